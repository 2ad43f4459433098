/**
 * What the console needed and GraphQL lacked, added for every client (docs/console.md lists them):
 * resourceTypes, health, apiKeys (+ ApiKey dates), users(tenant_id), and the passkey mutations.
 * Each is checked through gql() for an administrator, a tenant administrator and a plain user.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
let a: Awaited<ReturnType<typeof createTenantUser>>;
let u: Awaited<ReturnType<typeof createTenantUser>>;
let other: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: builtinPlugins() });
  a = await createTenantUser(t, { roles: ['user', 'admin'], features: ['tasks'] });
  u = await createTenantUser(t, { tenantId: a.tenantId, roles: ['user'] });
  // The other tenant's user is a second membership of the first one's person: one person, two tenants.
  other = await addMembership(t, a.userId, { roles: ['user', 'admin'] });
});
afterAll(() => t?.close());

const code = (res: { body: { errors?: { extensions?: { code?: string } }[] } }) => res.body.errors?.[0]?.extensions?.code;

describe('resourceTypes', () => {
  const Q = '{ resourceTypes { name path graphql_type accessible features searchable_fields allow_bulk_delete filter_operators versions operations { list get create update delete restore restore_version } fields { name kind required enum min max ref } cascade { resource field on_delete } referenced_by { resource field on_delete } } }';

  it('describes every resource with its fields, GraphQL operations and rules', async () => {
    const res = await t.gql(Q, {}, { key: a.key });
    expect(res.body.errors).toBeUndefined();
    const [projects, tasks] = ['projects', 'tasks'].map((n) => res.body.data.resourceTypes.find((r: any) => r.name === n));
    expect(projects).toMatchObject({
      path: '/projects', graphql_type: 'Project', accessible: true, features: [], searchable_fields: ['name', 'description'], allow_bulk_delete: true,
      versions: true,
      operations: { list: 'projects', get: 'project', create: 'createProject', update: 'updateProject', delete: 'deleteProject', restore: 'restoreProject', restore_version: 'restoreProjectVersion' },
      referenced_by: [{ resource: 'tasks', field: 'project_id', on_delete: 'deny' }],
    });
    expect(projects.filter_operators).toEqual(['gt', 'gte', 'lt', 'lte', 'ne', 'in', 'nin', 'exists', 'regex']);
    expect(projects.fields.find((f: any) => f.name === 'name')).toEqual({ name: 'name', kind: 'string', required: true, enum: null, min: null, max: null, ref: null });
    expect(projects.fields.find((f: any) => f.name === 'status').enum).toEqual(['active', 'archived']);
    // A resource without versions has no history to show and no version to restore.
    expect(tasks).toMatchObject({ versions: false, operations: { restore_version: null } });
    expect(tasks).toMatchObject({ features: ['tasks'], accessible: true, cascade: [{ resource: 'projects', field: 'project_id', on_delete: 'deny' }] });
    expect(tasks.fields.find((f: any) => f.name === 'project_id')).toMatchObject({ kind: 'objectId', ref: 'projects', required: true });
    expect(tasks.fields.find((f: any) => f.name === 'priority')).toMatchObject({ kind: 'integer', min: 1, max: 5, required: false });
  });

  it('tells a user without the feature that a resource is not accessible, and needs a credential', async () => {
    const res = await t.gql(Q, {}, { key: u.key });
    expect(res.body.data.resourceTypes.find((r: any) => r.name === 'tasks').accessible).toBe(false);
    expect(code(await t.gql(Q, {}, { key: null }))).toBe('AUTH_REQUIRED');
  });
});

describe('health', () => {
  it('runs every check for administrators, as /admin/health/detailed', async () => {
    const res = await t.gql('{ health { status checks { name status duration_ms } } }', {}, { key: a.key });
    expect(res.body.data.health.status).toBe('ok');
    expect(res.body.data.health.checks).toContainEqual({ name: 'database', status: 'ok', duration_ms: expect.any(Number) });
  });
  it('refuses a plain user', async () => {
    expect(code(await t.gql('{ health { status } }', {}, { key: u.key }))).toBe('ACCESS_DENIED');
  });
});

describe('apiKeys and users(tenant_id)', () => {
  it('lists the keys a tenant administrator administers, never the key itself, and not other tenants\' keys', async () => {
    const res = await t.gql('{ apiKeys { id name prefix user_id tenant_id key created_at last_used_at revoked_at } }', {}, { key: a.key });
    expect(res.body.errors).toBeUndefined();
    const keys = res.body.data.apiKeys;
    expect(keys.map((k: any) => k.id).sort()).toEqual([a.keyId, u.keyId].sort());
    for (const k of keys) {
      expect(k.tenant_id).toBe(a.tenantId);
      expect(k.key).toBeNull();
      expect(k.created_at).toEqual(expect.any(String));
    }
    expect(keys.find((k: any) => k.id === a.keyId).last_used_at).toEqual(expect.any(String));
  });

  it('filters by user, hides revoked keys unless asked, and refuses a plain user', async () => {
    const mine = await t.gql('query($u: String) { apiKeys(user_id: $u) { id } }', { u: u.userId }, { key: a.key });
    expect(mine.body.data.apiKeys).toEqual([{ id: u.keyId }]);
    const extra = await t.gql('mutation($u: String!) { createApiKey(user_id: $u, name: "spare") { id key } }', { u: u.userId }, { key: a.key });
    const spare = extra.body.data.createApiKey.id;
    await t.gql('mutation($id: String!) { revokeApiKey(id: $id) { id } }', { id: spare }, { key: a.key });
    const live = await t.gql('query($u: String) { apiKeys(user_id: $u) { id revoked_at } }', { u: u.userId }, { key: a.key });
    expect(live.body.data.apiKeys.map((k: any) => k.id)).not.toContain(spare);
    const all = await t.gql('query($u: String) { apiKeys(user_id: $u, include_revoked: true) { id revoked_at } }', { u: u.userId }, { key: a.key });
    expect(all.body.data.apiKeys.find((k: any) => k.id === spare).revoked_at).toEqual(expect.any(String));
    expect(code(await t.gql('{ apiKeys { id } }', {}, { key: u.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql('{ apiKeys(user_id: "nope") { id } }', {}, { key: a.key }))).toBe('VALIDATION_ERROR');
  });

  it('users(tenant_id): a system administrator lists one tenant; a tenant administrator stays in theirs', async () => {
    const sys = await t.gql('query($t: String) { users(tenant_id: $t) { id tenant_id } }', { t: other.tenantId });
    expect(sys.body.data.users).toEqual([{ id: other.userId, tenant_id: other.tenantId }]);
    const ten = await t.gql('query($t: String) { users(tenant_id: $t) { id tenant_id } }', { t: other.tenantId }, { key: a.key });
    expect(ten.body.data.users.every((x: any) => x.tenant_id === a.tenantId)).toBe(true);
  });
});

describe('passkey mutations (the browser half is in browser.test.ts)', () => {
  it('passkeyRegistrationOptions gives creation options to a signed-in user; passkeyLoginOptions needs no credential', async () => {
    const reg = await t.gql('mutation { passkeyRegistrationOptions }', {}, { key: u.key });
    expect(reg.body.data.passkeyRegistrationOptions).toMatchObject({ challenge: expect.any(String), rp: { id: 'localhost' }, user: { id: expect.any(String) } });
    expect(code(await t.gql('mutation { passkeyRegistrationOptions }', {}, { key: null }))).toBe('AUTH_REQUIRED');
    const login = await t.gql('mutation($e: String!) { passkeyLoginOptions(email: $e) }', { e: 'someone@example.com' }, { key: null });
    expect(login.body.data.passkeyLoginOptions).toMatchObject({ challenge: expect.any(String), rpId: 'localhost' });
  });

  it('passkeyLogin refuses a bad assertion with AUTH_REQUIRED and a malformed one with VALIDATION_ERROR', async () => {
    const bad = { email: 'someone@example.com', credential_id: 'AAAA', client_data_json: 'AAAA', authenticator_data: 'AAAA', signature: 'AAAA' };
    expect(code(await t.gql('mutation($i: JSON!) { passkeyLogin(input: $i) { token } }', { i: bad }, { key: null }))).toBe('AUTH_REQUIRED');
    expect(code(await t.gql('mutation($i: JSON!) { passkeyLogin(input: $i) { token } }', { i: { email: 'x' } }, { key: null }))).toBe('VALIDATION_ERROR');
    expect(code(await t.gql('mutation($i: JSON!) { registerPasskey(input: $i) { credential_id } }', { i: {} }, { key: u.key }))).toBe('VALIDATION_ERROR');
  });
});
