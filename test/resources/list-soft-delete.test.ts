/** Read path: soft-deleted documents are invisible on every read unless an admin asks for `include_deleted`. */
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { idsOf, items, qs, seed, seedProjects, type Doc } from './read-helpers.ts';

/** References projects without any cascade rule, so a referenced project can be deleted through the API. */
const notes = defineResource({
  name: 'notes',
  schema: new Schema({ text: { type: String, required: true }, project_id: { type: Schema.Types.ObjectId, ref: 'projects', default: null } }),
});

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let alice: User; // plain user, tenant A
let adminA: User; // tenant admin, tenant A
let carol: User; // plain user, tenant B
let live: Doc[];
let dead: Doc[];
let carolDead: Doc;
let note: Doc;

const get = (path: string, params: Record<string, any> = {}, key: string = alice.key, headers?: Record<string, string>) =>
  t.http('GET', `${path}${qs(params)}`, { key, ...(headers ? { headers } : {}) });
const del = async (path: string, key: string) => {
  const res = await t.http('DELETE', path, { key, headers: { 'If-Match': '"1"' } });
  expect(res.status).toBe(204);
};
const names = (docs: Doc[]) => docs.map((d) => d.name).sort();

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, notes] })] });
  alice = await createTenantUser(t);
  adminA = await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'] });
  carol = await createTenantUser(t);
  live = await seedProjects(t, alice.key, [{ name: 'Alpha live', budget: 1 }, { name: 'Beta live', budget: 2 }]);
  dead = await seedProjects(t, alice.key, [{ name: 'Alpha dead', budget: 1 }, { name: 'Gamma dead', budget: 3 }]);
  [carolDead] = await seedProjects(t, carol.key, [{ name: 'Carol dead' }]) as [Doc];
  await seedProjects(t, carol.key, [{ name: 'Carol live' }]);
  [note] = (await seed(t, '/notes', alice.key, [{ text: 'n', project_id: dead[0]!._id }])) as [Doc];
  for (const d of dead) await del(`/projects/${d._id}`, alice.key);
  await del(`/projects/${carolDead._id}`, carol.key);
});
afterAll(() => t?.close());

describe('soft-deleted documents are absent', () => {
  it('from the offset list and its counts', async () => {
    const res = await get('/projects');
    expect(names(items(res))).toEqual(['Alpha live', 'Beta live']);
    expect(res.headers.get('x-total-count')).toBe('2');
    expect(res.body).toMatchObject({ total: 2, total_pages: 1 });
  });

  it('from the cursor list (walking page by page)', async () => {
    const seen: Doc[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const res = await get('/projects', { limit: 1, ...(cursor ? { cursor } : {}) });
      seen.push(...items(res));
      if (!res.body.cursors.has_next) break;
      cursor = res.body.cursors.next;
    }
    expect(names(seen)).toEqual(['Alpha live', 'Beta live']);
  });

  it('from get-one (404)', async () => {
    for (const d of dead) {
      const res = await get(`/projects/${d._id}`);
      expect(res.status).toBe(404);
      expect(envelope(res)).toMatchObject({ code: 'NOT_FOUND', details: { resource: 'projects', item_id: d._id } });
    }
  });

  it('from q search', async () => {
    expect(names(items(await get('/projects', { q: 'alpha' })))).toEqual(['Alpha live']);
    expect(names(items(await get('/projects', { q: 'gamma' })))).toEqual([]);
  });

  it('from filters that name is_deleted (the scope wins)', async () => {
    expect(items(await get('/projects', { is_deleted: 'true' }))).toEqual([]);
    expect(items(await get('/projects', { where: { is_deleted: true } }))).toEqual([]);
    expect(items(await get('/projects', { where: { $or: [{ is_deleted: true }, { is_deleted: false }] } })).length).toBe(2);
    const res = await get('/projects', { budget: '1' });
    expect(names(items(res))).toEqual(['Alpha live']);
    expect(res.headers.get('x-total-count')).toBe('1');
  });

  it('from populate (null)', async () => {
    const res = await get(`/notes/${note._id}`, { populate: 'project_id' });
    expect(res.status).toBe(200);
    expect(res.body.project_id).toBeNull();
    expect(items(await get('/notes', { populate: 'project_id' }))[0]!.project_id).toBeNull();
    expect(items(await get('/notes', { populate: 'project_id', limit: 5 }))[0]!.project_id).toBeNull();
  });

  it('from GraphQL list, count and get-one', async () => {
    const res = await t.gql('{ projects { total items { name } } }', {}, { key: alice.key });
    expect(res.body.data.projects.total).toBe(2);
    expect(names(res.body.data.projects.items)).toEqual(['Alpha live', 'Beta live']);
    const one = await t.gql('query($id: ID!) { project(id: $id) { name } }', { id: dead[0]!._id }, { key: alice.key });
    expect(one.body.data?.project ?? null).toBeNull();
    expect(one.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });
});

describe('include_deleted', () => {
  it('an admin of the tenant sees them, counted, in both modes and with q', async () => {
    const res = await get('/projects', { include_deleted: 'true' }, adminA.key);
    expect(names(items(res))).toEqual(['Alpha dead', 'Alpha live', 'Beta live', 'Gamma dead']);
    expect(res.headers.get('x-total-count')).toBe('4');
    expect(res.body.total).toBe(4);
    const onlyDead = await get('/projects', { include_deleted: 'true', is_deleted: 'true' }, adminA.key);
    expect(idsOf(items(onlyDead)).sort()).toEqual(idsOf(dead).sort());
    for (const d of items(onlyDead)) expect(d).toMatchObject({ is_deleted: true, deleted_by: alice.userId, deleted_at: expect.any(String) });
    const cursor = await get('/projects', { include_deleted: '1', limit: 10 }, adminA.key);
    expect(items(cursor)).toHaveLength(4);
    expect(names(items(await get('/projects', { include_deleted: 'true', q: 'alpha' }, adminA.key)))).toEqual(['Alpha dead', 'Alpha live']);
  });

  it('an admin gets a soft-deleted document by id with include_deleted, 404 without', async () => {
    expect((await get(`/projects/${dead[0]!._id}`, {}, adminA.key)).status).toBe(404);
    const res = await get(`/projects/${dead[0]!._id}`, { include_deleted: 'true' }, adminA.key);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Alpha dead', is_deleted: true });
    expect(res.headers.get('etag')).toBe('"2"');
  });

  it('a tenant admin never sees another tenant\'s deleted documents', async () => {
    const res = await get('/projects', { include_deleted: 'true' }, adminA.key);
    expect(JSON.stringify(res.body)).not.toContain('Carol');
    expect((await get(`/projects/${carolDead._id}`, { include_deleted: 'true' }, adminA.key)).status).toBe(404);
  });

  it('the system admin sees every tenant\'s deleted documents, or one tenant\'s with X-Tenant-Id', async () => {
    const all = await get('/projects', { include_deleted: 'true', is_deleted: 'true' }, ADMIN_KEY);
    expect(names(items(all))).toEqual(['Alpha dead', 'Carol dead', 'Gamma dead']);
    const one = await get('/projects', { include_deleted: 'true', is_deleted: 'true' }, ADMIN_KEY, { 'X-Tenant-Id': carol.tenantId });
    expect(names(items(one))).toEqual(['Carol dead']);
    expect(one.headers.get('x-total-count')).toBe('1');
  });

  it.each([
    ['offset list', '/projects', {}],
    ['cursor list', '/projects', { limit: 5 }],
    ['get-one of a live document', 'LIVE', {}],
    ['get-one of a deleted document', 'DEAD', {}],
  ])('a plain user asking for include_deleted gets 403 ACCESS_DENIED: %s', async (_l, path, extra) => {
    const p = path === 'LIVE' ? `/projects/${live[0]!._id}` : path === 'DEAD' ? `/projects/${dead[0]!._id}` : path;
    const res = await get(p, { include_deleted: 'true', ...extra });
    expect(res.status).toBe(403);
    expect(envelope(res).code).toBe('ACCESS_DENIED');
  });

  it('include_deleted=false is allowed for anybody and changes nothing', async () => {
    const res = await get('/projects', { include_deleted: 'false' });
    expect(names(items(res))).toEqual(['Alpha live', 'Beta live']);
  });

  it('GraphQL projects(include_deleted: true): admin sees them and their count, user is denied', async () => {
    const q = '{ projects(include_deleted: true, sort: "name") { total items { name is_deleted } } }';
    const admin = await t.gql(q, {}, { key: adminA.key });
    expect(admin.body.errors).toBeUndefined();
    expect(admin.body.data.projects.total).toBe(4);
    expect(admin.body.data.projects.items).toEqual([
      { name: 'Alpha dead', is_deleted: true },
      { name: 'Alpha live', is_deleted: false },
      { name: 'Beta live', is_deleted: false },
      { name: 'Gamma dead', is_deleted: true },
    ]);
    const user = await t.gql(q, {}, { key: alice.key });
    expect(user.body.data ?? null).toBeNull();
    expect(user.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    const falseFlag = await t.gql('{ projects(include_deleted: false) { total } }', {}, { key: alice.key });
    expect(falseFlag.body.data.projects.total).toBe(2);
  });

  it('GraphQL project(id, include_deleted: true): admin only', async () => {
    const q = 'query($id: ID!) { project(id: $id, include_deleted: true) { name is_deleted } }';
    const admin = await t.gql(q, { id: dead[0]!._id }, { key: adminA.key });
    expect(admin.body.data.project).toEqual({ name: 'Alpha dead', is_deleted: true });
    const user = await t.gql(q, { id: dead[0]!._id }, { key: alice.key });
    expect(user.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
  });
});
