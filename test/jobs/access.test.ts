/**
 * Roles and tenant isolation on every job endpoint, REST and GraphQL: system administrators do
 * everything; tenant administrators see and run per-tenant jobs for their own tenant only, and
 * manage their tenant's schedules; other users are refused. Per-tenant fan-out and its failure
 * isolation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { jobsApp, until, waitRun } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

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
  // B's administrator is A's administrator's second membership: one person, two tenants.
  B = await addMembership(t, A.userId, { roles: ['admin'] });
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

  it('mutations refuse anonymous callers (AUTH_REQUIRED) and plain users (ACCESS_DENIED); nothing is written', async () => {
    const runsBefore = await t.app.db.conn.collection('job_runs').countDocuments();
    const schedulesBefore = await t.app.db.conn.collection('job_schedules').countDocuments();
    const mutations: [string, Record<string, unknown>][] = [
      ['mutation { triggerJob(job: "tenant_job", params: {}) { id } }', {}],
      ['mutation($id: String!) { cancelJobRun(id: $id) { id } }', { id: runA }],
      ['mutation { upsertJobSchedule(input: {name: "gql-anon", target: "tenant_job", cron: "0 1 * * *"}) { id } }', {}],
      ['mutation($id: String) { upsertJobSchedule(id: $id, input: {is_enabled: false}) { id } }', { id: schedA }],
    ];
    for (const [query, vars] of mutations) {
      const anon = await q(query, vars, null);
      expect(code(anon), query).toBe('AUTH_REQUIRED');
      expect(anon.body.data ?? null).toBeNull();
      const user = await q(query, vars, plain.key);
      expect(code(user), query).toBe('ACCESS_DENIED');
    }
    expect(await t.app.db.conn.collection('job_runs').countDocuments()).toBe(runsBefore);
    expect(await t.app.db.conn.collection('job_schedules').countDocuments()).toBe(schedulesBefore);
    expect((await t.http('GET', `/jobs/schedules/${schedA}`)).body.is_enabled).toBe(true);
  });

  it('upsertJobSchedule refuses a tenant administrator another tenant and per-tenant fan-out, as REST does', async () => {
    const other = await q('mutation($t: String) { upsertJobSchedule(input: {name: "gql-x2", target: "tenant_job", cron: "0 1 * * *", tenant_id: $t}) { id } }', { t: B.tenantId }, A.key);
    expect(code(other)).toBe('ACCESS_DENIED');
    const fan = await q('mutation { upsertJobSchedule(input: {name: "gql-x3", target: "tenant_job", cron: "0 1 * * *", per_tenant: true}) { id } }', {}, A.key);
    expect(code(fan)).toBe('ACCESS_DENIED');
    // Moving the own schedule to another tenant or to fan-out is refused too.
    expect(code(await q('mutation($id: String, $t: String) { upsertJobSchedule(id: $id, input: {tenant_id: $t}) { id } }', { id: schedA, t: B.tenantId }, A.key))).toBe('ACCESS_DENIED');
    expect(code(await q('mutation($id: String) { upsertJobSchedule(id: $id, input: {per_tenant: true}) { id } }', { id: schedA }, A.key))).toBe('ACCESS_DENIED');
    expect(await t.app.db.conn.collection('job_schedules').countDocuments({ job_name: /^gql-x\d$/ })).toBe(0);
    expect((await t.http('GET', `/jobs/schedules/${schedA}`)).body).toMatchObject({ tenant_id: A.tenantId, per_tenant: false });
  });

  it('jobRegistry and jobChains answer a system administrator', async () => {
    const reg = await t.gql('{ jobRegistry { name description timeout max_attempts params per_tenant timeout_seconds retries plugin } }');
    expect(reg.body.errors).toBeUndefined();
    const names = reg.body.data.jobRegistry.map((j: { name: string }) => j.name);
    for (const n of ['count', 'tenant_job', 'cleanup_job_runs', 'cleanup_expired_tokens', 'calculate_next_schedules', 'cleanup_audit_log']) expect(names).toContain(n);
    expect(reg.body.data.jobRegistry.find((j: { name: string }) => j.name === 'tenant_job')).toEqual({
      name: 'tenant_job', description: expect.any(String), timeout: 30, max_attempts: 1, per_tenant: true, timeout_seconds: 30, retries: 0, plugin: 'jobs-fixture',
      params: { fail_tenant: { type: 'string', required: false, description: '' } },
    });
    const c = await t.http('POST', '/jobs/chains', { json: { name: 'gql-chain', description: 'd', default_on_failure: 'continue', steps: [{ job: 'count' }, { job: 'echo', params: { message: 'm' }, depends_on: ['count'], on_failure: 'retry', retries: 2, retry_delay_seconds: 5 }] } });
    expect(c.status).toBe(201);
    const chains = await t.gql('{ jobChains { id name description is_system default_on_failure steps { job params depends_on on_failure retries retry_delay_seconds } } }');
    expect(chains.body.errors).toBeUndefined();
    expect(chains.body.data.jobChains.find((x: { id: string }) => x.id === c.body.id)).toEqual({
      id: c.body.id, name: 'gql-chain', description: 'd', is_system: false, default_on_failure: 'continue',
      steps: [
        { job: 'count', params: {}, depends_on: [], on_failure: null, retries: 0, retry_delay_seconds: 60 },
        { job: 'echo', params: { message: 'm' }, depends_on: ['count'], on_failure: 'retry', retries: 2, retry_delay_seconds: 5 },
      ],
    });
  });

  it('cancelJobRun cancels a running run; jobRun shows its progress and log lines', async () => {
    const started = await t.gql('mutation { triggerJob(job: "sleepy", params: {ms: 30000, steps: 300}) { id status } }');
    const id = started.body.data.triggerJob.id as string;
    await until(async () => (await t.http('GET', `/jobs/runs/${id}`)).body.progress_current >= 1);
    const cancelled = await t.gql('mutation($id: String!) { cancelJobRun(id: $id) { id status completed_at } }', { id });
    expect(cancelled.body.errors).toBeUndefined();
    expect(cancelled.body.data.cancelJobRun).toMatchObject({ id, status: 'cancelled', completed_at: expect.any(String) });
    expect((await waitRun(t, id)).status).toBe('cancelled');
    expect(await t.app.db.conn.collection('jobs_fixture_calls').countDocuments({ run_id: id, phase: 'end' })).toBe(0);
    expect(code(await t.gql('mutation($id: String!) { cancelJobRun(id: $id) { id } }', { id }))).toBe('CONFLICT');

    const done = (await t.http('POST', '/jobs/run/sleepy', { json: { parameters: { ms: 200, steps: 2 } } })).body.id as string;
    await waitRun(t, done);
    const r = await t.gql('query($id: String!) { jobRun(id: $id) { id status progress_current progress_total progress_message percentage logs { timestamp level message percentage } } }', { id: done });
    expect(r.body.errors).toBeUndefined();
    const run = r.body.data.jobRun;
    expect(run).toMatchObject({ id: done, status: 'completed', progress_current: 2, progress_total: 2, progress_message: 'step 2', percentage: 100 });
    expect(run.logs.map((l: { level: string; message: string; percentage: number | null }) => [l.level, l.message, l.percentage])).toEqual([
      ['progress', 'step 1', 50], ['info', 'step 1 done', null], ['progress', 'step 2', 100], ['info', 'step 2 done', null], ['info', expect.stringMatching(/^completed in \d+ ms$/), null],
    ]);
    for (const l of run.logs) expect(new Date(l.timestamp).toISOString()).toBe(l.timestamp);
  });
});

describe('REST: own tenant, and a system administrator acting in one tenant', () => {
  it('a tenant administrator streams the log of, and cancels, a run of their own tenant', async () => {
    // A long run in tenant A (started by a system administrator for that tenant).
    const r = await t.http('POST', '/jobs/run', { json: { job: 'sleepy', params: { ms: 30_000, steps: 300 }, tenant_id: A.tenantId } });
    expect(r.status).toBe(202);
    const id = r.body.run_id as string;
    await until(async () => (await t.http('GET', `/jobs/runs/${id}`, { key: A.key })).body.logs.some((l: { message: string }) => l.message === 'step 1'));
    const res = await fetch(`${t.url}/jobs/runs/${id}/logs`, { headers: { 'X-API-Key': A.key, Accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = res.text();
    const c = await t.http('POST', `/jobs/runs/${id}/cancel`, { key: A.key });
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ id, status: 'cancelled', tenant_id: A.tenantId });
    // The stream showed the run's lines and ended with it.
    const body = await text;
    expect(body).toContain('event: log');
    expect(body).toContain('"message":"step 1"');
    const end = body.split('\n\n').find((e) => e.includes('event: end'))!;
    expect(JSON.parse(end.split('data: ')[1]!)).toMatchObject({ status: 'cancelled' });
    expect(await t.app.db.conn.collection('jobs_fixture_calls').countDocuments({ run_id: id, phase: 'end' })).toBe(0);
  });

  it('a system administrator sending X-Tenant-Id sees only that tenant\'s runs and schedules', async () => {
    const asA = { headers: { 'X-Tenant-Id': A.tenantId } };
    const runs = await t.http('GET', '/jobs/runs?per_page=100', asA);
    expect(runs.status).toBe(200);
    const ids = runs.body.items.map((r: { id: string }) => r.id);
    expect(ids).toContain(runA);
    expect(ids).not.toContain(runB);
    expect(ids).not.toContain(runSys);
    for (const r of runs.body.items) expect(r.tenant_id).toBe(A.tenantId);
    expect(runs.body.total).toBe(await t.app.db.conn.collection('job_runs').countDocuments({ tenant_id: new Types.ObjectId(A.tenantId) }));
    // Asking for another tenant does not widen it.
    const forced = await t.http('GET', `/jobs/runs?tenant_id=${B.tenantId}&per_page=100`, asA);
    for (const r of forced.body.items) expect(r.tenant_id).toBe(A.tenantId);
    expectError(await t.http('GET', `/jobs/runs/${runB}`, asA), 404, 'NOT_FOUND');
    expect((await t.http('GET', `/jobs/runs/${runA}`, asA)).status).toBe(200);
    const scheds = (await t.http('GET', '/jobs/schedules', asA)).body;
    expect(scheds.map((s: { id: string }) => s.id)).toContain(schedA);
    for (const s of scheds) expect(s.tenant_id).toBe(A.tenantId);
    expectError(await t.http('GET', `/jobs/schedules/${schedB}`, asA), 404, 'NOT_FOUND');
    // Without the header: every tenant.
    const all = (await t.http('GET', '/jobs/schedules')).body.map((s: { id: string }) => s.id);
    expect(all).toEqual(expect.arrayContaining([schedA, schedB]));
  });
});

describe('schedules of a system administrator: per-tenant fan-out and one tenant', () => {
  it('per_tenant: true fans out once per tenant when the schedule fires', async () => {
    // `count` is not a per-tenant job: the schedule's flag alone makes it fan out.
    const s = await t.http('POST', '/jobs/schedules', { json: { name: 'fan-out-sched', target: 'count', cron: '0 0 1 1 *', per_tenant: true } });
    expect(s.status).toBe(201);
    expect(s.body).toMatchObject({ per_tenant: true, tenant_id: null });
    await t.app.db.conn.collection('job_schedules').updateOne({ _id: new Types.ObjectId(s.body.id as string) }, { $set: { next_run_at: new Date(Date.now() - 1000) } });
    const chk = await t.http('POST', '/jobs/check-schedules');
    const fired = chk.body.triggered.find((x: { schedule_id: string }) => x.schedule_id === s.body.id);
    expect(fired).toBeTruthy();
    const parent = await waitRun(t, fired.run_id);
    expect(parent).toMatchObject({ status: 'completed', job_name: 'count', tenant_id: null, schedule_id: s.body.id, trigger: 'schedule' });
    const tenants = (await t.http('GET', '/admin/tenants?per_page=100')).body.items.map((x: { id: string }) => x.id);
    expect(parent.result).toMatchObject({ tenants: tenants.length, completed: tenants.length, failed: 0 });
    const children = (await t.http('GET', `/jobs/runs?parent_job_id=${fired.run_id}&per_page=100`)).body.items;
    expect(children.map((c: { tenant_id: string }) => c.tenant_id).sort()).toEqual([...tenants].sort());
    for (const c of children) expect(c).toMatchObject({ job_name: 'count', status: 'completed' });
    const calls = await t.app.db.conn.collection('jobs_fixture_calls').find({ run_id: { $in: children.map((c: { id: string }) => c.id) } }).toArray();
    expect(calls).toHaveLength(tenants.length);
    for (const c of calls) expect(c.actor_tenant).toBe(c.tenant_id);
  });

  it('an explicit tenant_id runs the schedule as that tenant (no fan-out)', async () => {
    const s = await t.http('POST', '/jobs/schedules', { json: { name: 'for-tenant-a', target: 'count', cron: '0 0 1 1 *', tenant_id: A.tenantId } });
    expect(s.status).toBe(201);
    expect(s.body).toMatchObject({ tenant_id: A.tenantId, per_tenant: false });
    await t.app.db.conn.collection('job_schedules').updateOne({ _id: new Types.ObjectId(s.body.id as string) }, { $set: { next_run_at: new Date(Date.now() - 1000) } });
    const chk = await t.http('POST', '/jobs/check-schedules');
    const fired = chk.body.triggered.find((x: { schedule_id: string }) => x.schedule_id === s.body.id);
    const run = await waitRun(t, fired.run_id);
    expect(run).toMatchObject({ status: 'completed', job_name: 'count', tenant_id: A.tenantId, schedule_id: s.body.id, parent_job_id: null });
    expect((await t.http('GET', `/jobs/runs?parent_job_id=${fired.run_id}`)).body.total).toBe(0);
    const [call] = await t.app.db.conn.collection('jobs_fixture_calls').find({ run_id: fired.run_id }).toArray();
    expect(call).toMatchObject({ tenant_id: A.tenantId, actor_tenant: A.tenantId });
    // Tenant A's administrator sees the run; B's does not.
    expect((await t.http('GET', `/jobs/runs/${fired.run_id}`, { key: A.key })).status).toBe(200);
    expectError(await t.http('GET', `/jobs/runs/${fired.run_id}`, { key: B.key }), 404, 'NOT_FOUND');
  });
});
