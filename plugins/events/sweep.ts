import { Types, type Connection } from 'mongoose';
import type { Logger } from '../../core/logger.ts';
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
 * missing ones (docs/events.md, "Finding what a dead writer left"). Two passes share the work across
 * replicas through `event_sweeps` (one holder at a time, by lease):
 * - `recent` checks each entry once, `sweepAgeMs` (5 s) after it was stamped: a dead writer's events
 *   reach the log within seconds;
 * - `late` checks it again `lateSweepAgeMs` (10 min) after: a write that committed late, or a writer
 *   whose clock ran behind, is still found.
 * Windows are contiguous (a pass's horizon moves only over what it read), and never reach further
 * back than the log's retention. `recent` runs on every tick (`sweepMs`), `late` on every tenth,
 * each only when its window is at least a tick long (whichever replica ticks first reads it).
 */
export class OutboxSweeper {
  private readonly owner = new Types.ObjectId().toHexString();
  private readonly passes: SweepPass[];
  private ready = false;
  private ticks = 0;

  constructor(
    private readonly conn: Connection,
    private readonly relay: Relay,
    private readonly settings: RelaySettings,
    private readonly log: Logger,
  ) {
    this.passes = [{ name: 'recent', lagMs: settings.sweepAgeMs }, { name: 'late', lagMs: settings.lateSweepAgeMs }];
  }

  private get col() {
    return this.conn.collection<SweepState>('event_sweeps');
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
    // Only a window at least a tick long is due: once one replica has read it, the others' ticks
    // find nothing to claim, so replicas run one window query per pass and tick between them, not one
    // each (on some engines the query costs with the collection's size, not the window's).
    const claimed = await this.col.findOneAndUpdate(
      { _id: pass.name, lease_until: { $lt: new Date(now) }, horizon: { $lte: new Date(now - pass.lagMs - this.settings.sweepMs) } },
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
      if (until > from) stored = await this.relay.sweepWindow(from, until);
    } catch (err) {
      await this.col.updateOne({ _id: pass.name, owner: this.owner }, { $set: { lease_until: new Date(0), owner: null } });
      throw err;
    }
    await this.col.updateOne({ _id: pass.name, owner: this.owner }, { $max: { horizon: until }, $set: { lease_until: new Date(0), owner: null } });
    if (pass.name === 'late' && until > from) this.relay.coveredBefore(until.getTime());
    if (stored) this.log.info({ pass: pass.name, from, until, events: stored }, 'sweep relayed events a writer left behind');
    return stored;
  }

  private learn(state: SweepState | null): void {
    if (state) this.relay.coveredBefore(state.horizon.getTime());
  }
}
