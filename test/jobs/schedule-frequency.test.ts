/**
 * JOBS_MIN_SCHEDULE_INTERVAL_SECONDS: a tenant administrator's cron may not fire more often than
 * the setting (the smallest gap between its next fire times decides), on create and update,
 * REST and GraphQL; nothing is written. System administrators are not limited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { jobsApp } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await jobsApp({ JOBS_MIN_SCHEDULE_INTERVAL_SECONDS: '120' });
  A = await createTenantUser(t, { roles: ['admin'] });
});
afterAll(() => t?.close());

const schedules = () => t.app.db.conn.collection('job_schedules');
const create = (json: Record<string, unknown>, key?: string) => t.http('POST', '/jobs/schedules', { key: key ?? A.key, json });
const tooFrequent = (field: string) => ({ loc: ['body', field], msg: expect.stringMatching(/at most once every 120 s/), type: 'too_frequent' });

describe('minimum schedule interval', () => {
  it('REST create: every second, every minute, or two fires 30 s apart once an hour are refused naming the field', async () => {
    const before = await schedules().countDocuments();
    for (const [cron, field] of [['* * * * * *', 'cron'], ['* * * * *', 'cron_expression'], ['0,30 0 * * * *', 'cron']] as const) {
      const e = expectError(await create({ name: `fast-${field}-${cron.length}`, target: 'tenant_job', [field]: cron }), 422, 'VALIDATION_ERROR');
      expect(e.details.errors).toEqual([tooFrequent(field)]);
    }
    expect(await schedules().countDocuments()).toBe(before);
    expect((await create({ name: 'every-2-min', target: 'tenant_job', cron: '*/2 * * * *' })).status).toBe(201);
  });

  it('REST update: a too frequent cron is refused and the schedule keeps its own', async () => {
    const s = await create({ name: 'hourly', target: 'tenant_job', cron: '0 * * * *' });
    expect(s.status).toBe(201);
    const e = expectError(await t.http('PATCH', `/jobs/schedules/${s.body.id}`, { key: A.key, json: { cron: '*/10 * * * * *' } }), 422, 'VALIDATION_ERROR');
    expect(e.details.errors).toEqual([tooFrequent('cron')]);
    expect((await t.http('GET', `/jobs/schedules/${s.body.id}`, { key: A.key })).body.cron_expression).toBe('0 * * * *');
    // Other fields of the schedule stay editable.
    expect((await t.http('PATCH', `/jobs/schedules/${s.body.id}`, { key: A.key, json: { description: 'x' } })).status).toBe(200);
  });

  it('GraphQL upsertJobSchedule: the same rule on create and update', async () => {
    const code = (res: { body: { errors?: { extensions?: { code?: string; details?: Record<string, unknown> } }[] } }) => res.body.errors?.[0]?.extensions;
    const created = await t.gql('mutation { upsertJobSchedule(input: {name: "gql-fast", target: "tenant_job", cron: "* * * * * *"}) { id } }', {}, { key: A.key });
    expect(code(created)).toMatchObject({ code: 'VALIDATION_ERROR', details: { errors: [tooFrequent('cron')] } });
    expect(await schedules().countDocuments({ job_name: 'gql-fast' })).toBe(0);
    const ok = await t.gql('mutation { upsertJobSchedule(input: {name: "gql-slow", target: "tenant_job", cron: "0 3 * * *"}) { id } }', {}, { key: A.key });
    const id = ok.body.data.upsertJobSchedule.id as string;
    const updated = await t.gql('mutation($id: String) { upsertJobSchedule(id: $id, input: {cron_expression: "* * * * *"}) { id } }', { id }, { key: A.key });
    expect(code(updated)).toMatchObject({ code: 'VALIDATION_ERROR', details: { errors: [tooFrequent('cron_expression')] } });
    expect((await schedules().findOne({ job_name: 'gql-slow' }))!.cron_expression).toBe('0 3 * * *');
  });

  it('a system administrator is not limited', async () => {
    const s = await t.http('POST', '/jobs/schedules', { json: { name: 'sys-every-second', target: 'count', cron: '* * * * * *', is_enabled: false } });
    expect(s.status).toBe(201);
    expect((await t.http('PATCH', `/jobs/schedules/${s.body.id}`, { json: { cron: '*/5 * * * * *' } })).status).toBe(200);
    const g = await t.gql('mutation { upsertJobSchedule(input: {name: "sys-gql", target: "count", cron: "* * * * * *", is_enabled: false}) { id } }');
    expect(g.body.errors).toBeUndefined();
  });
});
