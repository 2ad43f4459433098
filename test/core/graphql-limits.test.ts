import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type HttpResult, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';

let t: TestApp;
let user: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  user = await createTenantUser(t, { features: ['tasks'] });
});
afterAll(() => t?.close());

const projectCount = () => t.app.db.conn.collection('projects').countDocuments();

/** 400 BAD_REQUEST in the GraphQL form of the envelope, with a request id, and no data. */
function expectRejected(res: HttpResult<any>, message: RegExp) {
  expect(res.status).toBe(400);
  expect(res.body.data ?? null).toBeNull();
  const [err] = res.body.errors;
  expect(err.message).toMatch(message);
  expect(err.extensions.code).toBe('BAD_REQUEST');
  expect(err.extensions.request_id).toBe(res.headers.get('x-request-id'));
  expect(JSON.stringify(res.body)).not.toMatch(/at .*\.(ts|js):\d+/);
}

describe('GraphQL cost limits', () => {
  it('1000 aliases of projects(per_page: 100) is 400 before any list runs', async () => {
    const query = `{ ${Array.from({ length: 1000 }, (_, i) => `a${i}: projects(per_page: 100) { total items { _id } }`).join(' ')} }`;
    const res = await t.http('POST', '/graphql', { key: user.key, json: { query }, headers: {} });
    // The token cap trips first on a document this large; smaller ones hit the alias cap.
    expectRejected(res, /token|alias/i);
  });

  it('31 aliases (over GRAPHQL_MAX_ALIASES=30) is 400; 30 pass', async () => {
    const q = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: projects(per_page: 1) { total }`).join(' ')} }`;
    expectRejected(await t.gql(q(31), undefined, { key: user.key }), /alias/i);
    const ok = await t.gql(q(30), undefined, { key: user.key });
    expect(ok.status).toBe(200);
    expect(ok.body.errors).toBeUndefined();
  });

  it('a list counts by its page size: lists whose pages add up past GRAPHQL_MAX_LIST_ITEMS are 400', async () => {
    const q = (per: number) => `{ ${Array.from({ length: 20 }, (_, i) => `a${i}: projects(per_page: ${per}) { items { _id } }`).join(' ')} }`;
    expectRejected(await t.gql(q(300), undefined, { key: user.key }), /lists may return \d+ items, at most 5000/);
    expect(JSON.stringify((await t.gql(q(100), undefined, { key: user.key })).body.errors)).toBeUndefined();
    // A variable page size counts by its value.
    const vq = `query($n: Int) { ${Array.from({ length: 20 }, (_, i) => `a${i}: projects(per_page: $n) { items { _id } }`).join(' ')} }`;
    expectRejected(await t.gql(vq, { n: 300 }, { key: user.key }), /lists may return \d+ items/);
    expect(JSON.stringify((await t.gql(vq, { n: 10 }, { key: user.key })).body.errors)).toBeUndefined();
  });

  it('200 aliased creates in one mutation: 400 and nothing written (cap: the bulk cap of 100)', async () => {
    const before = await projectCount();
    const mutation = (n: number) => `mutation { ${Array.from({ length: n }, (_, i) => `c${i}: createProject(input: { name: "m${i}" }) { _id }`).join(' ')} }`;
    const res = await t.http('POST', '/graphql', { key: user.key, json: { query: mutation(200) } });
    expect(res.status).toBe(400);
    expect(res.body.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    expect(await projectCount()).toBe(before);
  });

  it('the mutation-field cap counts fields, not aliases: 101 fields through fragments are refused', async () => {
    const app = await buildTestApp({ plugins: [resourcesPlugin], config: { GRAPHQL_MAX_ALIASES: '1000', GRAPHQL_MAX_TOKENS: '100000', GRAPHQL_MAX_COST: '1000000' } });
    try {
      const before = await app.app.db.conn.collection('projects').countDocuments();
      const fields = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `c${i + from}: createProject(input: { name: "f${i + from}" }) { _id }`).join(' ');
      const res = await app.gql(`mutation { ...A ${fields(51, 50)} } fragment A on Mutation { ${fields(50)} }`);
      expect(res.status).toBe(400);
      expect(res.body.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_REQUEST', details: { limit: 'mutation_fields', max: 100, found: 101 } } });
      expect(await app.app.db.conn.collection('projects').countDocuments()).toBe(before);
      const ok = await app.gql(`mutation { ${fields(100)} }`);
      expect(ok.body.errors).toBeUndefined();
      expect(await app.app.db.conn.collection('projects').countDocuments()).toBe(before + 100);
    } finally {
      await app.close();
    }
  });

  it('selection depth over GRAPHQL_MAX_DEPTH is 400', async () => {
    const deep = `{ me ${'{ __typename '.repeat(1)}} }`;
    expect((await t.gql(deep, undefined, { key: user.key })).status).toBe(200);
    const tooDeep = `{ tasks { items { project_id { ${'_id '} } } } }`;
    expect((await t.gql(tooDeep, undefined, { key: user.key })).status).toBe(200);
    const app = await buildTestApp({ plugins: [resourcesPlugin], config: { GRAPHQL_MAX_DEPTH: '2' } });
    try {
      expectRejected(await app.gql('{ projects { items { _id } } }'), /depth/i);
    } finally {
      await app.close();
    }
  });

  it('too many directives is 400', async () => {
    const q = `{ me { email ${'@include(if: true) '.repeat(51)} } }`;
    expectRejected(await t.gql(q, undefined, { key: user.key }), /directive/i);
  });

  it('query text 3,000 to 5,000 levels deep is 400, not INTERNAL_ERROR', async () => {
    for (const depth of [3000, 5000]) {
      const q = `{ ${'projects { items { '.repeat(depth)}_id${' } }'.repeat(depth)} }`;
      expectRejected(await t.http('POST', '/graphql', { key: user.key, json: { query: q } }), /token/i);
    }
    // An object literal nested as deep in the text trips the same parser-level cap.
    const lit = `{ projects(where: ${'{a: '.repeat(4000)}1${'}'.repeat(4000)}) { total } }`;
    expectRejected(await t.http('POST', '/graphql', { key: user.key, json: { query: lit } }), /token/i);
  });

  it('variables nested 20,000 deep are 400, not INTERNAL_ERROR', async () => {
    // Built as text: JSON.stringify itself would overflow the stack on 20,000 levels.
    const deep = `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
    const body = `{"query":"query($w: JSON) { projects(where: $w) { total } }","variables":{"w":${deep}}}`;
    const res = await t.http('POST', '/graphql', { key: user.key, body, headers: { 'Content-Type': 'application/json' } });
    expectRejected(res, /nested too deep/);
    // A reasonable nesting still works.
    const ok = await t.gql('query($w: JSON) { projects(where: $w) { total } }', { w: { name: { $eq: 'x' } } }, { key: user.key });
    expect(ok.status).toBe(200);
  });

  it('GraphiQL-style introspection still works under the limits', async () => {
    const { getIntrospectionQuery } = await import('graphql');
    const res = await t.gql(getIntrospectionQuery(), undefined, { key: user.key });
    expect(res.status).toBe(200);
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.__schema.queryType.name).toBe('Query');
  });
});
