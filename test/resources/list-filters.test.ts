/**
 * Read path, "List query parameters", "Exact-match filters and coercion", "Suffix
 * operators", "where clause", "Search and tags": real HTTP against the real database.
 */
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { collection, items, oid, qs, seed, seedProjects, sortedNames, type Doc } from './read-helpers.ts';

/** Every reserved list parameter is also a real field of this resource (reserved names are never filters). */
const notebooks = defineResource({
  name: 'notebooks',
  schema: new Schema({
    name: { type: String, required: true },
    page: { type: Number, default: null },
    per_page: { type: Number, default: null },
    cursor: { type: String, default: null },
    limit: { type: Number, default: null },
    direction: { type: String, default: null },
    sort: { type: String, default: null },
    fields: { type: String, default: null },
    where: { type: String, default: null },
    q: { type: String, default: null },
    include_deleted: { type: String, default: null },
    populate: { type: String, default: null },
    tags: { type: [String], default: [] },
    tags__in: { type: String, default: null },
    tags__all: { type: String, default: null },
    tags__nin: { type: String, default: null },
    other_id: { type: Schema.Types.ObjectId, ref: 'notebooks', default: null },
  }),
  searchable_fields: ['name'],
});

/** No searchable fields, one private field. */
const vaults = defineResource({
  name: 'vaults',
  schema: new Schema({
    name: { type: String, required: true },
    secret: { type: String, private: true },
  }),
});

/** An untyped field: the database sees exactly the value the coercion produced. */
const things = defineResource({
  name: 'things',
  schema: new Schema({ label: { type: String, required: true }, meta: { type: Schema.Types.Mixed, default: null } }),
});

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
const P: Record<string, Doc> = {};

const list = (path: string, params: Record<string, any> = {}, key = alice.key) => t.http('GET', `${path}${qs(params)}`, { key });
const projects = (params: Record<string, any> = {}) => list('/projects', { per_page: 100, ...params });

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, notebooks, vaults, things] })] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  const docs = await seedProjects(t, alice.key, [
    { name: 'Alpha', description: 'first project', status: 'active', tags: ['red', 'blue'], budget: 10, owner_email: 'alice@example.com' },
    { name: 'Beta', description: 'second one', status: 'archived', tags: ['blue'], budget: 20 },
    { name: 'Gamma', status: 'active', tags: ['green', 'red'], budget: 30, owner_email: 'g@example.com' },
    { name: 'Delta', description: 'no money', status: 'active', tags: [] },
    { name: 'Epsilon', status: 'archived', tags: ['red'], budget: 2.5, owner_email: 'e@example.com' },
    { name: '42', status: 'active', budget: 42 },
    { name: 'Zeta', status: 'active', tags: ['blue', 'green'] },
    { name: 'aaaaaaaaaaaaaaaaaaaaaaaa', status: 'archived', budget: 1 },
  ]);
  for (const d of docs) P[d.name] = d;
  // SETUP: a document without a `budget` field at all (the API always fills the default null).
  await collection(t, 'projects').updateOne({ _id: oid(P.Zeta!._id) }, { $unset: { budget: '' } });
});
afterAll(() => t?.close());

const ALL = ['42', 'Alpha', 'Beta', 'Delta', 'Epsilon', 'Gamma', 'Zeta', 'aaaaaaaaaaaaaaaaaaaaaaaa'];
const without = (...names: string[]) => ALL.filter((n) => !names.includes(n));

describe('equality filters: coercion in a fixed order (true/false, null/none, integer, float, 24-hex, string)', () => {
  it.each<[string, Record<string, string>, string[]]>([
    ['string stays a string', { status: 'active' }, ['42', 'Alpha', 'Delta', 'Gamma', 'Zeta']],
    ['string with a space', { description: 'first project' }, ['Alpha']],
    ['integer matches the number', { budget: '10' }, ['Alpha']],
    ['float matches the number', { budget: '2.5' }, ['Epsilon']],
    ['none is null (matches null and missing)', { owner_email: 'none' }, ['42', 'Beta', 'Delta', 'Zeta', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['null is null', { owner_email: 'null' }, ['42', 'Beta', 'Delta', 'Zeta', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['null on a number field', { budget: 'null' }, ['Delta', 'Zeta']],
    // On a typed field the schema casts the coerced value back (42 → "42"); the pure coercion order
    // is observable on an untyped field, see the `things` table below.
    ['integer-looking value on a string field (schema cast)', { name: '42' }, ['42']],
    ['24-hex value on a string field (schema cast)', { name: 'aaaaaaaaaaaaaaaaaaaaaaaa' }, ['aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['two equality filters AND', { status: 'archived', budget: '20' }, ['Beta']],
  ])('%s: %j', async (_label, params, expected) => {
    expect(sortedNames(await projects(params))).toEqual(expected);
  });

  describe('on an untyped field every coercion row is observable', () => {
    const HEX = '0123456789abcdef01234567';
    beforeAll(async () => {
      const docs = await seed(t, '/things', alice.key, [
        { label: 'bool true', meta: true }, { label: 'string true', meta: 'true' }, { label: 'bool false', meta: false },
        { label: 'null', meta: null }, { label: 'string null', meta: 'null' }, { label: 'string none', meta: 'none' },
        { label: 'int 10', meta: 10 }, { label: 'string 10', meta: '10' }, { label: 'int -3', meta: -3 },
        { label: 'float 2.5', meta: 2.5 }, { label: 'string 2.5', meta: '2.5' }, { label: 'float 1000', meta: 1000 },
        { label: 'object id', meta: 'placeholder' }, { label: 'string hex', meta: HEX }, { label: 'string abc', meta: 'abc' },
        { label: 'string 10 digits + hex-like', meta: '12345678901234567890' },
      ]);
      // SETUP: JSON cannot carry an ObjectId.
      const ph = docs.find((d) => d.label === 'object id')!;
      await collection(t, 'things').updateOne({ _id: oid(ph._id) }, { $set: { meta: oid(HEX) } });
    });

    it.each<[string, string, string[]]>([
      ['true → boolean', 'true', ['bool true']],
      ['false → boolean', 'false', ['bool false']],
      ['null → null', 'null', ['null']],
      ['none → null', 'none', ['null']],
      ['integer-looking → integer', '10', ['int 10']],
      ['negative integer', '-3', ['int -3']],
      ['float-looking → float', '2.5', ['float 2.5']],
      ['float with exponent', '1e3', ['float 1000']],
      ['24-hex → object id', HEX, ['object id']],
      ['anything else stays a string', 'abc', ['string abc']],
      ['digits beyond a safe integer stay a string', '12345678901234567890', ['string 10 digits + hex-like']],
    ])('%s (meta=%s)', async (_label, value, expected) => {
      const labels = items(await list('/things', { meta: value, per_page: 100 })).map((d) => d.label).sort();
      expect(labels).toEqual(expected);
    });
  });

  it('true/false become booleans and a 24-hex value becomes an object id (tasks)', async () => {
    const [, t2] = await seed(t, '/tasks', alice.key, [
      { project_id: P.Alpha!._id, title: 'one', done: true },
      { project_id: P.Alpha!._id, title: 'two', done: false },
      { project_id: P.Beta!._id, title: 'three', done: true },
    ]);
    const titles = async (params: Record<string, string>) => items(await list('/tasks', params)).map((d) => d.title).sort();
    expect(await titles({ done: 'true' })).toEqual(['one', 'three']);
    expect(await titles({ done: 'false' })).toEqual(['two']);
    expect(await titles({ project_id: P.Alpha!._id })).toEqual(['one', 'two']);
    expect(await titles({ project_id: P.Beta!._id, done: 'true' })).toEqual(['three']);
    expect(await titles({ _id: t2!._id })).toEqual(['two']);
    expect(await titles({ project_id__in: `${P.Beta!._id},${P.Gamma!._id}` })).toEqual(['three']);
  });

  it.each<[string, string, string]>([
    ['unknown field', '/projects', 'nope=1'],
    ['unknown field with an operator', '/projects', 'nope__gt=1'],
    ['unknown operator', '/projects', 'budget__foo=1'],
    ['relation traversal', '/tasks', 'project_id.name=Alpha'],
    ['relation traversal with an operator', '/tasks', 'project_id.name__regex=a'],
    ['operator-like field name', '/projects', '%24where=1'],
    ['prototype path segment', '/projects', 'constructor.name=x'],
    ['exists with a non-boolean', '/projects', 'budget__exists=maybe'],
    ['a parameter given twice', '/projects', 'budget=1&budget=2'],
    ['malformed page', '/projects', 'page=abc'],
    ['page 0', '/projects', 'page=0'],
    ['bad direction', '/projects', 'direction=sideways&limit=2'],
    ['bad include_deleted', '/projects', 'include_deleted=yes'],
    ['value not castable to a number field', '/projects', 'budget=abc'],
    ['value not castable, with an operator', '/projects', 'budget__gt=abc'],
    ['value not castable inside in', '/projects', 'budget__in=1,abc'],
    ['value not castable to an object id', '/tasks', 'project_id=abc'],
    ['value not castable to a boolean', '/tasks', 'done=maybe'],
    ['value not castable to a date', '/tasks', 'due_at__lt=abc'],
    ['regex on a number field', '/projects', 'budget__regex=1'],
    ['regex on a date field', '/projects', 'created_at__regex=1'],
    ['regex on _id', '/projects', '_id__regex=a'],
    ['where: regex on a date field', '/projects', `where=${encodeURIComponent('{"created_at":{"$regex":"1"}}')}`],
    ['where: $size on a string field', '/projects', `where=${encodeURIComponent('{"name":{"$size":1}}')}`],
  ])('400 BAD_REQUEST naming the parameter: %s', async (_label, path, search) => {
    const res = await t.http('GET', `${path}?${search}`, { key: alice.key });
    expect(res.status).toBe(400);
    const e = envelope(res);
    expect(e.code).toBe('BAD_REQUEST');
    const param = decodeURIComponent(search.split('=')[0]!);
    expect(e.details.param).toBe(param);
    expect(e.details.errors).toEqual([{ loc: ['query', param], msg: e.message, type: expect.any(String) }]);
  });

  it('a value the field cannot hold is a 400 cast_error naming its parameter, also among several filters on the field', async () => {
    const res = await t.http('GET', '/projects?budget__lte=5&budget__gte=abc', { key: alice.key });
    expect(res.status).toBe(400);
    expect(envelope(res)).toMatchObject({
      code: 'BAD_REQUEST',
      message: "'abc' is not a valid number for field 'budget'",
      details: { param: 'budget__gte', errors: [{ loc: ['query', 'budget__gte'], type: 'cast_error' }] },
    });
    const gql = await t.gql('{ projects(filter: {budget__gte: "abc"}) { total } }', undefined, { key: alice.key });
    expect(gql.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_REQUEST', details: { param: 'budget__gte' } });
  });

  it('a list parameter given twice is a 400 like any malformed one; `__proto__` is dropped by validation and ignored', async () => {
    const twice = await t.http('GET', '/projects?page=1&page=2', { key: alice.key });
    expect(twice.status).toBe(400);
    expect(envelope(twice).details).toMatchObject({ param: 'page', errors: [{ loc: ['query', 'page'] }] });
    const all = await t.http('GET', '/projects', { key: alice.key });
    const proto = await t.http('GET', '/projects?__proto__=1', { key: alice.key });
    expect(proto.status).toBe(200);
    expect(proto.body.total).toBe(all.body.total);
  });
});

describe('reserved parameter names are never field filters', () => {
  beforeAll(async () => {
    await seed(t, '/notebooks', alice.key, [
      {
        name: 'apple', page: 1, per_page: 5, cursor: 'c', limit: 5, direction: 'next', sort: 'name', fields: 'name', where: '{}',
        q: 'banana', include_deleted: 'false', populate: 'other_id', tags: ['x'], tags__in: 'y', tags__all: 'y', tags__nin: 'x',
      },
      { name: 'banana', page: 2, per_page: 7, cursor: 'd', limit: 7, direction: 'prev', sort: 'z', fields: 'z', where: 'z', q: 'z', include_deleted: 'z', populate: 'z', tags: ['y'] },
    ]);
  });
  const names = async (params: Record<string, string>) => items(await list('/notebooks', params)).map((d) => d.name as string).sort();

  it.each<[string, Record<string, string>, string[]]>([
    ['page', { page: '1' }, ['apple', 'banana']],
    ['per_page', { per_page: '5' }, ['apple', 'banana']],
    ['limit', { limit: '5' }, ['apple', 'banana']],
    ['cursor (empty: first page)', { cursor: '' }, ['apple', 'banana']],
    ['direction', { direction: 'next', limit: '10' }, ['apple', 'banana']],
    ['sort', { sort: 'name' }, ['apple', 'banana']],
    ['fields', { fields: 'name' }, ['apple', 'banana']],
    ['where', { where: '{}' }, ['apple', 'banana']],
    ['include_deleted', { include_deleted: 'false' }, ['apple', 'banana']],
    ['populate', { populate: 'other_id' }, ['apple', 'banana']],
    // The reserved meaning wins: a search over `name`, not equality on the field `q`.
    ['q', { q: 'banana' }, ['banana']],
    // Tag filters over `tags`, not equality on the fields named `tags__*`.
    ['tags__in', { tags__in: 'y' }, ['banana']],
    ['tags__all', { tags__all: 'y' }, ['banana']],
    ['tags__nin', { tags__nin: 'x' }, ['banana']],
  ])('%s', async (_name, params, expected) => {
    expect(await names(params)).toEqual(expected);
  });

  it('sort and fields keep their meaning (order, projection)', async () => {
    const desc = items(await list('/notebooks', { sort: '-name' }));
    expect(desc.map((d) => d.name)).toEqual(['banana', 'apple']);
    const proj = items(await list('/notebooks', { fields: 'page' }));
    for (const d of proj) expect(Object.keys(d).sort()).toEqual(['_id', 'page']);
    expect(proj.map((d) => d.page).sort()).toEqual([1, 2]);
  });

  it('on projects: page/sort/fields/q together select, order and project instead of filtering', async () => {
    const res = await projects({ page: 1, sort: 'name', fields: 'name', q: 'a' });
    // q=a: word prefix "a" over name/description (Alpha, aaaa…, and "a" nowhere else as a word start)
    expect(items(res).map((d) => d.name)).toEqual(['Alpha', 'aaaaaaaaaaaaaaaaaaaaaaaa']);
    for (const d of items(res)) expect(Object.keys(d).sort()).toEqual(['_id', 'name']);
  });
});

describe('private fields', () => {
  let v: Doc;
  beforeAll(async () => {
    [v] = (await seed(t, '/vaults', alice.key, [{ name: 'v1' }])) as [Doc];
    // SETUP: the API never accepts a private field, so it is written directly.
    await collection(t, 'vaults').updateOne({ _id: oid(v._id) }, { $set: { secret: 'hunter2' } });
  });

  it('cannot be set through the API (422)', async () => {
    const res = await t.http('POST', '/vaults', { key: alice.key, json: { name: 'x', secret: 's' } });
    expect(res.status).toBe(422);
  });

  it.each([
    ['equality', { secret: 'hunter2' }],
    ['suffix operator', { secret__exists: 'true' }],
    ['regex probe', { secret__regex: '^h' }],
    ['where', { where: { secret: 'hunter2' } }],
    ['where inside $or', { where: { $or: [{ name: 'v1' }, { secret: { $regex: '^h' } }] } }],
    ['where $not', { where: { secret: { $not: { $eq: 'x' } } } }],
    ['sort', { sort: 'secret' }],
    ['fields', { fields: 'name,secret' }],
    ['fields in cursor mode', { fields: 'secret', limit: '5' }],
  ])('is not filterable/sortable/projectable: %s → 400', async (_l, params) => {
    const res = await list('/vaults', params);
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });

  it.each([
    ['offset list', '/vaults'],
    ['cursor list', '/vaults?limit=5'],
    ['get-one', 'ONE'],
    ['get-one with fields', 'ONE?fields=name'],
  ])('is never returned: %s', async (_l, path) => {
    const res = await t.http('GET', path.startsWith('ONE') ? `/vaults/${v._id}${path.slice(3)}` : path, { key: alice.key });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain('hunter2');
    expect(JSON.stringify(res.body)).not.toContain('secret');
  });

  it('is not a GraphQL field', async () => {
    const res = await t.gql('{ vaults { items { _id name secret } } }', {}, { key: alice.key });
    expect(res.body.errors?.[0]?.message).toMatch(/secret/);
    const ok = await t.gql('{ vaults { items { _id name } } }', {}, { key: alice.key });
    expect(JSON.stringify(ok.body)).not.toContain('hunter2');
    expect(ok.body.data.vaults.items).toEqual([{ _id: v._id, name: 'v1' }]);
  });
});

describe('suffix operators', () => {
  it.each<[string, Record<string, string>, string[]]>([
    ['gt', { budget__gt: '20' }, ['42', 'Gamma']],
    ['gte', { budget__gte: '20' }, ['42', 'Beta', 'Gamma']],
    ['lt (null and missing never compare)', { budget__lt: '10' }, ['Epsilon', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['lte', { budget__lte: '10' }, ['Alpha', 'Epsilon', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['gt with a float', { budget__gt: '2.4' }, ['42', 'Alpha', 'Beta', 'Epsilon', 'Gamma']],
    ['gte and lte together', { budget__gte: '10', budget__lte: '20' }, ['Alpha', 'Beta']],
    ['ne (includes null and missing)', { budget__ne: '10' }, without('Alpha')],
    ['ne on a string', { status__ne: 'archived' }, ['42', 'Alpha', 'Delta', 'Gamma', 'Zeta']],
    ['in', { budget__in: '10,30' }, ['Alpha', 'Gamma']],
    ['in with none', { budget__in: '10,none' }, ['Alpha', 'Delta', 'Zeta']],
    ['in on strings', { status__in: 'archived' }, ['Beta', 'Epsilon', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['nin', { budget__nin: '10,30' }, without('Alpha', 'Gamma')],
    ['exists=false', { budget__exists: 'false' }, ['Zeta']],
    ['exists=true', { budget__exists: 'true' }, without('Zeta')],
    ['regex is case-insensitive', { name__regex: '^AL' }, ['Alpha']],
    ['regex anchored at the end', { name__regex: 'TA$' }, ['Beta', 'Delta', 'Zeta']],
    ['regex on a lower-case pattern', { description__regex: 'PROJECT' }, ['Alpha']],
    ['equality and operator on one field', { budget: '20', budget__gte: '10' }, ['Beta']],
  ])('%s: %j', async (_label, params, expected) => {
    expect(sortedNames(await projects(params))).toEqual(expected);
  });

  it.each([
    ['regex longer than the cap (256)', { name__regex: 'a'.repeat(257) }],
    ['invalid regex', { name__regex: '(' }],
    ['invalid regex (bad class)', { name__regex: '[z-a]' }],
  ])('400: %s', async (_l, params) => {
    const res = await projects(params);
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });

  it('a regex exactly at the cap is accepted', async () => {
    const pattern = `^${'a'.repeat(24)}$|${'z'.repeat(229)}`;
    expect(pattern).toHaveLength(256);
    const res = await projects({ name__regex: pattern });
    expect(sortedNames(res)).toEqual(['aaaaaaaaaaaaaaaaaaaaaaaa']);
  });
});

describe('where', () => {
  it.each<[string, unknown, string[]]>([
    ['$or branches', { $or: [{ budget: { $gt: 25 } }, { status: 'archived' }] }, ['42', 'Beta', 'Epsilon', 'Gamma', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['nested $and of $or', { $and: [{ $or: [{ name: 'Alpha' }, { name: 'Beta' }, { name: 'Gamma' }] }, { $or: [{ budget: { $lt: 15 } }, { status: 'archived' }] }] }, ['Alpha', 'Beta']],
    ['$not', { name: { $not: { $regex: '^[a-e]', $options: 'i' } } }, ['42', 'Gamma', 'Zeta']],
    ['$nor', { $nor: [{ status: 'archived' }, { budget: null }] }, ['42', 'Alpha', 'Gamma']],
    ['$regex with $options', { description: { $regex: 'ONE$', $options: 'i' } }, ['Beta']],
    ['$in and $exists', { budget: { $in: [10, 20, 30], $exists: true } }, ['Alpha', 'Beta', 'Gamma']],
    ['$all on tags', { tags: { $all: ['red', 'blue'] } }, ['Alpha']],
    ['$size on tags', { tags: { $size: 2 } }, ['Alpha', 'Gamma', 'Zeta']],
    ['$elemMatch on tags', { tags: { $elemMatch: { $eq: 'green' } } }, ['Gamma', 'Zeta']],
    ['$eq null', { owner_email: { $eq: null }, status: 'active' }, ['42', 'Delta', 'Zeta']],
    ['_id as a 24-hex string', 'ID_OF_ALPHA', ['Alpha']],
    ['empty object matches everything', {}, ALL],
  ])('%s', async (_label, where, expected) => {
    const w = where === 'ID_OF_ALPHA' ? { _id: P.Alpha!._id } : where;
    expect(sortedNames(await projects({ where: w as object }))).toEqual(expected);
  });

  it.each<[string, unknown, Record<string, string>, string[]]>([
    ['same field: the query parameter wins', { status: 'archived' }, { status: 'active' }, ['42', 'Alpha', 'Delta', 'Gamma', 'Zeta']],
    ['same field, operator in where: the parameter wins', { budget: { $lt: 5 } }, { budget__gte: '30' }, ['42', 'Gamma']],
    ['same field, parameter equality beats where operator', { budget: { $gt: 100 } }, { budget: '10' }, ['Alpha']],
    ['different fields: both apply', { status: 'archived' }, { budget__lt: '25' }, ['Beta', 'Epsilon', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['where $or plus parameter: both apply', { $or: [{ name: 'Alpha' }, { name: 'Beta' }] }, { status: 'active' }, ['Alpha']],
    ['tags in where, tag parameter wins', { tags: 'green' }, { tags__in: 'red' }, ['Alpha', 'Epsilon', 'Gamma']],
    ['where $and plus tag parameters: all apply', { $and: [{ status: 'active' }] }, { tags__in: 'red', tags__nin: 'blue' }, ['Gamma']],
  ])('merge with query parameters: %s', async (_label, where, params, expected) => {
    expect(sortedNames(await projects({ where: where as object, ...params }))).toEqual(expected);
  });

  const deep = (n: number): Record<string, unknown> => {
    let w: Record<string, unknown> = { name: 'Alpha' };
    for (let i = 0; i < n; i++) w = { $and: [w] };
    return w;
  };

  it.each<[string, string]>([
    ...(['$where', '$expr', '$function', '$accumulator'] as const).flatMap((op): [string, string][] => {
      const v = op === '$where' ? '"return true"' : op === '$expr' ? '{"$gt":["$budget",1]}' : '{"body":"function(){return true}","args":[],"lang":"js"}';
      return [
        [`${op} at top level`, `{"${op}":${v}}`],
        [`${op} inside $or`, `{"$or":[{"name":"Alpha"},{"${op}":${v}}]}`],
        [`${op} inside $and`, `{"$and":[{"${op}":${v}}]}`],
        [`${op} inside $nor`, `{"$nor":[{"${op}":${v}}]}`],
        [`${op} as a field operator`, `{"budget":{"${op}":${v}}}`],
        [`${op} inside $not`, `{"budget":{"$not":{"${op}":${v}}}}`],
        [`${op} inside $elemMatch`, `{"tags":{"$elemMatch":{"${op}":${v}}}}`],
        [`${op} inside an embedded object`, `{"budget":{"x":{"${op}":${v}}}}`],
      ];
    }),
    ['unknown operator at top level', '{"$foo":1}'],
    ['unknown operator on a field', '{"budget":{"$foo":1}}'],
    ['$text', '{"$text":{"$search":"alpha"}}'],
    ['$jsonSchema', '{"$jsonSchema":{}}'],
    ['$or with a non-array', '{"$or":{"name":"Alpha"}}'],
    ['$or with an empty array', '{"$or":[]}'],
    ['unknown field', '{"nope":1}'],
    ['unknown field in $or', '{"$or":[{"nope":1}]}'],
    ['relation traversal', '{"project_id.name":"x"}'],
    ['invalid JSON', '{"name":'],
    ['invalid JSON (single quotes)', "{'name':'Alpha'}"],
    ['array', '[{"name":"Alpha"}]'],
    ['number', '1'],
    ['null', 'null'],
    ['string', '"name"'],
    ['boolean', 'true'],
    ['too deep', JSON.stringify(deep(8))],
    ['too large (> 8192 characters)', JSON.stringify({ name: 'x'.repeat(8200) })],
    ['too many nodes', JSON.stringify({ $or: Array.from({ length: 250 }, (_, i) => ({ budget: i })) })],
    ['$regex too long', JSON.stringify({ name: { $regex: 'a'.repeat(257) } })],
    ['invalid $regex', '{"name":{"$regex":"("}}'],
    ['$options without $regex', '{"name":{"$options":"i"}}'],
    ['__proto__ key', '{"__proto__":{"x":1}}'],
  ])('400 BAD_REQUEST: %s', async (_label, raw) => {
    const path = raw.includes('project_id') ? '/tasks' : '/projects';
    const res = await t.http('GET', `${path}?where=${encodeURIComponent(raw)}`, { key: alice.key });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });

  it('a nesting depth within the limit is accepted', async () => {
    // deep(2): {$and:[{$and:[{name}]}]} = 5 levels of objects/arrays, limit 6.
    expect(sortedNames(await projects({ where: deep(2) }))).toEqual(['Alpha']);
  });
});

describe('q: search', () => {
  beforeAll(async () => {
    await seedProjects(t, alice.key, [
      { name: 'Apollo Rocket', description: 'moon landing program', status: 'archived' },
      { name: 'abc', status: 'archived' },
      { name: 'a.c', status: 'archived' },
      { name: '(draft) plan', status: 'archived' },
      { name: 'Mercury', description: 'APOLLO precursor', status: 'archived' },
    ]);
  });
  const search = async (q: string) => sortedNames(await list('/projects', { q, status: 'archived', per_page: 100 }));

  it.each<[string, string, string[]]>([
    ['prefix of the field', 'apo', ['Apollo Rocket', 'Mercury']],
    ['case-insensitive', 'APOLLO', ['Apollo Rocket', 'Mercury']],
    ['not a substring', 'ollo', []],
    ['words ANDed across fields (name + description)', 'apollo moon', ['Apollo Rocket']],
    ['words ANDed: one word matches nothing', 'apollo venus', []],
    ['word order does not matter', 'landing apollo', ['Apollo Rocket']],
    ['prefix of a later word (word-prefix search)', 'rocket', ['Apollo Rocket']],
    ['extra white space', '  apollo   moon ', ['Apollo Rocket']],
    ['regex metacharacter . is literal', 'a.c', ['a.c']],
    ['regex metacharacter ( is literal', '(', ['(draft) plan']],
    ['other metacharacters', '.*', []],
    ['backslash', '\\', []],
  ])('%s: q=%j', async (_label, q, expected) => {
    expect(await search(q)).toEqual(expected);
  });

  it('q combines with where $and, equality filters and tags', async () => {
    const res = await list('/projects', { q: 'apo', where: { $and: [{ status: 'archived' }] }, per_page: 100 });
    expect(sortedNames(res)).toEqual(['Apollo Rocket', 'Mercury']);
    expect(sortedNames(await list('/projects', { q: 'apo', name: 'Mercury' }))).toEqual(['Mercury']);
    expect(sortedNames(await list('/projects', { q: 'a', tags__all: 'red,blue' }))).toEqual(['Alpha']);
  });

  it('400 "Search is not enabled for this resource" on a resource without searchable fields', async () => {
    const res = await list('/vaults', { q: 'v1' });
    expect(res.status).toBe(400);
    const e = envelope(res);
    expect(e.code).toBe('BAD_REQUEST');
    expect(e.message).toBe('Search is not enabled for this resource');
  });

  it('400 when q is longer than the cap', async () => {
    const res = await list('/projects', { q: 'a'.repeat(300) });
    expect(res.status).toBe(400);
  });
});

describe('tags', () => {
  it.each<[string, Record<string, string>, string[]]>([
    ['tags__in: any listed tag', { tags__in: 'green,blue' }, ['Alpha', 'Beta', 'Gamma', 'Zeta']],
    ['tags__in: one tag', { tags__in: 'red' }, ['Alpha', 'Epsilon', 'Gamma']],
    ['tags__all: every listed tag', { tags__all: 'red,blue' }, ['Alpha']],
    ['tags__all: one tag', { tags__all: 'green' }, ['Gamma', 'Zeta']],
    ['tags__nin: none present', { tags__nin: 'red,blue' }, ['42', 'Delta', 'aaaaaaaaaaaaaaaaaaaaaaaa']],
    ['tags__in and tags__nin', { tags__in: 'blue', tags__nin: 'green' }, ['Alpha', 'Beta']],
    ['tags__all and tags__in', { tags__all: 'red', tags__in: 'green' }, ['Gamma']],
    ['tags__in: tags are case-sensitive', { tags__in: 'RED' }, []],
    ['tags__in: unknown tag', { tags__in: 'nope' }, []],
  ])('%s', async (_label, params, expected) => {
    // only the first seeding (the q describe adds untagged archived projects)
    expect(sortedNames(await projects({ ...params, where: { name: { $in: ALL } } }))).toEqual(expected);
  });

  it('400 on a resource without tags', async () => {
    const res = await list('/vaults', { tags__in: 'x' });
    expect(res.status).toBe(400);
  });
});
