/**
 * Identity's changes are events on the log, stored by the change's own write: tenants, users
 * (created, updated, disabled, deleted) and API keys (created, revoked). Their audit entries come
 * from those events. A tenant administrator reads only its tenant's identity events; the system
 * tenant's stay out. No event carries a key or its hash.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { addMembership } from '../helpers/memberships.ts';

type Ev = { id: string; type: string; tenant_id: string | null; actor: string | null; data: Record<string, any> };

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin] });
  A = await createTenantUser(t, { roles: ['admin'] });
  // B's administrator is A's administrator's second membership: one person, two tenants.
  B = await addMembership(t, A.userId, { roles: ['admin'] });
});
afterAll(() => t?.close());

/** Every event the key may read (newest first), of the identity types. */
const eventsOf = async (key?: string): Promise<Ev[]> => {
  const out: Ev[] = [];
  let cursor: string | null = null;
  do {
    const r: { status: number; body: any } = await t.http('GET', `/events?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, key ? { key } : {});
    expect(r.status).toBe(200);
    out.push(...r.body.items);
    cursor = r.body.cursors.has_next ? r.body.cursors.next : null;
  } while (cursor);
  return out.filter((e) => /^(tenant|user|api_key)\./.test(e.type));
};
const auditOf = async (resource: string, id: string) => {
  const r = await t.http('GET', `/admin/audit-log?resource=${resource}&resource_id=${id}`);
  expect(r.status).toBe(200);
  return r.body.items as { operation: string; user_id: string | null; tenant_id: string | null; changes: Record<string, any> | null; snapshot: Record<string, any> | null }[];
};

describe('identity events', () => {
  it('are in the catalogue', async () => {
    const names = ((await t.http('GET', '/events/types')).body.items as { name: string }[]).map((x) => x.name);
    expect(names).toEqual(expect.arrayContaining(['tenant.created', 'user.created', 'user.updated', 'user.disabled', 'user.deleted', 'api_key.created', 'api_key.revoked']));
  });

  it('a tenant, a user, its key: one event each, with the object as the API answered it', async () => {
    const tenant = await t.http('POST', '/admin/tenants', { json: { name: 'Evented' } });
    const user = await t.http('POST', '/admin/users', { key: A.key, json: { email: 'ev@example.com', name: 'Ev', roles: ['user'] } });
    const key = await t.http('POST', '/admin/api-keys', { key: A.key, json: { user_id: user.body.id, name: 'ci' } });
    expect([tenant.status, user.status, key.status]).toEqual([201, 201, 201]);
    const all = await eventsOf();
    const json = (x: unknown) => JSON.parse(JSON.stringify(x));
    const [te] = all.filter((e) => e.type === 'tenant.created' && e.data.id === tenant.body.id);
    expect(te).toMatchObject({ tenant_id: tenant.body.id, data: json(tenant.body) });
    const [ue, ...moreUsers] = all.filter((e) => e.type === 'user.created' && e.data.id === user.body.id);
    expect(moreUsers).toEqual([]);
    expect(ue).toMatchObject({ tenant_id: A.tenantId, actor: A.userId, data: json(user.body) });
    const [ke] = all.filter((e) => e.type === 'api_key.created' && e.data.id === key.body.id);
    const { key: plain, ...keyView } = key.body;
    expect(ke).toMatchObject({ tenant_id: A.tenantId, actor: A.userId, data: json(keyView) });
    // Never the key, nor its hash, anywhere in the stored event.
    const stored = await t.app.db.conn.collection('events').findOne({ _id: ke!.id as never });
    expect(JSON.stringify(stored)).not.toContain(plain);
    expect(JSON.stringify(stored)).not.toContain('key_hash');
    expect(await auditOf('api_keys', key.body.id)).toEqual([expect.objectContaining({ operation: 'insert', user_id: A.userId, tenant_id: A.tenantId })]);
    expect(await auditOf('tenants', tenant.body.id)).toEqual([expect.objectContaining({ operation: 'insert' })]);
  });

  it('an update, a disable and a delete: each event keeps its own object; revoked keys are events and audited', async () => {
    const u = await createTenantUser(t, { tenantId: A.tenantId });
    expect((await t.http('PATCH', `/admin/users/${u.userId}`, { key: A.key, json: { roles: ['admin'] } })).status).toBe(200);
    expect((await t.http('PATCH', `/admin/users/${u.userId}`, { key: A.key, json: { is_active: false } })).status).toBe(200);
    expect((await t.http('DELETE', `/admin/users/${u.userId}`, { key: A.key })).status).toBe(204);
    const mine = (await eventsOf(A.key)).filter((e) => e.data.id === u.userId || e.data.user_id === u.userId).reverse();
    expect(mine.map((e) => e.type)).toEqual(['user.created', 'api_key.created', 'user.updated', 'user.updated', 'user.disabled', 'user.deleted', 'api_key.revoked']);
    expect(mine[2]!.data).toMatchObject({ roles: ['admin'], is_active: true });
    expect(mine[3]!.data).toMatchObject({ roles: ['admin'], is_active: false });
    expect(mine[4]!.data).toMatchObject({ is_active: false });
    expect(mine[6]!.data).toMatchObject({ id: u.keyId, revoked_at: expect.any(String) });
    for (const e of mine) expect(e).toMatchObject({ tenant_id: A.tenantId });
    expect(mine.slice(2).every((e) => e.actor === A.userId)).toBe(true);

    const userEntries = await auditOf('users', u.userId);
    expect(userEntries.map((e) => e.operation)).toEqual(['delete', 'update', 'update', 'insert']);
    expect(userEntries[1]!.changes).toMatchObject({ is_active: { old: true, new: false } });
    expect(userEntries[2]!.changes).toMatchObject({ roles: { old: ['user'], new: ['admin'] } });
    const keyEntries = await auditOf('api_keys', u.keyId);
    expect(keyEntries.map((e) => e.operation)).toEqual(['update', 'insert']);
    expect(keyEntries[0]).toMatchObject({ user_id: A.userId, tenant_id: A.tenantId, changes: { revoked_at: { old: null } } });
  });

  it('a revoke by hand is one event and one entry; a second revoke is a 404 and stores nothing', async () => {
    const u = await createTenantUser(t, { tenantId: A.tenantId });
    expect((await t.http('DELETE', `/admin/api-keys/${u.keyId}`, { key: A.key })).status).toBe(200);
    expect((await t.http('DELETE', `/admin/api-keys/${u.keyId}`, { key: A.key })).status).toBe(404);
    const revoked = (await eventsOf(A.key)).filter((e) => e.type === 'api_key.revoked' && e.data.id === u.keyId);
    expect(revoked).toHaveLength(1);
    expect((await auditOf('api_keys', u.keyId)).map((e) => e.operation)).toEqual(['update', 'insert']);
    // The document's outbox is emptied once its events are stored (every identity entry carries its object).
    const doc = await t.app.db.conn.collection('api_keys').findOne({ _id: new Types.ObjectId(u.keyId) });
    expect(doc?._outbox ?? []).toEqual([]);
  });

  it("tenant isolation: a tenant administrator reads only its tenant's identity events, never the system tenant's", async () => {
    const sys = await t.http('POST', '/admin/users', { json: { email: 'second-sys@example.com', name: 'Second', scope: 'system' } });
    expect(sys.status).toBe(201);
    const bUser = await createTenantUser(t, { tenantId: B.tenantId });
    const ofA = await eventsOf(A.key);
    expect(ofA.length).toBeGreaterThan(0);
    expect(ofA.every((e) => e.tenant_id === A.tenantId)).toBe(true);
    expect(ofA.some((e) => e.data.id === sys.body.id || e.data.id === bUser.userId)).toBe(false);
    const ofB = await eventsOf(B.key);
    expect(ofB.some((e) => e.data.id === bUser.userId)).toBe(true);
    expect(ofB.every((e) => e.tenant_id === B.tenantId)).toBe(true);
    // The system administrator's creation is in the system tenant's log, read by system administrators.
    expect((await eventsOf()).some((e) => e.type === 'user.created' && e.data.id === sys.body.id && e.tenant_id === sys.body.tenant_id)).toBe(true);
    const one = (await eventsOf()).find((e) => e.data.id === sys.body.id)!;
    expect((await t.http('GET', `/events/${one.id}`, { key: A.key })).status).toBe(404);
  });
});
