/**
 * Read path, list parameter `populate` ("eager loading of related documents, both modes"):
 * related documents are read through the related resource's own scope (tenant, guards, soft
 * delete, private fields).
 */
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { collection, items, oid, qs, seed, seedProjects, type Doc } from './read-helpers.ts';

/** Guarded by feature `vault`, with a private field. */
const vaultItems = defineResource({
  name: 'vault_items',
  schema: new Schema({ name: { type: String, required: true }, secret: { type: String, private: true, default: null } }),
  guards: { features: ['vault'] },
});
/** Unguarded, references the guarded resource. */
const vaultRefs = defineResource({
  name: 'vault_refs',
  schema: new Schema({ label: { type: String, required: true }, item_id: { type: Schema.Types.ObjectId, ref: 'vault_items', default: null } }),
});
/** Six relation fields: one more than the populate cap (5). */
const manyRefs = defineResource({
  name: 'many_refs',
  schema: new Schema(Object.fromEntries(['r1', 'r2', 'r3', 'r4', 'r5', 'r6'].map((r) => [r, { type: Schema.Types.ObjectId, ref: 'projects', default: null }]))),
});

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let alice: User; // tenant A, features tasks + vault
let bob: User; // tenant A, feature tasks only
let carol: User; // tenant B
let P1: Doc, P2: Doc, PD: Doc, PC: Doc;
let T1: Doc, T3: Doc, T4: Doc;
let V: Doc, R: Doc;

const get = (path: string, params: Record<string, string | undefined>, user: User = alice) => t.http('GET', `${path}${qs(params)}`, { key: user.key });

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, vaultItems, vaultRefs, manyRefs] })] });
  alice = await createTenantUser(t, { features: ['tasks', 'vault'] });
  bob = await createTenantUser(t, { tenantId: alice.tenantId, features: ['tasks'] });
  carol = await createTenantUser(t, { features: ['tasks'] });

  [P1, P2, PD] = (await seedProjects(t, alice.key, [{ name: 'One', budget: 1 }, { name: 'Two', tags: ['x'] }, { name: 'Doomed' }])) as [Doc, Doc, Doc];
  [PC] = (await seedProjects(t, carol.key, [{ name: 'Carol project' }])) as [Doc];
  [T1, , T3] = (await seed(t, '/tasks', alice.key, [
    { project_id: P1._id, title: 't1' },
    { project_id: P2._id, title: 't2' },
    { project_id: PD._id, title: 't3' },
    { project_id: P1._id, title: 't5' },
  ])) as [Doc, Doc, Doc, Doc];
  // SETUP: the API refuses to soft-delete a project with live tasks (cascade deny), so the state
  // "task whose project was soft-deleted" is produced directly.
  await collection(t, 'projects').updateOne({ _id: oid(PD._id) }, { $set: { is_deleted: true, deleted_at: new Date() } });
  // SETUP: a task of tenant A pointing at tenant B's project (the API refuses such a reference).
  const now = new Date();
  const crafted = await collection(t, 'tasks').insertOne({
    project_id: oid(PC._id), title: 't4', done: false, priority: null, due_at: null, tags: [],
    tenant_id: oid(alice.tenantId), created_at: now, updated_at: now, created_by: null, updated_by: null,
    is_deleted: false, deleted_at: null, deleted_by: null, version: 1,
  });
  T4 = { _id: String(crafted.insertedId), title: 't4' };

  [V] = (await seed(t, '/vault_items', alice.key, [{ name: 'gold' }])) as [Doc];
  await collection(t, 'vault_items').updateOne({ _id: oid(V._id) }, { $set: { secret: 'combination-1234' } });
  [R] = (await seed(t, '/vault_refs', alice.key, [{ label: 'ref', item_id: V._id }])) as [Doc];
});
afterAll(() => t?.close());

/** What each task's project_id must populate to, keyed by title. */
async function expectedProjects(): Promise<Record<string, Doc | null>> {
  const one = (await get(`/projects/${P1._id}`, {})).body;
  const two = (await get(`/projects/${P2._id}`, {})).body;
  return { t1: one, t2: two, t3: null, t4: null, t5: one };
}

describe('populate=project_id on tasks', () => {
  it('offset mode replaces the id with the project document (null when soft-deleted or in another tenant)', async () => {
    const exp = await expectedProjects();
    const res = await get('/tasks', { populate: 'project_id', sort: 'title' });
    const got = items(res);
    expect(got.map((d) => d.title)).toEqual(['t1', 't2', 't3', 't4', 't5']);
    for (const d of got) expect(d.project_id).toEqual(exp[d.title]);
    expect(JSON.stringify(got)).not.toContain('Carol project');
  });

  it('cursor mode (walking two pages) populates the same way', async () => {
    const exp = await expectedProjects();
    const p1 = await get('/tasks', { populate: 'project_id', sort: 'title', limit: '3' });
    const p2 = await get('/tasks', { populate: 'project_id', sort: 'title', limit: '3', cursor: p1.body.cursors.next });
    const got = [...items(p1), ...items(p2)];
    expect(got.map((d) => d.title)).toEqual(['t1', 't2', 't3', 't4', 't5']);
    for (const d of got) expect(d.project_id).toEqual(exp[d.title]);
    expect(p2.body.cursors.has_next).toBe(false);
  });

  it('cursor mode: populate works with direction=prev', async () => {
    const exp = await expectedProjects();
    const p1 = await get('/tasks', { sort: 'title', limit: '3' });
    const p2 = await get('/tasks', { sort: 'title', limit: '3', cursor: p1.body.cursors.next });
    const back = await get('/tasks', { populate: 'project_id', sort: 'title', limit: '3', cursor: p2.body.cursors.prev, direction: 'prev' });
    expect(items(back).map((d) => d.title)).toEqual(['t1', 't2', 't3']);
    for (const d of items(back)) expect(d.project_id).toEqual(exp[d.title]);
  });

  it.each([
    ['live project', () => T1, 't1'],
    ['soft-deleted project', () => T3, 't3'],
    ['project of another tenant', () => T4, 't4'],
  ] as const)('get-one: %s', async (_l, task, title) => {
    const exp = await expectedProjects();
    const res = await get(`/tasks/${task()._id}`, { populate: 'project_id' });
    expect(res.status).toBe(200);
    expect(res.body.title).toBe(title);
    expect(res.body.project_id).toEqual(exp[title]);
  });

  it('without populate the id stays an id', async () => {
    const res = await get(`/tasks/${T1._id}`, {});
    expect(res.body.project_id).toBe(P1._id);
    const listed = items(await get('/tasks', { sort: 'title' }));
    expect(listed.map((d) => d.project_id)).toEqual([P1._id, P2._id, PD._id, PC._id, P1._id]);
  });

  it('a populated project is filtered, not just hidden: the other tenant\'s project is unreachable by the populated id', async () => {
    const res = await get(`/projects/${PC._id}`, {});
    expect(res.status).toBe(404);
  });

  it('GraphQL: the relation field reads through the same scope', async () => {
    const res = await t.gql('{ tasks(sort: "title") { items { title project_id project { _id name } } } }', {}, { key: alice.key });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.tasks.items).toEqual([
      { title: 't1', project_id: P1._id, project: { _id: P1._id, name: 'One' } },
      { title: 't2', project_id: P2._id, project: { _id: P2._id, name: 'Two' } },
      { title: 't3', project_id: PD._id, project: null },
      { title: 't4', project_id: PC._id, project: null },
      { title: 't5', project_id: P1._id, project: { _id: P1._id, name: 'One' } },
    ]);
  });
});

describe('populate errors', () => {
  it.each<[string, string, string]>([
    ['a plain field', '/tasks', 'title'],
    ['an unknown field', '/tasks', 'nope'],
    ['relation traversal', '/tasks', 'project_id.name'],
    ['a field of a resource without relations', '/projects', 'name'],
    ['one bad among good', '/tasks', 'project_id,title'],
  ])('400 when not populatable: %s', async (_l, path, populate) => {
    const res = await get(path, { populate });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });

  it('400 when not populatable on get-one and in cursor mode', async () => {
    expect((await get(`/tasks/${T1._id}`, { populate: 'title' })).status).toBe(400);
    expect((await get('/tasks', { populate: 'title', limit: '2' })).status).toBe(400);
  });

  it('too many populate paths → 400; the cap itself is accepted', async () => {
    const [m] = await seed(t, '/many_refs', alice.key, [{ r1: P1._id, r6: P2._id }]);
    const over = await get('/many_refs', { populate: 'r1,r2,r3,r4,r5,r6' });
    expect(over.status).toBe(400);
    expect(envelope(over).code).toBe('BAD_REQUEST');
    const ok = await get('/many_refs', { populate: 'r1,r2,r3,r4,r5' });
    const [d] = items(ok);
    expect(d!._id).toBe(m!._id);
    expect(d!.r1).toMatchObject({ _id: P1._id, name: 'One' });
    expect(d!.r2).toBeNull();
    expect(d!.r6).toBe(P2._id);
  });
});

describe('populate honours the related resource\'s guards and private fields', () => {
  it.each([
    ['offset list', '/vault_refs', {}],
    ['cursor list', '/vault_refs', { limit: '5' }],
    ['get-one', 'ONE', {}],
  ] as const)('403 ACCESS_DENIED with details.feature when the caller lacks the related feature: %s', async (_l, path, extra) => {
    const p = path === 'ONE' ? `/vault_refs/${R._id}` : path;
    const res = await get(p, { populate: 'item_id', ...extra }, bob);
    expect(res.status).toBe(403);
    expect(envelope(res)).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'vault' } });
    // Without populate the same caller reads the referencing resource.
    const plain = await get(p, { ...extra }, bob);
    expect(plain.status).toBe(200);
  });

  it.each([
    ['offset list', '/vault_refs', {}],
    ['cursor list', '/vault_refs', { limit: '5' }],
    ['get-one', 'ONE', {}],
  ] as const)('a caller with the feature gets the related document without its private fields: %s', async (_l, path, extra) => {
    const p = path === 'ONE' ? `/vault_refs/${R._id}` : path;
    const res = await get(p, { populate: 'item_id', ...extra });
    expect(res.status).toBe(200);
    const doc = path === 'ONE' ? res.body : items(res)[0];
    expect(doc.item_id).toMatchObject({ _id: V._id, name: 'gold' });
    expect(doc.item_id).not.toHaveProperty('secret');
    expect(JSON.stringify(res.body)).not.toContain('combination-1234');
  });

  it('GraphQL: the relation field of a guarded resource is ACCESS_DENIED for a caller without the feature', async () => {
    const res = await t.gql('{ vaultRefs { items { label item { name } } } }', {}, { key: bob.key });
    expect(res.body.errors?.[0]?.extensions).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'vault' } });
    expect(JSON.stringify(res.body)).not.toContain('gold');
    const ok = await t.gql('{ vaultRefs { items { label item { _id name } } } }', {}, { key: alice.key });
    expect(ok.body.data.vaultRefs.items).toEqual([{ label: 'ref', item: { _id: V._id, name: 'gold' } }]);
  });
});
