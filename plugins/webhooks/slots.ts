/**
 * The sender's slots, in memory: the attempts under way by endpoint, the claimed deliveries waiting
 * for a slot, and what a claim may take (decision 0031, fair shares; 0148, claiming ahead). Nothing
 * here touches the database: `DeliverySender` claims, this decides how many and of which endpoints.
 *
 * - A process sends at most `concurrency` attempts at once, and at most `endpointConcurrency` (the
 *   share) of one endpoint.
 * - A claimed delivery within its endpoint's share holds a slot to be: claims of those never exceed
 *   the free slots (`free`), so they start as soon as they are claimed or a slot of theirs ends.
 * - Beyond the share an endpoint may have up to `AHEAD_SHARES` more shares claimed ahead, waiting
 *   beside its attempts under way, only while it answers (`ahead`): one of its attempts ended
 *   within `AHEAD_WINDOW_MS`, having taken no longer, and none under way is older. They wait for a
 *   slot of their endpoint, not another's. A hanging endpoint, or one not sent to yet, holds its
 *   share and no more by the search, twice its share by the fresh claim (as before); all claimed at
 *   once stay within `(1 + AHEAD_SHARES) × concurrency` (`room`). A delivery claimed ahead waits
 *   at most `AHEAD_SHARES` attempts of its endpoint: its lease covers them (`DeliverySender`).
 */

/** See `ahead`: how recent an endpoint's answer must be for its next attempts to be claimed ahead. */
export const AHEAD_WINDOW_MS = 1_000;
/** Shares an answering endpoint may have claimed beyond the one under way. */
export const AHEAD_SHARES = 4;

/** What a search may claim now: any endpoint but `full` ones (a slot is free), or only the `fast` ones with deliveries left. */
export type SearchScope = { free: true; full: string[] } | { free: false; fast: string[] };

export class Slots<T> {
  /** When each attempt under way began, by endpoint. */
  private readonly started = new Map<string, number[]>();
  /** When an attempt of each endpoint that took at most `AHEAD_WINDOW_MS` last ended. */
  private readonly endedAt = new Map<string, number>();
  private running = 0;
  /** Claimed deliveries waiting for a slot, by endpoint, in claim order. */
  private readonly ready = new Map<string, T[]>();
  private waiting = 0;
  /** Endpoints with due deliveries a search saw and left (their share, or the room, was taken). */
  readonly backlog = new Set<string>();

  constructor(private readonly settings: { concurrency: number; endpointConcurrency: number }) {}

  /** Attempts under way. */
  get inFlight(): number {
    return this.running;
  }

  /** Claimed deliveries waiting for a slot. */
  get readyCount(): number {
    return this.waiting;
  }

  /**
   * Slots no claimed delivery is waiting for: a waiting delivery within its endpoint's share takes
   * the next free slot; one claimed ahead waits for a slot of its endpoint, not for another's.
   */
  get free(): number {
    let next = 0;
    for (const [key, queue] of this.ready) next += Math.min(queue.length, Math.max(0, this.settings.endpointConcurrency - (this.started.get(key)?.length ?? 0)));
    return this.settings.concurrency - this.running - next;
  }

  /** How many more deliveries this process may hold claimed (under way or waiting). */
  get room(): number {
    return (1 + AHEAD_SHARES) * this.settings.concurrency - this.running - this.waiting;
  }

  /** Attempts of the endpoint under way, and its claimed deliveries waiting. */
  held(key: string): number {
    return (this.started.get(key)?.length ?? 0) + (this.ready.get(key)?.length ?? 0);
  }

  /** How many beyond its share the endpoint may have claimed now: `AHEAD_SHARES` shares while it answers, else 0. */
  ahead(key: string, now: number): number {
    const ended = this.endedAt.get(key);
    if (ended === undefined || now - ended > AHEAD_WINDOW_MS) return 0;
    if (this.started.get(key)?.some((t) => now - t > AHEAD_WINDOW_MS)) return 0;
    return AHEAD_SHARES * this.settings.endpointConcurrency;
  }

  /** How many more of the endpoint may be claimed now (its share, and what it may have ahead). */
  cap(key: string, now: number): number {
    return this.settings.endpointConcurrency + this.ahead(key, now) - this.held(key);
  }

  /**
   * What a search may claim: with a free slot, every endpoint but those at their cap; with every
   * slot spoken for, once no more than `concurrency` wait, the answering endpoints with due
   * deliveries left (`backlog`) below their cap; otherwise null (no search).
   */
  scope(now: number): SearchScope | null {
    if (this.room <= 0) return null;
    if (this.free > 0) {
      const keys = new Set([...this.started.keys(), ...this.ready.keys()]);
      return { free: true, full: [...keys].filter((k) => this.cap(k, now) <= 0) };
    }
    if (this.waiting > this.settings.concurrency) return null;
    const fast = [...this.backlog].filter((k) => this.ahead(k, now) > 0 && this.cap(k, now) > 0);
    return fast.length ? { free: false, fast } : null;
  }

  /**
   * Chooses among due deliveries (oldest first) those a claim may take: within its endpoint's share
   * one takes a free slot, beyond it room claimed ahead (answering endpoints only). The endpoints of
   * those left are marked as having a backlog.
   */
  choose<R extends { endpoint_id: unknown }>(rows: readonly R[], now: number, mark = true): R[] {
    const share = this.settings.endpointConcurrency;
    let free = this.free;
    let room = this.room;
    const taken = new Map<string, number>();
    const chosen: R[] = [];
    for (const r of rows) {
      const key = String(r.endpoint_id);
      const mine = taken.get(key) ?? 0;
      const within = this.held(key) + mine < share;
      if (room <= 0 || this.cap(key, now) - mine <= 0 || (within ? free <= 0 : this.ahead(key, now) <= 0)) {
        if (mark) this.backlog.add(key);
        continue;
      }
      taken.set(key, mine + 1);
      chosen.push(r);
      room--;
      if (within) free--;
    }
    return chosen;
  }

  /**
   * A search saw every due delivery of the endpoints it covered (`scope`): those of them it found
   * none of, nor left any of, have no backlog.
   */
  searchedAll(scope: SearchScope, found: readonly { endpoint_id: unknown }[]): void {
    const seen = new Set(found.map((r) => String(r.endpoint_id)));
    for (const k of this.backlog) {
      const covered = scope.free ? !scope.full.includes(k) : scope.fast.includes(k);
      if (covered && !seen.has(k)) this.backlog.delete(k);
    }
  }

  /** How many fresh deliveries of the endpoint may be claimed: up to twice its share held, more while it answers. */
  freshRoom(key: string, now: number): number {
    return Math.max(2 * this.settings.endpointConcurrency, this.settings.endpointConcurrency + this.ahead(key, now)) - this.held(key);
  }

  /** Claimed deliveries of the endpoint, to wait for a slot. */
  hold(key: string, items: T[]): void {
    const queue = this.ready.get(key);
    if (queue) queue.push(...items);
    else this.ready.set(key, [...items]);
    this.waiting += items.length;
  }

  /** The waiting deliveries that have a slot now (their endpoint's share and the process's), taken off the queue. */
  launchable(): { key: string; item: T }[] {
    const { concurrency, endpointConcurrency } = this.settings;
    const out: { key: string; item: T }[] = [];
    for (const [key, queue] of this.ready) {
      let mine = this.started.get(key)?.length ?? 0;
      for (; queue.length && mine < endpointConcurrency && this.running + out.length < concurrency; mine++) {
        out.push({ key, item: queue.shift()! });
        this.waiting--;
      }
      if (!queue.length) this.ready.delete(key);
    }
    return out;
  }

  /** An attempt of the endpoint begins; the returned function ends it. */
  begin(key: string, now: number): () => void {
    const starts = this.started.get(key);
    if (starts) starts.push(now);
    else this.started.set(key, [now]);
    this.running++;
    return () => {
      this.running--;
      const left = this.started.get(key) ?? [];
      left.splice(left.indexOf(now), 1);
      if (!left.length) this.started.delete(key);
      // An attempt that took longer (a timeout, a slow answer) does not make the endpoint one that answers.
      const ended = Date.now();
      if (ended - now <= AHEAD_WINDOW_MS) this.endedAt.set(key, ended);
      if (this.endedAt.size > 1_000) this.prune(Date.now());
    };
  }

  /** Every waiting delivery, taken off (stop). */
  drain(): T[] {
    const all = [...this.ready.values()].flat();
    this.ready.clear();
    this.waiting = 0;
    return all;
  }

  private prune(now: number): void {
    for (const [key, at] of this.endedAt) if (now - at > AHEAD_WINDOW_MS && !this.started.has(key)) this.endedAt.delete(key);
  }
}

/** Deliveries this process's fan-out created, by endpoint, oldest first, with when they came; `max` at most. */
export class FreshQueue<F> {
  private readonly byKey = new Map<string, { f: F; at: number }[]>();
  private count = 0;

  constructor(private readonly max: number) {}

  /** Queues a delivery of the endpoint. @returns false when `max` wait already (it is left to the search) */
  add(key: string, f: F, at: number): boolean {
    if (this.count >= this.max) return false;
    const queue = this.byKey.get(key);
    if (queue) queue.push({ f, at });
    else this.byKey.set(key, [{ f, at }]);
    this.count++;
    return true;
  }

  /** Whether deliveries of the endpoint wait. */
  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /** Takes up to `room` in all, and up to `want(key)` of each endpoint, oldest first. */
  take(room: number, want: (key: string) => number): { f: F; at: number }[] {
    const out: { f: F; at: number }[] = [];
    for (const [key, queue] of this.byKey) {
      for (let n = Math.min(room - out.length, want(key)); n > 0 && queue.length; n--) out.push(queue.shift()!);
      if (!queue.length) this.byKey.delete(key);
    }
    this.count -= out.length;
    return out;
  }

  clear(): void {
    this.byKey.clear();
    this.count = 0;
  }
}
