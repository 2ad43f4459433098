/** Custom roles: /admin/roles CRUD, tenant isolation, users holding custom roles, includes, events. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenantUser, type TestApp } from '../helpers/app.ts';
import { accessApp, createRole, newTenant, userWith } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
let a: string;
let b: string;
let adminA: { key: string; userId: string };
let adminB: { key: string };

beforeAll(async () => {
  t = await accessApp();
  a = await newTenant(t);
  b = await newTenant(t);
  adminA = await createTenantUser(t, { tenantId: a, roles: ['admin'] });
  // B's administrator is A's administrator's second membership: one person, two tenants.
  adminB = await addMembership(t, adminA.userId, { tenantId: b, roles: ['admin'] });
});
afterAll(() => t?.close());

const readNotes = { notes: { read: true } };

describe('roles', () => {
  it('a tenant admin creates, reads, lists, changes and deletes a role of its tenant', async () => {
    const r = await t.http('POST', '/admin/roles', { key: adminA.key, json: { name: 'viewer', description: 'reads notes', permissions: readNotes } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ name: 'viewer', tenant_id: a, includes: [], permissions: readNotes });
    const one = await t.http('GET', `/admin/roles/${r.body.id}`, { key: adminA.key });
    expect(one.body.name).toBe('viewer');
    const list = await t.http('GET', '/admin/roles?per_page=10', { key: adminA.key });
    expect(list.status).toBe(200);
    expect(list.body.items.map((x: { name: string }) => x.name)).toEqual(['viewer']);
    expect(list.headers.get('x-total-count')).toBe('1');
    const p = await t.http('PATCH', `/admin/roles/${r.body.id}`, { key: adminA.key, json: { description: 'changed' } });
    expect(p.body.description).toBe('changed');
    expect((await t.http('DELETE', `/admin/roles/${r.body.id}`, { key: adminA.key })).status).toBe(204);
    expect((await t.http('GET', `/admin/roles/${r.body.id}`, { key: adminA.key })).status).toBe(404);
  });

  it('roles of tenant A are invisible and unusable in tenant B', async () => {
    const r = await createRole(t, { name: 'a-only', permissions: readNotes }, { key: adminA.key });
    expect((await t.http('GET', `/admin/roles/${r.id}`, { key: adminB.key })).status).toBe(404);
    expect((await t.http('PATCH', `/admin/roles/${r.id}`, { key: adminB.key, json: { description: 'x' } })).status).toBe(404);
    expect((await t.http('DELETE', `/admin/roles/${r.id}`, { key: adminB.key })).status).toBe(404);
    const listB = await t.http('GET', '/admin/roles', { key: adminB.key });
    expect(listB.body.items.map((x: { name: string }) => x.name)).not.toContain('a-only');
    const u = await t.http('POST', '/admin/users', { key: adminB.key, json: { email: 'x@example.com', name: 'X', roles: ['a-only'] } });
    expect(u.status).toBe(422);
    expect(JSON.stringify(u.body.error.details)).toContain('a-only');
    // The same name is free in B.
    expect((await t.http('POST', '/admin/roles', { key: adminB.key, json: { name: 'a-only', permissions: {} } })).status).toBe(201);
  });

  it('a system admin acts for a tenant with X-Tenant-Id', async () => {
    const r = await createRole(t, { name: 'by-system', permissions: readNotes }, { tenantId: b });
    const got = await t.http('GET', `/admin/roles/${r.id}`, { key: adminB.key });
    expect(got.body.tenant_id).toBe(b);
  });

  it('names are unique per tenant (409); unknown resources, fields and filters are 422 naming them', async () => {
    await createRole(t, { name: 'dup', permissions: {} }, { key: adminA.key });
    expect((await t.http('POST', '/admin/roles', { key: adminA.key, json: { name: 'dup', permissions: {} } })).status).toBe(409);
    const bad = await t.http('POST', '/admin/roles', {
      key: adminA.key,
      json: { name: 'bad', permissions: { nope: { read: true }, notes: { read: { fields: ['ghost'], rows: { level: { $where: 1 } } } } } },
    });
    expect(bad.status).toBe(422);
    const locs = bad.body.error.details.errors.map((e: { loc: string[] }) => e.loc.join('.'));
    expect(locs).toEqual(expect.arrayContaining(['body.permissions.nope', 'body.permissions.notes.read.fields', 'body.permissions.notes.read.rows']));
    expect((await t.http('POST', '/admin/roles', { key: adminA.key, json: { name: 'user', permissions: {} } })).status).toBe(422);
    expect((await t.http('GET', '/admin/roles?per_page=0', { key: adminA.key })).status).toBe(422);
  });

  it('includes must name roles of the tenant, and a cycle is refused with 422', async () => {
    const base = await createRole(t, { name: 'base', permissions: readNotes }, { key: adminA.key });
    await createRole(t, { name: 'mid', includes: ['base'], permissions: {} }, { key: adminA.key });
    expect((await t.http('POST', '/admin/roles', { key: adminA.key, json: { name: 'x', includes: ['ghost'], permissions: {} } })).status).toBe(422);
    const cyc = await t.http('PATCH', `/admin/roles/${base.id}`, { key: adminA.key, json: { includes: ['mid'] } });
    expect(cyc.status).toBe(422);
    expect(cyc.body.error.details.errors[0].type).toBe('cycle');
    // An included role cannot be deleted either.
    expect((await t.http('DELETE', `/admin/roles/${base.id}`, { key: adminA.key })).status).toBe(409);
  });

  it('a user holds a custom role through the user endpoints; a held role cannot be deleted (409)', async () => {
    const r = await createRole(t, { name: 'held', permissions: readNotes }, { key: adminA.key });
    const u = await userWith(t, a, ['held']);
    const me = await t.http('GET', '/auth/me', { key: u.key });
    expect(me.body.roles).toEqual(['held']);
    expect((await t.http('PATCH', `/admin/users/${u.userId}`, { key: adminA.key, json: { roles: ['held', 'ghost'] } })).status).toBe(422);
    expect((await t.http('DELETE', `/admin/roles/${r.id}`, { key: adminA.key })).status).toBe(409);
    await t.http('PATCH', `/admin/users/${u.userId}`, { key: adminA.key, json: { roles: ['user'] } });
    expect((await t.http('DELETE', `/admin/roles/${r.id}`, { key: adminA.key })).status).toBe(204);
  });

  it('a plain user may not manage roles (403)', async () => {
    const u = await userWith(t, a, ['user']);
    expect((await t.http('GET', '/admin/roles', { key: u.key })).status).toBe(403);
    expect((await t.http('POST', '/admin/roles', { key: u.key, json: { name: 'z', permissions: {} } })).status).toBe(403);
  });

  it('GraphQL declares the same permission: anonymous AUTH_REQUIRED, a plain user ACCESS_DENIED, an administrator served; nothing is written', async () => {
    const u = await userWith(t, a, ['user']);
    const create = 'mutation($i: JSON!) { createRole(input: $i) { name } }';
    const explain = 'query($u: String!) { explainAccess(user_id: $u, resource: "notes", action: "read") }';
    for (const [key, code] of [[null, 'AUTH_REQUIRED'], [u.key, 'ACCESS_DENIED']] as const) {
      const c = await t.gql(create, { i: { name: 'refused', permissions: readNotes } }, { key });
      expect(c.body.errors?.[0]?.extensions?.code).toBe(code);
      const l = await t.gql('{ roles { total } }', {}, { key });
      expect(l.body.errors?.[0]?.extensions?.code).toBe(code);
      const e = await t.gql(explain, { u: u.userId }, { key });
      expect(e.body.errors?.[0]?.extensions?.code).toBe(code);
    }
    const denied = await t.gql('{ roles { total } }', {}, { key: u.key });
    expect(denied.body.errors?.[0]?.message).toBe('Administrator role required');
    expect((await t.http('GET', '/admin/roles?per_page=100', { key: adminA.key })).body.items.map((x: { name: string }) => x.name)).not.toContain('refused');
    const ok = await t.gql(explain, { u: u.userId }, { key: adminA.key });
    expect(ok.body.errors).toBeUndefined();
    expect(ok.body.data.explainAccess).toMatchObject({ allowed: true });
  });

  it('role writes are events on the log and audited', async () => {
    const r = await createRole(t, { name: 'evented', permissions: readNotes }, { key: adminA.key });
    await t.http('PATCH', `/admin/roles/${r.id}`, { key: adminA.key, json: { description: 'd' } });
    await t.http('DELETE', `/admin/roles/${r.id}`, { key: adminA.key });
    const events = await t.app.db.conn.collection('events').find({ type: /^role\./, 'data.id': r.id }).sort({ committed_at: 1 }).toArray();
    expect(events.map((e) => e.type)).toEqual(['role.created', 'role.updated', 'role.deleted']);
    expect(String(events[0]!.tenant_id)).toBe(a);
  });

  it('GraphQL offers the same operations', async () => {
    const c = await t.gql<{ createRole: { id: string; name: string } }>('mutation($i: JSON!) { createRole(input: $i) { id name permissions } }', { i: { name: 'gql-role', permissions: readNotes } }, { key: adminA.key });
    expect(c.body.data?.createRole.name).toBe('gql-role');
    const id = c.body.data!.createRole.id;
    const l = await t.gql('{ roles(per_page: 50) { total items { name } } }', {}, { key: adminA.key });
    expect(l.body.data.roles.items.map((x: { name: string }) => x.name)).toContain('gql-role');
    const other = await t.gql('query($id: String!) { role(id: $id) { name } }', { id }, { key: adminB.key });
    expect(other.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const bad = await t.gql('mutation($i: JSON!) { createRole(input: $i) { id } }', { i: { name: 'gql-role', permissions: {} } }, { key: adminA.key });
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const u = await t.gql('mutation($id: String!, $i: JSON!) { updateRole(id: $id, input: $i) { description } }', { id, i: { description: 'g' } }, { key: adminA.key });
    expect(u.body.data.updateRole.description).toBe('g');
    const d = await t.gql('mutation($id: String!) { deleteRole(id: $id) }', { id }, { key: adminA.key });
    expect(d.body.data.deleteRole).toBe(true);
  });
});
