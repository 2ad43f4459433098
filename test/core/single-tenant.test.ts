/**
 * `MULTI_TENANT_ENABLED=false`: a single-tenant deployment. Identity and passkeys apply no tenant
 * filter, so a tenant administrator administers every user (REST and GraphQL); system
 * administrators stay out of reach of other administrators, plain users stay refused, and new
 * documents are still stamped with a tenant.
 */
import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, type HttpResult, type TestApp } from '../helpers/app.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { SoftAuthenticator } from '../webauthn/authenticator.ts';
import { PASSKEY_CONFIG, registerPasskey } from '../webauthn/helpers.ts';

/** Two tenants, each with an administrator and a plain user, and the system administrator's id. */
async function seed(app: TestApp) {
  const adminA = await createTenantUser(app, { tenant: 'Tenant A', roles: ['admin'] });
  const userA = await createTenantUser(app, { tenantId: adminA.tenantId });
  const adminB = await createTenantUser(app, { tenant: 'Tenant B', roles: ['admin'] });
  const userB = await createTenantUser(app, { tenantId: adminB.tenantId });
  return { adminA, userA, adminB, userB, systemAdminId: (await app.http('GET', '/auth/me')).body.id as string };
}

let t: TestApp;
let adminA: Awaited<ReturnType<typeof seed>>['adminA'];
let userA: typeof adminA;
let adminB: typeof adminA;
let userB: typeof adminA;
let systemAdminId: string;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [webauthnPlugin], config: { ...PASSKEY_CONFIG, MULTI_TENANT_ENABLED: 'false' } });
  ({ adminA, userA, adminB, userB, systemAdminId } = await seed(t));
});
afterAll(() => t?.close());

const code = (res: HttpResult<{ errors?: { extensions?: { code?: string } }[] }>) => res.body.errors?.[0]?.extensions?.code;
const email = () => `st-${Math.random().toString(36).slice(2)}@example.com`;

describe('identity (REST)', () => {
  it('a tenant administrator lists every tenant and every user, and may narrow to one tenant', async () => {
    const tenants = await t.http('GET', '/admin/tenants', { key: adminA.key });
    expect(tenants.status).toBe(200);
    expect((tenants.body.items as { id: string }[]).map((x) => x.id)).toEqual(expect.arrayContaining([adminA.tenantId, adminB.tenantId]));
    expect(tenants.body.items.some((x: { is_system: boolean }) => x.is_system)).toBe(true);

    const users = await t.http('GET', '/admin/users?per_page=500', { key: adminA.key });
    expect((users.body.items as { id: string }[]).map((u) => u.id)).toEqual(expect.arrayContaining([userA.userId, userB.userId, adminB.userId, systemAdminId]));
    const ofB = await t.http('GET', `/admin/users?tenant_id=${adminB.tenantId}`, { key: adminA.key });
    expect((ofB.body.items as { id: string }[]).map((u) => u.id).sort()).toEqual([adminB.userId, userB.userId].sort());
  });

  it("a tenant administrator creates, changes, keys and deletes another tenant's users", async () => {
    const created = await t.http('POST', '/admin/users', { key: adminA.key, json: { email: email(), name: 'In B', tenant_id: adminB.tenantId } });
    expect(created.status).toBe(201);
    expect(created.body.tenant_id).toBe(adminB.tenantId);

    const patched = await t.http('PATCH', `/admin/users/${created.body.id}`, { key: adminA.key, json: { name: 'Renamed', features: ['tasks'] } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Renamed', features: ['tasks'], tenant_id: adminB.tenantId });

    const key = await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: created.body.id, name: 'k' } });
    expect(key.status).toBe(201);
    expect(key.body.tenant_id).toBe(adminB.tenantId);
    expect((await t.http('GET', '/auth/me', { key: key.body.key })).body.id).toBe(created.body.id);
    expect((await t.http('DELETE', `/admin/api-keys/${key.body.id}`, { key: adminA.key })).status).toBe(200);
    expectError(await t.http('GET', '/auth/me', { key: key.body.key }), 401, 'AUTH_REQUIRED');

    expect((await t.http('DELETE', `/admin/users/${created.body.id}`, { key: adminA.key })).status).toBe(204);
    expectError(await t.http('PATCH', `/admin/users/${created.body.id}`, { key: adminA.key, json: { name: 'x' } }), 404, 'NOT_FOUND');
  });

  it("a tenant administrator's new users still go to its own tenant by default", async () => {
    const created = await t.http('POST', '/admin/users', { key: adminA.key, json: { email: email(), name: 'Default' } });
    expect(created.status).toBe(201);
    expect(created.body.tenant_id).toBe(adminA.tenantId);
  });

  it('system administrators stay out of reach of other administrators; tenants stay system-only', async () => {
    expectError(await t.http('PATCH', `/admin/users/${systemAdminId}`, { key: adminA.key, json: { name: 'x' } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('DELETE', `/admin/users/${systemAdminId}`, { key: adminA.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: systemAdminId, name: 'k' } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('POST', '/admin/tenants', { key: adminA.key, json: { name: 'mine' } }), 403, 'ACCESS_DENIED');
    expect((await t.http('GET', '/auth/me')).body.name).toBe('System Administrator');
    expect(await t.app.db.conn.collection('api_keys').countDocuments({ user_id: new Types.ObjectId(systemAdminId), name: 'k' })).toBe(0);
  });

  it("a tenant administrator cannot revoke a system administrator's key (REST and GraphQL); the key keeps working", async () => {
    const bootstrap = await t.app.db.conn.collection('api_keys').findOne({ user_id: new Types.ObjectId(systemAdminId), revoked_at: null });
    const id = String(bootstrap!._id);
    expectError(await t.http('DELETE', `/admin/api-keys/${id}`, { key: adminA.key }), 403, 'ACCESS_DENIED');
    const g = await t.gql('mutation ($id: String!) { revokeApiKey(id: $id) { id } }', { id }, { key: adminA.key });
    expect(code(g)).toBe('ACCESS_DENIED');
    expect((await t.http('GET', '/auth/me')).status).toBe(200);
    expect((await t.app.db.conn.collection('api_keys').findOne({ _id: bootstrap!._id }))!.revoked_at).toBeNull();
  });

  it('plain users are still refused', async () => {
    expectError(await t.http('GET', '/admin/users', { key: userA.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('GET', '/admin/tenants', { key: userA.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('PATCH', `/admin/users/${userB.userId}`, { key: userA.key, json: { name: 'x' } }), 403, 'ACCESS_DENIED');
  });
});

describe('identity (GraphQL)', () => {
  it('a tenant administrator sees every tenant and user', async () => {
    const r = await t.gql('{ tenants(per_page: 500) { id } users(per_page: 500) { id tenant_id } }', {}, { key: adminA.key });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.tenants.map((x: { id: string }) => x.id)).toEqual(expect.arrayContaining([adminA.tenantId, adminB.tenantId]));
    expect(r.body.data.users.map((u: { id: string }) => u.id)).toEqual(expect.arrayContaining([userA.userId, userB.userId, systemAdminId]));
  });

  it("a tenant administrator creates, changes, keys and deletes another tenant's users", async () => {
    const created = await t.gql('mutation ($i: JSON!) { createUser(input: $i) { id tenant_id } }', { i: { email: email(), name: 'G', tenant_id: adminB.tenantId } }, { key: adminA.key });
    expect(created.body.errors).toBeUndefined();
    const id = created.body.data.createUser.id as string;
    expect(created.body.data.createUser.tenant_id).toBe(adminB.tenantId);

    const updated = await t.gql('mutation ($id: String!) { updateUser(id: $id, input: {name: "G2"}) { name } }', { id }, { key: adminA.key });
    expect(updated.body.data).toEqual({ updateUser: { name: 'G2' } });
    const key = await t.gql('mutation ($u: String!) { createApiKey(user_id: $u, name: "k") { id tenant_id key } }', { u: id }, { key: adminA.key });
    expect(key.body.data.createApiKey.tenant_id).toBe(adminB.tenantId);
    const revoked = await t.gql('mutation ($id: String!) { revokeApiKey(id: $id) { id } }', { id: key.body.data.createApiKey.id }, { key: adminA.key });
    expect(revoked.body.data).toEqual({ revokeApiKey: { id: key.body.data.createApiKey.id } });
    expect((await t.gql('mutation ($id: String!) { deleteUser(id: $id) }', { id }, { key: adminA.key })).body.data).toEqual({ deleteUser: true });
  });

  it('system administrators stay out of reach; plain users are refused', async () => {
    expect(code(await t.gql('mutation ($id: String!) { updateUser(id: $id, input: {name: "x"}) { id } }', { id: systemAdminId }, { key: adminA.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql('mutation ($id: String!) { deleteUser(id: $id) }', { id: systemAdminId }, { key: adminA.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql('mutation ($u: String!) { createApiKey(user_id: $u, name: "k") { id } }', { u: systemAdminId }, { key: adminA.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql('mutation { createTenant(name: "x") { id } }', {}, { key: adminA.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql('{ users { id } }', {}, { key: userA.key }))).toBe('ACCESS_DENIED');
  });
});

describe('passkeys', () => {
  let passkeyB: SoftAuthenticator;
  beforeAll(async () => {
    passkeyB = new SoftAuthenticator();
    expect((await registerPasskey(t, userB.key, passkeyB)).status).toBe(201);
  });

  it("a tenant administrator lists another tenant's user's passkeys (userPasskeys and users { passkeys })", async () => {
    const r = await t.gql('query ($u: String!) { userPasskeys(user_id: $u) { credential_id } }', { u: userB.userId }, { key: adminA.key });
    expect(r.body.data).toEqual({ userPasskeys: [{ credential_id: passkeyB.id }] });
    const all = await t.gql('{ users(per_page: 500) { id passkeys { credential_id } } }', {}, { key: adminA.key });
    expect(all.body.errors).toBeUndefined();
    expect(all.body.data.users.find((u: { id: string }) => u.id === userB.userId).passkeys).toEqual([{ credential_id: passkeyB.id }]);
    expect(code(await t.gql('query ($u: String!) { userPasskeys(user_id: $u) { credential_id } }', { u: userB.userId }, { key: userA.key }))).toBe('ACCESS_DENIED');
  });

  it("the own-passkey endpoints stay the owner's: stored with its tenant, anyone else's is 404", async () => {
    const doc = await t.app.db.conn.collection('webauthn_credentials').findOne({ credential_id: passkeyB.id });
    expect(String(doc?.tenant_id)).toBe(userB.tenantId);
    const own = await t.http('GET', '/auth/webauthn/credentials', { key: userB.key });
    expect(own.body.map((c: { credential_id: string }) => c.credential_id)).toEqual([passkeyB.id]);
    expect((await t.http('GET', '/auth/webauthn/credentials', { key: adminA.key })).body).toEqual([]);
    for (const key of [adminA.key, userA.key, ADMIN_KEY]) {
      expectError(await t.http('DELETE', `/auth/webauthn/credentials/${passkeyB.id}`, { key }), 404, 'NOT_FOUND');
      expect(code(await t.gql('mutation ($id: String!) { deletePasskey(credential_id: $id) }', { id: passkeyB.id }, { key }))).toBe('NOT_FOUND');
    }
    expect((await t.http('DELETE', `/auth/webauthn/credentials/${passkeyB.id}`, { key: userB.key })).status).toBe(204);
  });
});
