/**
 * What the console's third round asks of the API (docs/console.md, "GraphQL additions"): a user's
 * `last_admin` (the console offers no Disable or Delete for a tenant's only administrator), the
 * owner's e-mail on each API key of `apiKeys` (tenant-scoped like the keys), and validation
 * messages in plain words, over REST and GraphQL alike.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';

let t: TestApp;
let a: Awaited<ReturnType<typeof createTenantUser>>;
let a2: Awaited<ReturnType<typeof createTenantUser>>;
let plain: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  a = await createTenantUser(t, { roles: ['user', 'admin'], email: 'first@a.test' });
  plain = await createTenantUser(t, { tenantId: a.tenantId, email: 'plain@a.test' });
  await createTenantUser(t, { roles: ['user', 'admin'], email: 'only@b.test' });
});
afterAll(() => t?.close());

const USERS = '{ usersPage(per_page: 50) { items { email last_admin } } }';
const lastAdmins = async (key?: string) =>
  Object.fromEntries(((await t.gql(USERS, {}, key ? { key } : {})).body.data.usersPage.items as { email: string; last_admin: boolean }[]).map((u) => [u.email, u.last_admin]));

describe('User.last_admin', () => {
  it('is true for the only active administrator of a tenant, and false once another one exists or for a plain user', async () => {
    expect(await lastAdmins(a.key)).toEqual({ 'first@a.test': true, 'plain@a.test': false });
    a2 = await createTenantUser(t, { tenantId: a.tenantId, roles: ['user', 'admin'], email: 'second@a.test' });
    expect(await lastAdmins(a.key)).toEqual({ 'first@a.test': false, 'plain@a.test': false, 'second@a.test': false });
    // A disabled administrator does not count: the other one is the last again.
    expect((await t.gql('mutation($id: String!) { updateUser(id: $id, input: { is_active: false }) { is_active } }', { id: a2.userId }, { key: a.key })).body.errors).toBeUndefined();
    expect(await lastAdmins(a.key)).toMatchObject({ 'first@a.test': true, 'second@a.test': false });
    // Each tenant is counted on its own (a system administrator sees both).
    expect(await lastAdmins()).toMatchObject({ 'first@a.test': true, 'only@b.test': true });
  });
});

describe('ApiKey.user_email', () => {
  it("names each key's owner, and a tenant administrator lists only their tenant's keys", async () => {
    const mine = (await t.gql('{ apiKeys(per_page: 100) { user_id user_email } }', {}, { key: a.key })).body.data.apiKeys as { user_id: string; user_email: string }[];
    expect(mine.length).toBeGreaterThan(0);
    expect(new Set(mine.map((k) => k.user_email))).toEqual(new Set(['first@a.test', 'plain@a.test', 'second@a.test']));
    for (const k of mine) expect(k.user_email).toBe({ [a.userId]: 'first@a.test', [plain.userId]: 'plain@a.test', [a2.userId]: 'second@a.test' }[k.user_id]);
    const all = (await t.gql('{ apiKeys(per_page: 500) { user_email } }')).body.data.apiKeys as { user_email: string }[];
    expect(all.map((k) => k.user_email)).toContain('only@b.test');
  });
});

describe('validation messages in plain words', () => {
  it('says "name is required" for a missing required name, over REST and GraphQL, and writes nothing', async () => {
    const rest = await t.http('POST', '/projects', { key: a.key, json: {} });
    const err = expectError(rest, 422, 'VALIDATION_ERROR');
    expect(err.details?.errors ?? (rest.body as { error: { details: { errors: unknown } } }).error.details.errors).toContainEqual(expect.objectContaining({ loc: ['body', 'name'], msg: 'name is required' }));
    expect(JSON.stringify(rest.body)).not.toContain('Invalid input');
    const gq = await t.gql('mutation { createProject(input: {}) { _id } }', {}, { key: a.key });
    expect(gq.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    expect(JSON.stringify(gq.body.errors)).toContain('name is required');
    expect((await t.http('GET', '/projects', { key: a.key })).body.items).toHaveLength(0);
  });

  it('names the expected kind, the bounds and the choices', async () => {
    const wrong = await t.http('POST', '/projects', { key: a.key, json: { name: 5 } });
    expect(JSON.stringify(wrong.body)).toContain('Must be text');
    const empty = await t.http('POST', '/admin/tenants', { json: { name: '' } });
    expect(JSON.stringify(empty.body)).toContain('Must not be empty');
    const status = await t.http('POST', '/projects', { key: a.key, json: { name: 'P', status: 'paused' } });
    expect(expectError(status, 422, 'VALIDATION_ERROR')).toBeTruthy();
    expect(JSON.stringify(status.body)).toMatch(/Must be one of: active, archived|Must be one of: archived, active/);
    // Roles are open to a tenant's custom roles: an unknown one is named, in words.
    const role = await t.http('POST', '/admin/users', { key: a.key, json: { email: 'x@a.test', name: 'X', roles: ['owner'] } });
    expect(expectError(role, 422, 'VALIDATION_ERROR')).toBeTruthy();
    expect(JSON.stringify(role.body)).toContain('Unknown role \\"owner\\" in this tenant');
  });
});
