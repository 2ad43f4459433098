import type { Model } from 'mongoose';
import type { Logger } from '../../core/logger.ts';
import type { EventDoc } from './public/outbox.ts';
import { toHead, toRecord, type EventConsumer, type HeadDoc } from './public/contributions.ts';

/** The fields of an event document a head is made of. */
const HEAD_FIELDS = { type: 1, tenant_id: 1, created_at: 1, actor: 1, request_id: 1 } as const;

/**
 * The filter of the events committed from `floor` on, or, once a page has been read, of those after
 * its `last` in (`committed_at`, `_id`) order. Paging by the pair, not by the time alone, moves on
 * past a page whose events share one commit time (a relay batch shares one) instead of reading it again.
 */
export const committedFrom = (floor: Date, last?: Pick<EventDoc, '_id' | 'committed_at'>) =>
  last
    ? { $or: [{ committed_at: { $gt: last.committed_at } }, { committed_at: last.committed_at, _id: { $gt: last._id } }] }
    : { committed_at: { $gte: floor } };

/** An event as a poll first reads it: its id and commit time, and its head for `select`. */
type EventRow = Pick<EventDoc, '_id' | 'committed_at'> & Partial<EventDoc>;

export interface ConsumerSettings {
  pollMs: number;
  /** How far back each poll looks again for events that committed late (another process's batch). */
  lookbackMs: number;
  /** Lease of a claim: a holder that died is replaced after it. */
  leaseMs: number;
  batch: number;
}

/**
 * Runs one durable consumer in this process: polls the log by `committed_at`, claims each event in
 * `event_claims` (unique per consumer and event), handles it and marks it done. Its position moves
 * to the oldest event not yet done, minus nothing: the look-back window covers late commits.
 */
export class ConsumerRunner {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Events known to be done or claimed elsewhere recently, by id → committed_at (ms). */
  private readonly seen = new Map<string, number>();
  private position: Date | null = null;

  get name(): string {
    return this.consumer.name;
  }

  constructor(
    private readonly consumer: EventConsumer,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    private readonly models: { events: Model<any>; claims: Model<any>; cursors: Model<any> },
    private readonly settings: ConsumerSettings,
    private readonly log: Logger,
  ) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.running = this.poll()
        .catch((err) => this.log.warn({ err, consumer: this.consumer.name }, 'event consumer poll failed'))
        .finally(() => {
          this.running = null;
          if (!this.stopped) {
            this.timer = setTimeout(tick, this.settings.pollMs);
            this.timer.unref();
          }
        });
    };
    this.timer = setTimeout(tick, 0);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** How far behind the newest committed event this consumer's position is, in ms (metrics). */
  async lagMs(): Promise<number> {
    const newest = await this.models.events.findOne({}, { committed_at: 1 }).sort({ committed_at: -1 }).lean<{ committed_at: Date }>();
    if (!newest || !this.position) return 0;
    return Math.max(0, newest.committed_at.getTime() - this.position.getTime());
  }

  private async loadPosition(): Promise<Date> {
    if (this.position) return this.position;
    const now = new Date();
    // First registration starts at "now": a new consumer does not replay the whole history.
    const doc = await this.models.cursors.findOneAndUpdate(
      { _id: this.consumer.name },
      { $setOnInsert: { position: now, updated_at: now } },
      { upsert: true, returnDocument: 'after' },
    ).lean<{ position: Date }>();
    this.position = doc!.position;
    return this.position;
  }

  /** One poll: returns once every event found has been handled or left for a retry. */
  async poll(): Promise<void> {
    const position = await this.loadPosition();
    const floor = new Date(position.getTime() - this.settings.lookbackMs);
    for (const [id, at] of this.seen) if (at < floor.getTime()) this.seen.delete(id);
    const { batch, last } = await this.unseen(floor);
    if (!batch.length) {
      if (last && last.committed_at > position) await this.advance(last.committed_at);
      return;
    }
    const newest = batch[batch.length - 1]!.committed_at;
    let fresh = batch;
    if (this.consumer.select) {
      const chosen = await this.consumer.select(batch.map((e) => toHead(e as HeadDoc)));
      // Passed over: as good as done, on every replica alike.
      for (const e of batch) if (!chosen.has(e._id)) this.seen.set(e._id, e.committed_at.getTime());
      fresh = batch.filter((e) => chosen.has(e._id));
      if (!fresh.length) {
        await this.advance(newest);
        return;
      }
    }
    const claimed = await this.claim(fresh);
    const events = claimed.length ? await this.models.events.find({ _id: { $in: claimed } }).sort({ committed_at: 1, _id: 1 }).lean<EventDoc[]>() : [];
    let oldestOpen: Date | null = null;
    for (const e of events) {
      const ok = await this.handleOne(e);
      if (!ok && (!oldestOpen || e.committed_at < oldestOpen)) oldestOpen = e.committed_at;
    }
    // Claimed-elsewhere events still open hold the position too: their holder may die.
    const open = await this.models.claims
      .find({ consumer: this.consumer.name, event_id: { $in: fresh.map((e) => e._id) }, status: { $ne: 'done' } }, { committed_at: 1 })
      .sort({ committed_at: 1 })
      .limit(1)
      .lean<{ committed_at: Date }[]>();
    if (open[0] && (!oldestOpen || open[0].committed_at < oldestOpen)) oldestOpen = open[0].committed_at;
    await this.advance(oldestOpen && oldestOpen < newest ? oldestOpen : newest);
  }

  /**
   * Up to `batch` events committed from `floor` on that this process has not seen, oldest first, and
   * the last event read. Ids first (heads for `select`), from the (committed_at, _id) index; whole
   * events are read only once claimed. The look-back window is read again on every poll, and it can
   * hold more seen events than one page (a relay batch shares one `committed_at`; at a few hundred
   * events a second, two seconds hold more than a page): the read goes on past them, page by page,
   * instead of stopping on a page of seen ones, which would hold the consumer there for good.
   */
  private async unseen(floor: Date): Promise<{ batch: EventRow[]; last: EventRow | undefined }> {
    const typeFilter = this.consumer.types === '*' ? {} : { type: { $in: this.consumer.types } };
    const head = this.consumer.select ? HEAD_FIELDS : {};
    const pageSize = this.settings.batch * 4;
    const batch: EventRow[] = [];
    let last: EventRow | undefined;
    for (;;) {
      const page = await this.models.events
        .find({ ...committedFrom(floor, last), ...typeFilter }, { _id: 1, committed_at: 1, ...head })
        .sort({ committed_at: 1, _id: 1 })
        .limit(pageSize)
        .lean<EventRow[]>();
      for (const e of page) {
        last = e;
        if (this.seen.has(e._id)) continue;
        batch.push(e);
        if (batch.length >= this.settings.batch) return { batch, last };
      }
      if (page.length < pageSize) return { batch, last };
    }
  }

  private async advance(to: Date): Promise<void> {
    if (this.position && to <= this.position) return;
    this.position = to;
    await this.models.cursors.updateOne({ _id: this.consumer.name }, { $max: { position: to }, $set: { updated_at: new Date() } });
  }

  /** Claims what it can of `fresh`; returns the ids this process now holds. */
  private async claim(fresh: { _id: string; committed_at: Date }[]): Promise<string[]> {
    const now = new Date();
    const lease = new Date(now.getTime() + this.settings.leaseMs);
    const name = this.consumer.name;
    const docs = fresh.map((e) => ({ _id: `${name}:${e._id}`, consumer: name, event_id: e._id, committed_at: e.committed_at, status: 'claimed', attempts: 1, lease_until: lease, last_error: null, updated_at: now }));
    const won = new Set(fresh.map((e) => e._id));
    try {
      await this.models.claims.collection.insertMany(docs as never[], { ordered: false });
    } catch (err) {
      const writeErrors = (err as { writeErrors?: { index: number; code?: number; err?: { code?: number } }[] }).writeErrors;
      if (!writeErrors) throw err;
      for (const w of writeErrors) {
        if ((w.code ?? w.err?.code) !== 11000) throw err;
        won.delete(fresh[w.index]!._id);
      }
    }
    // Taken before: take over a claim whose lease ran out (holder died, or a failure's backoff passed).
    const max = this.consumer.max_attempts ?? 10;
    for (const e of fresh) {
      if (won.has(e._id)) {
        this.seen.set(e._id, e.committed_at.getTime());
        continue;
      }
      const taken = await this.models.claims.findOneAndUpdate(
        { _id: `${name}:${e._id}`, status: { $in: ['claimed', 'failed'] }, lease_until: { $lt: now }, attempts: { $lt: max } },
        { $set: { status: 'claimed', lease_until: lease, updated_at: now }, $inc: { attempts: 1 } },
        { returnDocument: 'after' },
      ).lean();
      if (taken) won.add(e._id);
      else {
        const state = await this.models.claims.findById(`${name}:${e._id}`, { status: 1, attempts: 1 }).lean<{ status: string; attempts: number }>();
        // Done, or given up after max attempts: never look at it again.
        if (state?.status === 'done' || (state?.status === 'failed' && state.attempts >= max)) this.seen.set(e._id, e.committed_at.getTime());
      }
    }
    return [...won];
  }

  private async handleOne(e: EventDoc): Promise<boolean> {
    const id = `${this.consumer.name}:${e._id}`;
    try {
      await this.consumer.handle(toRecord(e));
      await this.models.claims.updateOne({ _id: id }, { $set: { status: 'done', updated_at: new Date(), last_error: null } });
      this.seen.set(e._id, e.committed_at.getTime());
      return true;
    } catch (err) {
      const claim = await this.models.claims.findById(id, { attempts: 1 }).lean<{ attempts: number }>();
      const attempts = claim?.attempts ?? 1;
      const backoff = Math.min(60_000, 500 * 2 ** (attempts - 1));
      await this.models.claims.updateOne({ _id: id }, { $set: { status: 'failed', lease_until: new Date(Date.now() + backoff), last_error: String((err as Error)?.message ?? err).slice(0, 500), updated_at: new Date() } });
      this.log.warn({ err, consumer: this.consumer.name, event_id: e._id, attempts }, 'event consumer failed; will retry');
      this.seen.delete(e._id);
      return false;
    }
  }
}
