/**
 * The time-series store behind the console's plots: one document per minute, series and tenant
 * (`metric_minutes`), each process adding its counts with an atomic `$inc` upsert every few
 * seconds, so replicas share one series. Latencies and durations are small fixed histograms whose
 * quantiles are computed on read. No Koa or GraphQL here.
 */
import type { AnyBulkWriteOperation, Collection, Document } from 'mongodb';

/** Histogram bucket upper bounds (ms); the last bucket is everything above. */
export const BUCKETS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000, 3_600_000];

/** A stored minute: `c` holds the counters (`<name>` or `<name>.<bucket>` for a histogram). */
export interface MinuteDoc {
  _id: string;
  series: string;
  tenant_id: string | null;
  minute: Date;
  expires_at: Date;
  c: Record<string, number | Record<string, number>>;
}

const MINUTE = 60_000;
/** `.` and `$` cannot be in a field name: event types (`projects.created`) are stored with `~`. */
export const fieldName = (s: string) => s.replace(/\./g, '~').replace(/^\$/, '_');
export const fromFieldName = (s: string) => s.replace(/~/g, '.');

/** The bucket index of `ms`. */
export const bucketOf = (ms: number): number => {
  let i = 0;
  while (i < BUCKETS_MS.length && !(ms <= BUCKETS_MS[i]!)) i++;
  return i;
};

/** The `q` quantile (0..1) of a histogram of bucket counts, interpolated inside its bucket; null when empty. */
export function quantile(hist: Record<string, number> | undefined, q: number): number | null {
  if (!hist) return null;
  const counts = Array.from({ length: BUCKETS_MS.length + 1 }, (_, i) => hist[String(i)] ?? 0);
  const total = counts.reduce((a, b) => a + b, 0);
  if (!total) return null;
  const want = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i]!;
    if (seen + n >= want && n > 0) {
      const lo = i === 0 ? 0 : BUCKETS_MS[i - 1]!;
      const hi = BUCKETS_MS[i] ?? BUCKETS_MS[BUCKETS_MS.length - 1]!;
      return lo + ((want - seen) / n) * (hi - lo);
    }
    seen += n;
  }
  return BUCKETS_MS[BUCKETS_MS.length - 1]!;
}

export class SeriesStore {
  private buffer = new Map<string, { series: string; tenant: string | null; minute: number; inc: Record<string, number> }>();
  /** The entry `counters` answered last, and the buffer it is in (a flush starts a new buffer). */
  private hot: { buffer: Map<string, unknown>; series: string; tenant: string | null; minute: number; inc: Record<string, number> } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly coll: Collection<MinuteDoc>,
    private readonly opts: { retentionDays: number; flushMs: number; onError: (err: unknown) => void },
  ) {}

  /** Creates the TTL index (documents go `retentionDays` after their minute) and starts flushing. */
  async start(): Promise<void> {
    await this.coll.createIndex({ expires_at: 1 }, { expireAfterSeconds: 0 });
    await this.coll.createIndex({ series: 1, minute: 1, tenant_id: 1 });
    this.timer = setInterval(() => void this.flush().catch(this.opts.onError), this.opts.flushMs);
    this.timer.unref();
  }

  /** Adds `inc` to the minute of `at` of `series` (per tenant, or system-wide with null). */
  add(series: string, tenant: string | null, at: number, inc: Record<string, number>): void {
    const counters = this.counters(series, tenant, at);
    for (const [k, v] of Object.entries(inc)) counters[k] = (counters[k] ?? 0) + v;
  }

  /**
   * The unflushed counters of the minute of `at` of `series`, to add to in place. Every request
   * counts here, so the minute last asked for is kept at hand: no key is built while it lasts.
   */
  counters(series: string, tenant: string | null, at: number): Record<string, number> {
    const minute = Math.floor(at / MINUTE) * MINUTE;
    const hot = this.hot;
    if (hot && hot.buffer === this.buffer && hot.minute === minute && hot.series === series && hot.tenant === tenant) return hot.inc;
    const key = `${series}|${tenant ?? '-'}|${minute}`;
    let e = this.buffer.get(key);
    if (!e) this.buffer.set(key, (e = { series, tenant, minute, inc: {} }));
    this.hot = { buffer: this.buffer, series, tenant, minute, inc: e.inc };
    return e.inc;
  }

  /** Writes what this process counted since the last flush: one upsert per minute document. */
  flush(): Promise<void> {
    // One flush at a time: a second caller waits for the one running, then writes what is left.
    const run = async (): Promise<void> => {
      if (this.flushing) await this.flushing.catch(() => undefined);
      if (!this.buffer.size) return;
      const batch = [...this.buffer.values()];
      this.buffer = new Map();
      const ops: AnyBulkWriteOperation<MinuteDoc>[] = batch.map((e) => ({
        updateOne: {
          filter: { _id: `${e.series}|${e.tenant ?? '-'}|${new Date(e.minute).toISOString()}` },
          update: {
            $inc: Object.fromEntries(Object.entries(e.inc).map(([k, v]) => [`c.${k}`, v])) as Document,
            $setOnInsert: { series: e.series, tenant_id: e.tenant, minute: new Date(e.minute), expires_at: new Date(e.minute + this.opts.retentionDays * 86_400_000) },
          },
          upsert: true,
        },
      }));
      await this.coll.bulkWrite(ops, { ordered: false });
    };
    const p = run();
    this.flushing = p;
    return p.finally(() => { if (this.flushing === p) this.flushing = null; });
  }

  /** The minutes of `series` in [from, to): of one tenant, or of every tenant with `tenant` undefined. */
  read(series: string[], from: Date, to: Date, tenant: string | null | undefined): Promise<MinuteDoc[]> {
    return this.coll.find({ series: { $in: series }, minute: { $gte: from, $lt: to }, ...(tenant !== undefined ? { tenant_id: tenant } : {}) }).toArray();
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush().catch(this.opts.onError);
  }
}
