/**
 * `GET /<resource>/:id?draft=true` takes `fields`, `populate` and `include_deleted` as a plain GET
 * does, applied to the draft's values; a reader who may not read the draft gets the plain answer to
 * the same query. A draft in another tenant stays out of reach.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { defineResource } from '../../plugins/resources/define.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { ifMatch } from './write-helpers.ts';

/** Drafts with a relation: a note about a project. */
const notesResource = defineResource({
  name: 'notes',
  schema: new Schema({
    title: { type: String, required: true },
    body: { type: String, default: null },
    project_id: { type: Schema.Types.ObjectId, ref: 'projects', default: null },
  }),
  populatable: ['project_id'],
  drafts: true,
});

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let author: User;
let reader: User;
let other: User;
let noteId: string;
let projectA: string;
let projectB: string;

async function ok(method: string, path: string, key: string, json?: unknown, etag?: string) {
  const res = await t.http(method, path, { key, ...(json !== undefined ? { json } : {}), ...(etag ? { headers: ifMatch(etag) } : {}) });
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
  return res;
}

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, notesResource] })] });
  author = await createTenantUser(t);
  reader = await createTenantUser(t, { tenantId: author.tenantId });
  other = await createTenantUser(t, { roles: ['admin'] });
  projectA = (await ok('POST', '/projects', author.key, { name: 'alpha' })).body._id;
  projectB = (await ok('POST', '/projects', author.key, { name: 'beta' })).body._id;
  noteId = (await ok('POST', '/notes', author.key, { title: 'published', body: 'old', project_id: projectA })).body._id;
  await ok('PATCH', `/notes/${noteId}?draft=true`, author.key, { title: 'drafted', project_id: projectB }, '"1"');
});
afterAll(() => t?.close());

describe('GET ?draft=true with query parameters', () => {
  it('fields: the same keys as a plain GET with those fields, the draft\'s values', async () => {
    const plain = await ok('GET', `/notes/${noteId}?fields=title`, author.key);
    const draft = await ok('GET', `/notes/${noteId}?draft=true&fields=title`, author.key);
    expect(draft.body).toEqual({ _id: noteId, title: 'drafted' });
    expect(draft.body).not.toHaveProperty('body');
    expect(draft.body).not.toHaveProperty('project_id');
    expect(Object.keys(draft.body).sort()).toEqual(Object.keys(plain.body).sort());
    expect(draft.headers.get('etag')).toBe(plain.headers.get('etag'));
  });

  it("populate: the draft's relation, resolved as a plain GET resolves the published one", async () => {
    const plain = await ok('GET', `/notes/${noteId}?populate=project_id`, author.key);
    expect(plain.body.project_id).toMatchObject({ _id: projectA, name: 'alpha' });
    const draft = await ok('GET', `/notes/${noteId}?draft=true&populate=project_id`, author.key);
    expect(draft.body).toMatchObject({ title: 'drafted', _status: 'draft', project_id: { _id: projectB, name: 'beta' } });
    const both = await ok('GET', `/notes/${noteId}?draft=true&fields=project_id&populate=project_id`, author.key);
    expect(both.body).toMatchObject({ project_id: { _id: projectB, name: 'beta' } });
    expect(both.body).not.toHaveProperty('title');
  });

  it('a reader who may not read the draft gets the plain answer to the same query', async () => {
    const got = await ok('GET', `/notes/${noteId}?draft=true&fields=title&populate=project_id`, reader.key);
    const plain = await ok('GET', `/notes/${noteId}?fields=title&populate=project_id`, reader.key);
    expect(got.body).toEqual(plain.body);
    expect(got.body).toMatchObject({ title: 'published' });
  });

  it('bad parameters answer the envelope, as on a plain GET; another tenant sees nothing', async () => {
    expectError(await t.http('GET', `/notes/${noteId}?draft=true&fields=nope`, { key: author.key }), 400, 'BAD_REQUEST');
    expectError(await t.http('GET', `/notes/${noteId}?draft=true&populate=title`, { key: author.key }), 400, 'BAD_REQUEST');
    expectError(await t.http('GET', `/notes/${noteId}?draft=true&fields=title`, { key: other.key }), 404, 'NOT_FOUND');
  });
});
