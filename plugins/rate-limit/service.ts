import type { Connection } from 'mongoose';
import type { AnyBulkWriteOperation, Collection } from 'mongodb';
import { MongoBulkWriteError } from 'mongodb';
import type { Config } from '../../config/index.ts';
import type { Logger } from '../../core/logger.ts';
import type { LimitDecision, RequestLimiter } from '../../core/rate-limit.ts';
import { mongoLimiter } from './store.ts';

/** One key's window as this process knows it. */
interface Tally {
  /** End of the window (the store's `expire` once read back; this process's estimate before). */
  windowEnd: number;
  /** The store's total at the last read back (every replica's counts, this one's included). */
  shared: number;
  /** This process's counts in the bulk write under way (not yet in `shared`). */
  inflight: number;
  /** This process's counts since the last bulk write. */
  pending: number;
  /** Syncs since this process last counted the key; it is read back for `REFRESH_TICKS` of them. */
  quiet: number;
}

/**
 * Syncs a key is still read back after this process last counted it, so a process that served the
 * last requests of a burst learns the other replicas' counts without waiting for its next request.
 */
const REFRESH_TICKS = 10;

/**
 * The `requestLimiter` service: fixed windows of `RATE_LIMIT_WINDOW_SECONDS` per key, shared across
 * replicas without a database write per request. Each process counts in memory; every
 * `RATE_LIMIT_SYNC_MS` it adds the counts of every key it saw to the store with ONE bulk write
 * (`rate_limits`, the documents rate-limiter-flexible's Mongo store uses: `{key, points, expire}`,
 * so replicas of an older version share them) and reads the totals back. A request is allowed
 * while the last-known total plus this process's counts since is below the key's limit, so a
 * process never refuses early; replicas can overshoot by what the others accept before their counts
 * arrive (at most two sync intervals plus a store round trip of their traffic, docs/operations.md).
 *
 * rate-limiter-flexible has no batching: its stores write per request, and `inMemoryBlockOnConsumed`
 * saves the write only for keys already over the limit. This class does the batching; the exact
 * limiter of store.ts (failed authentications) stays the library's. If the store fails, counting
 * goes on in memory (last-known totals plus local counts) and the counts are sent on the next sync
 * that succeeds.
 * With `RATE_LIMIT_STORE=memory` it is a local limiter with the same windows and answers.
 */
export class SyncedRequestLimiter implements RequestLimiter {
  private readonly tallies = new Map<string, Tally>();
  private readonly timer: NodeJS.Timeout | undefined;
  private syncing: Promise<void> | undefined;
  private failing = false;

  constructor(
    private readonly store: Collection | null,
    private readonly opts: { windowMs: number; syncMs: number; keyPrefix: string; log: Logger },
  ) {
    // Also without a store: the sync drops the tallies of windows that ended.
    this.timer = setInterval(() => void this.sync(), opts.syncMs).unref();
  }

  /** Counts one request for `key` unless it is over `max` in its window (refused requests are not counted). */
  consume(key: string, max: number): LimitDecision {
    const now = Date.now();
    let t = this.tallies.get(key);
    if (!t || t.windowEnd <= now) {
      // A new window; counts of the old one still in flight are the store's concern.
      t = { windowEnd: now + this.opts.windowMs, shared: 0, inflight: 0, pending: 0, quiet: 0 };
      this.tallies.set(key, t);
    }
    const used = t.shared + t.inflight + t.pending;
    const msBeforeNext = t.windowEnd - now;
    if (used >= max) return { allowed: false, remaining: 0, msBeforeNext };
    t.pending++;
    return { allowed: true, remaining: max - used - 1, msBeforeNext };
  }

  /** Requests left for `key` without counting one (for a budget consulted but not spent). */
  remaining(key: string, max: number): LimitDecision {
    const now = Date.now();
    const t = this.tallies.get(key);
    if (!t || t.windowEnd <= now) return { allowed: true, remaining: max, msBeforeNext: this.opts.windowMs };
    const left = max - (t.shared + t.inflight + t.pending);
    return { allowed: left > 0, remaining: Math.max(left, 0), msBeforeNext: t.windowEnd - now };
  }

  /** One bulk write of every pending count, then the totals read back. Never rejects; runs one at a time. */
  sync(): Promise<void> {
    this.syncing ??= this.flush().finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  /** Stops syncing after a last flush of the pending counts (given at most a second: a store that does not answer must not hold up shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    const last = (async () => {
      await this.syncing;
      await this.sync();
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([last, new Promise((resolve) => (timer = setTimeout(resolve, 1000)))]);
    clearTimeout(timer);
  }

  private async flush(): Promise<void> {
    const now = Date.now();
    const writes: [string, Tally, number][] = [];
    const reads: [string, Tally][] = [];
    for (const [key, t] of this.tallies) {
      if (t.windowEnd <= now && !t.inflight) this.tallies.delete(key);
      else if (t.pending) {
        writes.push([key, t, t.pending]);
        t.quiet = 0;
      } else if (++t.quiet <= REFRESH_TICKS) reads.push([key, t]);
    }
    if (!this.store || (!writes.length && !reads.length)) return;
    for (const [, t, n] of writes) {
      t.inflight += n;
      t.pending -= n;
    }
    const at = new Date(now);
    const live = { $gt: ['$expire', at] };
    // Adds to a live window, or starts one (an expired document the TTL monitor has not removed yet is reset).
    const ops: AnyBulkWriteOperation[] = writes.map(([key, t, n]) => ({
      updateOne: {
        filter: { key: `${this.opts.keyPrefix}:${key}` },
        update: [{ $set: { points: { $cond: [live, { $add: ['$points', n] }, n] }, expire: { $cond: [live, '$expire', new Date(t.windowEnd)] } } }],
        upsert: true,
      },
    }));
    let failed = new Set<number>();
    if (ops.length) {
      try {
        await this.store.bulkWrite(ops, { ordered: false });
      } catch (err) {
        // Counts of failed operations go back to pending, to be sent again; a partial failure names them.
        failed = err instanceof MongoBulkWriteError && err.writeErrors ? new Set((Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors]).map((e) => e.index)) : new Set(writes.keys());
        this.warn(err);
      }
    }
    writes.forEach(([, t, n], i) => {
      t.inflight -= n;
      // Written: in the local view as the store's until the read below says better.
      if (failed.has(i)) t.pending += n;
      else t.shared += n;
    });
    const known = [...writes.filter((_, i) => !failed.has(i)), ...reads];
    if (!known.length) return;
    try {
      const docs = await this.store.find({ key: { $in: known.map(([key]) => `${this.opts.keyPrefix}:${key}`) } }, { projection: { _id: 0, key: 1, points: 1, expire: 1 } }).toArray();
      const byKey = new Map(docs.map((d) => [String(d.key), d]));
      const readAt = Date.now();
      for (const [key, t] of known) {
        const d = byKey.get(`${this.opts.keyPrefix}:${key}`);
        if (d?.expire instanceof Date && d.expire.getTime() > readAt && typeof d.points === 'number') {
          t.shared = d.points;
          t.windowEnd = d.expire.getTime();
        }
      }
      this.failing = false;
    } catch (err) {
      this.warn(err);
    }
  }

  /** Logged once per outage: the sync runs ten times a second. */
  private warn(err: unknown): void {
    if (this.failing) return;
    this.failing = true;
    this.opts.log.warn({ err }, 'rate limit store unavailable: counting in this process until it answers');
  }
}

/**
 * The request limiter of `config`: sharing counts through the collection `rate_limits` with
 * `RATE_LIMIT_STORE=mongo`, in memory otherwise.
 */
export async function createRequestLimiter(config: Config, conn: Connection, log: Logger): Promise<SyncedRequestLimiter> {
  const collection = 'rate_limits';
  const opts = { windowMs: config.RATE_LIMIT_WINDOW_SECONDS * 1000, syncMs: config.RATE_LIMIT_SYNC_MS, keyPrefix: collection, log };
  if (config.RATE_LIMIT_STORE === 'memory') return new SyncedRequestLimiter(null, opts);
  // The indexes rate-limiter-flexible's Mongo store uses: unique key, TTL on expire.
  await mongoLimiter(conn, collection, 1, config.RATE_LIMIT_WINDOW_SECONDS).createIndexes();
  return new SyncedRequestLimiter(conn.db!.collection(collection), opts);
}
