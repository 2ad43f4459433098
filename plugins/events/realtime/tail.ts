import { AsyncResource } from 'node:async_hooks';
import type { Model } from 'mongoose';
import type { Logger } from '../../../core/logger.ts';
import { committedFrom } from '../consumers.ts';
import { toRecord } from '../public/contributions.ts';
import type { EventRecord } from '../public/contributions.ts';
import type { EventDoc } from '../public/outbox.ts';

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
 *
 * A new listener starts receiving after a poll that began once it asked: whatever that poll finds
 * was committed before, so it is not sent (a fresh stream has events from "now" on, with no clock
 * compared across processes); joins arriving together share that poll.
 */
export class EventTail {
  private readonly listeners = new Set<TailListener>();
  private readonly joining = new Set<TailListener>();
  /** Event id → committed_at (ms), for events already handed out inside the look-back window. */
  private readonly seen = new Map<string, number>();
  /** Joiners waiting for a poll that starts after they asked. */
  private waiters: (() => void)[] = [];
  private position = 0;
  /** Where the last poll looked from: never moves back, since the seen-set forgets what lies before it. */
  private floor = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  /**
   * The async context the polls run in: the tail's own, taken where it was made (start-up), not
   * that of the request whose subscriber happened to start it. Its queries serve every subscriber
   * of every tenant, so they are background work (traces, test/sharding), not that request's.
   */
  private readonly scope = new AsyncResource('realtime.tail');
  /** Database queries made, and polls, for measurements (bench/realtime.ts). */
  queries = 0;
  polls = 0;

  constructor(
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    private readonly events: Model<any>,
    private readonly settings: TailSettings,
    private readonly log: Logger,
  ) {}

  /**
   * Adds a listener; resolves once it receives every event committed from then on. Returns the
   * function that removes it.
   */
  async listen(listener: TailListener): Promise<() => void> {
    this.joining.add(listener);
    const remove = () => {
      this.joining.delete(listener);
      this.listeners.delete(listener);
      if (!this.size) this.pause();
    };
    await new Promise<void>((resolve) => {
      this.waiters.push(resolve);
      if (!this.running) this.scope.runInAsyncScope(() => this.run());
    });
    if (this.joining.delete(listener)) this.listeners.add(listener);
    return remove;
  }

  get size(): number {
    return this.listeners.size + this.joining.size;
  }

  /** Events this process just stored: delivered now rather than at the next poll. */
  push(docs: readonly EventDoc[]): void {
    if (!this.listeners.size) return;
    // One batch may hold an event twice (a change and the write that superseded it, in one flush).
    const fresh: EventDoc[] = [];
    for (const d of docs) {
      if (this.seen.has(d._id)) continue;
      const at = d.committed_at.getTime();
      this.seen.set(d._id, at);
      if (at > this.position) this.position = at;
      fresh.push(d);
    }
    this.deliver(fresh);
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.pause();
    await this.running;
  }

  private pause(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.seen.clear();
    this.position = 0;
    this.floor = 0;
  }

  /** One poll now (unless one runs), then the next after `pollMs` while anyone listens. */
  private run(): void {
    if (this.stopped || this.running) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const waiters = this.waiters.splice(0);
    this.running = this.poll()
      .catch((err) => this.log.warn({ err }, 'event tail poll failed'))
      .finally(() => {
        this.running = null;
        for (const w of waiters) w();
        if (this.stopped || !this.size) return;
        if (this.waiters.length) return this.run();
        this.timer = setTimeout(() => this.run(), this.settings.pollMs);
        this.timer.unref();
      });
  }

  private async poll(): Promise<void> {
    this.polls++;
    const floor = (this.floor = Math.max(this.floor, (this.position || Date.now()) - this.settings.lookbackMs));
    const fresh: string[] = [];
    // Pages by (committed_at, _id): events of one commit time (several processes' batches in one
    // millisecond) never hold the tail on one page.
    let last: { _id: string; committed_at: Date } | undefined;
    for (;;) {
      this.queries++;
      const ids = await this.events
        .find(committedFrom(new Date(floor), last), { _id: 1, committed_at: 1 })
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
      last = ids[ids.length - 1];
      if (ids.length < this.settings.batch || !last) break;
    }
    for (const [id, at] of this.seen) if (at < floor) this.seen.delete(id);
    // Nobody to give them to yet (the first poll, or only joiners): they are marked seen.
    if (!this.listeners.size || !fresh.length) return;
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
