/**
 * Drafts over GraphQL: `draft: true` on the writes, `draft: true` on get-one, `publishProject` and
 * `unpublishProject`; list and get never show a draft to a reader without `read_drafts`; errors
 * carry the REST codes; another tenant gets NOT_FOUND.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { expectNoWrite } from './write-helpers.ts';

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let author: User;
let reader: User;
let other: User;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource] })] });
  author = await createTenantUser(t);
  reader = await createTenantUser(t, { tenantId: author.tenantId });
  other = await createTenantUser(t, { roles: ['admin'] });
});
afterAll(() => t?.close());

const FIELDS = '_id name etag _status';
async function gql(query: string, variables: Record<string, unknown>, key: string) {
  const res = await t.gql<Record<string, any>>(query, variables, { key });
  expect(res.status).toBe(200);
  return res.body;
}
async function data(query: string, variables: Record<string, unknown>, key: string) {
  const body = await gql(query, variables, key);
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data!;
}
const codeOf = (body: { errors?: { extensions?: { code?: string } }[] }) => body.errors?.[0]?.extensions?.code;

const CREATE = `mutation($input: JSON!, $draft: Boolean) { createProject(input: $input, draft: $draft) { ${FIELDS} } }`;
const UPDATE = `mutation($id: ID!, $m: String, $input: JSON!, $draft: Boolean) { updateProject(id: $id, if_match: $m, input: $input, draft: $draft) { ${FIELDS} } }`;
const GET = `query($id: ID!, $draft: Boolean) { project(id: $id, draft: $draft) { ${FIELDS} } }`;
const LIST = `query($q: String) { projects(q: $q) { items { ${FIELDS} } total } }`;
const PUBLISH = `mutation($id: ID!, $m: String) { publishProject(id: $id, if_match: $m) { ${FIELDS} } }`;
const UNPUBLISH = `mutation($id: ID!, $m: String) { unpublishProject(id: $id, if_match: $m) { ${FIELDS} } }`;

describe('drafts over GraphQL', () => {
  it('a draft is invisible to readers in list and get until published; publish and unpublish answer the document', async () => {
    const created = (await data(CREATE, { input: { name: 'gqldraft' }, draft: true }, author.key)).createProject;
    expect(created._status).toBe('draft');
    const id = created._id as string;

    expect((await data(LIST, { q: 'gqldraft' }, reader.key)).projects).toEqual({ items: [], total: 0 });
    const hidden = await gql(GET, { id }, reader.key);
    expect(codeOf(hidden)).toBe('NOT_FOUND');
    expect((await data(LIST, { q: 'gqldraft' }, author.key)).projects.items).toMatchObject([{ name: 'gqldraft', _status: 'draft' }]);

    expect(codeOf(await gql(PUBLISH, { id, m: '"1"' }, reader.key))).toBe('NOT_FOUND');
    const published = (await data(PUBLISH, { id, m: '"1"' }, author.key)).publishProject;
    expect(published).toMatchObject({ name: 'gqldraft', _status: 'published', etag: '"2"' });
    expect((await data(GET, { id }, reader.key)).project).toMatchObject({ name: 'gqldraft', _status: 'published' });

    // A draft of the published document: readers keep the published name; draft: true shows it to its author.
    await data(UPDATE, { id, m: '"2"', input: { name: 'gqldraft renamed' }, draft: true }, author.key);
    expect((await data(GET, { id, draft: true }, reader.key)).project.name).toBe('gqldraft');
    expect((await data(LIST, { q: 'renamed' }, reader.key)).projects.items).toEqual([]);
    expect((await data(GET, { id, draft: true }, author.key)).project).toMatchObject({ name: 'gqldraft renamed', _status: 'draft' });

    const un = (await data(UNPUBLISH, { id, m: '"3"' }, author.key)).unpublishProject;
    expect(un._status).toBe('draft');
    expect(codeOf(await gql(GET, { id }, reader.key))).toBe('NOT_FOUND');
  });

  it('errors carry the REST codes, other tenants get NOT_FOUND, and nothing is written', async () => {
    const id = (await data(CREATE, { input: { name: 'gqlerr' } }, author.key)).createProject._id as string;
    await expectNoWrite(t, ['projects'], async () => {
      expect(codeOf(await gql(PUBLISH, { id }, author.key))).toBe('ETAG_REQUIRED');
      expect(codeOf(await gql(PUBLISH, { id, m: '"1"' }, author.key))).toBe('CONFLICT');
      expect(codeOf(await gql(PUBLISH, { id, m: '"1"' }, other.key))).toBe('NOT_FOUND');
      expect(codeOf(await gql(UNPUBLISH, { id, m: '"1"' }, other.key))).toBe('NOT_FOUND');
      expect(codeOf(await gql(UPDATE, { id, m: '"1"', input: { budget: 'x' }, draft: true }, author.key))).toBe('VALIDATION_ERROR');
      const late = await gql('mutation($input: JSON!) { createProject(input: $input, publish_at: "2030-01-01T00:00:00Z") { _id } }', { input: { name: 'x' } }, author.key);
      expect(codeOf(late)).toBe('VALIDATION_ERROR');
    });
  });
});
