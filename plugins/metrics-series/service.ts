/**
 * What the plots show, recorded from the server's own instrumentation points (every HTTP answer,
 * every event stored in the log) into the SeriesStore, and read back as aligned series for a range.
 * Series: `http` (system-wide: count, errors = 5xx, latency histogram `lat`), and per tenant
 * `events` (count by type), `deliveries` (outbound: ok, failed, delay histogram `delay`) and
 * `jobs` (runs by status, duration histogram `dur`); the pages' own series are in pages.ts.
 */
import type { Permissions } from '../../core/permissions.ts';
import type { Range } from './schemas.ts';
import { BUCKETS_MS, bucketOf, fieldName, fromFieldName, quantile, type MinuteDoc, type SeriesStore } from './store.ts';

/** An event as the log stores it (the fields read here). */
export interface StoredEvent {
  type: string;
  tenant_id: unknown;
  created_at: Date;
  data: Record<string, unknown> | null;
}

export const RANGES: Record<Range, { span: number; step: number }> = { hour: { span: 3_600_000, step: 60_000 }, day: { span: 86_400_000, step: 300_000 } };

/** One named line of a plot. */
export interface Line { name: string; values: (number | null)[] }
/** Aligned series over a range: `t` (unix seconds, each step's start) and one value per step. */
export interface Overview {
  range: Range;
  step_seconds: number;
  t: number[];
  /** System-wide series: null unless the caller is a system administrator. */
  requests_per_second: (number | null)[] | null;
  error_rate: (number | null)[] | null;
  latency_p50_ms: (number | null)[] | null;
  latency_p95_ms: (number | null)[] | null;
  deliveries_succeeded: number[];
  deliveries_failed: number[];
  delivery_delay_p95_ms: (number | null)[];
  job_runs: Line[];
  job_duration_p95_ms: (number | null)[];
  events: Line[];
}

export const JOB_EVENT = /^job_run\.(completed|failed|cancelled)$/;
export const DELIVERY_EVENT = /^webhook_delivery\.(succeeded|failed)$/;

/** A finished run's counters: one run of its status, and its duration in the `dur` histogram. */
export const jobCounts = (status: string, d: Record<string, unknown>) => {
  const ms = typeof d.duration_ms === 'number' ? d.duration_ms : null;
  return { [`n.${status}`]: 1, ...(ms != null ? { [`dur.${bucketOf(ms)}`]: 1 } : {}) };
};
/** A delivery attempt's counters: ok or failed, and for a delivered one its delay since the delivery was created. */
export const deliveryCounts = (ok: boolean, at: number, d: Record<string, unknown>) => {
  const since = typeof d.created_at === 'string' || d.created_at instanceof Date ? new Date(d.created_at as string).getTime() : NaN;
  return { [ok ? 'ok' : 'failed']: 1, ...(ok && Number.isFinite(since) ? { [`delay.${bucketOf(Math.max(0, at - since))}`]: 1 } : {}) };
};
/** Event types kept apart per tenant and minute document; the rest add up under `other`. */
const MAX_TYPES = 50;
/** The counter of each latency bucket of the `http` series. */
const LATENCY_FIELDS = Array.from({ length: BUCKETS_MS.length + 1 }, (_, i) => `lat.${i}`);

/** Who may read the overview's plots: the one declaration its GraphQL field reads. */
export const SERIES_PERMISSIONS = { overview: 'admin' } as const satisfies Permissions;

export class SeriesService {
  constructor(private readonly store: SeriesStore, private readonly now: () => number = Date.now) {}

  /** One HTTP answer (any transport that the access log times). */
  request(status: number, seconds: number): void {
    const c = this.store.counters('http', null, this.now());
    const lat = LATENCY_FIELDS[bucketOf(seconds * 1000)]!;
    c.count = (c.count ?? 0) + 1;
    if (status >= 500) c.errors = (c.errors ?? 0) + 1;
    c[lat] = (c[lat] ?? 0) + 1;
  }

  /** Events newly stored in the log (each is stored by one process only, so counted once). */
  events(events: readonly StoredEvent[]): void {
    for (const e of events) {
      const tenant = e.tenant_id ? String(e.tenant_id) : null;
      const at = new Date(e.created_at).getTime();
      this.store.add('events', tenant, at, { [`n.${fieldName(e.type)}`]: 1 });
      const d = e.data ?? {};
      const delivery = DELIVERY_EVENT.exec(e.type);
      if (delivery) {
        const ok = delivery[1] === 'succeeded';
        this.store.add('deliveries', tenant, at, deliveryCounts(ok, at, d));
      }
      const job = JOB_EVENT.exec(e.type);
      if (job) {
        this.store.add('jobs', tenant, at, jobCounts(job[1]!, d));
      }
    }
  }

  /**
   * The overview's series for the last `range`, ending now. `tenant`: one tenant's series, or
   * undefined for every tenant added up; `system`: whether the system-wide series are included.
   * This process's unflushed counts are written first, so a caller reads its own requests.
   */
  async overview(range: Range, tenant: string | undefined, system: boolean): Promise<Overview> {
    await this.store.flush();
    const { span, step } = RANGES[range];
    const end = Math.floor(this.now() / step) * step + step;
    const start = end - span;
    const n = span / step;
    const t = Array.from({ length: n }, (_, i) => (start + i * step) / 1000);
    const [own, wide] = await Promise.all([
      this.store.read(['events', 'deliveries', 'jobs'], new Date(start), new Date(end), tenant),
      system ? this.store.read(['http'], new Date(start), new Date(end), null) : [],
    ]);
    const docs = [...own, ...wide];
    // Per series, per step: the counters added up (histograms bucket by bucket).
    const steps = new Map<string, Record<string, number | Record<string, number>>[]>();
    for (const d of docs) {
      const i = Math.floor((d.minute.getTime() - start) / step);
      if (i < 0 || i >= n) continue;
      const rows = steps.get(d.series) ?? Array.from({ length: n }, () => ({}));
      steps.set(d.series, rows);
      addInto(rows[i]!, d.c);
    }
    const rows = (s: string) => steps.get(s) ?? Array.from({ length: n }, () => ({}));
    const num = (r: Record<string, unknown>, k: string) => (typeof r[k] === 'number' ? (r[k] as number) : 0);
    const hist = (r: Record<string, unknown>, k: string) => r[k] as Record<string, number> | undefined;
    const round = (v: number | null) => (v == null ? null : Math.round(v * 100) / 100);
    const http = rows('http');
    const lines = (s: string, key: string, label = (x: string) => x): Line[] => {
      const names = new Set<string>();
      for (const r of rows(s)) for (const k of Object.keys(hist(r, key) ?? {})) names.add(k);
      return [...names].sort().slice(0, MAX_TYPES).map((k) => ({ name: label(fromFieldName(k)), values: rows(s).map((r) => hist(r, key)?.[k] ?? 0) }));
    };
    return {
      range, step_seconds: step / 1000, t,
      requests_per_second: system ? http.map((r) => round(num(r, 'count') / (step / 1000))) : null,
      error_rate: system ? http.map((r) => (num(r, 'count') ? round(num(r, 'errors') / num(r, 'count')) : null)) : null,
      latency_p50_ms: system ? http.map((r) => round(quantile(hist(r, 'lat'), 0.5))) : null,
      latency_p95_ms: system ? http.map((r) => round(quantile(hist(r, 'lat'), 0.95))) : null,
      deliveries_succeeded: rows('deliveries').map((r) => num(r, 'ok')),
      deliveries_failed: rows('deliveries').map((r) => num(r, 'failed')),
      delivery_delay_p95_ms: rows('deliveries').map((r) => round(quantile(hist(r, 'delay'), 0.95))),
      job_runs: lines('jobs', 'n'),
      job_duration_p95_ms: rows('jobs').map((r) => round(quantile(hist(r, 'dur'), 0.95))),
      events: lines('events', 'n'),
    };
  }
}

/** Adds a stored minute's counters into a step's (nested objects are histograms or counts by name). */
export function addInto(into: Record<string, number | Record<string, number>>, c: MinuteDoc['c']): void {
  for (const [k, v] of Object.entries(c ?? {})) {
    if (typeof v === 'number') into[k] = ((into[k] as number | undefined) ?? 0) + v;
    else {
      const o = (into[k] as Record<string, number> | undefined) ?? {};
      for (const [b, x] of Object.entries(v)) o[b] = (o[b] ?? 0) + x;
      into[k] = o;
    }
  }
}
