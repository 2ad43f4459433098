/**
 * The console's time series (plugins/metrics-series): every HTTP answer and every stored event is
 * counted into one document per minute, series and tenant; `metricsOverview` reads them back for
 * the last hour or day. Tenant administrators see their tenant's series only and no system-wide
 * ones; two processes add into the same minute document; quantiles come from the stored histograms.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { metricsSeriesPlugin } from '../../plugins/metrics-series/index.ts';
import { BUCKETS_MS, quantile, SeriesStore, type MinuteDoc } from '../../plugins/metrics-series/store.ts';
import { SeriesService } from '../../plugins/metrics-series/service.ts';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { addMembership } from '../helpers/memberships.ts';

/** A route that fails (500), to count errors. */
const failing = definePlugin({
  name: 'series-failing',
  setup: () => ({ routes: [defineRoute({ method: 'GET', path: '/boom', auth: 'public', response: z.object({}), handler: () => { throw new Error('boom'); } })] }),
});

let t: TestApp;
let a: Awaited<ReturnType<typeof createTenantUser>>;
let b: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, metricsSeriesPlugin, failing], config: { METRICS_ENABLED: 'false' } });
  a = await createTenantUser(t, { roles: ['user', 'admin'] });
  // The other tenant's user is a second membership of the first one's person: one person, two tenants.
  b = await addMembership(t, a.userId, { roles: ['user', 'admin'] });
});
afterAll(() => t?.close());

const OVERVIEW = `query($r: String!) { metricsOverview(range: $r) { range step_seconds t requests_per_second error_rate latency_p50_ms latency_p95_ms
  deliveries_succeeded deliveries_failed delivery_delay_p95_ms job_runs { name values } job_duration_p95_ms events { name values } } }`;
const sum = (xs: (number | null)[] | null) => (xs ?? []).reduce<number>((n, x) => n + (x ?? 0), 0);

describe('metricsOverview', () => {
  it('counts requests, 5xx and events per type and tenant (with METRICS_ENABLED=false), in 60 one-minute steps', async () => {
    for (let i = 0; i < 3; i++) await t.http('POST', '/projects', { key: a.key, json: { name: `P${i}` } });
    await t.http('POST', '/projects', { key: b.key, json: { name: 'B' } });
    for (let i = 0; i < 2; i++) await t.http('GET', '/boom');
    const sys = (await t.gql(OVERVIEW, { r: 'hour' })).body.data.metricsOverview;
    expect(sys).toMatchObject({ range: 'hour', step_seconds: 60 });
    expect(sys.t).toHaveLength(60);
    expect(sys.t[59] - sys.t[0]).toBe(59 * 60);
    // Every request so far (set-up included) is counted: at least the 6 above.
    expect(sum(sys.requests_per_second) * 60).toBeGreaterThanOrEqual(6);
    expect(sum(sys.error_rate)).toBeGreaterThan(0);
    expect(sys.latency_p95_ms.some((v: number | null) => v !== null && v > 0)).toBe(true);
    const created = (o: { events: { name: string; values: number[] }[] }) => sum(o.events.find((e) => e.name === 'projects.created')?.values ?? []);
    expect(created(sys)).toBe(4);

    const mine = (await t.gql(OVERVIEW, { r: 'hour' }, { key: a.key })).body.data.metricsOverview;
    expect(created(mine)).toBe(3);
    expect(mine.requests_per_second).toBeNull();
    expect(mine.latency_p50_ms).toBeNull();
    expect(created((await t.gql(OVERVIEW, { r: 'hour' }, { key: b.key })).body.data.metricsOverview)).toBe(1);
    // A system administrator acting for tenant B sees B's events, and still the system-wide series.
    const asB = (await t.gql(OVERVIEW, { r: 'hour' }, { headers: { 'X-Tenant-Id': b.tenantId } })).body.data.metricsOverview;
    expect(created(asB)).toBe(1);
    expect(asB.requests_per_second).not.toBeNull();
  });

  it('gives the last day in 288 five-minute steps', async () => {
    const day = (await t.gql(OVERVIEW, { r: 'day' }, { key: a.key })).body.data.metricsOverview;
    expect(day).toMatchObject({ range: 'day', step_seconds: 300 });
    expect(day.t).toHaveLength(288);
    expect(sum(day.events.find((e: { name: string }) => e.name === 'projects.created').values)).toBe(3);
  });

  it('refuses an anonymous caller (AUTH_REQUIRED), a plain user (ACCESS_DENIED) and an unknown range (VALIDATION_ERROR)', async () => {
    expect((await t.gql(OVERVIEW, { r: 'hour' }, { key: null })).body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    const plain = await createTenantUser(t, { tenantId: a.tenantId });
    expect((await t.gql(OVERVIEW, { r: 'hour' }, { key: plain.key })).body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    expect((await t.gql(OVERVIEW, { r: 'week' }, { key: a.key })).body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
  });
});

describe('the store', () => {
  it('adds two processes\' counts into one minute document, with its expiry', async () => {
    const coll = t.app.db.conn.collection<MinuteDoc>('series_test_minutes') as never;
    const opts = { retentionDays: 3, flushMs: 60_000, onError: (e: unknown) => { throw e; } };
    const one = new SeriesStore(coll, opts);
    const two = new SeriesStore(coll, opts);
    const at = Date.UTC(2026, 0, 1, 10, 30, 15);
    one.add('x', 't1', at, { n: 2, 'h.3': 1 });
    two.add('x', 't1', at + 20_000, { n: 5, 'h.3': 2 });
    await Promise.all([one.flush(), two.flush()]);
    const docs = await one.read(['x'], new Date(at - 3_600_000), new Date(at + 3_600_000), 't1');
    expect(docs).toHaveLength(1);
    expect(docs[0]!.c).toEqual({ n: 7, h: { 3: 3 } });
    expect(docs[0]!.minute.toISOString()).toBe('2026-01-01T10:30:00.000Z');
    expect(docs[0]!.expires_at.toISOString()).toBe('2026-01-04T10:30:00.000Z');
  });

  it('counts every answer into its minute: across a flush, and into the next minute when it begins', async () => {
    const coll = t.app.db.conn.collection<MinuteDoc>('series_test_requests') as never;
    const store = new SeriesStore(coll, { retentionDays: 1, flushMs: 60_000, onError: (e: unknown) => { throw e; } });
    let now = Date.UTC(2026, 0, 1, 10, 30, 5);
    const series = new SeriesService(store, () => now);
    series.request(200, 0.001);
    series.request(503, 0.001);
    await store.flush();
    // Counted after the flush: into the same minute document, not into the batch already written.
    series.request(200, 0.001);
    now += 60_000;
    series.request(200, 0.001);
    await store.flush();
    const docs = await store.read(['http'], new Date(now - 3_600_000), new Date(now + 3_600_000), null);
    const byMinute = Object.fromEntries(docs.map((d) => [d.minute.toISOString(), d.c]));
    expect(byMinute).toEqual({
      '2026-01-01T10:30:00.000Z': { count: 3, errors: 1, lat: { 0: 3 } },
      '2026-01-01T10:31:00.000Z': { count: 1, lat: { 0: 1 } },
    });
  });

  it('counts deliveries with their delay and job runs with their duration from the stored events', async () => {
    const coll = t.app.db.conn.collection<MinuteDoc>('series_test_events') as never;
    const store = new SeriesStore(coll, { retentionDays: 1, flushMs: 60_000, onError: () => undefined });
    const now = Date.now();
    const svc = new SeriesService(store, () => now);
    const at = new Date(now - 30_000);
    svc.events([
      { type: 'webhook_delivery.succeeded', tenant_id: 'T', created_at: at, data: { created_at: new Date(at.getTime() - 200).toISOString() } },
      { type: 'webhook_delivery.failed', tenant_id: 'T', created_at: at, data: {} },
      { type: 'job_run.completed', tenant_id: 'T', created_at: at, data: { duration_ms: 40 } },
      { type: 'job_run.failed', tenant_id: 'T', created_at: at, data: { duration_ms: 3000 } },
      { type: 'job_run.completed', tenant_id: 'U', created_at: at, data: { duration_ms: 10 } },
    ]);
    const o = await svc.overview('hour', 'T', false);
    expect(sum(o.deliveries_succeeded)).toBe(1);
    expect(sum(o.deliveries_failed)).toBe(1);
    const delay = o.delivery_delay_p95_ms.filter((v) => v !== null);
    expect(delay).toHaveLength(1);
    expect(delay[0]).toBeGreaterThan(100);
    expect(delay[0]).toBeLessThanOrEqual(250);
    expect(Object.fromEntries(o.job_runs.map((l) => [l.name, sum(l.values)]))).toEqual({ completed: 1, failed: 1 });
    expect(o.job_duration_p95_ms.filter((v) => v !== null)[0]).toBeGreaterThan(2500);
  });
});

describe('quantile', () => {
  it('interpolates inside the bucket holding the quantile', () => {
    // 10 answers in (10, 25] ms and 10 in (100, 250] ms.
    const h = { 2: 10, 5: 10 };
    expect(BUCKETS_MS[2]).toBe(25);
    expect(quantile(h, 0.5)).toBe(25);
    expect(quantile(h, 0.95)).toBeCloseTo(100 + 0.9 * 150);
    expect(quantile({}, 0.5)).toBeNull();
  });
});
