/**
 * Read-side tenant isolation: on every read endpoint, REST and GraphQL, a user sees only the
 * documents of its own tenant; a system admin sees every tenant or the one named in X-Tenant-Id;
 * with MULTI_TENANT_ENABLED=false nothing is tenant-filtered. Tenant C's user is a second membership
 * of tenant A's user's person: each membership sees only its own tenant, as two people do.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { idsOf, items, qs, seed, seedProjects, type Doc } from './read-helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

type User = { key: string; tenantId: string; userId: string };
type Side = { user: User; projects: Doc[]; tasks: Doc[] };

let t: TestApp;
const side: Record<'A' | 'B' | 'C', Side> = {} as never;

async function seedTenant(user: User, label: string): Promise<Side> {
  const projects = await seedProjects(t, user.key, [
    { name: `Shared alpha ${label}`, budget: 1, tags: ['common'] },
    { name: `Shared beta ${label}`, budget: 2, tags: ['common'] },
    { name: `Own ${label}`, budget: 3, tags: [label] },
  ]);
  const tasks = await seed(t, '/tasks', user.key, [
    { project_id: projects[0]!._id, title: 'shared task' },
    { project_id: projects[2]!._id, title: `own task ${label}` },
  ]);
  return { user, projects, tasks };
}

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  const a = await createTenantUser(t, { features: ['tasks'] });
  const b = await createTenantUser(t, { features: ['tasks'] });
  side.A = await seedTenant(a, 'A');
  side.B = await seedTenant(b, 'B');
  side.C = await seedTenant(await addMembership(t, a.userId, { features: ['tasks'] }), 'C');
});
afterAll(() => t?.close());

const get = (path: string, params: Record<string, any>, key: string, headers?: Record<string, string>) =>
  t.http('GET', `${path}${qs(params)}`, { key, ...(headers ? { headers } : {}) });
const sorted = (ids: string[]) => [...ids].sort();

describe.each([['A', 'B'], ['B', 'A'], ['A', 'C'], ['C', 'A']] as const)('user of tenant %s, against tenant %s', (me, other) => {
  const mine = () => side[me];
  const theirs = () => side[other];
  const key = () => mine().user.key;
  const expectNoneOfTheirs = (body: unknown) => {
    const text = JSON.stringify(body);
    for (const d of [...theirs().projects, ...theirs().tasks]) expect(text).not.toContain(d._id);
    expect(text).not.toContain(theirs().user.tenantId);
  };

  it.each<[string, () => Record<string, any>, (s: Side) => Doc[]]>([
    ['plain list', () => ({}), (s) => s.projects],
    ['q search', () => ({ q: 'shared' }), (s) => s.projects.slice(0, 2)],
    ['tag filter', () => ({ tags__in: 'common' }), (s) => s.projects.slice(0, 2)],
    ['where naming the other tenant', () => ({ where: { tenant_id: theirs().user.tenantId } }), () => []],
    ['where $or with the other tenant', () => ({ where: { $or: [{ tenant_id: theirs().user.tenantId }, { budget: 1 }] } }), (s) => s.projects.slice(0, 1)],
    ['where $nor on the own tenant', () => ({ where: { $nor: [{ tenant_id: mine().user.tenantId }] } }), () => []],
    ['tenant_id parameter of the other tenant', () => ({ tenant_id: theirs().user.tenantId }), () => []],
    ['tenant_id__in with both tenants', () => ({ tenant_id__in: `${theirs().user.tenantId},${mine().user.tenantId}` }), (s) => s.projects],
    ['tenant_id__ne of the own tenant', () => ({ tenant_id__ne: mine().user.tenantId }), () => []],
    ['_id of the other tenant\'s project', () => ({ _id: theirs().projects[0]!._id }), () => []],
    ['_id__in of both tenants\' projects', () => ({ _id__in: `${theirs().projects[0]!._id},${mine().projects[0]!._id}` }), (s) => s.projects.slice(0, 1)],
  ])('REST /projects: %s (offset and cursor mode, counts)', async (_l, params, expected) => {
    const want = sorted(idsOf(expected(mine())));
    const offset = await get('/projects', { ...params(), per_page: 1 }, key());
    expect(offset.status).toBe(200);
    expect(offset.headers.get('x-total-count')).toBe(String(want.length));
    expect(offset.body.total).toBe(want.length);
    expect(offset.body.total_pages).toBe(want.length);
    expect(offset.headers.get('x-total-pages')).toBe(String(want.length));
    const full = await get('/projects', { ...params(), per_page: 100 }, key());
    expect(sorted(idsOf(items(full)))).toEqual(want);
    expectNoneOfTheirs(full.body);
    // Cursor mode, walked to the end.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const res = await get('/projects', { ...params(), limit: 1, ...(cursor ? { cursor } : {}) }, key());
      expect(res.status).toBe(200);
      expectNoneOfTheirs(res.body);
      seen.push(...idsOf(items(res)));
      if (!res.body.cursors.has_next) break;
      cursor = res.body.cursors.next;
    }
    expect(sorted(seen)).toEqual(want);
  });

  it('REST get-one of the other tenant\'s project and task → 404', async () => {
    for (const [path, doc] of [['/projects', theirs().projects[0]!], ['/tasks', theirs().tasks[0]!]] as const) {
      const res = await get(`${path}/${doc._id}`, {}, key());
      expect(res.status).toBe(404);
      expect(envelope(res)).toMatchObject({ code: 'NOT_FOUND', details: { item_id: doc._id } });
      expect((await get(`${path}/${doc._id}`, { populate: path === '/tasks' ? 'project_id' : undefined, fields: '_id' }, key())).status).toBe(404);
    }
    const own = await get(`/projects/${mine().projects[0]!._id}`, {}, key());
    expect(own.status).toBe(200);
  });

  it('REST /tasks: list, count, q, project_id filter and populate stay in the tenant', async () => {
    const list = await get('/tasks', { populate: 'project_id', per_page: 100 }, key());
    expect(sorted(idsOf(items(list)))).toEqual(sorted(idsOf(mine().tasks)));
    expect(list.headers.get('x-total-count')).toBe('2');
    for (const d of items(list)) expect(d.project_id.tenant_id).toBe(mine().user.tenantId);
    expectNoneOfTheirs(list.body);
    const q = await get('/tasks', { q: 'shared' }, key());
    expect(idsOf(items(q))).toEqual([mine().tasks[0]!._id]);
    const byTheirProject = await get('/tasks', { project_id: theirs().projects[0]!._id }, key());
    expect(items(byTheirProject)).toEqual([]);
    const cursor = await get('/tasks', { populate: 'project_id', limit: 10 }, key());
    expect(sorted(idsOf(items(cursor)))).toEqual(sorted(idsOf(mine().tasks)));
    expectNoneOfTheirs(cursor.body);
  });

  it('a cursor issued to the other tenant only pages through the own rows', async () => {
    const theirsPage = await get('/projects', { limit: 1, sort: 'name' }, theirs().user.key);
    const res = await get('/projects', { limit: 10, sort: 'name', cursor: theirsPage.body.cursors.next }, key());
    expect(res.status).toBe(200);
    expectNoneOfTheirs(res.body);
  });

  it('GraphQL projects, project(id), tasks, task(id)', async () => {
    const list = await t.gql(
      `query($w: JSON) {
        all: projects(per_page: 1) { total total_pages items { _id } }
        cursor: projects(limit: 10) { items { _id tenant_id } }
        searched: projects(q: "shared", per_page: 100) { total items { _id } }
        sneaky: projects(where: $w, filter: { tenant_id: "${theirs().user.tenantId}" }) { total items { _id } }
        tasks(per_page: 100) { total items { _id project { _id tenant_id } } }
      }`,
      { w: { tenant_id: theirs().user.tenantId } },
      { key: key() },
    );
    expect(list.body.errors).toBeUndefined();
    const d = list.body.data;
    expect(d.all).toMatchObject({ total: 3, total_pages: 3 });
    expect(sorted(idsOf(d.cursor.items))).toEqual(sorted(idsOf(mine().projects)));
    expect(d.searched.total).toBe(2);
    expect(d.sneaky).toEqual({ total: 0, items: [] });
    expect(d.tasks.total).toBe(2);
    for (const task of d.tasks.items) expect(task.project.tenant_id).toBe(mine().user.tenantId);
    expectNoneOfTheirs(list.body);

    const one = await t.gql(
      'query($p: ID!, $t: ID!) { project(id: $p) { _id } task(id: $t) { _id } }',
      { p: theirs().projects[0]!._id, t: theirs().tasks[0]!._id },
      { key: key() },
    );
    expect(one.body.data).toEqual({ project: null, task: null });
    expect(one.body.errors?.map((e) => e.extensions?.code)).toEqual(['NOT_FOUND', 'NOT_FOUND']);
  });
});

describe('system admin', () => {
  const allProjects = () => sorted(idsOf([...side.A.projects, ...side.B.projects, ...side.C.projects]));

  it('without X-Tenant-Id sees every tenant (list, count, cursor, get-one, GraphQL)', async () => {
    const res = await get('/projects', { per_page: 100 }, ADMIN_KEY);
    expect(sorted(idsOf(items(res)))).toEqual(allProjects());
    expect(res.headers.get('x-total-count')).toBe('9');
    const cursor = await get('/projects', { limit: 100 }, ADMIN_KEY);
    expect(sorted(idsOf(items(cursor)))).toEqual(allProjects());
    for (const p of [side.A.projects[0]!, side.B.projects[0]!, side.C.projects[0]!]) expect((await get(`/projects/${p._id}`, {}, ADMIN_KEY)).status).toBe(200);
    const tasks = await get('/tasks', { per_page: 100, populate: 'project_id' }, ADMIN_KEY);
    expect(items(tasks)).toHaveLength(6);
    for (const d of items(tasks)) expect(d.project_id).not.toBeNull();
    const g = await t.gql('{ projects(per_page: 100) { total } tasks { total } }');
    expect(g.body.data).toEqual({ projects: { total: 9 }, tasks: { total: 6 } });
  });

  it.each(['A', 'B'] as const)('with X-Tenant-Id of tenant %s sees only that tenant', async (which) => {
    const headers = { 'X-Tenant-Id': side[which].user.tenantId };
    const other = which === 'A' ? side.B : side.A;
    expect((await get(`/projects/${side.C.projects[0]!._id}`, {}, ADMIN_KEY, headers)).status).toBe(404);
    const res = await get('/projects', { per_page: 100 }, ADMIN_KEY, headers);
    expect(sorted(idsOf(items(res)))).toEqual(sorted(idsOf(side[which].projects)));
    expect(res.headers.get('x-total-count')).toBe('3');
    const cursor = await get('/projects', { limit: 100, q: 'shared' }, ADMIN_KEY, headers);
    expect(items(cursor)).toHaveLength(2);
    expect((await get(`/projects/${other.projects[0]!._id}`, {}, ADMIN_KEY, headers)).status).toBe(404);
    expect((await get(`/tasks/${other.tasks[0]!._id}`, {}, ADMIN_KEY, headers)).status).toBe(404);
    const tasks = await get('/tasks', { per_page: 100 }, ADMIN_KEY, headers);
    expect(sorted(idsOf(items(tasks)))).toEqual(sorted(idsOf(side[which].tasks)));
    const g = await t.gql('{ projects(per_page: 100) { total items { tenant_id } } }', {}, { headers });
    expect(g.body.data.projects.total).toBe(3);
    for (const p of g.body.data.projects.items) expect(p.tenant_id).toBe(side[which].user.tenantId);
  });

  it('a plain user\'s X-Tenant-Id is ignored, also naming another membership\'s tenant: a key acts in its own', async () => {
    const res = await get('/projects', { per_page: 100 }, side.A.user.key, { 'X-Tenant-Id': side.B.user.tenantId });
    expect(sorted(idsOf(items(res)))).toEqual(sorted(idsOf(side.A.projects)));
    const sibling = await get('/projects', { per_page: 100 }, side.A.user.key, { 'X-Tenant-Id': side.C.user.tenantId });
    expect(sorted(idsOf(items(sibling)))).toEqual(sorted(idsOf(side.A.projects)));
  });
});

describe('MULTI_TENANT_ENABLED=false', () => {
  let t2: TestApp;
  let u1: User;
  let u2: User;
  let p1: Doc[];
  let p2: Doc[];
  beforeAll(async () => {
    t2 = await buildTestApp({ plugins: [resourcesPlugin], config: { MULTI_TENANT_ENABLED: 'false' } });
    u1 = await createTenantUser(t2, { features: ['tasks'] });
    u2 = await createTenantUser(t2, { features: ['tasks'] });
    p1 = (await t2.http('POST', '/projects/bulk', { key: u1.key, json: { items: [{ name: 'one' }, { name: 'two' }] } })).body.items;
    p2 = (await t2.http('POST', '/projects/bulk', { key: u2.key, json: { items: [{ name: 'three' }] } })).body.items;
  });
  afterAll(() => t2?.close());

  it('a user sees every document (list, count, cursor, get-one, GraphQL)', async () => {
    const all = sorted(idsOf([...p1, ...p2]));
    for (const u of [u1, u2]) {
      const res = await t2.http('GET', '/projects', { key: u.key });
      expect(sorted(idsOf(items(res)))).toEqual(all);
      expect(res.headers.get('x-total-count')).toBe('3');
      const cursor = await t2.http('GET', '/projects?limit=10', { key: u.key });
      expect(sorted(idsOf(items(cursor)))).toEqual(all);
      for (const p of [...p1, ...p2]) expect((await t2.http('GET', `/projects/${p._id}`, { key: u.key })).status).toBe(200);
      const g = await t2.gql('{ projects { total } }', {}, { key: u.key });
      expect(g.body.data.projects.total).toBe(3);
    }
  });
});
