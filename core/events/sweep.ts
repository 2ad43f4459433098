import { Types, type Connection } from 'mongoose';
import type { Logger } from '../logger.ts';
import type { Relay, RelaySettings } from './relay.ts';

/** One sweep pass: it checks the entries stamped between its horizon and `now - lagMs`. */
interface SweepPass {
  name: 'recent' | 'late';
  lagMs: number;
}

/** A pass's shared state (`event_sweeps`): how far it got, and who is sweeping now. */
interface SweepState {
  _id: string;
  /** Every entry stamped before this was checked against the log. */
  horizon: Date;
  lease_until: Date;
  owner: string | null;
}

/**
 * A writer's heartbeat (`event_writers`), one per server process, written on each of its sweep
 * ticks: every entry it staged before `confirmed_before` is in the log (or its write failed).
 */
interface WriterState {
  _id: string;
  seen_at: Date;
  confirmed_before: Date;
}

/**
 * How long a pass's holder keeps it. A sweeper that dies holding it delays the pass by this much
 * (a SIGKILL during a tick); one whose window takes longer is joined by another replica on the
 * same window, which is only work done twice (storing is idempotent).
 */
const LEASE_MS = 10_000;
/** The late pass runs on one tick in this many. */
const LATE_EVERY = 10;

/**
 * Finds outbox entries whose writer died before relaying them. Relayed creates stay in their
 * documents (`staysAfterRelay`), so "an entry is there" no longer means "its event is missing":
 * each pass reads the entries stamped in its window, looks their ids up in the log, and relays the
 * missing ones (docs/events.md, "Finding what a dead writer left").
 *
 * Only the entries that may be missing are read. Each process is a writer: once registered, it
 * stamps its entries with its id (`w`) and confirms them on every tick (`event_writers`): every
 * entry it stamped before `confirmed_before` (the oldest event its relay still holds, and at most
 * `now - confirmSlackMs`, for writes still on their way to the database) is in the log. A pass
 * reads, per writer, the window's entries of the writers that have not confirmed it, and of no
 * writer at all: a live process costs its windows an empty index probe, a dead one has its entries
 * read. Two passes share the work across replicas through `event_sweeps` (one holder at a time, by lease):
 * - `recent` checks each entry once, `sweepAgeMs` (5 s) after it was stamped: a dead writer's events
 *   reach the log within seconds;
 * - `late` checks it again `lateSweepAgeMs` (10 min) after: a write that committed late, or a writer
 *   whose clock ran behind, is still found.
 * Windows are contiguous (a pass's horizon moves only over what it read), and never reach further
 * back than the log's retention. `recent` runs on every tick (`sweepMs`), `late` on every tenth.
 * The late pass also reads the entries of writers not seen for `deadAfterMs`, confirmed or not (a
 * write of theirs that committed after they confirmed it, and that they died before relaying), and
 * forgets writers whose last window it has covered.
 */
export class OutboxSweeper {
  private readonly owner = new Types.ObjectId().toHexString();
  private readonly passes: SweepPass[];
  private ready = false;
  private registered = false;
  private ticks = 0;
  /** A write staged this long ago may still be on its way to the database: not confirmed yet. */
  private readonly confirmSlackMs: number;
  /** A writer not seen for this long is taken for dead by the late pass. */
  private readonly deadAfterMs: number;

  constructor(
    private readonly conn: Connection,
    private readonly relay: Relay,
    private readonly settings: RelaySettings,
    private readonly log: Logger,
  ) {
    this.passes = [{ name: 'recent', lagMs: settings.sweepAgeMs }, { name: 'late', lagMs: settings.lateSweepAgeMs }];
    // Other replicas' confirmations are up to a tick or two old when a pass reads them: the slack
    // leaves room for that, so a live replica's confirmation covers the recent pass's window.
    this.confirmSlackMs = Math.max(0, settings.sweepAgeMs - 3 * settings.sweepMs);
    this.deadAfterMs = 10 * settings.sweepMs;
  }

  /** This process's writer id, for the entries it stages; null until it has registered (its first tick). */
  get writer(): string | null {
    return this.registered ? this.owner : null;
  }

  private get col() {
    return this.conn.collection<SweepState>('event_sweeps');
  }

  private get writers() {
    return this.conn.collection<WriterState>('event_writers');
  }

  /** Confirms this process's entries (see the class comment); its entries carry its id from then on. */
  private async heartbeat(): Promise<void> {
    const now = Date.now();
    const confirmed = Math.min(this.relay.oldestPending() ?? Infinity, now - this.confirmSlackMs);
    await this.writers.updateOne({ _id: this.owner }, { $set: { seen_at: new Date(now), confirmed_before: new Date(confirmed) } }, { upsert: true });
    this.registered = true;
  }

  /** Runs each pass whose lease this process gets; resolves to the number of events stored. */
  async tick(): Promise<number> {
    if (!this.ready) {
      const floor = new Date(Date.now() - this.settings.retentionMs);
      for (const p of this.passes) {
        await this.col.updateOne({ _id: p.name }, { $setOnInsert: { horizon: floor, lease_until: new Date(0), owner: null } }, { upsert: true }).catch((err: { code?: number }) => {
          if (err.code !== 11000) throw err; // another replica created it first
        });
      }
      this.ready = true;
    }
    await this.heartbeat();
    // The late pass reads each entry once however often it runs: every tenth tick is enough.
    const late = this.ticks++ % LATE_EVERY === 0;
    let stored = 0;
    for (const p of this.passes) if (p.name === 'recent' || late) stored += await this.run(p);
    return stored;
  }

  /**
   * Checks [from, now - sweepAgeMs) at once, outside the passes and without moving their horizons:
   * for an operator after an incident (and for tests that stage a lost entry by hand).
   */
  catchUp(from: Date): Promise<number> {
    return this.relay.sweepWindow(from, new Date(Date.now() - this.settings.sweepAgeMs));
  }

  private async run(pass: SweepPass): Promise<number> {
    const now = Date.now();
    const claimed = await this.col.findOneAndUpdate(
      { _id: pass.name, lease_until: { $lt: new Date(now) } },
      { $set: { lease_until: new Date(now + LEASE_MS), owner: this.owner } },
      { returnDocument: 'after' },
    );
    if (!claimed) {
      // Another replica sweeps now; still learn how far the late pass got.
      if (pass.name === 'late') this.learn(await this.col.findOne({ _id: pass.name }));
      return 0;
    }
    if (pass.name === 'late') this.learn(claimed);
    const from = new Date(Math.max(claimed.horizon.getTime(), now - this.settings.retentionMs));
    const until = new Date(now - pass.lagMs);
    let stored = 0;
    try {
      if (until > from) stored = await this.relay.sweepWindow(from, until, await this.unconfirmed(pass, now, until));
    } catch (err) {
      await this.col.updateOne({ _id: pass.name, owner: this.owner }, { $set: { lease_until: new Date(0), owner: null } });
      throw err;
    }
    await this.col.updateOne({ _id: pass.name, owner: this.owner }, { $max: { horizon: until }, $set: { lease_until: new Date(0), owner: null } });
    if (pass.name === 'late' && until > from) {
      this.relay.coveredBefore(until.getTime());
      // A writer last seen a minute before the covered window's end has no entry left to read.
      await this.writers.deleteMany({ seen_at: { $lt: new Date(until.getTime() - 60_000) } });
    }
    if (stored) this.log.info({ pass: pass.name, from, until, events: stored }, 'sweep relayed events a writer left behind');
    return stored;
  }

  /** The writers whose entries of the window [.., until) the pass reads: null (no writer) and those that did not confirm it. */
  private async unconfirmed(pass: SweepPass, now: number, until: Date): Promise<(string | null)[]> {
    const writers = await this.writers.find({}).toArray();
    const dead = now - this.deadAfterMs;
    return [null, ...writers.filter((w) => w.confirmed_before < until || (pass.name === 'late' && w.seen_at.getTime() < dead)).map((w) => w._id)];
  }

  private learn(state: SweepState | null): void {
    if (state) this.relay.coveredBefore(state.horizon.getTime());
  }
}
