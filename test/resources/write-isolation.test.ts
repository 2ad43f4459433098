/**
 * Write path, tenant isolation and guards over REST: another tenant's documents cannot be changed
 * through any write endpoint (404, document unchanged), created documents land in the caller's
 * tenant (a system administrator's `X-Tenant-Id` picks one), references never cross tenants,
 * feature and attribute guards on writes, and MULTI_TENANT_ENABLED=false.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { col, expectNoWrite, ifMatch, raw, rowCodes } from './write-helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

const regional = defineResource({
  name: 'regional_docs',
  schema: new Schema({ name: { type: String, required: true }, region: { type: String, default: null } }),
  guards: { attributes: [{ attribute: 'region', field: 'region' }] },
  allow_bulk_create: true,
  allow_bulk_delete: true,
});

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let alice: User;
let bob: User;
let bobAdmin: User;
let noTasks: User;
let eu: User;
let us: User;
let both: User;
let noRegion: User;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource, regional] })] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  // Bob is Alice's second membership: one person, two tenants.
  bob = await addMembership(t, alice.userId, { features: ['tasks'] });
  bobAdmin = await createTenantUser(t, { tenantId: bob.tenantId, roles: ['admin'], features: ['tasks'] });
  noTasks = await createTenantUser(t, { tenantId: alice.tenantId });
  eu = await createTenantUser(t, { tenantId: alice.tenantId, attributes: { region: 'eu' } });
  us = await createTenantUser(t, { tenantId: alice.tenantId, attributes: { region: 'us' } });
  both = await createTenantUser(t, { tenantId: alice.tenantId, attributes: { region: ['eu', 'us'] } });
  noRegion = await createTenantUser(t, { tenantId: alice.tenantId });
});
afterAll(() => t?.close());

const post = async (path: string, json: Record<string, unknown>, key: string | undefined, headers: Record<string, string> = {}) => {
  const res = await t.http('POST', path, { key, json, headers });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
};

describe('another tenant\'s documents cannot be written', () => {
  it('PATCH, PUT and DELETE by tenant B (user and tenant admin) of tenant A\'s project: 404, unchanged', async () => {
    const p = await post('/projects', { name: 'A-only', budget: 1 }, alice.key);
    await expectNoWrite(t, ['projects'], async () => {
      for (const key of [bob.key, bobAdmin.key]) {
        for (const [method, json] of [['PATCH', { budget: 666 }], ['PUT', { name: 'pwned' }], ['DELETE', undefined]] as const) {
          const res = await t.http(method, `/projects/${p._id}`, { key, json, headers: ifMatch('"1"') });
          expect(res.status, method).toBe(404);
          expect(envelope(res)).toMatchObject({ code: 'NOT_FOUND', details: { resource: 'projects', item_id: p._id } });
        }
      }
    });
    expect(await raw(t, 'projects', p._id)).toMatchObject({ name: 'A-only', budget: 1, version: 1, is_deleted: false });
  });

  it('the same for tasks', async () => {
    const p = await post('/projects', { name: 'A-p' }, alice.key);
    const task = await post('/tasks', { project_id: p._id, title: 'A-t' }, alice.key);
    const bobsProject = await post('/projects', { name: 'B-p' }, bob.key);
    await expectNoWrite(t, ['tasks'], async () => {
      const a = await t.http('PATCH', `/tasks/${task._id}`, { key: bob.key, json: { done: true }, headers: ifMatch('"1"') });
      const b = await t.http('PUT', `/tasks/${task._id}`, { key: bob.key, json: { project_id: bobsProject._id, title: 'moved' }, headers: ifMatch('"1"') });
      const c = await t.http('DELETE', `/tasks/${task._id}`, { key: bob.key, headers: ifMatch('"1"') });
      expect([a.status, b.status, c.status]).toEqual([404, 404, 404]);
    });
  });

  it('bulk delete of tenant A\'s ids by tenant B: 409 with a NOT_FOUND row each, nothing deleted', async () => {
    const a1 = await post('/projects', { name: 'A1' }, alice.key);
    const a2 = await post('/projects', { name: 'A2' }, alice.key);
    const res = await expectNoWrite(t, ['projects'], () =>
      t.http('DELETE', '/projects/bulk', { key: bob.key, json: { items: [{ id: a1._id, etag: '"1"' }, { id: a2._id, etag: '"1"' }] } }),
    );
    expect(res.status).toBe(409);
    const e = envelope(res);
    expect(e.code).toBe('CONFLICT');
    expect(rowCodes(e.details.errors as any)).toEqual(['0:NOT_FOUND', '1:NOT_FOUND']);
  });

  it('mixed bulk delete by B: only B\'s own row is deleted (207), A\'s row is NOT_FOUND', async () => {
    const a = await post('/projects', { name: 'A-mixed' }, alice.key);
    const b = await post('/projects', { name: 'B-mixed' }, bob.key);
    const res = await t.http('DELETE', '/projects/bulk', { key: bob.key, json: { items: [{ id: a._id, etag: '"1"' }, { id: b._id, etag: '"1"' }] } });
    expect(res.status).toBe(207);
    expect(res.body.deleted).toEqual([b._id]);
    expect(rowCodes(res.body.errors)).toEqual(['0:NOT_FOUND']);
    expect(await raw(t, 'projects', a._id)).toMatchObject({ is_deleted: false, version: 1 });
  });
});

describe('created documents belong to the caller\'s tenant', () => {
  it('single and bulk create land in the caller\'s tenant; X-Tenant-Id from a non-system caller is ignored', async () => {
    const one = await post('/projects', { name: 'B-own' }, bob.key, { 'X-Tenant-Id': alice.tenantId });
    expect(one.tenant_id).toBe(bob.tenantId);
    const bulk = await t.http('POST', '/projects/bulk', { key: bobAdmin.key, json: { items: [{ name: 'B-bulk' }] }, headers: { 'X-Tenant-Id': alice.tenantId } });
    expect(bulk.status).toBe(201);
    expect(bulk.body.items[0].tenant_id).toBe(bob.tenantId);
    for (const id of [one._id, bulk.body.items[0]._id]) {
      expect(String((await raw(t, 'projects', id))!.tenant_id)).toBe(bob.tenantId);
      expect((await t.http('GET', `/projects/${id}`, { key: alice.key })).status).toBe(404);
    }
  });

  it('a tenant_id in the body is rejected, never honoured', async () => {
    const res = await expectNoWrite(t, ['projects'], () => t.http('POST', '/projects', { key: bob.key, json: { name: 'sneaky', tenant_id: alice.tenantId } }));
    expect(res.status).toBe(422);
    expect((envelope(res).details.errors as any[]).map((x) => x.loc)).toContainEqual(['body', 'tenant_id']);
  });

  it('a system administrator with X-Tenant-Id creates into that tenant; without it into its own', async () => {
    const me = await t.http('GET', '/auth/me');
    const adminTenant = me.body.tenant_id as string;
    expect(adminTenant).not.toBe(alice.tenantId);

    const inA = await post('/projects', { name: 'admin-in-A' }, undefined, { 'X-Tenant-Id': alice.tenantId });
    expect(inA.tenant_id).toBe(alice.tenantId);
    expect(inA.created_by).toBe(me.body.id);
    expect((await t.http('GET', `/projects/${inA._id}`, { key: alice.key })).status).toBe(200);

    const bulk = await t.http('POST', '/projects/bulk', { json: { items: [{ name: 'admin-bulk-A' }] }, headers: { 'X-Tenant-Id': alice.tenantId } });
    expect(bulk.status).toBe(201);
    expect(bulk.body.items[0].tenant_id).toBe(alice.tenantId);

    const own = await post('/projects', { name: 'admin-own' }, undefined);
    expect(own.tenant_id).toBe(adminTenant);
    expect(String((await raw(t, 'projects', own._id))!.tenant_id)).toBe(adminTenant);
    for (const u of [alice, bob]) expect((await t.http('GET', `/projects/${own._id}`, { key: u.key })).status).toBe(404);
  });

  it('a system administrator scoped to tenant B cannot write tenant A\'s documents; scoped to A it can', async () => {
    const p = await post('/projects', { name: 'A-admin-target' }, alice.key);
    const asB = await expectNoWrite(t, ['projects'], () => t.http('PATCH', `/projects/${p._id}`, { json: { budget: 1 }, headers: { ...ifMatch('"1"'), 'X-Tenant-Id': bob.tenantId } }));
    expect(asB.status).toBe(404);
    const asA = await t.http('PATCH', `/projects/${p._id}`, { json: { budget: 1 }, headers: { ...ifMatch('"1"'), 'X-Tenant-Id': alice.tenantId } });
    expect(asA.status).toBe(200);
    expect(asA.body.tenant_id).toBe(alice.tenantId);
  });

  it('references never cross tenants, whoever writes: a task can only point at a project of its own tenant', async () => {
    const aProject = await post('/projects', { name: 'A-ref' }, alice.key);
    const bProject = await post('/projects', { name: 'B-ref' }, bob.key);
    const bTask = await post('/tasks', { project_id: bProject._id, title: 'B-task' }, bob.key);
    const attempts = [
      // System administrator acting in tenant B, pointing at A's project.
      () => t.http('POST', '/tasks', { json: { project_id: aProject._id, title: 'x' }, headers: { 'X-Tenant-Id': bob.tenantId } }),
      // System administrator without X-Tenant-Id: the task would land in its own tenant.
      () => t.http('POST', '/tasks', { json: { project_id: aProject._id, title: 'x' } }),
      // System administrator without X-Tenant-Id moving B's task onto A's project.
      () => t.http('PATCH', `/tasks/${bTask._id}`, { json: { project_id: aProject._id }, headers: ifMatch('"1"') }),
      () => t.http('PUT', `/tasks/${bTask._id}`, { json: { project_id: aProject._id, title: 'x' }, headers: ifMatch('"1"') }),
    ];
    for (const [i, attempt] of attempts.entries()) {
      const res = await expectNoWrite(t, ['tasks'], attempt);
      expect(res.status, `attempt ${i}`).toBe(422);
      expect(envelope(res).details.errors).toEqual([expect.objectContaining({ loc: ['body', 'project_id'], type: 'reference_not_found' })]);
    }
    // ...so A's project never acquires a hidden referrer and stays deletable.
    expect((await t.http('DELETE', `/projects/${aProject._id}`, { key: alice.key, headers: ifMatch('"1"') })).status).toBe(204);
  });
});

describe('feature guard on writes (/tasks needs `tasks`)', () => {
  it('create, PATCH, PUT and DELETE without the feature: 403 ACCESS_DENIED with details.feature, nothing written', async () => {
    const p = await post('/projects', { name: 'for tasks' }, alice.key);
    const task = await post('/tasks', { project_id: p._id, title: 'guarded' }, alice.key);
    await expectNoWrite(t, ['tasks'], async () => {
      const calls = [
        t.http('POST', '/tasks', { key: noTasks.key, json: { project_id: p._id, title: 'nope' } }),
        t.http('PATCH', `/tasks/${task._id}`, { key: noTasks.key, json: { done: true }, headers: ifMatch('"1"') }),
        t.http('PUT', `/tasks/${task._id}`, { key: noTasks.key, json: { project_id: p._id, title: 'nope' }, headers: ifMatch('"1"') }),
        t.http('DELETE', `/tasks/${task._id}`, { key: noTasks.key, headers: ifMatch('"1"') }),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status).toBe(403);
        expect(envelope(res)).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'tasks' } });
      }
    });
  });
});

describe('attribute guard {attribute: region, field: region}', () => {
  it('creating a document of another region: 403, nothing written; of one\'s own region: 201', async () => {
    await expectNoWrite(t, ['regional_docs'], async () => {
      const res = await t.http('POST', '/regional_docs', { key: eu.key, json: { name: 'x', region: 'us' } });
      expect(res.status).toBe(403);
      expect(envelope(res).code).toBe('ACCESS_DENIED');
      const bulk = await t.http('POST', '/regional_docs/bulk', { key: eu.key, json: { items: [{ name: 'y', region: 'us' }] } });
      expect(bulk.status).toBeGreaterThanOrEqual(400);
    });
    const ok = await post('/regional_docs', { name: 'eu doc', region: 'eu' }, eu.key);
    expect(ok.region).toBe('eu');
  });

  it('a multi-valued attribute allows each of its values; a caller without the attribute is refused', async () => {
    expect((await post('/regional_docs', { name: 'b-eu', region: 'eu' }, both.key)).region).toBe('eu');
    expect((await post('/regional_docs', { name: 'b-us', region: 'us' }, both.key)).region).toBe('us');
    const res = await expectNoWrite(t, ['regional_docs'], () => t.http('POST', '/regional_docs', { key: noRegion.key, json: { name: 'n', region: 'eu' } }));
    expect(res.status).toBe(403);
    expect(envelope(res)).toMatchObject({ code: 'ACCESS_DENIED', details: { attribute: 'region' } });
  });

  it('PATCH, PUT, DELETE and bulk delete of another region\'s document: 404, unchanged', async () => {
    const doc = await post('/regional_docs', { name: 'eu only', region: 'eu' }, eu.key);
    await expectNoWrite(t, ['regional_docs'], async () => {
      const a = await t.http('PATCH', `/regional_docs/${doc._id}`, { key: us.key, json: { name: 'mine now' }, headers: ifMatch('"1"') });
      const b = await t.http('PUT', `/regional_docs/${doc._id}`, { key: us.key, json: { name: 'mine now', region: 'us' }, headers: ifMatch('"1"') });
      const c = await t.http('DELETE', `/regional_docs/${doc._id}`, { key: us.key, headers: ifMatch('"1"') });
      expect([a.status, b.status, c.status]).toEqual([404, 404, 404]);
      const bulk = await t.http('DELETE', '/regional_docs/bulk', { key: us.key, json: { items: [{ id: doc._id, etag: '"1"' }] } });
      expect(bulk.status).toBe(409);
      expect(rowCodes(envelope(bulk).details.errors as any)).toEqual(['0:NOT_FOUND']);
    });
  });

  it('moving one\'s own document to another region: 403, unchanged', async () => {
    const doc = await post('/regional_docs', { name: 'stay', region: 'eu' }, eu.key);
    await expectNoWrite(t, ['regional_docs'], async () => {
      const a = await t.http('PATCH', `/regional_docs/${doc._id}`, { key: eu.key, json: { region: 'us' }, headers: ifMatch('"1"') });
      expect(a.status).toBe(403);
      const b = await t.http('PUT', `/regional_docs/${doc._id}`, { key: eu.key, json: { name: 'stay', region: 'us' }, headers: ifMatch('"1"') });
      expect(b.status).toBe(403);
    });
    const ok = await t.http('PATCH', `/regional_docs/${doc._id}`, { key: eu.key, json: { name: 'renamed' }, headers: ifMatch('"1"') });
    expect(ok.status).toBe(200);
  });

  it('a system administrator is not restricted by attribute rules', async () => {
    const doc = await post('/regional_docs', { name: 'any', region: 'apac' }, undefined, { 'X-Tenant-Id': alice.tenantId });
    expect(doc.region).toBe('apac');
  });
});

describe('MULTI_TENANT_ENABLED=false', () => {
  let s: TestApp;
  let a: User;
  let b: User;
  beforeAll(async () => {
    s = await buildTestApp({ plugins: [resourcesPlugin], config: { MULTI_TENANT_ENABLED: 'false' } });
    a = await createTenantUser(s, { features: ['tasks'] });
    b = await createTenantUser(s, { features: ['tasks'] });
  });
  afterAll(() => s?.close());

  it('no tenant isolation: users of different tenants write each other\'s documents', async () => {
    const created = await s.http('POST', '/projects', { key: a.key, json: { name: 'shared' } });
    expect(created.status).toBe(201);
    expect(created.body.tenant_id).toBe(a.tenantId);
    const patched = await s.http('PATCH', `/projects/${created.body._id}`, { key: b.key, json: { budget: 5 }, headers: ifMatch('"1"') });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ budget: 5, updated_by: b.userId, tenant_id: a.tenantId });
    const del = await s.http('DELETE', `/projects/${created.body._id}`, { key: b.key, headers: ifMatch('"2"') });
    expect(del.status).toBe(204);
  });

  it('references and cascade rules work across what would be tenants', async () => {
    const p = await s.http('POST', '/projects', { key: a.key, json: { name: 'parent' } });
    const task = await s.http('POST', '/tasks', { key: b.key, json: { project_id: p.body._id, title: 'child' } });
    expect(task.status).toBe(201);
    const before = await s.app.db.conn.collection('projects').findOne({ name: 'parent' });
    const res = await s.http('DELETE', `/projects/${p.body._id}`, { key: a.key, headers: ifMatch('"1"') });
    expect(res.status).toBe(422);
    expect(envelope(res)).toMatchObject({ code: 'CASCADE_DENY', details: { referenced_by: 'tasks', count: 1 } });
    expect(await s.app.db.conn.collection('projects').findOne({ name: 'parent' })).toEqual(before);
  });
});

describe('fixture sanity', () => {
  it('the shared collections are populated by several tenants', async () => {
    const tenants = await col(t, 'projects').distinct('tenant_id');
    expect(tenants.length).toBeGreaterThanOrEqual(3);
  });
});
