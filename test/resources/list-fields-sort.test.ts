/** Read path, list parameters `fields` (projection, both modes) and `sort`. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { items, qs, seed, seedProjects, type Doc } from './read-helpers.ts';

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
let created: Doc[];

const list = (params: Record<string, any>, path = '/projects') => t.http('GET', `${path}${qs(params)}`, { key: alice.key });
const names = (docs: Doc[]) => docs.map((d) => d.name);

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  // Created one after the other: created_at ascending in this order.
  created = [];
  for (const p of [
    { name: 'Bravo', status: 'active', budget: 20, tags: ['x'] },
    { name: 'alpha', status: 'archived', budget: 10 },
    { name: 'Charlie', status: 'active', budget: null },
    { name: 'Delta', status: 'archived', budget: 20 },
    { name: 'Echo', status: 'active', budget: 5 },
  ]) {
    created.push(...(await seedProjects(t, alice.key, [p])));
    await new Promise((r) => setTimeout(r, 3)); // distinct created_at
  }
});
afterAll(() => t?.close());

describe('fields', () => {
  const expectOnly = (docs: Doc[], keys: string[]) => {
    expect(docs.length).toBeGreaterThan(0);
    for (const d of docs) expect(Object.keys(d).sort()).toEqual([...keys].sort());
  };

  it.each<[string, Record<string, string>, string[]]>([
    ['offset mode, one field', { fields: 'name' }, ['_id', 'name']],
    ['offset mode, several fields', { fields: 'name,budget,tags' }, ['_id', 'name', 'budget', 'tags']],
    ['offset mode, _id named explicitly', { fields: '_id,status' }, ['_id', 'status']],
    ['offset mode, base field', { fields: 'created_at' }, ['_id', 'created_at']],
    ['offset mode, white space and empty items', { fields: ' name , ,status' }, ['_id', 'name', 'status']],
    ['cursor mode, one field', { fields: 'name', limit: '2' }, ['_id', 'name']],
    ['cursor mode, sort field not requested is not returned', { fields: 'name', limit: '2', sort: '-budget' }, ['_id', 'name']],
    ['cursor mode, default sort field not returned', { fields: 'status', limit: '10' }, ['_id', 'status']],
    ['cursor mode with a sort field requested', { fields: 'budget', limit: '2', sort: 'budget' }, ['_id', 'budget']],
  ])('%s', async (_l, params, keys) => {
    const res = await list(params);
    expectOnly(items(res), keys);
  });

  it('cursor mode: the projection holds on every page of a walk and the walk is complete', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 10; i++) {
      const res = await list({ fields: 'name', limit: '2', sort: '-budget', ...(cursor ? { cursor } : {}) });
      expectOnly(items(res), ['_id', 'name']);
      seen.push(...names(items(res)));
      cursor = res.body.cursors.next;
      if (!res.body.cursors.has_next) break;
    }
    const full = items(await list({ sort: '-budget', per_page: '100' }));
    expect(seen).toEqual(names(full));
  });

  it('get-one honours fields and still carries the ETag of the current revision', async () => {
    const res = await t.http('GET', `/projects/${created[0]!._id}?fields=name`, { key: alice.key });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['_id', 'name']);
    expect(res.headers.get('etag')).toBe('"1"');
    const withVersion = await t.http('GET', `/projects/${created[0]!._id}?fields=name,version`, { key: alice.key });
    expect(withVersion.body).toEqual({ _id: created[0]!._id, name: 'Bravo', version: 1 });
    expect(withVersion.headers.get('etag')).toBe('"1"');
  });

  it.each([
    ['unknown field', 'nope'],
    ['relation traversal', 'project_id.name'],
    ['empty', ''],
    ['only commas', ',,'],
    ['operator-like', '$where'],
  ])('400 on %s', async (_l, fields) => {
    const res = await list({ fields });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });

  it('tasks: populate with fields keeps the projection and expands the relation', async () => {
    const [task] = await seed(t, '/tasks', alice.key, [{ project_id: created[0]!._id, title: 'x' }]);
    const res = await list({ fields: 'title,project_id', populate: 'project_id' }, '/tasks');
    const [d] = items(res);
    expect(d!._id).toBe(task!._id);
    expect(Object.keys(d!).sort()).toEqual(['_id', 'project_id', 'title']);
    expect(d!.project_id).toMatchObject({ _id: created[0]!._id, name: 'Bravo' });
  });
});

describe('sort', () => {
  it.each<[string, string | undefined, string[]]>([
    ['default is -created_at', undefined, ['Echo', 'Delta', 'Charlie', 'alpha', 'Bravo']],
    ['ascending (binary string order)', 'name', ['Bravo', 'Charlie', 'Delta', 'Echo', 'alpha']],
    ['+ prefix is ascending', '+name', ['Bravo', 'Charlie', 'Delta', 'Echo', 'alpha']],
    ['descending', '-name', ['alpha', 'Echo', 'Delta', 'Charlie', 'Bravo']],
    ['null sorts lowest ascending', 'budget,name', ['Charlie', 'Echo', 'alpha', 'Bravo', 'Delta']],
    ['null sorts last descending', '-budget,name', ['Bravo', 'Delta', 'alpha', 'Echo', 'Charlie']],
    ['multi-field asc/desc', 'status,-budget', ['Bravo', 'Echo', 'Charlie', 'Delta', 'alpha']],
    ['multi-field desc/asc', '-status,name', ['Delta', 'alpha', 'Bravo', 'Charlie', 'Echo']],
    ['ties broken by _id (ascending with the last field)', 'budget', ['Charlie', 'Echo', 'alpha', 'Bravo', 'Delta']],
    ['ties broken by _id (descending with the last field)', '-budget', ['Delta', 'Bravo', 'alpha', 'Echo', 'Charlie']],
    ['created_at ascending', 'created_at', ['Bravo', 'alpha', 'Charlie', 'Delta', 'Echo']],
    ['_id descending', '-_id', ['Echo', 'Delta', 'Charlie', 'alpha', 'Bravo']],
  ])('%s (sort=%s)', async (_l, sort, expected) => {
    const offset = items(await list(sort === undefined ? {} : { sort }));
    expect(names(offset)).toEqual(expected);
    // Same order in cursor mode.
    const cursor = items(await list({ ...(sort === undefined ? {} : { sort }), limit: '10' }));
    expect(names(cursor)).toEqual(expected);
  });

  it.each([
    ['unknown field', 'nope'],
    ['unknown descending field', '-nope'],
    ['relation traversal', 'project_id.name'],
    ['duplicate field', 'name,-name'],
    ['empty', ''],
    ['only a sign', '-'],
  ])('400 on %s', async (_l, sort) => {
    const res = await list({ sort });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });
});
