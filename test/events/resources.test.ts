import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { addMembership } from '../helpers/memberships.ts';

/** Waits until the tenant's log (as `key` reads it) satisfies `fn`. */
async function eventsUntil(t: TestApp, key: string, fn: (items: any[]) => boolean, ms = 10_000): Promise<any[]> {
  const end = Date.now() + ms;
  for (;;) {
    const r = await t.http('GET', '/events?limit=100', { key });
    if (r.status === 200 && fn(r.body.items)) return r.body.items;
    if (Date.now() > end) throw new Error(`events not as expected: ${JSON.stringify(r.body).slice(0, 500)}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

describe('resource events', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof createTenantUser>>;
  let user: Awaited<ReturnType<typeof createTenantUser>>;
  let other: Awaited<ReturnType<typeof createTenantUser>>;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [resourcesPlugin] });
    admin = await createTenantUser(t, { roles: ['admin'], features: ['tasks'] });
    user = await createTenantUser(t, { tenantId: admin.tenantId, roles: ['user'] });
    // The other tenant's user is a second membership of the first one's person: one person, two tenants.
    other = await addMembership(t, admin.userId, { roles: ['admin'] });
  });
  afterAll(() => t?.close());

  it('the catalogue lists created, updated, deleted and restored for every resource, with the document schema', async () => {
    const r = await t.http('GET', '/events/types', { key: user.key });
    const names = r.body.items.map((x: any) => x.name);
    for (const res of ['projects', 'tasks']) for (const verb of ['created', 'updated', 'deleted', 'restored']) expect(names).toContain(`${res}.${verb}`);
    const created = r.body.items.find((x: any) => x.name === 'projects.created');
    expect(created.plugin).toBe('resources');
    expect(created.schema.properties).toMatchObject({ _id: { type: 'string' }, name: { type: 'string' }, version: expect.any(Object) });
    expect(created.schema.required).toEqual(expect.arrayContaining(['_id', 'version', 'name']));
  });

  it('create, PATCH, PUT, DELETE and restore each store one event with the document after the change', async () => {
    const c = await t.http('POST', '/projects', { key: admin.key, json: { name: 'Apollo', budget: 1 } });
    expect(c.status).toBe(201);
    expect(c.body).not.toHaveProperty('_outbox');
    const id = c.body._id;
    const p = await t.http('PATCH', `/projects/${id}`, { key: admin.key, json: { budget: 2 }, headers: { 'If-Match': '"1"' } });
    expect(p.status).toBe(200);
    const r = await t.http('PUT', `/projects/${id}`, { key: admin.key, json: { name: 'Apollo 2' }, headers: { 'If-Match': '"2"' } });
    expect(r.status).toBe(200);
    expect((await t.http('DELETE', `/projects/${id}`, { key: admin.key, headers: { 'If-Match': '"3"' } })).status).toBe(204);
    const restored = await t.http('POST', `/projects/${id}/restore`, { key: admin.key, headers: { 'If-Match': '"4"' } });
    expect(restored.status).toBe(200);
    expect(restored.headers.get('etag')).toBe('"5"');
    expect(restored.body).toMatchObject({ _id: id, is_deleted: false, deleted_at: null, version: 5 });

    const mine = (await eventsUntil(t, admin.key, (items) => items.filter((e) => e.data._id === id).length === 5)).filter((e) => e.data._id === id).reverse();
    expect(mine.map((e) => [e.type, e.data.version])).toEqual([
      ['projects.created', 1], ['projects.updated', 2], ['projects.updated', 3], ['projects.deleted', 4], ['projects.restored', 5],
    ]);
    expect(mine[1].data.budget).toBe(2);
    expect(mine[2].data).toMatchObject({ name: 'Apollo 2', budget: null });
    expect(mine[3].data.is_deleted).toBe(true);
    for (const e of mine) {
      expect(e).toMatchObject({ tenant_id: admin.tenantId, actor: admin.userId });
      expect(e.data).not.toHaveProperty('_outbox');
    }
    // The stored document carries no outbox once relayed, and the API never shows one.
    const got = await t.http('GET', `/projects/${id}`, { key: admin.key });
    expect(got.body).not.toHaveProperty('_outbox');
    const list = await t.http('GET', '/projects?per_page=100', { key: admin.key });
    expect(list.body.items.every((d: any) => !('_outbox' in d))).toBe(true);
  });

  it('an empty PATCH changes nothing and stores no event; a refused write stores none', async () => {
    const c = await t.http('POST', '/projects', { key: admin.key, json: { name: 'quiet' } });
    await eventsUntil(t, admin.key, (items) => items.some((e) => e.data._id === c.body._id));
    expect((await t.http('PATCH', `/projects/${c.body._id}`, { key: admin.key, json: {}, headers: { 'If-Match': '"1"' } })).status).toBe(200);
    expectError(await t.http('PATCH', `/projects/${c.body._id}`, { key: admin.key, json: { budget: 'x' }, headers: { 'If-Match': '"1"' } }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('PATCH', `/projects/${c.body._id}`, { key: admin.key, json: { budget: 3 }, headers: { 'If-Match': '"9"' } }), 412, 'ETAG_MISMATCH');
    await t.app.services.get('events').flush();
    const items = await eventsUntil(t, admin.key, () => true);
    expect(items.filter((e) => e.data._id === c.body._id).map((e) => e.type)).toEqual(['projects.created']);
  });

  it('restore: administrators only (403), a live document is 409, another tenant 404, If-Match required (428); GraphQL alike', async () => {
    const c = await t.http('POST', '/projects', { key: admin.key, json: { name: 'r' } });
    const id = c.body._id;
    expectError(await t.http('POST', `/projects/${id}/restore`, { key: admin.key, headers: { 'If-Match': '"1"' } }), 409, 'CONFLICT');
    await t.http('DELETE', `/projects/${id}`, { key: admin.key, headers: { 'If-Match': '"1"' } });
    expectError(await t.http('POST', `/projects/${id}/restore`, { key: user.key, headers: { 'If-Match': '"2"' } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('POST', `/projects/${id}/restore`, { key: other.key, headers: { 'If-Match': '"2"' } }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', `/projects/${id}/restore`, { key: admin.key }), 428, 'ETAG_REQUIRED');
    const g = await t.gql('mutation ($id: ID!, $if_match: String) { restoreProject(id: $id, if_match: $if_match) { _id is_deleted version } }', { id, if_match: '"2"' }, { key: admin.key });
    expect(g.body.errors).toBeUndefined();
    expect(g.body.data.restoreProject).toMatchObject({ _id: id, is_deleted: false, version: 3 });
    const items = await eventsUntil(t, admin.key, (list) => list.some((e) => e.type === 'projects.restored' && e.data._id === id));
    expect(items.find((e) => e.type === 'projects.restored' && e.data._id === id).actor).toBe(admin.userId);
  });

  it('bulk create stores one event per document; other tenants see none of them', async () => {
    const r = await t.http('POST', '/projects/bulk', { key: other.key, json: { items: [{ name: 'b1' }, { name: 'b2' }, { name: 'b3' }] } });
    expect([200, 201, 207]).toContain(r.status);
    const items = await eventsUntil(t, other.key, (list) => list.filter((e) => e.type === 'projects.created').length === 3);
    expect(items.every((e) => e.tenant_id === other.tenantId)).toBe(true);
    const adminSees = await eventsUntil(t, admin.key, () => true);
    expect(adminSees.some((e) => e.tenant_id === other.tenantId)).toBe(false);
  });
});
