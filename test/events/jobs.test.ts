/**
 * Job runs in the event log: `job_run.created`, `.started`, `.cancelled`, `.completed` and `.failed`,
 * each written in the run's outbox by the write that makes the change (the insert, or the
 * conditional update: docs/events.md), with the run in its list form (no logs, the error as a tenant
 * administrator sees it), readable by the run's tenant's administrators.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { ADMIN_KEY, createTenantUser, type TestApp } from '../helpers/app.ts';
import { jobsApp, waitRun } from '../jobs/helpers.ts';
import { catalogue, eventsOfType, expectConforms, visibleTo } from './domain-helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
let schemas: Record<string, Record<string, any>>;
beforeAll(async () => {
  t = await jobsApp();
  A = await createTenantUser(t, { roles: ['admin'] });
  B = await createTenantUser(t, { roles: ['admin'] });
  schemas = await catalogue(t, A.key, ['job_run.created', 'job_run.started', 'job_run.cancelled', 'job_run.completed', 'job_run.failed'], 'jobs');
});
afterAll(() => t?.close());

const run = async (parameters: Record<string, unknown>, key = A.key) => {
  const r = await t.http('POST', '/jobs/run/tenant_job', { key, json: { parameters } });
  expect(r.status).toBe(202);
  return waitRun(t, r.body.id as string, undefined, key);
};
const ofRun = (id: string) => (e: Record<string, any>) => e.data.id === id;

describe('job_run events', () => {
  it('the catalogue lists job_run.completed and job_run.failed with the JSON Schema of a run', () => {
    const s = schemas['job_run.completed']!.schema;
    expect(s.properties).toMatchObject({ id: { type: 'string' }, status: { enum: expect.arrayContaining(['completed', 'failed']) }, completed_at: expect.any(Object) });
    expect(Object.keys(s.properties)).not.toContain('logs');
  });

  it('a completed run stores job_run.completed with the run; another tenant does not see it', async () => {
    const done = await run({});
    expect(done.status).toBe('completed');
    const [e] = await eventsOfType(t, A.key, 'job_run.completed', ofRun(done.id));
    expect(e).toMatchObject({ type: 'job_run.completed', tenant_id: A.tenantId, actor: null });
    expect(e!.data).toMatchObject({ id: done.id, job_name: 'tenant_job', status: 'completed', result: { tenant: A.tenantId }, tenant_id: A.tenantId, error: null, error_traceback: null, completed_at: done.completed_at });
    expect(e!.data).not.toHaveProperty('logs');
    expect(e!.data).not.toHaveProperty('_outbox');
    expectConforms(schemas['job_run.completed']!, e!.data);
    // The run as the API lists it.
    const listed = (await t.http('GET', `/jobs/runs?per_page=100`, { key: A.key })).body.items.find((r: { id: string }) => r.id === done.id);
    expect(e!.data).toEqual(listed);

    expect(await visibleTo(t, B.key, 'job_run.completed', ofRun(done.id))).toEqual([]);
    expect((await t.http('GET', `/events/${e!.id}`, { key: B.key })).status).toBe(404);
    // The system administrator reads every tenant's log.
    expect(await visibleTo(t, ADMIN_KEY, 'job_run.completed', ofRun(done.id))).toHaveLength(1);
    // The relay emptied the run's outbox.
    expect((await t.app.db.conn.collection('job_runs').findOne({ _id: new Types.ObjectId(done.id) }))!._outbox).toEqual([]);
  });

  it('a failed run stores job_run.failed with its error (no traceback), and no job_run.completed', async () => {
    const failed = await run({ fail_tenant: A.tenantId });
    expect(failed.status).toBe('failed');
    const [e] = await eventsOfType(t, A.key, 'job_run.failed', ofRun(failed.id));
    expect(e).toMatchObject({ tenant_id: A.tenantId, actor: null, data: { id: failed.id, status: 'failed', error: `tenant ${A.tenantId} failed`, error_traceback: null, result: null } });
    expectConforms(schemas['job_run.failed']!, e!.data);
    expect(await visibleTo(t, A.key, 'job_run.completed', ofRun(failed.id))).toEqual([]);
    expect(await visibleTo(t, B.key, 'job_run.failed', ofRun(failed.id))).toEqual([]);
  });

  it("each tenant's run of a fan-out is in its own tenant's log; the parent (no tenant) only in the system administrator's", async () => {
    const r = await t.http('POST', '/jobs/run/tenant_job', { json: { parameters: { fail_tenant: B.tenantId } } });
    expect(r.status).toBe(202);
    const parent = await waitRun(t, r.body.id as string);
    expect(parent.status).toBe('failed');
    const children = (await t.http('GET', `/jobs/runs?parent_job_id=${parent.id}&per_page=100`)).body.items as { id: string; tenant_id: string; status: string }[];
    const childA = children.find((c) => c.tenant_id === A.tenantId)!;
    const childB = children.find((c) => c.tenant_id === B.tenantId)!;
    await eventsOfType(t, A.key, 'job_run.completed', ofRun(childA.id));
    await eventsOfType(t, B.key, 'job_run.failed', ofRun(childB.id));
    expect(await visibleTo(t, A.key, 'job_run.failed', ofRun(childB.id))).toEqual([]);
    expect(await visibleTo(t, B.key, 'job_run.completed', ofRun(childA.id))).toEqual([]);
    const [p] = await eventsOfType(t, ADMIN_KEY, 'job_run.failed', ofRun(parent.id));
    expect(p!.tenant_id).toBeNull();
    expect(await visibleTo(t, A.key, 'job_run.failed', ofRun(parent.id))).toEqual([]);
  });

  it('a run stores job_run.created when queued (by its starter) and job_run.started when a worker takes it, each with the run as it was then', async () => {
    const done = await run({});
    const [c] = await eventsOfType(t, A.key, 'job_run.created', ofRun(done.id));
    expect(c).toMatchObject({ type: 'job_run.created', tenant_id: A.tenantId, actor: A.userId });
    expect(c!.data).toMatchObject({ id: done.id, job_name: 'tenant_job', status: 'pending', started_at: null, completed_at: null, tenant_id: A.tenantId, triggered_by_user: A.userId, created_at: done.created_at });
    expectConforms(schemas['job_run.created']!, c!.data);
    const [s] = await eventsOfType(t, A.key, 'job_run.started', ofRun(done.id));
    expect(s).toMatchObject({ type: 'job_run.started', tenant_id: A.tenantId, actor: null });
    expect(s!.data).toMatchObject({ id: done.id, status: 'running', started_at: done.started_at, completed_at: null });
    expectConforms(schemas['job_run.started']!, s!.data);
    expect(Date.parse(c!.created_at)).toBeLessThanOrEqual(Date.parse(s!.created_at));
    expect(s!.data).not.toHaveProperty('logs');
    // Tenant B sees neither; the system administrator sees both.
    expect(await visibleTo(t, B.key, 'job_run.created', ofRun(done.id))).toEqual([]);
    expect(await visibleTo(t, B.key, 'job_run.started', ofRun(done.id))).toEqual([]);
    expect((await t.http('GET', `/events/${s!.id}`, { key: B.key })).status).toBe(404);
    expect(await visibleTo(t, ADMIN_KEY, 'job_run.started', ofRun(done.id))).toHaveLength(1);
    // Once each, and the outbox emptied.
    expect(await visibleTo(t, A.key, 'job_run.created', ofRun(done.id))).toHaveLength(1);
    await t.app.services.get('events').flush();
    expect((await t.app.db.conn.collection('job_runs').findOne({ _id: new Types.ObjectId(done.id) }))!._outbox).toEqual([]);
  });

  it('a cancelled run stores job_run.cancelled by whoever cancelled it, and no job_run.completed', async () => {
    // A system administrator runs it in tenant A (not a per-tenant job); A's administrator cancels it.
    const r = await t.http('POST', '/jobs/run', { key: ADMIN_KEY, json: { job: 'deaf', params: { ms: 1500 }, tenant_id: A.tenantId } });
    expect(r.status).toBe(202);
    const id = r.body.run_id as string;
    await waitRun(t, id, ['running'], A.key);
    const c = await t.http('POST', `/jobs/runs/${id}/cancel`, { key: A.key });
    expect(c.status).toBe(200);
    const [e] = await eventsOfType(t, A.key, 'job_run.cancelled', ofRun(id));
    expect(e).toMatchObject({ tenant_id: A.tenantId, actor: A.userId, data: { id, status: 'cancelled', completed_at: c.body.completed_at } });
    expectConforms(schemas['job_run.cancelled']!, e!.data);
    expect(await visibleTo(t, B.key, 'job_run.cancelled', ofRun(id))).toEqual([]);
    await new Promise((res) => setTimeout(res, 2000)); // the deaf function ends by itself: its outcome is not recorded
    expect(await visibleTo(t, A.key, 'job_run.completed', ofRun(id))).toEqual([]);
  });
});
