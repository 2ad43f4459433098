/**
 * The declared permissions of the resources' GraphQL fields: every generated root field (list,
 * get, writes, restore, drafts, versions) and `resourceTypes` refuses an anonymous caller with
 * AUTH_REQUIRED before its resolver runs; a signed-in caller is let through to the access rules,
 * which keep restoring a deleted document for administrators (ACCESS_DENIED for a plain user).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { ifMatch } from './write-helpers.ts';

type User = { key: string; tenantId: string };
let t: TestApp;
let alice: User;
let admin: User;
let id: string;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource] })] });
  alice = await createTenantUser(t);
  admin = await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'] });
  const created = await t.http('POST', '/projects', { key: alice.key, json: { name: 'declared' } });
  expect(created.status).toBe(201);
  id = String(created.body._id);
});
afterAll(() => t?.close());

const OPS: [string, string][] = [
  ['projects', '{ projects { total } }'],
  ['project', `{ project(id: "ID") { _id } }`],
  ['resourceTypes', '{ resourceTypes { name } }'],
  ['createProject', 'mutation { createProject(input: { name: "anon" }) { _id } }'],
  ['updateProject', 'mutation { updateProject(id: "ID", if_match: "\\"1\\"", input: { name: "anon" }) { _id } }'],
  ['replaceProject', 'mutation { replaceProject(id: "ID", if_match: "\\"1\\"", input: { name: "anon" }) { _id } }'],
  ['deleteProject', 'mutation { deleteProject(id: "ID", if_match: "\\"1\\"") { _id } }'],
  ['restoreProject', 'mutation { restoreProject(id: "ID", if_match: "\\"1\\"") { _id } }'],
  ['publishProject', 'mutation { publishProject(id: "ID", if_match: "\\"1\\"") { _id } }'],
  ['unpublishProject', 'mutation { unpublishProject(id: "ID", if_match: "\\"1\\"") { _id } }'],
  ['restoreProjectVersion', 'mutation { restoreProjectVersion(id: "ID", n: 1, if_match: "\\"1\\"") { _id } }'],
];

describe('resources over GraphQL: declared permissions', () => {
  it.each(OPS)('%s: AUTH_REQUIRED without credentials, nothing written', async (_name, query) => {
    const res = await t.gql(query.replace('ID', id), {}, { key: null });
    // A nullable field answers null beside the error, a non-null one nulls `data`.
    expect(Object.values(res.body.data ?? {}).filter((v) => v !== null)).toEqual([]);
    expect(res.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    const stored = await t.http('GET', `/projects/${id}`, { key: alice.key });
    expect(stored.body).toMatchObject({ name: 'declared', version: 1, is_deleted: false });
  });

  it('a signed-in user reads the document and its fields behind `user` (versions, _actions)', async () => {
    const res = await t.gql('query($id: ID!) { project(id: $id) { name _actions versions { items { version } } } resourceTypes { name } }', { id }, { key: alice.key });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.project).toMatchObject({ name: 'declared', versions: { items: [{ version: 1 }] } });
    expect(res.body.data.project._actions).toContain('update');
    expect(res.body.data.resourceTypes.map((r: { name: string }) => r.name)).toContain('projects');
  });

  it('restoring a deleted document: ACCESS_DENIED for a plain user (an access rule), done for an administrator', async () => {
    const doc = (await t.http('POST', '/projects', { key: alice.key, json: { name: 'to restore' } })).body;
    expect((await t.http('DELETE', `/projects/${doc._id}`, { key: alice.key, headers: ifMatch('"1"') })).status).toBe(204);
    const q = 'mutation($id: ID!) { restoreProject(id: $id, if_match: "\\"2\\"") { name is_deleted } }';
    const user = await t.gql(q, { id: doc._id }, { key: alice.key });
    expect(user.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    const ok = await t.gql(q, { id: doc._id }, { key: admin.key });
    expect(ok.body.errors).toBeUndefined();
    expect(ok.body.data.restoreProject).toEqual({ name: 'to restore', is_deleted: false });
  });
});
