/**
 * Administrative writes outside the resources plugin are audited too: creating a user, and the
 * creates, updates and deletes of job schedules and chains. Each entry names the actor and the
 * document's tenant, and a tenant administrator sees only their own tenant's entries.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTenantUser, type TestApp } from '../helpers/app.ts';
import { jobsApp } from '../jobs/helpers.ts';
import { listEntries } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await jobsApp();
  A = await createTenantUser(t, { roles: ['admin'] });
  // B's administrator is A's administrator's second membership: one person, two tenants.
  B = await addMembership(t, A.userId, { roles: ['admin'] });
});
afterAll(() => t?.close());

const entriesOf = async (id: string, key?: string) => (await listEntries(t, {}, key)).filter((e) => e.item_id === id);

it('creating a user records an insert by the actor, in the new user\'s tenant', async () => {
  const r = await t.http('POST', '/admin/users', { key: A.key, json: { email: 'audited@example.com', name: 'Audited' } });
  expect(r.status).toBe(201);
  const [entry, ...rest] = await entriesOf(r.body.id);
  expect(rest).toEqual([]);
  expect(entry).toMatchObject({ resource: 'users', operation: 'insert', user_id: A.userId, tenant_id: A.tenantId });
  // Tenant isolation of the entry.
  expect(await entriesOf(r.body.id, A.key)).toHaveLength(1);
  expect(await entriesOf(r.body.id, B.key)).toEqual([]);
});

it('a schedule\'s create, update and delete are recorded, with the change', async () => {
  const c = await t.http('POST', '/jobs/schedules', { key: A.key, json: { name: 'audited-sched', target: 'tenant_job', cron: '0 0 * * *' } });
  expect(c.status).toBe(201);
  const p = await t.http('PATCH', `/jobs/schedules/${c.body.id}`, { key: A.key, json: { cron: '0 12 * * *' } });
  expect(p.status).toBe(200);
  expect((await t.http('DELETE', `/jobs/schedules/${c.body.id}`, { key: A.key })).status).toBe(204);
  const entries = await entriesOf(c.body.id);
  expect(entries.map((e) => e.operation).sort()).toEqual(['delete', 'insert', 'update']);
  for (const e of entries) expect(e).toMatchObject({ resource: 'job_schedules', user_id: A.userId, tenant_id: A.tenantId });
  expect(entries.find((e) => e.operation === 'update').changes).toMatchObject({ cron_expression: { old: '0 0 * * *', new: '0 12 * * *' } });
  expect(entries.find((e) => e.operation === 'delete').snapshot).toMatchObject({ job_name: 'audited-sched' });
  expect(await entriesOf(c.body.id, B.key)).toEqual([]);
});

it('a chain\'s create, update and delete are recorded (system administrators manage chains)', async () => {
  const c = await t.http('POST', '/jobs/chains', { json: { name: 'audited-chain', steps: [{ job: 'count' }] } });
  expect(c.status).toBe(201);
  expect((await t.http('PATCH', `/jobs/chains/${c.body.id}`, { json: { description: 'now described' } })).status).toBe(200);
  expect((await t.http('DELETE', `/jobs/chains/${c.body.id}`)).status).toBe(204);
  const entries = await entriesOf(c.body.id);
  expect(entries.map((e) => e.operation).sort()).toEqual(['delete', 'insert', 'update']);
  for (const e of entries) expect(e).toMatchObject({ resource: 'job_chains', tenant_id: null });
  expect(entries.find((e) => e.operation === 'update').changes).toMatchObject({ description: { new: 'now described' } });
});
