/**
 * Every built-in job does its work on real data, run through the jobs plugin (HTTP trigger,
 * Agenda dispatch): cleanup_expired_tokens, cleanup_audit_log, cleanup_job_runs,
 * purge_soft_deleted, calculate_next_schedules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { createTenantUser, type TestApp } from '../helpers/app.ts';
import { jobsApp, trigger, waitRun } from './helpers.ts';

const DAY = 86_400_000;
let t: TestApp;
beforeAll(async () => {
  t = await jobsApp({ JOBS_AUDIT_RETENTION_DAYS: '365', JOB_RUN_RETENTION_DAYS: '90', SOFT_DELETE_RETENTION_DAYS: '30', REVOKED_API_KEY_RETENTION_DAYS: '30' });
});
afterAll(() => t?.close());

const col = (name: string) => t.app.db.conn.collection(name);
const ago = (days: number) => new Date(Date.now() - days * DAY);
async function run(job: string, parameters: Record<string, unknown> = {}) {
  const r = await trigger(t, job, parameters);
  expect(r.status).toBe(202);
  const done = await waitRun(t, r.body.id);
  expect(done.status).toBe('completed');
  return done;
}

describe('built-in jobs', () => {
  it('cleanup_expired_tokens deletes keys revoked, or of users deleted, before the retention; live and recent ones stay', async () => {
    const live = await createTenantUser(t);
    const recent = await createTenantUser(t);
    const old = await createTenantUser(t);
    const gone = await createTenantUser(t);
    expect((await t.http('DELETE', `/admin/api-keys/${recent.keyId}`)).status).toBe(200);
    expect((await t.http('DELETE', `/admin/api-keys/${old.keyId}`)).status).toBe(200);
    await col('api_keys').updateOne({ _id: new Types.ObjectId(old.keyId) }, { $set: { revoked_at: ago(31) } });
    expect((await t.http('DELETE', `/admin/users/${gone.userId}`)).status).toBe(204);
    await col('users').updateOne({ _id: new Types.ObjectId(gone.userId) }, { $set: { deleted_at: ago(40) } });
    const done = await run('cleanup_expired_tokens');
    expect(done.result).toMatchObject({ revoked_keys_deleted: 1, deleted_user_keys_deleted: 1 });
    const left = (await col('api_keys').find({}, { projection: { _id: 1 } }).toArray()).map((k) => String(k._id));
    expect(left).toEqual(expect.arrayContaining([live.keyId, recent.keyId]));
    expect(left).not.toContain(old.keyId);
    expect(left).not.toContain(gone.keyId);
  });

  it('cleanup_audit_log deletes audit entries older than JOBS_AUDIT_RETENTION_DAYS', async () => {
    const entry = (days: number) => ({ resource: 'x', item_id: new Types.ObjectId(), operation: 'insert', user_id: null, user_name: null, ip: null, changes: null, snapshot: null, tenant_id: null, created_at: ago(days) });
    await col('audit_log').insertMany([entry(400), entry(366), entry(364), entry(1)]);
    const before = await col('audit_log').countDocuments();
    const done = await run('cleanup_audit_log');
    expect(done.result).toMatchObject({ deleted_count: 2 });
    expect(await col('audit_log').countDocuments()).toBe(before - 2);
    expect(await col('audit_log').countDocuments({ created_at: { $lt: ago(365) } })).toBe(0);
  });

  it('cleanup_job_runs deletes finished runs older than JOB_RUN_RETENTION_DAYS, never unfinished ones', async () => {
    const base = { job_name: 'old', job_type: 'manual', parameters: {}, attempt: 1, max_attempts: 1, timeout_seconds: 1, retry_delay_ms: 0, logs: [] };
    const res = await col('job_runs').insertMany([
      { ...base, status: 'completed', created_at: ago(100) },
      { ...base, status: 'failed', created_at: ago(91) },
      { ...base, status: 'pending', created_at: ago(200) },
      { ...base, status: 'completed', created_at: ago(89) },
    ]);
    const done = await run('cleanup_job_runs');
    expect(done.result).toMatchObject({ deleted_count: 2 });
    const left = await col('job_runs').find({ job_name: 'old' }).toArray();
    expect(left.map((r) => String(r._id)).sort()).toEqual([String(res.insertedIds[2]), String(res.insertedIds[3])].sort());
  });

  it('purge_soft_deleted permanently deletes documents soft-deleted before SOFT_DELETE_RETENTION_DAYS', async () => {
    const u = await createTenantUser(t);
    const mk = async (name: string) => (await t.http('POST', '/projects', { key: u.key, json: { name } })).body._id as string;
    const [live, oldDel, newDel] = [await mk('live'), await mk('old'), await mk('new')];
    for (const id of [oldDel, newDel]) expect((await t.http('DELETE', `/projects/${id}`, { key: u.key, headers: { 'If-Match': '"1"' } })).status).toBe(204);
    await col('projects').updateOne({ _id: new Types.ObjectId(oldDel) }, { $set: { deleted_at: ago(31) } });
    const done = await run('purge_soft_deleted');
    expect(done.result).toMatchObject({ deleted_count: 1, resources: { projects: 1 } });
    const ids = (await col('projects').find({}).toArray()).map((d) => String(d._id));
    expect(ids).toEqual(expect.arrayContaining([live, newDel]));
    expect(ids).not.toContain(oldDel);
  });

  it('calculate_next_schedules recomputes next_run_at of enabled schedules (null for disabled ones)', async () => {
    const on = await t.http('POST', '/jobs/schedules', { json: { name: 'calc-on', target: 'count', cron: '15 4 * * *', timezone: 'UTC' } });
    const off = await t.http('POST', '/jobs/schedules', { json: { name: 'calc-off', target: 'count', cron: '15 4 * * *', is_enabled: false } });
    await col('job_schedules').updateMany({}, { $set: { next_run_at: new Date('2000-01-01T00:00:00Z') } });
    const done = await run('calculate_next_schedules');
    expect(done.result).toMatchObject({ updated: 2 });
    const a = (await t.http('GET', `/jobs/schedules/${on.body.id}`)).body;
    expect(new Date(a.next_run_at).getTime()).toBeGreaterThan(Date.now());
    expect(new Date(a.next_run_at).toISOString()).toMatch(/T04:15:00\.000Z$/);
    expect((await t.http('GET', `/jobs/schedules/${off.body.id}`)).body.next_run_at).toBeNull();
  });
});
