/**
 * A system administrator creates another one (`scope: "system"`), over REST and GraphQL: it lands in
 * the system tenant with system scope, works across tenants with its own key, and its creation is
 * audited. Nobody else may ask for it, and a wrong tenant is refused; neither writes anything.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';

let t: TestApp;
let tenantAdmin: Awaited<ReturnType<typeof createTenantUser>>;
let systemTenantId: string;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin] });
  tenantAdmin = await createTenantUser(t, { roles: ['admin'] });
  systemTenantId = (await t.http('GET', '/auth/me')).body.tenant_id;
});
afterAll(() => t?.close());

const users = () => t.app.db.conn.collection('users');

it('REST: a system administrator creates another; its key acts across tenants; the creation is audited', async () => {
  const r = await t.http('POST', '/admin/users', { json: { email: 'second@example.com', name: 'Second', scope: 'system' } });
  expect(r.status).toBe(201);
  expect(r.body).toMatchObject({ email: 'second@example.com', tenant_id: systemTenantId, roles: ['admin'], scope: 'system', is_system_user: true });
  const k = await t.http('POST', '/admin/api-keys', { json: { user_id: r.body.id, name: 'second' } });
  expect(k.status).toBe(201);
  const tenants = await t.http('GET', '/admin/tenants?per_page=500', { key: k.body.key });
  expect(tenants.status).toBe(200);
  expect(tenants.body.items.map((x: { id: string }) => x.id)).toContain(tenantAdmin.tenantId);
  const entries = (await t.http('GET', '/admin/audit-log?resource=users&per_page=500')).body.items.filter((e: { item_id: string }) => e.item_id === r.body.id);
  const me = (await t.http('GET', '/auth/me')).body;
  expect(entries).toEqual([expect.objectContaining({ operation: 'insert', user_id: me.id, tenant_id: systemTenantId })]);
});

it('GraphQL createUser takes the same scope', async () => {
  const r = await t.gql('mutation($i: JSON!) { createUser(input: $i) { id scope tenant_id } }', { i: { email: 'third@example.com', name: 'Third', scope: 'system' } });
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.createUser).toMatchObject({ scope: 'system', tenant_id: systemTenantId });
});

it('a tenant administrator asking for it gets 403 (REST and GraphQL), and nothing is written', async () => {
  const before = await users().countDocuments();
  expectError(await t.http('POST', '/admin/users', { key: tenantAdmin.key, json: { email: 'nope@example.com', name: 'Nope', scope: 'system' } }), 403, 'ACCESS_DENIED');
  const g = await t.gql('mutation($i: JSON!) { createUser(input: $i) { id } }', { i: { email: 'nope2@example.com', name: 'Nope', scope: 'system' } }, { key: tenantAdmin.key });
  expect(g.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
  expect(await users().countDocuments()).toBe(before);
});

it('another tenant, or roles without admin, is 422 naming the field, and nothing is written', async () => {
  const before = await users().countDocuments();
  const a = expectError(await t.http('POST', '/admin/users', { json: { email: 'x@example.com', name: 'X', scope: 'system', tenant_id: tenantAdmin.tenantId } }), 422, 'VALIDATION_ERROR');
  expect(JSON.stringify(a.details)).toContain('tenant_id');
  const b = expectError(await t.http('POST', '/admin/users', { json: { email: 'y@example.com', name: 'Y', scope: 'system', roles: ['user'] } }), 422, 'VALIDATION_ERROR');
  expect(JSON.stringify(b.details)).toContain('roles');
  expectError(await t.http('POST', '/admin/users', { json: { email: 'z@example.com', name: 'Z', scope: 'tenant' } }), 422, 'VALIDATION_ERROR');
  expect(await users().countDocuments()).toBe(before);
});
