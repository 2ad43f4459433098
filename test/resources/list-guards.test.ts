/** Read path: feature guards (403 ACCESS_DENIED with details.feature) and attribute guards that filter. */
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { idsOf, items, qs, seed, seedProjects, type Doc } from './read-helpers.ts';

const regional = defineResource({
  name: 'regional',
  schema: new Schema({ name: { type: String, required: true }, region: { type: String, required: true } }),
  searchable_fields: ['name'],
  guards: { attributes: [{ attribute: 'region', field: 'region' }] },
  graphql_name: 'RegionalDoc', // list `regional`, get-one `regionalDoc`
});

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let withTasks: User;
let noTasks: User;
let eu: User;
let us: User;
let both: User;
let noRegion: User;
let euOtherTenant: User;
let task: Doc;
let euDocs: Doc[];
let usDocs: Doc[];
let otherTenantEu: Doc[];

const get = (path: string, params: Record<string, any>, key: string) => t.http('GET', `${path}${qs(params)}`, { key });
const sorted = (ids: string[]) => [...ids].sort();

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, regional] })] });
  withTasks = await createTenantUser(t, { features: ['tasks'] });
  noTasks = await createTenantUser(t, { tenantId: withTasks.tenantId, features: ['other'] });
  const [p] = await seedProjects(t, withTasks.key, [{ name: 'P' }]);
  [task] = (await seed(t, '/tasks', withTasks.key, [{ project_id: p!._id, title: 'secret plan' }])) as [Doc];

  eu = await createTenantUser(t, { attributes: { region: 'eu' } });
  us = await createTenantUser(t, { tenantId: eu.tenantId, attributes: { region: 'us' } });
  both = await createTenantUser(t, { tenantId: eu.tenantId, attributes: { region: ['eu', 'us'] } });
  noRegion = await createTenantUser(t, { tenantId: eu.tenantId, attributes: { department: 'x' } });
  euOtherTenant = await createTenantUser(t, { attributes: { region: 'eu' } });
  euDocs = await seed(t, '/regional', eu.key, [{ name: 'eu one', region: 'eu' }, { name: 'eu two', region: 'eu' }, { name: 'eu three', region: 'eu' }]);
  usDocs = await seed(t, '/regional', us.key, [{ name: 'us one', region: 'us' }, { name: 'us two', region: 'us' }]);
  otherTenantEu = await seed(t, '/regional', euOtherTenant.key, [{ name: 'eu elsewhere', region: 'eu' }]);
});
afterAll(() => t?.close());

describe('feature guard: /tasks needs feature tasks', () => {
  it.each<[string, () => string, Record<string, any>]>([
    ['offset list', () => '/tasks', {}],
    ['cursor list', () => '/tasks', { limit: 5 }],
    ['list with q', () => '/tasks', { q: 'secret' }],
    ['get-one of an existing task', () => `/tasks/${task._id}`, {}],
    ['get-one of a missing id (no existence oracle)', () => '/tasks/0123456789abcdef01234567', {}],
    ['get-one with populate', () => `/tasks/${task._id}`, { populate: 'project_id' }],
  ])('REST %s → 403 ACCESS_DENIED, details.feature = tasks', async (_l, path, params) => {
    const res = await get(path(), params, noTasks.key);
    expect(res.status).toBe(403);
    expect(envelope(res)).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'tasks' } });
    expect(JSON.stringify(res.body)).not.toContain('secret plan');
  });

  it('the same calls succeed with the feature', async () => {
    expect(idsOf(items(await get('/tasks', {}, withTasks.key)))).toEqual([task._id]);
    expect((await get(`/tasks/${task._id}`, {}, withTasks.key)).status).toBe(200);
  });

  it('GraphQL tasks and task(id) → ACCESS_DENIED with details.feature', async () => {
    const list = await t.gql('{ tasks { total items { title } } }', {}, { key: noTasks.key });
    expect(list.body.data ?? null).toBeNull();
    expect(list.body.errors?.[0]?.extensions).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'tasks' } });
    const one = await t.gql('query($id: ID!) { task(id: $id) { title } }', { id: task._id }, { key: noTasks.key });
    expect(one.body.data?.task ?? null).toBeNull();
    expect(one.body.errors?.[0]?.extensions).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'tasks' } });
    expect(JSON.stringify(list.body) + JSON.stringify(one.body)).not.toContain('secret plan');
    const ok = await t.gql('{ tasks { total } }', {}, { key: withTasks.key });
    expect(ok.body.data.tasks.total).toBe(1);
  });

  it('projects stay readable without the feature', async () => {
    expect(items(await get('/projects', {}, noTasks.key))).toHaveLength(1);
  });
});

describe('attribute guard {attribute: region, field: region}', () => {
  it.each<[string, () => User, () => Doc[]]>([
    ['eu user', () => eu, () => euDocs],
    ['us user', () => us, () => usDocs],
    ['user with both regions', () => both, () => [...euDocs, ...usDocs]],
    ['eu user of another tenant', () => euOtherTenant, () => otherTenantEu],
    ['system admin (no attribute filter)', () => ({ key: ADMIN_KEY, tenantId: '', userId: '' }), () => [...euDocs, ...usDocs, ...otherTenantEu]],
  ])('%s: list (offset, cursor), counts and q are filtered', async (_l, user, expected) => {
    const want = sorted(idsOf(expected()));
    const res = await get('/regional', { per_page: 100 }, user().key);
    expect(sorted(idsOf(items(res)))).toEqual(want);
    expect(res.headers.get('x-total-count')).toBe(String(want.length));
    const paged = await get('/regional', { per_page: 1 }, user().key);
    expect(paged.body).toMatchObject({ total: want.length, total_pages: want.length });
    const cursor = await get('/regional', { limit: 100 }, user().key);
    expect(sorted(idsOf(items(cursor)))).toEqual(want);
    const q = await get('/regional', { q: 'us' }, user().key);
    expect(sorted(idsOf(items(q)))).toEqual(sorted(idsOf(expected().filter((d) => d.region === 'us'))));
    const g = await t.gql('{ regional(per_page: 100) { total items { _id } } }', {}, { key: user().key });
    expect(g.body.data.regional.total).toBe(want.length);
    expect(sorted(idsOf(g.body.data.regional.items))).toEqual(want);
  });

  it('filters naming another region do not widen the view', async () => {
    expect(items(await get('/regional', { region: 'us' }, eu.key))).toEqual([]);
    expect(items(await get('/regional', { region__in: 'eu,us' }, eu.key))).toHaveLength(3);
    expect(items(await get('/regional', { where: { region: 'us' } }, eu.key))).toEqual([]);
    expect(items(await get('/regional', { where: { $or: [{ region: 'us' }, { region: { $ne: 'eu' } }] } }, eu.key))).toEqual([]);
  });

  it('get-one of another region → 404; own region → 200', async () => {
    for (const d of usDocs) {
      const res = await get(`/regional/${d._id}`, {}, eu.key);
      expect(res.status).toBe(404);
      expect(envelope(res).code).toBe('NOT_FOUND');
    }
    expect((await get(`/regional/${euDocs[0]!._id}`, {}, eu.key)).status).toBe(200);
    expect((await get(`/regional/${usDocs[0]!._id}`, {}, both.key)).status).toBe(200);
    const g = await t.gql('query($id: ID!) { regionalDoc(id: $id) { _id } }', { id: usDocs[0]!._id }, { key: eu.key });
    expect(g.body.data.regionalDoc).toBeNull();
    expect(g.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('a user without the attribute → 403 ACCESS_DENIED on list and get-one', async () => {
    for (const path of ['/regional', `/regional/${euDocs[0]!._id}`]) {
      const res = await get(path, {}, noRegion.key);
      expect(res.status).toBe(403);
      expect(envelope(res)).toMatchObject({ code: 'ACCESS_DENIED', details: { attribute: 'region' } });
    }
  });
});
