/**
 * Roles and tenant isolation on every job endpoint, REST and GraphQL: system administrators do
 * everything; tenant administrators see and run per-tenant jobs for their own tenant only, and
 * manage their tenant's schedules; other users are refused. Per-tenant fan-out and its failure
 * isolation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { jobsApp, until, waitRun } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
let plain: Awaited<ReturnType<typeof createTenantUser>>;
let runA: string;
let runB: string;
let runSys: string;
let schedA: string;
let schedB: string;

beforeAll(async () => {
  t = await jobsApp();
  A = await createTenantUser(t, { roles: ['admin'] });
  B = await createTenantUser(t, { roles: ['admin'] });
  plain = await createTenantUser(t, { tenantId: A.tenantId, roles: ['user'] });
  runA = (await t.http('POST', '/jobs/run/tenant_job', { key: A.key, json: { parameters: {} } })).body.id;
  runB = (await t.http('POST', '/jobs/run/tenant_job', { key: B.key, json: { parameters: {} } })).body.id;
  runSys = (await t.http('POST', '/jobs/run/count', { json: {} })).body.id;
  for (const id of [runA, runB, runSys]) await waitRun(t, id);
  schedA = (await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'a-sched', target: 'tenant_job', cron: '0 0 * * *' } })).body.id;
  schedB = (await t.http('POST', '/jobs/schedules', { key: B.key, json: { name: 'b-sched', target: 'tenant_job', cron: '0 0 * * *' } })).body.id;
});
afterAll(() => t?.close());

const ENDPOINTS = (run: string, sched: string): [string, string, unknown?][] => [
  ['GET', '/jobs/registry'], ['GET', '/jobs/registry/count'], ['GET', '/jobs/schedules'], ['POST', '/jobs/schedules', { name: 'x', target: 'count', cron: '* * * * *' }],
  ['GET', `/jobs/schedules/${sched}`], ['PATCH', `/jobs/schedules/${sched}`, { is_enabled: false }], ['DELETE', `/jobs/schedules/${sched}`],
  ['POST', `/jobs/schedules/${sched}/run`, {}], ['GET', '/jobs/runs'], ['GET', `/jobs/runs/${run}`], ['GET', `/jobs/runs/${run}/logs`],
  ['POST', `/jobs/runs/${run}/cancel`], ['POST', '/jobs/run/count', {}], ['POST', '/jobs/run', { job: 'count' }], ['POST', '/jobs/check-schedules'],
  ['GET', '/jobs/chains'], ['POST', '/jobs/chains', { name: 'c', steps: [{ job: 'count' }] }], ['GET', `/jobs/chains/${sched}`],
  ['PATCH', `/jobs/chains/${sched}`, { description: 'x' }], ['DELETE', `/jobs/chains/${sched}`], ['POST', `/jobs/chains/${sched}/run`, {}],
];

describe('authentication and roles', () => {
  it('every endpoint needs a caller (401) and an administrator (403)', async () => {
    for (const [m, p, json] of ENDPOINTS(runA, schedA)) {
      expectError(await t.http(m, p, { key: null, ...(json !== undefined ? { json } : {}) }), 401, 'AUTH_REQUIRED');
      expectError(await t.http(m, p, { key: plain.key, ...(json !== undefined ? { json } : {}) }), 403, 'ACCESS_DENIED');
    }
  });

  it('chains and check-schedules are for system administrators', async () => {
    for (const [m, p, json] of ENDPOINTS(runA, schedA).filter(([, p]) => p.startsWith('/jobs/chains') || p === '/jobs/check-schedules'))
      expectError(await t.http(m, p, { key: A.key, ...(json !== undefined ? { json } : {}) }), 403, 'ACCESS_DENIED');
  });
});

describe('tenant administrators', () => {
  it('see and run only per-tenant jobs, for their own tenant, as that tenant', async () => {
    const reg = await t.http('GET', '/jobs/registry', { key: A.key });
    expect(reg.body.map((j: { name: string }) => j.name)).toEqual(['tenant_job']);
    expectError(await t.http('GET', '/jobs/registry/count', { key: A.key }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', '/jobs/run/count', { key: A.key, json: {} }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', '/jobs/run', { key: A.key, json: { job: 'tenant_job', tenant_id: B.tenantId } }), 403, 'ACCESS_DENIED');
    const run = await t.http('GET', `/jobs/runs/${runA}`, { key: A.key });
    expect(run.body).toMatchObject({ tenant_id: A.tenantId, status: 'completed', triggered_by: A.userId, triggered_by_user: A.userId });
    const [call] = await t.app.db.conn.collection('jobs_fixture_calls').find({ run_id: runA }).toArray();
    expect(call).toMatchObject({ tenant_id: A.tenantId, actor_tenant: A.tenantId });
  });

  it('see only their tenant runs; another tenant run is 404 for read, logs and cancel', async () => {
    const list = await t.http('GET', '/jobs/runs?per_page=100', { key: A.key });
    expect(list.body.items.map((r: { id: string }) => r.id)).toEqual([runA]);
    expect(list.body.total).toBe(1);
    const forced = await t.http('GET', `/jobs/runs?tenant_id=${B.tenantId}`, { key: A.key });
    expect(forced.body.items.map((r: { id: string }) => r.id)).toEqual([runA]);
    for (const id of [runB, runSys]) {
      expectError(await t.http('GET', `/jobs/runs/${id}`, { key: A.key }), 404, 'NOT_FOUND');
      expectError(await t.http('GET', `/jobs/runs/${id}/logs`, { key: A.key }), 404, 'NOT_FOUND');
      expectError(await t.http('POST', `/jobs/runs/${id}/cancel`, { key: A.key }), 404, 'NOT_FOUND');
    }
    const all = await t.http('GET', '/jobs/runs?per_page=100');
    expect(all.body.items.map((r: { id: string }) => r.id)).toEqual(expect.arrayContaining([runA, runB, runSys]));
  });

  it('manage only their tenant schedules, of per-tenant jobs', async () => {
    const own = await t.http('GET', `/jobs/schedules/${schedA}`, { key: A.key });
    expect(own.body).toMatchObject({ tenant_id: A.tenantId, job_type: 'tenant_job' });
    expect((await t.http('GET', '/jobs/schedules', { key: A.key })).body.map((s: { id: string }) => s.id)).toEqual([schedA]);
    expectError(await t.http('GET', `/jobs/schedules/${schedB}`, { key: A.key }), 404, 'NOT_FOUND');
    expectError(await t.http('PATCH', `/jobs/schedules/${schedB}`, { key: A.key, json: { is_enabled: false } }), 404, 'NOT_FOUND');
    expectError(await t.http('DELETE', `/jobs/schedules/${schedB}`, { key: A.key }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', `/jobs/schedules/${schedB}/run`, { key: A.key, json: {} }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'x1', target: 'count', cron: '* * * * *' } }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'x2', target: 'tenant_job', cron: '* * * * *', tenant_id: B.tenantId } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'x3', target: 'tenant_job', cron: '* * * * *', per_tenant: true } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'x4', target: 'tenant_job', cron: '* * * * *', depends_on_schedules: [schedB] } }), 422, 'VALIDATION_ERROR');
    const r = await t.http('POST', `/jobs/schedules/${schedA}/run`, { key: A.key, json: {} });
    expect(r.body).toMatchObject({ tenant_id: A.tenantId, schedule_id: schedA });
    expect((await t.http('GET', '/jobs/schedules')).body.map((s: { id: string }) => s.id)).toEqual(expect.arrayContaining([schedA, schedB]));
    expect(await t.app.db.conn.collection('job_schedules').countDocuments({ job_name: /^x\d$/ })).toBe(0);
  });
});

describe('per-tenant fan-out', () => {
  it('runs once per tenant, each as its tenant; one tenant failing does not stop the others', async () => {
    const r = await t.http('POST', '/jobs/run/tenant_job', { json: { parameters: { fail_tenant: A.tenantId } } });
    expect(r.status).toBe(202);
    expect(r.body.tenant_id).toBeNull();
    const parent = await waitRun(t, r.body.id);
    const tenants = (await t.http('GET', '/admin/tenants?per_page=100')).body.items.map((x: { id: string }) => x.id);
    expect(tenants.length).toBeGreaterThanOrEqual(3);
    const children = (await t.http('GET', `/jobs/runs?parent_job_id=${r.body.id}&per_page=100`)).body.items;
    expect(children.map((c: { tenant_id: string }) => c.tenant_id).sort()).toEqual([...tenants].sort());
    for (const c of children) expect(c.status).toBe(c.tenant_id === A.tenantId ? 'failed' : 'completed');
    expect(parent).toMatchObject({ status: 'failed', attempt: 1 });
    expect(parent.error).toContain(`1 of ${tenants.length} tenants failed: ${A.tenantId}`);
    const calls = await t.app.db.conn.collection('jobs_fixture_calls').find({ run_id: { $in: children.map((c: { id: string }) => c.id) } }).toArray();
    expect(calls).toHaveLength(tenants.length);
    for (const c of calls) expect(c.actor_tenant).toBe(c.tenant_id);
    // Tenant administrators see their own tenant's child only.
    const mine = await t.http('GET', `/jobs/runs?parent_job_id=${r.body.id}`, { key: B.key });
    expect(mine.body.items.map((c: { tenant_id: string }) => c.tenant_id)).toEqual([B.tenantId]);
  });

  it('cancelling the parent cancels the tenant runs still pending or running', async () => {
    const r = await t.http('POST', '/jobs/run', { json: { job: 'tenant_job', params: {} } });
    await t.http('POST', `/jobs/runs/${r.body.run_id}/cancel`);
    const parent = await waitRun(t, r.body.run_id);
    expect(parent.status).toBe('cancelled');
    await until(async () => {
      const kids = (await t.http('GET', `/jobs/runs?parent_job_id=${r.body.run_id}&per_page=100`)).body.items;
      return kids.every((k: { status: string }) => ['cancelled', 'completed'].includes(k.status));
    });
  });
});

describe('GraphQL', () => {
  const q = (query: string, vars: Record<string, unknown>, key: string | null) => t.gql(query, vars, { key });
  const code = (res: { body: { errors?: { extensions?: { code?: string } }[] } }) => res.body.errors?.[0]?.extensions?.code;

  it('applies the same roles', async () => {
    for (const query of ['{ jobRegistry { name } }', '{ jobRuns { total } }', '{ jobSchedules { id } }', '{ jobChains { id } }']) {
      expect(code(await q(query, {}, null))).toBe('AUTH_REQUIRED');
      expect(code(await q(query, {}, plain.key))).toBe('ACCESS_DENIED');
    }
    expect(code(await q('{ jobChains { id } }', {}, A.key))).toBe('ACCESS_DENIED');
  });

  it('isolates tenants on every query and mutation', async () => {
    expect((await q('{ jobRegistry { name per_tenant } }', {}, A.key)).body.data.jobRegistry).toEqual([{ name: 'tenant_job', per_tenant: true }]);
    const runs = await q('{ jobRuns(per_page: 100) { total items { id tenant_id } } }', {}, A.key);
    expect(runs.body.data.jobRuns.items.every((r: { tenant_id: string }) => r.tenant_id === A.tenantId)).toBe(true);
    expect(runs.body.data.jobRuns.items.map((r: { id: string }) => r.id)).toContain(runA);
    const forced = await q('query($t: String) { jobRuns(filter: {tenant_id: $t, job_name: "tenant_job"}) { items { id } } }', { t: B.tenantId }, A.key);
    expect(forced.body.data.jobRuns.items.map((r: { id: string }) => r.id)).not.toContain(runB);
    const sys = await q('query($t: String) { jobRuns(filter: {tenant_id: $t}) { items { id } } }', { t: B.tenantId }, null);
    expect(sys.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    const adminView = await t.gql('query($t: String) { jobRuns(filter: {tenant_id: $t, status: "completed"}) { items { id } } }', { t: B.tenantId });
    expect(adminView.body.data.jobRuns.items.map((r: { id: string }) => r.id)).toContain(runB);
    expect((await t.gql('{ jobRuns(filter: {status: "weird"}) { total } }')).body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    expect(code(await q('query($id: String!) { jobRun(id: $id) { id } }', { id: runB }, A.key))).toBe('NOT_FOUND');
    const own = await q('query($id: String!) { jobRun(id: $id) { id status logs { level message } } }', { id: runA }, A.key);
    expect(own.body.data.jobRun).toMatchObject({ id: runA, status: 'completed' });
    expect(code(await q('mutation($id: String!) { cancelJobRun(id: $id) { id } }', { id: runB }, A.key))).toBe('NOT_FOUND');
    expect(code(await q('mutation { triggerJob(job: "count") { id } }', {}, A.key))).toBe('NOT_FOUND');
    expect(code(await q('mutation($t: String) { triggerJob(job: "tenant_job", tenant_id: $t) { id } }', { t: B.tenantId }, A.key))).toBe('ACCESS_DENIED');
    const trig = await q('mutation { triggerJob(job: "tenant_job", params: {}) { id tenant_id status } }', {}, A.key);
    expect(trig.body.data.triggerJob).toMatchObject({ tenant_id: A.tenantId, status: 'pending' });
    expect((await q('{ jobSchedules { id tenant_id } }', {}, A.key)).body.data.jobSchedules).toEqual([{ id: schedA, tenant_id: A.tenantId }]);
    expect(code(await q('mutation($id: String) { upsertJobSchedule(id: $id, input: {is_enabled: false}) { id } }', { id: schedB }, A.key))).toBe('NOT_FOUND');
    const up = await q('mutation { upsertJobSchedule(input: {name: "gql-a", target: "tenant_job", cron: "0 1 * * *"}) { id tenant_id job_name } }', {}, A.key);
    expect(up.body.data.upsertJobSchedule).toMatchObject({ tenant_id: A.tenantId, job_name: 'gql-a' });
    const bad = await q('mutation { upsertJobSchedule(input: {name: "gql-b", target: "tenant_job", cron: "99 * * * *"}) { id } }', {}, A.key);
    expect(code(bad)).toBe('VALIDATION_ERROR');
    expect((await q('{ jobSchedules { id } }', {}, B.key)).body.data.jobSchedules).toEqual([{ id: schedB }]);
  });
});
