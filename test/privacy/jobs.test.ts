/** Execution as a job: the job function itself (jobContext), and the delegation to a JobRunner when one is provided. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, jobContext, type TestApp } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { ERASURE_JOB, privacyPlugin } from '../../plugins/privacy/index.ts';
import { ERASURE_COLLECTION } from '../../plugins/privacy/model.ts';
import { privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { fakeJobRunnerPlugin, fakeRuns } from '../fixtures/fake-job-runner-plugin.ts';
import { collectionsHolding, createSubject, oid, seedSubject } from './helpers.ts';

describe('without the jobs plugin', () => {
  let t: TestApp;
  let admin: { key: string; tenantId: string };
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin, privacyDataPlugin] });
    admin = await createTenantUser(t, { roles: ['admin'] });
  });
  afterAll(() => t?.close());

  it('the plugin contributes execute_erasure with a {request_id} params schema', () => {
    const job = t.app.kernel.jobs().find((j) => j.name === ERASURE_JOB)!;
    expect(job).toMatchObject({ plugin: 'privacy', timeout: 3600 });
    expect(job.params!.safeParse({ request_id: 'nope' }).success).toBe(false);
    expect(job.params!.safeParse({ request_id: '0123456789abcdef01234567' }).success).toBe(true);
  });

  it('the job function executes a request with progress and logs, acting as the given system actor', async () => {
    const s = await createSubject(t, admin.tenantId);
    const seeded = await seedSubject(t, s, { notes: 2 });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const job = t.app.kernel.jobs().find((j) => j.name === ERASURE_JOB)!;
    const progress: { current: number; total: number | null | undefined }[] = [];
    const ctx = jobContext({ actor: systemActor(admin.tenantId), tenant_id: admin.tenantId, progress: (current, total) => void progress.push({ current, total }) });
    const out = (await job.run(ctx, { request_id: r.body.id })) as any;
    expect(out).toMatchObject({ request_id: r.body.id, status: 'completed', result: { documents_depersonalized: 5, consents_revoked: 2 } });
    // 2 consents + 2 projects + 2 notes + 1 credential + the account; reports are throttled, the last one always sent.
    const currents = progress.map((p) => p.current);
    expect(currents[0]).toBe(1);
    expect([...currents].sort((a, b) => a - b)).toEqual(currents);
    expect(progress.at(-1)).toEqual({ current: 8, total: 8 });
    expect(ctx.lines).toEqual([`executing erasure request ${r.body.id}`, `erasure request ${r.body.id}: completed`]);
    expect(await collectionsHolding(t, [s.email, s.name, seeded.oldName])).toEqual([]);
  });

  it('a system actor of another tenant cannot execute it (404)', async () => {
    const other = await createTenantUser(t, { roles: ['admin'] });
    const s = await createSubject(t, admin.tenantId);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const job = t.app.kernel.jobs().find((j) => j.name === ERASURE_JOB)!;
    await expect(job.run(jobContext({ actor: systemActor(other.tenantId) }), { request_id: r.body.id })).rejects.toMatchObject({ status: 404 });
    expect((await t.http('GET', `/privacy/erasure-requests/${r.body.id}`, { key: admin.key })).body.status).toBe('pending');
  });

  it('an aborted run stops and leaves the request failed, resumable', async () => {
    const s = await createSubject(t, admin.tenantId);
    await seedSubject(t, s, { notes: 1 });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const job = t.app.kernel.jobs().find((j) => j.name === ERASURE_JOB)!;
    const ac = new AbortController();
    ac.abort();
    await expect(job.run(jobContext({ actor: systemActor(admin.tenantId), signal: ac.signal }), { request_id: r.body.id })).rejects.toThrow('Erasure aborted');
    expect((await t.http('GET', `/privacy/erasure-requests/${r.body.id}`, { key: admin.key })).body).toMatchObject({ status: 'failed', error: 'Erasure aborted' });
    expect((await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key })).body.status).toBe('completed');
  });
});

describe('with a job runner', () => {
  let t: TestApp;
  let admin: { key: string; tenantId: string };
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin, privacyDataPlugin, fakeJobRunnerPlugin] });
    admin = await createTenantUser(t, { roles: ['admin'] });
  });
  afterAll(() => t?.close());

  it('execute answers 202 with the job run id; the job completes the request, reporting progress', async () => {
    const s = await createSubject(t, admin.tenantId);
    const seeded = await seedSubject(t, s, { notes: 2 });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(ex.status).toBe(202);
    const run = fakeRuns.at(-1)!;
    expect(ex.body).toMatchObject({ id: r.body.id, job_run_id: run.run_id });
    expect(['pending', 'running']).toContain(ex.body.status);
    expect(run).toMatchObject({ name: ERASURE_JOB, params: { request_id: r.body.id }, tenant_id: admin.tenantId });
    expect(run.actor.tenant_id).toBe(admin.tenantId);
    await run.done;
    expect(run.status).toBe('completed');
    expect(run.progress.at(-1)).toMatchObject({ current: 8, total: 8 });
    const done = await t.http('GET', `/privacy/erasure-requests/${r.body.id}`, { key: admin.key });
    expect(done.body).toMatchObject({ status: 'completed', job_run_id: run.run_id });
    expect(await collectionsHolding(t, [s.email, s.name, seeded.oldName])).toEqual([]);
    // Completed: executing again is a no-op and queues nothing.
    const count = fakeRuns.length;
    const again = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(again.status).toBe(200);
    expect(fakeRuns).toHaveLength(count);
  });

  it('GraphQL executeErasure says queued', async () => {
    const s = await createSubject(t, admin.tenantId);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const g = await t.gql('mutation($id: String!) { executeErasure(id: $id) { queued request { id job_run_id } } }', { id: r.body.id }, { key: admin.key });
    expect(g.body.data.executeErasure).toEqual({ queued: true, request: { id: r.body.id, job_run_id: fakeRuns.at(-1)!.run_id } });
    await fakeRuns.at(-1)!.done;
    expect(fakeRuns.at(-1)!.status).toBe('completed');
  });

  it('two concurrent executes of a pending request queue one job: one 202, one 409; job_run_id names the run that completes', async () => {
    const s = await createSubject(t, admin.tenantId);
    await seedSubject(t, s, { notes: 2 });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const count = fakeRuns.length;
    const [a, b] = await Promise.all([
      t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key }),
      t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key }),
    ]);
    // The second one is refused while the first is queued or running (or, had the job already
    // finished, answered 200 with the completed request): never a second job.
    const statuses = [a.status, b.status].sort();
    expect([[202, 409], [200, 202]]).toContainEqual(statuses);
    const refused = a.status === 409 ? a : b;
    if (statuses[1] === 409) expect(['pending', 'running']).toContain(expectError(refused, 409, 'CONFLICT').details.status);
    expect(fakeRuns).toHaveLength(count + 1);
    const run = fakeRuns.at(-1)!;
    await run.done;
    expect(run.status).toBe('completed');
    expect((await t.http('GET', `/privacy/erasure-requests/${r.body.id}`, { key: admin.key })).body).toMatchObject({ status: 'completed', job_run_id: run.run_id });
  });

  it('a queued request whose run has not claimed it yet answers 409 to a second execute and queues nothing', async () => {
    const s = await createSubject(t, admin.tenantId);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const coll = t.app.db.conn.db!.collection(ERASURE_COLLECTION);
    // Queued a moment ago; its run is still waiting for a worker.
    await coll.updateOne({ _id: oid(r.body.id) }, { $set: { queued_until: new Date(Date.now() + 60_000), job_run_id: 'queued-run' } });
    const count = fakeRuns.length;
    const again = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(expectError(again, 409, 'CONFLICT').details).toEqual({ status: 'pending' });
    expect(fakeRuns).toHaveLength(count);
    expect(await coll.findOne({ _id: oid(r.body.id) })).toMatchObject({ status: 'pending', job_run_id: 'queued-run' });
    // A run that did not claim it within the lease is taken to be lost: executing queues a new one.
    await coll.updateOne({ _id: oid(r.body.id) }, { $set: { queued_until: new Date(Date.now() - 1000) } });
    const requeued = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(requeued.status).toBe(202);
    expect(fakeRuns).toHaveLength(count + 1);
    const run = fakeRuns.at(-1)!;
    expect(requeued.body.job_run_id).toBe(run.run_id);
    await run.done;
    expect(run.status).toBe('completed');
  });

  it('a running request whose lease is live answers 409 {status: running}, triggers nothing and keeps its job_run_id', async () => {
    const s = await createSubject(t, admin.tenantId);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const coll = t.app.db.conn.db!.collection(ERASURE_COLLECTION);
    await coll.updateOne({ _id: oid(r.body.id) }, { $set: { status: 'running', lease_until: new Date(Date.now() + 60_000), job_run_id: 'earlier-run' } });
    const count = fakeRuns.length;
    const busy = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(expectError(busy, 409, 'CONFLICT').details).toEqual({ status: 'running' });
    expect(fakeRuns).toHaveLength(count);
    expect(await coll.findOne({ _id: oid(r.body.id) })).toMatchObject({ status: 'running', job_run_id: 'earlier-run' });
    // The runner died: once its lease passed, executing queues a run that resumes it.
    await coll.updateOne({ _id: oid(r.body.id) }, { $set: { lease_until: new Date(Date.now() - 1000) } });
    const resumed = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(resumed.status).toBe(202);
    const run = fakeRuns.at(-1)!;
    await run.done;
    expect(run.status).toBe('completed');
    expect((await t.http('GET', `/privacy/erasure-requests/${r.body.id}`, { key: admin.key })).body).toMatchObject({ status: 'completed', job_run_id: run.run_id });
  });
});
