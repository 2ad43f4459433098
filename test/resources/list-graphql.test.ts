/**
 * GraphQL list parity: the `projects` / `tasks` list queries take the REST list parameters and
 * return the same documents; errors carry the same codes in `extensions.code`. Also the printed
 * schema of the default resources app.
 */
import { printSchema } from 'graphql';
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { idsOf, items, qs, seed, seedProjects, type Doc } from './read-helpers.ts';

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
let projects: Doc[];

const rest = async (params: Record<string, any>, path = '/projects') => {
  const res = await t.http('GET', `${path}${qs(params)}`, { key: alice.key });
  return { res, ids: idsOf(items(res)) };
};
const gql = (query: string, variables: Record<string, unknown> = {}) => t.gql(query, variables, { key: alice.key });

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  projects = await seedProjects(t, alice.key, [
    { name: 'Alpha', description: 'moon base', status: 'active', tags: ['red', 'blue'], budget: 10, owner_email: 'a@example.com' },
    { name: 'Beta', description: 'second', status: 'archived', tags: ['blue'], budget: 20 },
    { name: 'Gamma', status: 'active', tags: ['green', 'red'], budget: 30 },
    { name: 'Delta', status: 'active', tags: [] },
    { name: 'Alpine', description: 'moon rover', status: 'archived', tags: ['red'], budget: 5 },
    { name: 'Epsilon', status: 'active', tags: ['blue', 'green'], budget: 10 },
  ]);
  await seed(t, '/tasks', alice.key, [
    { project_id: projects[0]!._id, title: 'one', done: true, priority: 1 },
    { project_id: projects[1]!._id, title: 'two', done: false, priority: 5 },
  ]);
});
afterAll(() => t?.close());

describe('projects(...) returns the same documents as GET /projects', () => {
  const PAGE = 'items { _id } total page per_page total_pages';

  it.each<[string, string, Record<string, unknown>, Record<string, any>]>([
    ['no arguments', 'projects', {}, {}],
    ['filter: equality and suffix operators', 'projects(filter: $f, sort: "name")', { f: { status: 'active', budget__gte: 10 } }, { status: 'active', budget__gte: 10, sort: 'name' }],
    ['filter: in list as an array', 'projects(filter: $f, sort: "name")', { f: { budget__in: [10, 30] } }, { budget__in: '10,30', sort: 'name' }],
    ['filter: null means equality on null', 'projects(filter: $f, sort: "name")', { f: { owner_email: null, budget: null } }, { owner_email: 'null', budget: 'null', sort: 'name' }],
    ['filter: booleans and regex', 'projects(filter: $f, sort: "-name")', { f: { name__regex: '^AL', budget__exists: true } }, { name__regex: '^AL', budget__exists: 'true', sort: '-name' }],
    ['where object', 'projects(where: $w, sort: "-budget,name")', { w: { $or: [{ budget: { $gt: 15 } }, { status: 'archived' }] } }, { where: { $or: [{ budget: { $gt: 15 } }, { status: 'archived' }] }, sort: '-budget,name' }],
    ['where as a JSON string', 'projects(where: $w)', { w: '{"name":{"$regex":"^a","$options":"i"}}' }, { where: { name: { $regex: '^a', $options: 'i' } } }],
    ['where merged with filter, filter wins', 'projects(where: $w, filter: $f, sort: "name")', { w: { status: 'archived' }, f: { status: 'active' } }, { where: { status: 'archived' }, status: 'active', sort: 'name' }],
    ['q', 'projects(q: "moon al")', {}, { q: 'moon al' }],
    ['tags_in / tags_nin', 'projects(tags_in: ["red", "blue"], tags_nin: ["green"], sort: "name")', {}, { tags__in: 'red,blue', tags__nin: 'green', sort: 'name' }],
    ['tags_all', 'projects(tags_all: ["red", "blue"])', {}, { tags__all: 'red,blue' }],
    ['sort multi-field', 'projects(sort: "status,-budget")', {}, { sort: 'status,-budget' }],
    ['page / per_page', 'projects(page: 2, per_page: 4, sort: "name")', {}, { page: 2, per_page: 4, sort: 'name' }],
  ])('%s', async (_l, call, variables, params) => {
    const decl = Object.keys(variables).length ? `(${Object.keys(variables).map((k) => `$${k}: JSON`).join(', ')})` : '';
    const res = await gql(`query${decl} { ${call.replace(/^projects/, 'p: projects')} { ${PAGE} } }`, variables);
    expect(res.body.errors).toBeUndefined();
    const { res: r, ids } = await rest(params);
    const p = res.body.data.p;
    expect(idsOf(p.items)).toEqual(ids);
    expect(p).toMatchObject({ total: r.body.total, page: r.body.page, per_page: r.body.per_page, total_pages: r.body.total_pages });
    expect(p.total).toBe(Number(r.headers.get('x-total-count')));
  });

  it('the offset numbers: total, page, per_page, total_pages; cursors is null', async () => {
    const res = await gql('{ projects(page: 2, per_page: 4) { total page per_page total_pages cursors { next } items { _id } } }');
    expect(res.body.data.projects).toMatchObject({ total: 6, page: 2, per_page: 4, total_pages: 2, cursors: null });
    expect(res.body.data.projects.items).toHaveLength(2);
  });

  it('cursor mode: limit/cursor/direction walk the same pages as REST; total is null', async () => {
    const q = `query($c: String, $d: String) { projects(limit: 2, sort: "name", cursor: $c, direction: $d) {
      total page items { _id name } cursors { next prev has_next has_prev } } }`;
    const full = (await rest({ sort: 'name', per_page: 100 })).ids;
    const seen: string[] = [];
    let page = (await gql(q)).body.data.projects;
    expect(page.total).toBeNull();
    expect(page.page).toBeNull();
    expect(page.cursors).toMatchObject({ has_prev: false, prev: null, has_next: true });
    const restFirst = await rest({ sort: 'name', limit: 2 });
    expect(page.cursors).toEqual(restFirst.res.body.cursors);
    seen.push(...idsOf(page.items));
    while (page.cursors.has_next) {
      page = (await gql(q, { c: page.cursors.next })).body.data.projects;
      seen.push(...idsOf(page.items));
    }
    expect(seen).toEqual(full);
    const back = (await gql(q, { c: page.cursors.prev, d: 'prev' })).body.data.projects;
    expect(idsOf(back.items)).toEqual(full.slice(2, 4));
    // A REST cursor works in GraphQL and vice versa.
    const viaRest = await rest({ sort: 'name', limit: 2, cursor: back.cursors.next });
    expect(viaRest.ids).toEqual(full.slice(4, 6));
  });

  it('fields: projection (unrequested fields resolve to null)', async () => {
    const res = await gql('{ projects(fields: ["name"], sort: "name", per_page: 1) { items { _id name budget status etag } } }');
    expect(res.body.data.projects.items).toEqual([{ _id: expect.any(String), name: 'Alpha', budget: null, status: null, etag: '"1"' }]);
  });

  it('tasks: filter on boolean and object id, populate via the relation field', async () => {
    const res = await gql('query($f: JSON) { tasks(filter: $f) { total items { title project { name } } } }', { f: { done: true, project_id: projects[0]!._id } });
    expect(res.body.data.tasks).toEqual({ total: 1, items: [{ title: 'one', project: { name: 'Alpha' } }] });
    const { ids } = await rest({ done: 'true', project_id: projects[0]!._id }, '/tasks');
    expect(ids).toHaveLength(1);
  });
});

describe('errors carry the REST codes in extensions.code', () => {
  it.each<[string, string, Record<string, unknown>, string]>([
    ['invalid where JSON string', 'projects(where: $v)', { v: '{bad' }, 'BAD_REQUEST'],
    ['where that is an array', 'projects(where: $v)', { v: [{ name: 'x' }] }, 'BAD_REQUEST'],
    ['where that is a number', 'projects(where: $v)', { v: 1 }, 'BAD_REQUEST'],
    ['where with $where', 'projects(where: $v)', { v: { $where: 'return true' } }, 'BAD_REQUEST'],
    ['where with $expr inside $or', 'projects(where: $v)', { v: { $or: [{ $expr: { $gt: ['$budget', 1] } }] } }, 'BAD_REQUEST'],
    ['where with an unknown operator', 'projects(where: $v)', { v: { budget: { $foo: 1 } } }, 'BAD_REQUEST'],
    ['filter on an unknown field', 'projects(filter: $v)', { v: { nope: 1 } }, 'BAD_REQUEST'],
    ['filter that is not an object', 'projects(filter: $v)', { v: ['name'] }, 'BAD_REQUEST'],
    ['filter that is a string', 'projects(filter: $v)', { v: 'name=Alpha' }, 'BAD_REQUEST'],
    ['filter naming a list parameter (use the argument)', 'projects(filter: $v)', { v: { page: 2 } }, 'BAD_REQUEST'],
    ['page below 1', 'projects(page: $v)', { v: 0 }, 'BAD_REQUEST'],
    ['filter exists that is not a boolean', 'projects(filter: $v)', { v: { budget__exists: 'yes' } }, 'BAD_REQUEST'],
    ['unknown sort field', 'projects(sort: $v)', { v: 'nope' }, 'BAD_REQUEST'],
    ['invalid cursor', 'projects(cursor: $v)', { v: 'abc.def' }, 'BAD_REQUEST'],
    ['limit above the cap', 'projects(limit: $v)', { v: 101 }, 'VALIDATION_ERROR'],
    ['per_page above max_page_size', 'projects(per_page: $v)', { v: 101 }, 'VALIDATION_ERROR'],
    ['populate of a plain field', 'tasks(populate: $v)', { v: ['title'] }, 'BAD_REQUEST'],
  ])('%s → %s', async (_l, call, variables, code) => {
    const arg = /\((\w+):/.exec(call)![1]!;
    const type = ({ sort: 'String', cursor: 'String', limit: 'Int', page: 'Int', per_page: 'Int', populate: '[String!]' } as Record<string, string>)[arg] ?? 'JSON';
    const res = await gql(`query($v: ${type}) { x: ${call} { total } }`, variables);
    expect(res.body.data ?? null).toBeNull();
    expect(res.body.errors?.[0]?.extensions?.code).toBe(code);
  });

  it('q on a resource without search fields is BAD_REQUEST "Search is not enabled for this resource"', async () => {
    const t2 = await buildTestApp({
      plugins: [resourcesPlugin.configure({ resources: [defineResource({ name: 'plain_items', schema: new Schema({ name: String }) })] })],
    });
    try {
      const res = await t2.gql('{ plainItems(q: "x") { total } }');
      expect(res.body.errors?.[0]).toMatchObject({ message: 'Search is not enabled for this resource', extensions: { code: 'BAD_REQUEST' } });
    } finally {
      await t2.close();
    }
  });
});

describe('schema', () => {
  it('a resource whose list and get-one names would collide is refused at start-up', async () => {
    const clash = defineResource({ name: 'regional', schema: new Schema({ name: String }) });
    await expect(buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [clash] })] })).rejects.toThrow(/graphql_name/);
  });

  it('printed schema of the default resources app', () => {
    expect(printSchema(t.app.schema)).toMatchSnapshot();
  });
});
