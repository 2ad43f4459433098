/**
 * The pages' own series (plugins/metrics-series/pages.ts): a job's runs and durations, an outbound
 * endpoint's success rate and delay, payments per status per day. Recorded from stored events,
 * read through `jobSeries`, `webhookEndpointSeries` and `paymentSeries`: a tenant administrator
 * reads their tenant's numbers only, never another tenant's, also for the other tenant's endpoint
 * id or a job both tenants run; a system administrator reads every tenant's or the tenant of
 * `X-Tenant-Id`.
 */
import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsSeriesPlugin } from '../../plugins/metrics-series/index.ts';
import { SeriesStore, type MinuteDoc } from '../../plugins/metrics-series/store.ts';
import { PageSeries } from '../../plugins/metrics-series/pages.ts';
import { ADMIN_KEY, type HttpResult, type TestApp } from '../helpers/app.ts';
import { create, paymentsApp, tenant } from '../payments/helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;
let B: Awaited<ReturnType<typeof tenant>>;
beforeAll(async () => {
  t = await paymentsApp({ plugins: [metricsSeriesPlugin], config: { METRICS_ENABLED: 'false' } });
  A = await tenant(t);
  B = await tenant(t);
});
afterAll(() => t?.close());

const expectGqlError = (res: HttpResult<any>, code: string) => expect(res.body.errors?.[0]?.extensions?.code).toBe(code);
const sum = (xs: readonly (number | null)[]) => xs.reduce<number>((n, x) => n + (x ?? 0), 0);
const byName = (lines: { name: string; values: readonly (number | null)[] }[]) => Object.fromEntries(lines.map((l) => [l.name, sum(l.values)]));

const JOB = 'query($job: String!) { jobSeries(job: $job, range: "hour") { range step_seconds t runs { name values } duration_p50_ms duration_p95_ms } }';
const ENDPOINT = 'query($id: String!, $r: String!) { webhookEndpointSeries(endpoint_id: $id, range: $r) { step_seconds t succeeded failed success_rate delay_p50_ms delay_p95_ms } }';
const PAYMENTS = 'query($days: Int) { paymentSeries(days: $days) { days t statuses { name values } } }';

/** A minute document of `series` as the store writes it, for one tenant, a minute ago. */
const stored = async (series: string, tenantId: string, c: MinuteDoc['c']) => {
  const minute = new Date(Math.floor((Date.now() - 60_000) / 60_000) * 60_000);
  await t.app.db.conn.collection<MinuteDoc>('metric_minutes').insertOne({ _id: `${series}|${tenantId}|${minute.toISOString()}`, series, tenant_id: tenantId, minute, expires_at: new Date(Date.now() + 86_400_000), c });
};

describe('recording from stored events', () => {
  it("keeps a job's runs, an endpoint's deliveries and payments per status per day apart by job, endpoint and tenant", async () => {
    const store = new SeriesStore(t.app.db.conn.collection<MinuteDoc>('pages_test_minutes') as never, { retentionDays: 1, flushMs: 60_000, onError: () => undefined });
    const now = Date.now();
    const pages = new PageSeries(store, () => now);
    const at = new Date(now - 30_000);
    const ep = new Types.ObjectId().toString();
    pages.events([
      { type: 'job_run.completed', tenant_id: 'T', created_at: at, data: { job_name: 'report', duration_ms: 40 } },
      { type: 'job_run.failed', tenant_id: 'T', created_at: at, data: { job_name: 'report', duration_ms: 3000 } },
      { type: 'job_run.completed', tenant_id: 'T', created_at: at, data: { job_name: 'other', duration_ms: 10 } },
      { type: 'job_run.completed', tenant_id: 'U', created_at: at, data: { job_name: 'report', duration_ms: 10 } },
      { type: 'webhook_delivery.succeeded', tenant_id: 'T', created_at: at, data: { endpoint_id: ep, created_at: new Date(at.getTime() - 200).toISOString() } },
      { type: 'webhook_delivery.succeeded', tenant_id: 'T', created_at: at, data: { endpoint_id: ep, created_at: new Date(at.getTime() - 200).toISOString() } },
      { type: 'webhook_delivery.failed', tenant_id: 'T', created_at: at, data: { endpoint_id: ep } },
      { type: 'webhook_delivery.failed', tenant_id: 'T', created_at: at, data: { endpoint_id: new Types.ObjectId().toString() } },
      { type: 'payments.created', tenant_id: 'T', created_at: at, data: {} },
      { type: 'payments.created', tenant_id: 'T', created_at: at, data: {} },
      { type: 'payment.completed', tenant_id: 'T', created_at: at, data: {} },
      { type: 'payment.partially_refunded', tenant_id: 'T', created_at: at, data: {} },
      { type: 'payments.created', tenant_id: 'U', created_at: at, data: {} },
    ]);
    const job = await pages.job('report', 'hour', 'T');
    expect(byName(job.runs)).toEqual({ completed: 1, failed: 1 });
    expect(job.duration_p95_ms.filter((v) => v !== null)[0]).toBeGreaterThan(2500);
    expect(job.duration_p50_ms.filter((v) => v !== null)[0]).toBeLessThanOrEqual(50);
    expect(byName((await pages.job('report', 'hour', undefined)).runs)).toEqual({ completed: 2, failed: 1 });

    const e = await pages.endpoint(ep, 'hour', 'T');
    expect([sum(e.succeeded), sum(e.failed)]).toEqual([2, 1]);
    expect(e.success_rate.filter((v) => v !== null)).toEqual([0.67]);
    expect(e.success_rate.filter((v) => v === null)).toHaveLength(59);
    const delay = e.delay_p95_ms.filter((v) => v !== null)[0]!;
    expect(delay).toBeGreaterThan(100);
    expect(delay).toBeLessThanOrEqual(250);

    const p = await pages.payments(7, 'T');
    expect(p.t).toHaveLength(7);
    expect(p.t[6]! - p.t[0]!).toBe(6 * 86_400);
    expect(byName(p.statuses)).toEqual({ pending: 2, completed: 1, partially_refunded: 1 });
    // Today is the last day.
    expect(p.statuses.find((l) => l.name === 'pending')!.values[6]).toBe(2);
  });
});

describe('jobSeries and webhookEndpointSeries', () => {
  it("show a tenant administrator their tenant's numbers only, a system administrator every tenant's or the acting tenant's", async () => {
    const ep = new Types.ObjectId().toString();
    await stored(`endpoint:${ep}`, A.tenantId, { ok: 3, failed: 1 });
    // Another tenant's numbers under the same endpoint id and job name never reach A.
    await stored(`endpoint:${ep}`, B.tenantId, { ok: 0, failed: 5 });
    await stored('job:nightly', A.tenantId, { n: { completed: 2 }, dur: { 3: 2 } });
    await stored('job:nightly', B.tenantId, { n: { failed: 7 }, dur: { 9: 7 } });

    const mine = (await t.gql(ENDPOINT, { id: ep, r: 'hour' }, { key: A.admin })).body.data.webhookEndpointSeries;
    expect(mine.t).toHaveLength(60);
    expect([sum(mine.succeeded), sum(mine.failed)]).toEqual([3, 1]);
    expect(mine.success_rate.filter((v: number | null) => v !== null)).toEqual([0.75]);
    const theirs = (await t.gql(ENDPOINT, { id: ep, r: 'day' }, { key: B.admin })).body.data.webhookEndpointSeries;
    expect(theirs.t).toHaveLength(288);
    expect([sum(theirs.succeeded), sum(theirs.failed)]).toEqual([0, 5]);
    const all = (await t.gql(ENDPOINT, { id: ep, r: 'hour' })).body.data.webhookEndpointSeries;
    expect([sum(all.succeeded), sum(all.failed)]).toEqual([3, 6]);
    const asA = (await t.gql(ENDPOINT, { id: ep, r: 'hour' }, { headers: { 'X-Tenant-Id': A.tenantId } })).body.data.webhookEndpointSeries;
    expect([sum(asA.succeeded), sum(asA.failed)]).toEqual([3, 1]);

    expect(byName((await t.gql(JOB, { job: 'nightly' }, { key: A.admin })).body.data.jobSeries.runs)).toEqual({ completed: 2 });
    expect(byName((await t.gql(JOB, { job: 'nightly' }, { key: B.admin })).body.data.jobSeries.runs)).toEqual({ failed: 7 });
    expect(byName((await t.gql(JOB, { job: 'nightly' })).body.data.jobSeries.runs)).toEqual({ completed: 2, failed: 7 });
  });

  it('refuse an anonymous caller (AUTH_REQUIRED), a plain user (ACCESS_DENIED), a malformed endpoint id and an unknown range (VALIDATION_ERROR)', async () => {
    expectGqlError(await t.gql(JOB, { job: 'nightly' }, { key: null }), 'AUTH_REQUIRED');
    expectGqlError(await t.gql(PAYMENTS, {}, { key: null }), 'AUTH_REQUIRED');
    expectGqlError(await t.gql(ENDPOINT, { id: new Types.ObjectId().toString(), r: 'hour' }, { key: null }), 'AUTH_REQUIRED');
    expectGqlError(await t.gql(ENDPOINT, { id: new Types.ObjectId().toString(), r: 'hour' }, { key: A.user }), 'ACCESS_DENIED');
    expectGqlError(await t.gql(JOB, { job: 'nightly' }, { key: A.user }), 'ACCESS_DENIED');
    expectGqlError(await t.gql(ENDPOINT, { id: 'nope', r: 'hour' }, { key: A.admin }), 'VALIDATION_ERROR');
    expectGqlError(await t.gql(ENDPOINT, { id: new Types.ObjectId().toString(), r: 'week' }, { key: A.admin }), 'VALIDATION_ERROR');
    expectGqlError(await t.gql(PAYMENTS, { days: 0 }, { key: A.admin }), 'VALIDATION_ERROR');
    expectGqlError(await t.gql(PAYMENTS, {}, { key: A.user }), 'ACCESS_DENIED');
  });
});

describe('paymentSeries', () => {
  it("counts the payments a tenant created and captured today, never another tenant's", async () => {
    for (let i = 0; i < 3; i++) await create(t, A.user);
    const p = await create(t, B.user);
    expect((await t.http('POST', `/payments/${p._id}/process`, { key: B.admin, json: {} })).status).toBe(200);
    const today = async (key: string) => {
      const s = (await t.gql(PAYMENTS, {}, { key })).body.data.paymentSeries;
      expect(s.days).toBe(7);
      return Object.fromEntries((s.statuses as { name: string; values: number[] }[]).map((l) => [l.name, l.values[6]]));
    };
    // The events reach the series when the relay stores them.
    await expect.poll(() => today(A.admin), { timeout: 20_000 }).toEqual({ pending: 3 });
    await expect.poll(() => today(B.admin), { timeout: 20_000 }).toEqual({ pending: 1, processing: 1 });
    expect(await today(ADMIN_KEY)).toEqual({ pending: 4, processing: 1 });
  });
});
