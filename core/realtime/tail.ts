import type { Model } from 'mongoose';
import type { Logger } from '../logger.ts';
import { toRecord, type EventRecord } from '../events/consumers.ts';
import type { EventDoc } from '../events/relay.ts';

/** Receives every event the tail finds, once, in committed order within each batch. */
export type TailListener = (events: EventRecord[]) => void;

export interface TailSettings {
  pollMs: number;
  /** How far back each poll looks again for events that committed late (another process's batch). */
  lookbackMs: number;
  /** Ids read per query; a full page is followed by another at once. */
  batch: number;
}

/** What the tail reads of an event (never `previous`, `meta` or `source`). */
const PUBLIC = { _id: 1, type: 1, tenant_id: 1, created_at: 1, committed_at: 1, data: 1, actor: 1, request_id: 1 } as const;

/**
 * The one tail of the event log in this process, shared by every realtime subscriber: it polls
 * `events` by `committed_at` every `pollMs` while anyone listens, looking back `lookbackMs` with a
 * seen-set so that an event another process committed late is still found, and hands each new
 * event to every listener in memory. Its queries do not depend on the number of listeners: one
 * for the ids of the window, one for the events not seen yet. Events this process relays are
 * pushed at once (`push`) and then skipped by the poll.
 */
export class EventTail {
  private readonly listeners = new Set<TailListener>();
  /** Event id → committed_at (ms), for events already handed out inside the look-back window. */
  private readonly seen = new Map<string, number>();
  private position = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private seeded: Promise<void> | null = null;
  private stopped = false;
  /** Bumped on every start: a poll of an earlier run (all listeners left meanwhile) schedules nothing. */
  private generation = 0;
  /** Database queries made, for measurements (bench/realtime.ts). */
  queries = 0;

  constructor(
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    private readonly events: Model<any>,
    private readonly settings: TailSettings,
    private readonly log: Logger,
  ) {}

  /**
   * Adds a listener; resolves once the tail has its starting point, so every event committed
   * after that reaches the listener. Returns the function that removes it.
   */
  async listen(listener: TailListener): Promise<() => void> {
    this.listeners.add(listener);
    this.start();
    await this.seeded;
    return () => {
      this.listeners.delete(listener);
      if (!this.listeners.size) this.pause();
    };
  }

  get size(): number {
    return this.listeners.size;
  }

  /** Events this process just stored: delivered now rather than at the next poll. */
  push(docs: readonly EventDoc[]): void {
    if (!this.listeners.size || !this.seeded) return;
    const fresh = docs.filter((d) => !this.seen.has(d._id));
    for (const d of fresh) this.seen.set(d._id, d.committed_at.getTime());
    this.deliver(fresh);
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.pause();
    await this.running;
  }

  private start(): void {
    if (this.seeded || this.stopped) return;
    const generation = ++this.generation;
    // The starting point: whatever is in the look-back window now was committed before this
    // listener came, so it is marked seen, not delivered.
    this.seeded = this.poll(false).catch((err) => this.log.warn({ err }, 'event tail start failed'));
    this.running = this.seeded;
    void this.seeded.then(() => this.schedule(generation));
  }

  private pause(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.seeded = null;
    this.seen.clear();
    this.position = 0;
  }

  private schedule(generation: number): void {
    if (this.stopped || !this.listeners.size || this.timer || generation !== this.generation) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.listeners.size || !this.seeded) return;
      this.running = this.poll(true)
        .catch((err) => this.log.warn({ err }, 'event tail poll failed'))
        .finally(() => {
          this.running = null;
          this.schedule(generation);
        });
    }, this.settings.pollMs);
    this.timer.unref();
  }

  private async poll(deliver: boolean): Promise<void> {
    const floor = (this.position || Date.now()) - this.settings.lookbackMs;
    let from = new Date(floor);
    const fresh: string[] = [];
    for (;;) {
      this.queries++;
      const ids = await this.events
        .find({ committed_at: { $gte: from } }, { _id: 1, committed_at: 1 })
        .sort({ committed_at: 1, _id: 1 })
        .limit(this.settings.batch)
        .lean<{ _id: string; committed_at: Date }[]>();
      for (const e of ids) {
        const at = e.committed_at.getTime();
        if (at > this.position) this.position = at;
        if (this.seen.has(e._id)) continue;
        this.seen.set(e._id, at);
        fresh.push(e._id);
      }
      const last = ids[ids.length - 1];
      if (ids.length < this.settings.batch || !last || last.committed_at.getTime() === from.getTime()) break;
      from = last.committed_at;
    }
    for (const [id, at] of this.seen) if (at < floor) this.seen.delete(id);
    if (!deliver || !fresh.length) return;
    for (let i = 0; i < fresh.length; i += this.settings.batch) {
      this.queries++;
      const docs = await this.events
        .find({ _id: { $in: fresh.slice(i, i + this.settings.batch) } }, PUBLIC)
        .sort({ committed_at: 1, _id: 1 })
        .lean<EventDoc[]>();
      this.deliver(docs);
    }
  }

  private deliver(docs: readonly EventDoc[]): void {
    if (!docs.length) return;
    const records = docs.map(toRecord);
    for (const l of this.listeners) {
      try {
        l(records);
      } catch (err) {
        this.log.error({ err }, 'realtime listener failed');
      }
    }
  }
}
