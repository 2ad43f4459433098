import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type HttpResult, type TestApp } from '../helpers/app.ts';

/**
 * A tenant always keeps an active administrator: disabling, deleting or taking `admin` from the
 * last one is 409 CONFLICT with `details.reason: "last_admin"` and nothing written (REST and
 * GraphQL, a system administrator too), also when two requests take away the last two at once.
 */
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [] });
});
afterAll(() => t?.close());

const gqlError = (res: HttpResult<any>) => res.body.errors?.[0]?.extensions as { code?: string; details?: { reason?: string } } | undefined;
const rawUser = (id: string) => t.app.db.conn.collection('users').findOne({ _id: new Types.ObjectId(id) });
const activeAdmins = (tenantId: string) =>
  t.app.db.conn.collection('users').countDocuments({ tenant_id: new Types.ObjectId(tenantId), roles: 'admin', is_active: { $ne: false }, is_deleted: { $ne: true } });
const disabledEvents = async (id: string) =>
  ((await t.http('GET', '/events?type=user.disabled&limit=100')).body.items as { data: { id: string } }[]).filter((e) => e.data.id === id).length;

const expectLastAdmin = (res: HttpResult<any>) => expect(expectError(res, 409, 'CONFLICT').details).toEqual({ reason: 'last_admin' });

describe('the last active administrator of a tenant', () => {
  it('cannot be disabled, deleted or lose admin, by a system administrator or a tenant administrator, REST and GraphQL; nothing is written', async () => {
    const a = await createTenantUser(t, { roles: ['admin'] });
    const plain = await createTenantUser(t, { tenantId: a.tenantId });
    const before = await rawUser(a.userId);
    for (const json of [{ is_active: false }, { roles: ['user'] }, { roles: ['user'], is_active: false }])
      expectLastAdmin(await t.http('PATCH', `/admin/users/${a.userId}`, { json }));
    expectLastAdmin(await t.http('DELETE', `/admin/users/${a.userId}`));
    const upd = await t.gql('mutation ($id: String!, $input: JSON!) { updateUser(id: $id, input: $input) { id } }', { id: a.userId, input: { is_active: false } });
    expect(gqlError(upd)).toMatchObject({ code: 'CONFLICT', details: { reason: 'last_admin' } });
    const del = await t.gql('mutation ($id: String!) { deleteUser(id: $id) }', { id: a.userId });
    expect(gqlError(del)).toMatchObject({ code: 'CONFLICT', details: { reason: 'last_admin' } });
    expect(await rawUser(a.userId)).toEqual(before);
    expect(await disabledEvents(a.userId)).toBe(0);
    expect((await t.http('GET', '/auth/me', { key: a.key })).status).toBe(200);

    // Changes that keep it an active administrator, and changes to other users, go through.
    expect((await t.http('PATCH', `/admin/users/${a.userId}`, { json: { name: 'Still here', roles: ['admin', 'user'] } })).status).toBe(200);
    expect((await t.http('PATCH', `/admin/users/${plain.userId}`, { key: a.key, json: { is_active: false } })).status).toBe(200);
  });

  it('with a second active administrator, either may go; then the other is the last one', async () => {
    const a = await createTenantUser(t, { roles: ['admin'] });
    const b = await createTenantUser(t, { tenantId: a.tenantId, roles: ['admin'] });
    // A tenant administrator takes admin from the other one: allowed, it stays itself.
    expect((await t.http('PATCH', `/admin/users/${b.userId}`, { key: a.key, json: { roles: ['user'] } })).status).toBe(200);
    expectLastAdmin(await t.http('PATCH', `/admin/users/${a.userId}`, { json: { is_active: false } }));
    // A disabled administrator does not count.
    expect((await t.http('PATCH', `/admin/users/${b.userId}`, { json: { roles: ['admin'], is_active: false } })).status).toBe(200);
    expectLastAdmin(await t.http('DELETE', `/admin/users/${a.userId}`));
    expect((await t.http('PATCH', `/admin/users/${b.userId}`, { json: { is_active: true } })).status).toBe(200);
    expect((await t.http('DELETE', `/admin/users/${a.userId}`)).status).toBe(204);
    expect(await activeAdmins(a.tenantId)).toBe(1);
  });

  it('holds under concurrency: of two requests taking away the last two administrators at once, one succeeds', async () => {
    for (let round = 0; round < 6; round++) {
      const a = await createTenantUser(t, { roles: ['admin'] });
      const b = await createTenantUser(t, { tenantId: a.tenantId, roles: ['admin'] });
      const second = round % 3 === 0 ? { method: 'DELETE' as const, json: undefined } : { method: 'PATCH' as const, json: round % 3 === 1 ? { is_active: false } : { roles: ['user'] } };
      const [ra, rb] = await Promise.all([
        t.http('PATCH', `/admin/users/${a.userId}`, { json: { is_active: false } }),
        t.http(second.method, `/admin/users/${b.userId}`, second.json ? { json: second.json } : {}),
      ]);
      const statuses = [ra.status, rb.status].sort();
      expect(statuses.filter((s) => s === 409), `round ${round}: ${statuses}`).toHaveLength(1);
      for (const r of [ra, rb]) if (r.status === 409) expectLastAdmin(r);
      expect(await activeAdmins(a.tenantId)).toBe(1);
    }
  });

  it('a lease left by a process that died (past its end) does not block the tenant; a live one is waited for', async () => {
    const a = await createTenantUser(t, { roles: ['admin'] });
    const b = await createTenantUser(t, { tenantId: a.tenantId, roles: ['admin'] });
    const locks = t.app.db.conn.collection<{ _id: string; token: string; until: Date }>('admin_locks');
    await locks.insertOne({ _id: a.tenantId, token: 'dead', until: new Date(Date.now() - 1000) });
    expect((await t.http('PATCH', `/admin/users/${a.userId}`, { json: { is_active: false } })).status).toBe(200);
    expect(await locks.countDocuments({ _id: a.tenantId })).toBe(0);
    // Held by another request: this one waits for its release, then is judged (b is now the last one).
    await locks.insertOne({ _id: a.tenantId, token: 'live', until: new Date(Date.now() + 60_000) });
    const pending = t.http('PATCH', `/admin/users/${b.userId}`, { json: { is_active: false } });
    await new Promise((r) => setTimeout(r, 200));
    expect((await rawUser(b.userId))?.is_active).toBe(true);
    await locks.deleteOne({ _id: a.tenantId, token: 'live' });
    expectLastAdmin(await pending);
  });

  it('is per tenant: another tenant with one administrator does not hold this one back', async () => {
    const a = await createTenantUser(t, { roles: ['admin'] });
    const b = await createTenantUser(t, { tenantId: a.tenantId, roles: ['admin'] });
    await createTenantUser(t, { roles: ['admin'] });
    expect((await t.http('PATCH', `/admin/users/${a.userId}`, { json: { is_active: false } })).status).toBe(200);
    expect((await rawUser(b.userId))?.is_active).toBe(true);
  });
});
