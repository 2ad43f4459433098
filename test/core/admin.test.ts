import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type HttpResult, type TestApp } from '../helpers/app.ts';

type Account = Awaited<ReturnType<typeof createTenantUser>>;

let t: TestApp;
let adminA: Account; // roles ['admin'] in tenant A
let userA: Account; // plain user in tenant A
let adminB: Account;
let userB: Account;

beforeAll(async () => {
  t = await buildTestApp();
  adminA = await createTenantUser(t, { tenant: 'Tenant A', roles: ['admin'] });
  userA = await createTenantUser(t, { tenantId: adminA.tenantId });
  adminB = await createTenantUser(t, { tenant: 'Tenant B', roles: ['admin'] });
  userB = await createTenantUser(t, { tenantId: adminB.tenantId });
});
afterAll(() => t?.close());


const locs = (res: HttpResult<any>) => (expectError(res, 422, 'VALIDATION_ERROR').details.errors as { loc: unknown[] }[]).map((i) => i.loc);

describe('system administrator', () => {
  it('creates tenants', async () => {
    const res = await t.http('POST', '/admin/tenants', { json: { name: '  Tenant C  ' } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^[0-9a-f]{24}$/), name: 'Tenant C', is_system: false, created_at: expect.any(String) });
  });

  it('lists every tenant, paginated', async () => {
    const all = await t.http('GET', '/admin/tenants');
    expect(all.status).toBe(200);
    const names = (all.body.items as { name: string }[]).map((x) => x.name);
    expect(names).toEqual(expect.arrayContaining(['system', 'Tenant A', 'Tenant B']));
    expect(all.body.total).toBe(all.body.items.length);
    const page = await t.http('GET', '/admin/tenants?page=2&per_page=1');
    expect(page.body).toMatchObject({ page: 2, per_page: 1, total: all.body.total });
    expect(page.body.items).toEqual([all.body.items[1]]);
  });

  it('lists users of one tenant with ?tenant_id', async () => {
    const res = await t.http('GET', `/admin/users?tenant_id=${adminB.tenantId}`);
    expect(res.status).toBe(200);
    expect((res.body.items as { id: string }[]).map((u) => u.id).sort()).toEqual([adminB.userId, userB.userId].sort());
    expect(res.body.total).toBe(2);
  });

  it('creating a user in a tenant that does not exist → 404', async () => {
    const res = await t.http('POST', '/admin/users', { json: { email: 'ghost@example.com', name: 'G', tenant_id: 'bbbbbbbbbbbbbbbbbbbbbbbb' } });
    const err = expectError(res, 404, 'NOT_FOUND');
    expect(err.details).toEqual({ resource: 'tenant', item_id: 'bbbbbbbbbbbbbbbbbbbbbbbb' });
  });
});

describe('tenant administrator (REST)', () => {
  it('cannot create tenants', async () => {
    expectError(await t.http('POST', '/admin/tenants', { key: adminA.key, json: { name: 'mine' } }), 403, 'ACCESS_DENIED');
  });

  it('sees only its own tenant', async () => {
    const res = await t.http('GET', '/admin/tenants', { key: adminA.key });
    expect(res.status).toBe(200);
    expect(res.body.items).toEqual([expect.objectContaining({ id: adminA.tenantId, name: 'Tenant A' })]);
    expect(res.body.total).toBe(1);
  });

  it("sees only its own tenant's users, even when asking for another tenant", async () => {
    for (const q of ['', `?tenant_id=${adminB.tenantId}`]) {
      const res = await t.http('GET', `/admin/users${q}`, { key: adminA.key });
      expect(res.status).toBe(200);
      const items = res.body.items as { id: string; tenant_id: string }[];
      expect(items.every((u) => u.tenant_id === adminA.tenantId)).toBe(true);
      expect(items.map((u) => u.id)).toEqual(expect.arrayContaining([adminA.userId, userA.userId]));
      expect(items.map((u) => u.id)).not.toContain(userB.userId);
      expect(res.body.total).toBe(items.length);
    }
    const b = await t.http('GET', '/admin/users', { key: adminB.key });
    expect((b.body.items as { id: string }[]).map((u) => u.id).sort()).toEqual([adminB.userId, userB.userId].sort());
    expect(b.body.total).toBe(2);
  });

  it('creates users in its own tenant (default) but not in another → 403', async () => {
    const own = await t.http('POST', '/admin/users', { key: adminA.key, json: { email: 'a-new@example.com', name: 'New' } });
    expect(own.status).toBe(201);
    expect(own.body).toMatchObject({ tenant_id: adminA.tenantId, roles: ['user'], scope: null, is_system_user: false, is_active: true });

    const other = await t.http('POST', '/admin/users', { key: adminA.key, json: { email: 'b-new@example.com', name: 'X', tenant_id: adminB.tenantId } });
    expectError(other, 403, 'ACCESS_DENIED');
    expect(await t.app.db.conn.collection('users').countDocuments({ email: 'b-new@example.com' })).toBe(0);
  });

  it('cannot give a user system scope', async () => {
    // `is_system_user` is no input at all; `scope: "system"` is for system administrators only (403).
    const res = await t.http('POST', '/admin/users', { key: adminA.key, json: { email: 'sneaky@example.com', name: 'S', scope: 'system', is_system_user: true } });
    expect(locs(res)).toEqual([['body', 'is_system_user']]);
    expectError(await t.http('POST', '/admin/users', { key: adminA.key, json: { email: 'sneaky@example.com', name: 'S', scope: 'system' } }), 403, 'ACCESS_DENIED');
  });

  it("creates API keys for its own users, not for another tenant's (404)", async () => {
    const own = await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: userA.userId, name: 'ci' } });
    expect(own.status).toBe(201);
    expect(own.body).toMatchObject({ user_id: userA.userId, tenant_id: adminA.tenantId, name: 'ci', key: expect.stringMatching(/^ak_/) });
    expect((await t.http('GET', '/auth/me', { key: own.body.key })).body.id).toBe(userA.userId);

    const other = await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: userB.userId, name: 'steal' } });
    expect(expectError(other, 404, 'NOT_FOUND').details).toEqual({ resource: 'user', item_id: userB.userId });
  });

  it("cannot revoke another tenant's key (404), which keeps working", async () => {
    const res = await t.http('DELETE', `/admin/api-keys/${userB.keyId}`, { key: adminA.key });
    expect(expectError(res, 404, 'NOT_FOUND').details).toEqual({ resource: 'api_key', item_id: userB.keyId });
    expect((await t.http('GET', '/auth/me', { key: userB.key })).status).toBe(200);
  });

  it('revokes keys of its own tenant', async () => {
    const k = await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: userA.userId, name: 'temp' } });
    expect((await t.http('DELETE', `/admin/api-keys/${k.body.id}`, { key: adminA.key })).status).toBe(200);
    expectError(await t.http('GET', '/auth/me', { key: k.body.key }), 401, 'AUTH_REQUIRED');
  });
});

describe('an admin of the system tenant who is not a system administrator', () => {
  it('cannot mint a key for the system administrator (REST and GraphQL)', async () => {
    const tenants = (await t.http('GET', '/admin/tenants')).body.items as { id: string; is_system: boolean }[];
    const systemTenant = tenants.find((x) => x.is_system)!.id;
    const sysAdminId = (await t.http('GET', '/auth/me')).body.id as string;
    const insider = await createTenantUser(t, { tenantId: systemTenant, roles: ['admin'] });
    expect((await t.http('GET', '/auth/me', { key: insider.key })).body.scope).toBeNull();

    const res = await t.http('POST', '/admin/api-keys', { key: insider.key, json: { user_id: sysAdminId, name: 'escalate' } });
    expectError(res, 403, 'ACCESS_DENIED');
    const g = await t.gql(`mutation { createApiKey(user_id: "${sysAdminId}", name: "escalate") { key } }`, undefined, { key: insider.key });
    expect(g.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    expect(await t.app.db.conn.collection('api_keys').countDocuments({ name: 'escalate' })).toBe(0);
    // Keys for ordinary users of its tenant are fine.
    const own = await createTenantUser(t, { tenantId: systemTenant });
    expect((await t.http('POST', '/admin/api-keys', { key: insider.key, json: { user_id: own.userId, name: 'ok' } })).status).toBe(201);
  });
});

describe('plain users', () => {
  it.each([
    ['GET', '/admin/tenants', undefined],
    ['POST', '/admin/tenants', { name: 'x' }],
    ['GET', '/admin/users', undefined],
    ['POST', '/admin/users', { email: 'p@example.com', name: 'P' }],
    ['POST', '/admin/api-keys', { user_id: 'aaaaaaaaaaaaaaaaaaaaaaaa', name: 'k' }],
    ['DELETE', '/admin/api-keys/aaaaaaaaaaaaaaaaaaaaaaaa', undefined],
    ['GET', '/admin/health/detailed', undefined],
  ])('%s %s → 403', async (method, path, json) => {
    expectError(await t.http(method, path, { key: userA.key, json }), 403, 'ACCESS_DENIED');
  });

  it('cannot revoke even their own key', async () => {
    expectError(await t.http('DELETE', `/admin/api-keys/${userA.keyId}`, { key: userA.key }), 403, 'ACCESS_DENIED');
    expect((await t.http('GET', '/auth/me', { key: userA.key })).status).toBe(200);
  });

  it('anonymous callers get 401 on admin endpoints', async () => {
    expectError(await t.http('GET', '/admin/users', { key: null }), 401, 'AUTH_REQUIRED');
  });
});

describe('validation of admin input → 422 with loc', () => {
  it('POST /admin/users: bad email, empty name, bad tenant_id, bad role, unknown field', async () => {
    const res = await t.http('POST', '/admin/users', { json: { email: 'not-an-email', name: '', tenant_id: 'xyz', roles: [''], nickname: 'n' } });
    expect(locs(res)).toEqual([['body', 'email'], ['body', 'name'], ['body', 'tenant_id'], ['body', 'roles', 0], ['body', 'nickname']]);
  });

  it('POST /admin/users: a role that is neither built-in nor a role of the tenant → 422 naming it', async () => {
    const res = await t.http('POST', '/admin/users', { json: { email: 'root@example.com', name: 'R', roles: ['user', 'root'] } });
    expect(locs(res)).toEqual([['body', 'roles', 1]]);
    expect(res.body.error.details.errors[0].msg).toContain('root');
  });

  it('POST /admin/tenants without a name', async () => {
    expect(locs(await t.http('POST', '/admin/tenants', { json: {} }))).toEqual([['body', 'name']]);
  });

  it('POST /admin/api-keys with a bad user_id and no name', async () => {
    expect(locs(await t.http('POST', '/admin/api-keys', { json: { user_id: '123' } }))).toEqual([['body', 'user_id'], ['body', 'name']]);
  });

  it('DELETE /admin/api-keys/:id with a bad id', async () => {
    expect(locs(await t.http('DELETE', '/admin/api-keys/zzz'))).toEqual([['params', 'id']]);
  });

  it('GET /admin/users with bad paging and tenant_id', async () => {
    expect(locs(await t.http('GET', '/admin/users?page=0&per_page=501&tenant_id=nope'))).toEqual([
      ['query', 'page'],
      ['query', 'per_page'],
      ['query', 'tenant_id'],
    ]);
  });
});

describe('GraphQL admin operations obey the same rules', () => {
  const code = (res: HttpResult<any>) => res.body.errors?.[0]?.extensions?.code as string | undefined;

  it('tenants: all for the system admin, own for a tenant admin, denied to plain users', async () => {
    const sys = await t.gql('{ tenants(per_page: 500) { id name is_system } }');
    expect((sys.body.data.tenants as { id: string }[]).map((x) => x.id)).toEqual(expect.arrayContaining([adminA.tenantId, adminB.tenantId]));
    const own = await t.gql('{ tenants { id name } }', undefined, { key: adminA.key });
    expect(own.body.data.tenants).toEqual([{ id: adminA.tenantId, name: 'Tenant A' }]);
    expect(code(await t.gql('{ tenants { id } }', undefined, { key: userA.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql('{ tenants { id } }', undefined, { key: null }))).toBe('AUTH_REQUIRED');
  });

  it("users: a tenant admin sees only its own tenant's users", async () => {
    const res = await t.gql('{ users(per_page: 500) { id tenant_id } }', undefined, { key: adminB.key });
    const users = res.body.data.users as { id: string; tenant_id: string }[];
    expect(users.map((u) => u.id).sort()).toEqual([adminB.userId, userB.userId].sort());
    expect(code(await t.gql('{ users { id } }', undefined, { key: userB.key }))).toBe('ACCESS_DENIED');
  });

  it('createTenant is for system administrators only', async () => {
    const res = await t.gql('mutation { createTenant(name: "via gql") { id } }', undefined, { key: adminA.key });
    expect(code(res)).toBe('ACCESS_DENIED');
    const ok = await t.gql('mutation { createTenant(name: "via gql") { id name } }');
    expect(ok.body.data.createTenant.name).toBe('via gql');
  });

  it('createUser: own tenant ok, another tenant ACCESS_DENIED, bad input VALIDATION_ERROR at args', async () => {
    const m = 'mutation ($input: JSON!) { createUser(input: $input) { id tenant_id email } }';
    const own = await t.gql(m, { input: { email: 'gql-a@example.com', name: 'G' } }, { key: adminA.key });
    expect(own.body.data.createUser).toMatchObject({ tenant_id: adminA.tenantId, email: 'gql-a@example.com' });

    const cross = await t.gql(m, { input: { email: 'gql-b@example.com', name: 'G', tenant_id: adminB.tenantId } }, { key: adminA.key });
    expect(code(cross)).toBe('ACCESS_DENIED');
    expect(cross.body.data).toBeNull();

    const bad = await t.gql(m, { input: { email: 'nope', name: 'G', extra: true } }, { key: adminA.key });
    expect(code(bad)).toBe('VALIDATION_ERROR');
    expect((bad.body.errors![0]!.extensions!.details!.errors as { loc: unknown[] }[]).map((i) => i.loc)).toEqual([
      ['args', 'email'],
      ['args', 'extra'],
    ]);

    const dup = await t.gql(m, { input: { email: 'gql-a@example.com', name: 'again' } }, { key: adminA.key });
    expect(code(dup)).toBe('CONFLICT');
    expect(dup.body.errors![0]!.extensions!.status).toBe(409);
  });

  it("createApiKey: another tenant's user → NOT_FOUND", async () => {
    const m = 'mutation ($u: String!) { createApiKey(user_id: $u, name: "k") { id user_id key } }';
    const own = await t.gql(m, { u: userA.userId }, { key: adminA.key });
    expect(own.body.data.createApiKey).toMatchObject({ user_id: userA.userId, key: expect.stringMatching(/^ak_/) });
    expect(code(await t.gql(m, { u: userB.userId }, { key: adminA.key }))).toBe('NOT_FOUND');
    expect(code(await t.gql(m, { u: 'not-an-id' }, { key: adminA.key }))).toBe('VALIDATION_ERROR');
  });

  it("revokeApiKey: another tenant's key → NOT_FOUND and it keeps working; own key revoked at once", async () => {
    const m = 'mutation ($id: String!) { revokeApiKey(id: $id) { id } }';
    expect(code(await t.gql(m, { id: userB.keyId }, { key: adminA.key }))).toBe('NOT_FOUND');
    expect((await t.http('GET', '/auth/me', { key: userB.key })).status).toBe(200);

    const k = await t.http('POST', '/admin/api-keys', { key: adminA.key, json: { user_id: userA.userId, name: 'gql-temp' } });
    expect((await t.http('GET', '/auth/me', { key: k.body.key })).status).toBe(200);
    const res = await t.gql(m, { id: k.body.id }, { key: adminA.key });
    expect(res.body.data.revokeApiKey).toEqual({ id: k.body.id });
    expectError(await t.http('GET', '/auth/me', { key: k.body.key }), 401, 'AUTH_REQUIRED');
  });

  it('plain users are denied every admin mutation', async () => {
    for (const q of [
      'mutation { createTenant(name: "x") { id } }',
      'mutation { createUser(input: {email: "q@example.com", name: "Q"}) { id } }',
      `mutation { createApiKey(user_id: "${userA.userId}", name: "k") { id } }`,
      `mutation { revokeApiKey(id: "${userA.keyId}") { id } }`,
    ]) {
      expect(code(await t.gql(q, undefined, { key: userA.key }))).toBe('ACCESS_DENIED');
    }
    expect((await t.http('GET', '/auth/me', { key: userA.key })).status).toBe(200);
  });
});
