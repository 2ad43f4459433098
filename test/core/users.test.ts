import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { buildTestApp, createTenantUser, expectError, type HttpResult, type TestApp } from '../helpers/app.ts';

type Account = Awaited<ReturnType<typeof createTenantUser>>;

let t: TestApp;
let adminA: Account;
let userA: Account;
let adminB: Account;
let userB: Account;
let sysAdminId: string;

beforeAll(async () => {
  // A long cache TTL: cutting a user off must not wait for the cache to expire.
  t = await buildTestApp({ plugins: [auditPlugin], config: { AUTH_CACHE_TTL_MS: '600000' } });
  adminA = await createTenantUser(t, { tenant: 'Tenant A', roles: ['admin'] });
  userA = await createTenantUser(t, { tenantId: adminA.tenantId });
  adminB = await createTenantUser(t, { tenant: 'Tenant B', roles: ['admin'] });
  userB = await createTenantUser(t, { tenantId: adminB.tenantId });
  sysAdminId = (await t.http('GET', '/auth/me')).body.id as string;
});
afterAll(() => t?.close());

const gqlCode = (res: HttpResult<any>) => res.body.errors?.[0]?.extensions?.code as string | undefined;
const rawUser = (id: string) => t.app.db.conn.collection('users').findOne({ _id: new Types.ObjectId(id) });
const token = async (key: string) => (await t.http('POST', '/auth/token', { key })).body.token as string;
/** The cut-off events (`user.disabled`, `user.deleted`) of a user, as system administrators read them. */
const cutOffs = async (id: string) => {
  const items = [];
  for (const type of ['user.disabled', 'user.deleted']) items.push(...(await t.http('GET', `/events?type=${type}&limit=100`)).body.items);
  return (items as { type: string; tenant_id: string; actor: string | null; data: { id: string } }[]).filter((e) => e.data.id === id);
};
const auditOf = async (id: string, key?: string) => {
  await t.app.services.get('audit').flush();
  const res = await t.http('GET', `/admin/audit-log?resource=users&resource_id=${id}`, key ? { key } : {});
  expect(res.status).toBe(200);
  return res.body.items as { operation: string; user_id: string | null; tenant_id: string | null; changes: Record<string, unknown> | null; snapshot: Record<string, unknown> | null }[];
};

describe('PATCH /admin/users/{id}', () => {
  it('a tenant admin changes a user of its tenant; the change applies to the next request at once', async () => {
    const u = await createTenantUser(t, { tenantId: adminA.tenantId });
    expect((await t.http('GET', '/auth/me', { key: u.key })).body.features).toEqual([]); // cached
    const res = await t.http('PATCH', `/admin/users/${u.userId}`, {
      key: adminA.key,
      json: { name: 'Renamed', roles: ['admin', 'user'], features: ['reports'], attributes: { region: 'eu' } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: u.userId, name: 'Renamed', roles: ['admin', 'user'], features: ['reports'], attributes: { region: 'eu' }, is_active: true, tenant_id: adminA.tenantId });
    const me = await t.http('GET', '/auth/me', { key: u.key });
    expect(me.body).toMatchObject({ name: 'Renamed', features: ['reports'], roles: ['admin', 'user'] });
  });

  it("another tenant's user → 404, unchanged (REST and GraphQL)", async () => {
    const res = await t.http('PATCH', `/admin/users/${userB.userId}`, { key: adminA.key, json: { name: 'Hijacked', is_active: false } });
    expect(expectError(res, 404, 'NOT_FOUND').details).toEqual({ resource: 'user', item_id: userB.userId });
    const g = await t.gql('mutation ($id: String!, $input: JSON!) { updateUser(id: $id, input: $input) { id } }', { id: userB.userId, input: { name: 'Hijacked' } }, { key: adminA.key });
    expect(gqlCode(g)).toBe('NOT_FOUND');
    expect((await rawUser(userB.userId))!.name).toBe('Test User');
    expect((await t.http('GET', '/auth/me', { key: userB.key })).status).toBe(200);
  });

  it.each([
    [{ scope: 'system' }, 'scope'],
    [{ is_system_user: true }, 'is_system_user'],
    [{ tenant_id: '000000000000000000000001' }, 'tenant_id'],
    [{ email: 'new@example.com' }, 'email'],
    [{ is_deleted: true }, 'is_deleted'],
    [{ name: 'ok', _id: 'x' }, '_id'],
  ])('mass assignment %j → 422 at body.%s, nothing written', async (json, field) => {
    const res = await t.http('PATCH', `/admin/users/${userA.userId}`, { key: adminA.key, json });
    const err = expectError(res, 422, 'VALIDATION_ERROR');
    expect((err.details.errors as { loc: unknown[] }[]).map((e) => e.loc)).toContainEqual(['body', field]);
    const doc = await rawUser(userA.userId);
    expect(doc).toMatchObject({ scope: null, is_system_user: false, tenant_id: new Types.ObjectId(adminA.tenantId), name: 'Test User', is_deleted: false });
  });

  it('bad values and an empty body → 422', async () => {
    const res = await t.http('PATCH', `/admin/users/${userA.userId}`, { key: adminA.key, json: { name: '', roles: [''], is_active: 'no' } });
    expect((expectError(res, 422, 'VALIDATION_ERROR').details.errors as { loc: unknown[] }[]).map((e) => e.loc)).toEqual([
      ['body', 'name'],
      ['body', 'roles', 0],
      ['body', 'is_active'],
    ]);
    expectError(await t.http('PATCH', `/admin/users/${userA.userId}`, { key: adminA.key, json: {} }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('PATCH', '/admin/users/zzz', { key: adminA.key, json: { name: 'x' } }), 422, 'VALIDATION_ERROR');
  });

  it('a tenant admin of the system tenant cannot change a system administrator (403)', async () => {
    const systemTenant = ((await t.http('GET', '/admin/tenants')).body.items as { id: string; is_system: boolean }[]).find((x) => x.is_system)!.id;
    const insider = await createTenantUser(t, { tenantId: systemTenant, roles: ['admin'] });
    expectError(await t.http('PATCH', `/admin/users/${sysAdminId}`, { key: insider.key, json: { is_active: false } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('DELETE', `/admin/users/${sysAdminId}`, { key: insider.key }), 403, 'ACCESS_DENIED');
    expect((await t.http('GET', '/auth/me')).status).toBe(200);
  });

  it('nobody disables, deletes or re-roles themselves (403); renaming oneself is fine', async () => {
    expectError(await t.http('PATCH', `/admin/users/${adminA.userId}`, { key: adminA.key, json: { is_active: false } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('PATCH', `/admin/users/${adminA.userId}`, { key: adminA.key, json: { roles: ['user'] } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('DELETE', `/admin/users/${adminA.userId}`, { key: adminA.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('PATCH', `/admin/users/${sysAdminId}`, { json: { is_active: false } }), 403, 'ACCESS_DENIED');
    expect((await t.http('PATCH', `/admin/users/${adminA.userId}`, { key: adminA.key, json: { roles: ['admin'], name: 'Admin A' } })).status).toBe(200);
    expect((await t.http('GET', '/auth/me', { key: adminA.key })).body).toMatchObject({ name: 'Admin A', roles: ['admin'] });
  });

  it('plain users and anonymous callers are refused', async () => {
    expectError(await t.http('PATCH', `/admin/users/${userA.userId}`, { key: userA.key, json: { name: 'me' } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('DELETE', `/admin/users/${userA.userId}`, { key: userA.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('PATCH', `/admin/users/${userA.userId}`, { key: null, json: { name: 'me' } }), 401, 'AUTH_REQUIRED');
  });
});

describe('disabling a user (is_active: false)', () => {
  it('ends its keys and tokens at once, stores user.disabled, and is audited; re-enabling restores the keys', async () => {
    const u = await createTenantUser(t, { tenantId: adminA.tenantId });
    const tok = await token(u.key);
    expect((await t.http('GET', '/auth/me', { key: u.key })).status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: tok })).status).toBe(200);

    const res = await t.http('PATCH', `/admin/users/${u.userId}`, { key: adminA.key, json: { is_active: false } });
    expect(res.status).toBe(200);
    expect(res.body.is_active).toBe(false);
    expectError(await t.http('GET', '/auth/me', { key: u.key }), 401, 'AUTH_REQUIRED');
    expectError(await t.http('GET', '/auth/me', { token: tok }), 401, 'AUTH_REQUIRED');
    expectError(await t.http('POST', '/auth/token', { token: tok }), 401, 'AUTH_REQUIRED');
    expect(await cutOffs(u.userId)).toEqual([expect.objectContaining({ type: 'user.disabled', tenant_id: adminA.tenantId, actor: adminA.userId })]);

    // Its creation, then the change.
    const entries = (await auditOf(u.userId, adminA.key)).filter((e) => e.operation !== 'insert');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ operation: 'update', user_id: adminA.userId, tenant_id: adminA.tenantId });
    expect(entries[0]!.changes).toMatchObject({ is_active: { old: true, new: false } });
    // Not visible to another tenant's admin.
    expect(await auditOf(u.userId, adminB.key)).toEqual([]);

    // Still listed (disabled, not deleted), and re-enabling brings the key back.
    const list = (await t.http('GET', '/admin/users?per_page=500', { key: adminA.key })).body.items as { id: string; is_active: boolean }[];
    expect(list.find((x) => x.id === u.userId)?.is_active).toBe(false);
    expect((await t.http('PATCH', `/admin/users/${u.userId}`, { key: adminA.key, json: { is_active: true } })).status).toBe(200);
    expect((await t.http('GET', '/auth/me', { key: u.key })).status).toBe(200);
    expect(await cutOffs(u.userId)).toHaveLength(1);
  });

  it('another process stops the user within AUTH_CACHE_TTL_MS', async () => {
    const other = await buildTestApp({ config: { MONGODB_URI: t.app.db.uri, AUTH_CACHE_TTL_MS: '300' } });
    try {
      const u = await createTenantUser(t, { tenantId: adminA.tenantId });
      expect((await other.http('GET', '/auth/me', { key: u.key })).status).toBe(200);
      expect((await t.http('PATCH', `/admin/users/${u.userId}`, { key: adminA.key, json: { is_active: false } })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 400));
      expect((await other.http('GET', '/auth/me', { key: u.key })).status).toBe(401);
    } finally {
      await other.close();
    }
  });
});

describe('DELETE /admin/users/{id}', () => {
  it('soft-deletes: keys revoked, tokens dead, gone from lists, audit kept, user.deleted stored', async () => {
    const u = await createTenantUser(t, { tenantId: adminA.tenantId });
    const second = await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: u.userId, name: 'second' } });
    const tok = await token(u.key);
    expect((await t.http('GET', '/auth/me', { key: u.key })).status).toBe(200);

    const res = await t.http('DELETE', `/admin/users/${u.userId}`, { key: adminA.key });
    expect(res.status).toBe(204);
    for (const opts of [{ key: u.key }, { key: second.body.key as string }, { token: tok }]) expectError(await t.http('GET', '/auth/me', opts), 401, 'AUTH_REQUIRED');

    const doc = await rawUser(u.userId);
    expect(doc).toMatchObject({ is_deleted: true, is_active: false, deleted_by: new Types.ObjectId(adminA.userId) });
    expect(doc!.deleted_at).toBeInstanceOf(Date);
    expect(await t.app.db.conn.collection('api_keys').countDocuments({ user_id: new Types.ObjectId(u.userId), revoked_at: null })).toBe(0);
    expect(await t.app.db.conn.collection('api_keys').countDocuments({ user_id: new Types.ObjectId(u.userId) })).toBe(2);

    const rest = (await t.http('GET', '/admin/users?per_page=500', { key: adminA.key })).body;
    expect((rest.items as { id: string }[]).map((x) => x.id)).not.toContain(u.userId);
    expect(rest.total).toBe(rest.items.length);
    const gql = await t.gql('{ users(per_page: 500) { id } }');
    expect((gql.body.data.users as { id: string }[]).map((x) => x.id)).not.toContain(u.userId);

    // Gone for every admin operation.
    expectError(await t.http('DELETE', `/admin/users/${u.userId}`, { key: adminA.key }), 404, 'NOT_FOUND');
    expectError(await t.http('PATCH', `/admin/users/${u.userId}`, { key: adminA.key, json: { is_active: true } }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: u.userId, name: 'revive' } }), 404, 'NOT_FOUND');

    expect(await cutOffs(u.userId)).toEqual([expect.objectContaining({ type: 'user.deleted', tenant_id: adminA.tenantId, actor: adminA.userId })]);
    const entries = await auditOf(u.userId);
    expect(entries.map((e) => e.operation)).toEqual(['delete', 'insert']);
    expect(entries[0]).toMatchObject({ user_id: adminA.userId, tenant_id: adminA.tenantId });
    expect(entries[0]!.snapshot).toMatchObject({ email: expect.any(String), name: 'Test User' });
  });

  it("another tenant's user → 404 and it keeps working (REST and GraphQL)", async () => {
    expectError(await t.http('DELETE', `/admin/users/${userB.userId}`, { key: adminA.key }), 404, 'NOT_FOUND');
    const g = await t.gql('mutation ($id: String!) { deleteUser(id: $id) }', { id: userB.userId }, { key: adminA.key });
    expect(gqlCode(g)).toBe('NOT_FOUND');
    expect((await t.http('GET', '/auth/me', { key: userB.key })).status).toBe(200);
    expect((await rawUser(userB.userId))!.is_deleted).toBe(false);
  });

  it('a system administrator deletes in any tenant, audited as itself in that tenant', async () => {
    const u = await createTenantUser(t, { tenantId: adminB.tenantId });
    expect((await t.http('DELETE', `/admin/users/${u.userId}`)).status).toBe(204);
    expect((await auditOf(u.userId))[0]).toMatchObject({ operation: 'delete', user_id: sysAdminId, tenant_id: adminB.tenantId });
  });
});

describe('GraphQL updateUser / deleteUser', () => {
  const update = 'mutation ($id: String!, $input: JSON!) { updateUser(id: $id, input: $input) { id name is_active features } }';
  const del = 'mutation ($id: String!) { deleteUser(id: $id) }';

  it('own tenant: update and delete through the same service', async () => {
    const u = await createTenantUser(t, { tenantId: adminB.tenantId });
    const res = await t.gql(update, { id: u.userId, input: { name: 'G', features: ['x'], is_active: false } }, { key: adminB.key });
    expect(res.body.data.updateUser).toEqual({ id: u.userId, name: 'G', is_active: false, features: ['x'] });
    expectError(await t.http('GET', '/auth/me', { key: u.key }), 401, 'AUTH_REQUIRED');
    const d = await t.gql(del, { id: u.userId }, { key: adminB.key });
    expect(d.body).toEqual({ data: { deleteUser: true } });
    expect((await rawUser(u.userId))!.is_deleted).toBe(true);
  });

  it('mass assignment and bad ids → VALIDATION_ERROR; plain users → ACCESS_DENIED; nothing written', async () => {
    const bad = await t.gql(update, { id: userB.userId, input: { scope: 'system' } }, { key: adminB.key });
    expect(gqlCode(bad)).toBe('VALIDATION_ERROR');
    expect(gqlCode(await t.gql(update, { id: 'nope', input: { name: 'x' } }, { key: adminB.key }))).toBe('VALIDATION_ERROR');
    expect(gqlCode(await t.gql(update, { id: userA.userId, input: { name: 'x' } }, { key: userA.key }))).toBe('ACCESS_DENIED');
    expect(gqlCode(await t.gql(del, { id: userA.userId }, { key: userA.key }))).toBe('ACCESS_DENIED');
    expect(await rawUser(userB.userId)).toMatchObject({ scope: null, name: 'Test User', is_deleted: false });
    expect((await rawUser(userA.userId))!.is_deleted).toBe(false);
  });
});
