/**
 * The series of single pages of the console: a job's runs (`job:<name>`: runs by status, duration
 * histogram `dur`), an outbound endpoint's deliveries (`endpoint:<id>`: ok, failed, delay histogram
 * `delay`), each per tenant and minute like the overview's; and payments per status per day
 * (`payments-day`: one document per tenant and UTC day, `n.<status>` counting the payments that
 * reached each status that day, `pending` for the new ones). Recorded from the events stored in
 * the log; read per tenant (or every tenant added up for a system administrator's own view).
 */
import type { Permissions } from '../../core/permissions.ts';
import type { Range } from './schemas.ts';
import { addInto, deliveryCounts, DELIVERY_EVENT, jobCounts, JOB_EVENT, RANGES, type Line, type StoredEvent } from './service.ts';
import { fieldName, fromFieldName, quantile, type MinuteDoc, type SeriesStore } from './store.ts';

const DAY = 86_400_000;
const PAYMENT_EVENT = /^payment\.([a-z_]+)$/;

export const jobSeries = (job: string) => `job:${job}`;
export const endpointSeries = (id: string) => `endpoint:${id}`;


/** A job's runs over the last hour or day: finished runs by status, and their duration's p50 and p95. */
export interface JobSeries { range: Range; step_seconds: number; t: number[]; runs: Line[]; duration_p50_ms: (number | null)[]; duration_p95_ms: (number | null)[] }
/** An outbound endpoint's deliveries over the last hour or day: attempts, success rate (0..1) and delay. */
export interface EndpointSeries {
  range: Range; step_seconds: number; t: number[];
  succeeded: number[]; failed: number[]; success_rate: (number | null)[]; delay_p50_ms: (number | null)[]; delay_p95_ms: (number | null)[];
}
/** Payments per status per UTC day, the last `days` days (today last). */
export interface PaymentSeries { days: number; t: number[]; statuses: Line[] }

type Row = Record<string, number | Record<string, number>>;
const num = (r: Row, k: string) => (typeof r[k] === 'number' ? r[k] : 0);
const hist = (r: Row, k: string) => r[k] as Record<string, number> | undefined;
const round = (v: number | null) => (v == null ? null : Math.round(v * 100) / 100);
const linesOf = (rows: Row[], key: string): Line[] => {
  const names = new Set<string>();
  for (const r of rows) for (const k of Object.keys(hist(r, key) ?? {})) names.add(k);
  return [...names].sort().map((k) => ({ name: fromFieldName(k), values: rows.map((r) => hist(r, key)?.[k] ?? 0) }));
};

/** Who may read each page's plots: the one declaration its GraphQL field reads. */
export const PAGE_SERIES_PERMISSIONS = { job: 'admin', endpoint: 'admin', payments: 'admin' } as const satisfies Permissions;

export class PageSeries {
  constructor(private readonly store: SeriesStore, private readonly now: () => number = Date.now) {}

  /** Events newly stored in the log: a job's runs, an endpoint's deliveries, payments by status per day. */
  events(events: readonly StoredEvent[]): void {
    for (const e of events) {
      const tenant = e.tenant_id ? String(e.tenant_id) : null;
      const at = new Date(e.created_at).getTime();
      const d = e.data ?? {};
      const job = JOB_EVENT.exec(e.type);
      if (job && typeof d.job_name === 'string') this.store.add(jobSeries(d.job_name), tenant, at, jobCounts(job[1]!, d));
      const delivery = DELIVERY_EVENT.exec(e.type);
      if (delivery && typeof d.endpoint_id === 'string') this.store.add(endpointSeries(d.endpoint_id), tenant, at, deliveryCounts(delivery[1] === 'succeeded', at, d));
      const status = e.type === 'payments.created' ? 'pending' : PAYMENT_EVENT.exec(e.type)?.[1];
      if (status) this.store.add('payments-day', tenant, Math.floor(at / DAY) * DAY, { [`n.${fieldName(status)}`]: 1 });
    }
  }

  async job(job: string, range: Range, tenant: string | undefined): Promise<JobSeries> {
    const { t, step, rows } = await this.grid(jobSeries(job), range, tenant);
    return {
      range, step_seconds: step / 1000, t, runs: linesOf(rows, 'n'),
      duration_p50_ms: rows.map((r) => round(quantile(hist(r, 'dur'), 0.5))),
      duration_p95_ms: rows.map((r) => round(quantile(hist(r, 'dur'), 0.95))),
    };
  }

  async endpoint(id: string, range: Range, tenant: string | undefined): Promise<EndpointSeries> {
    const { t, step, rows } = await this.grid(endpointSeries(id), range, tenant);
    return {
      range, step_seconds: step / 1000, t,
      succeeded: rows.map((r) => num(r, 'ok')),
      failed: rows.map((r) => num(r, 'failed')),
      success_rate: rows.map((r) => (num(r, 'ok') + num(r, 'failed') ? round(num(r, 'ok') / (num(r, 'ok') + num(r, 'failed'))) : null)),
      delay_p50_ms: rows.map((r) => round(quantile(hist(r, 'delay'), 0.5))),
      delay_p95_ms: rows.map((r) => round(quantile(hist(r, 'delay'), 0.95))),
    };
  }

  async payments(days: number, tenant: string | undefined): Promise<PaymentSeries> {
    await this.store.flush();
    const end = Math.floor(this.now() / DAY) * DAY + DAY;
    const start = end - days * DAY;
    const docs = await this.store.read(['payments-day'], new Date(start), new Date(end), tenant);
    const rows = this.bucket(docs, start, DAY, days);
    return { days, t: Array.from({ length: days }, (_, i) => (start + i * DAY) / 1000), statuses: linesOf(rows, 'n') };
  }

  /** The minutes of `series` over the last `range`, added up per step. This process's counts are written first. */
  private async grid(series: string, range: Range, tenant: string | undefined) {
    await this.store.flush();
    const { span, step } = RANGES[range];
    const end = Math.floor(this.now() / step) * step + step;
    const start = end - span;
    const n = span / step;
    const docs = await this.store.read([series], new Date(start), new Date(end), tenant);
    return { step, t: Array.from({ length: n }, (_, i) => (start + i * step) / 1000), rows: this.bucket(docs, start, step, n) };
  }

  private bucket(docs: MinuteDoc[], start: number, step: number, n: number): Row[] {
    const rows: Row[] = Array.from({ length: n }, () => ({}));
    for (const d of docs) {
      const i = Math.floor((d.minute.getTime() - start) / step);
      if (i >= 0 && i < n) addInto(rows[i]!, d.c);
    }
    return rows;
  }
}
