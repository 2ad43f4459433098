/** `DELETE /admin/audit-log/retention` (system administrators only) and the `cleanup_audit_log` job. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, jobContext, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { auditCollection, IDENTITY_ENTRIES, seedEntries } from './helpers.ts';

const DAY = 86_400_000;
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin], config: { JOBS_AUDIT_RETENTION_DAYS: '200' } });
});
afterAll(() => t?.close());

const ageOf = (resource: string, days: number) => ({ resource, created_at: new Date(Date.now() - days * DAY) });
const remaining = async () => (await auditCollection(t).find({}, { projection: { resource: 1 } }).sort({ resource: 1 }).toArray()).map((e) => e.resource);

it('is refused to tenant administrators and regular users (403), deleting nothing', async () => {
  await auditCollection(t).deleteMany({});
  await seedEntries(t, [ageOf('old', 400)]);
  for (const roles of [['admin'], ['user']] as const) {
    const { key } = await createTenantUser(t, { roles: [...roles] });
    await auditCollection(t).deleteMany(IDENTITY_ENTRIES); // the new user's (and its key's, its tenant's) own entries
    const res = await t.http('DELETE', '/admin/audit-log/retention?older_than_days=1', { key });
    expect(res.status).toBe(403);
    expect(envelope(res).code).toBe('ACCESS_DENIED');
  }
  expect(await remaining()).toEqual(['old']);
});

it('deletes only entries older than N days and answers {message, deleted_count, cutoff_date}', async () => {
  await auditCollection(t).deleteMany({});
  await seedEntries(t, [ageOf('a-100', 100), ageOf('b-40', 40), ageOf('c-29', 29), ageOf('d-1', 1)]);
  const before = Date.now();
  const res = await t.http('DELETE', '/admin/audit-log/retention?older_than_days=30');
  expect(res.status).toBe(200);
  expect(Object.keys(res.body).sort()).toEqual(['cutoff_date', 'deleted_count', 'message']);
  expect(res.body.deleted_count).toBe(2);
  expect(typeof res.body.message).toBe('string');
  const cutoff = new Date(res.body.cutoff_date).getTime();
  expect(cutoff).toBeGreaterThanOrEqual(before - 30 * DAY);
  expect(cutoff).toBeLessThanOrEqual(Date.now() - 30 * DAY);
  expect(await remaining()).toEqual(['c-29', 'd-1']);
});

it('defaults to AUDIT_LOG_RETENTION_DAYS (90)', async () => {
  await auditCollection(t).deleteMany({});
  await seedEntries(t, [ageOf('a-95', 95), ageOf('b-85', 85)]);
  const res = await t.http('DELETE', '/admin/audit-log/retention');
  expect(res.status).toBe(200);
  expect(res.body.deleted_count).toBe(1);
  expect(Math.abs(Date.now() - 90 * DAY - new Date(res.body.cutoff_date).getTime())).toBeLessThan(60_000);
  expect(await remaining()).toEqual(['b-85']);
});

it.each(['0', '-5', '1.5', 'abc', ''])('answers 422 for older_than_days=%j', async (n) => {
  const res = await t.http('DELETE', `/admin/audit-log/retention?older_than_days=${n}`);
  expect(res.status).toBe(422);
  expect(envelope(res).details.errors).toEqual([expect.objectContaining({ loc: ['query', 'older_than_days'] })]);
});

it('cleanup_audit_log deletes entries older than JOBS_AUDIT_RETENTION_DAYS', async () => {
  await auditCollection(t).deleteMany({});
  await seedEntries(t, [ageOf('a-400', 400), ageOf('b-201', 201), ageOf('c-150', 150)]);
  const job = t.app.kernel.jobs().find((j) => j.name === 'cleanup_audit_log');
  expect(job).toMatchObject({ plugin: 'audit', timeout: 600 });
  const lines: string[] = [];
  const res = (await job!.run(jobContext({ log: (l) => void lines.push(l) }), {})) as { deleted_count: number; cutoff_date: Date };
  expect(res.deleted_count).toBe(2);
  expect(Math.abs(Date.now() - 200 * DAY - res.cutoff_date.getTime())).toBeLessThan(60_000);
  expect(lines).toHaveLength(1);
  expect(await remaining()).toEqual(['c-150']);
});
