/**
 * Write path over GraphQL: createProject / updateProject / replaceProject / deleteProject with the
 * REST rules (ETag via `if_match`, validation, cascade, guards, tenant isolation) and the `project`
 * relation field of Task.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type GqlError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { expectNoWrite, raw } from './write-helpers.ts';

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let alice: User;
let aliceAdmin: User;
let bob: User;
let noTasks: User;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  aliceAdmin = await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'], features: ['tasks'] });
  bob = await createTenantUser(t, { features: ['tasks'] });
  noTasks = await createTenantUser(t, { tenantId: alice.tenantId });
});
afterAll(() => t?.close());

const FIELDS = '_id etag version tenant_id name description status tags budget owner_email is_deleted deleted_at deleted_by created_by updated_by';
const CREATE = `mutation($input: JSON!) { createProject(input: $input) { ${FIELDS} } }`;
const UPDATE = `mutation($id: ID!, $if_match: String, $input: JSON!) { updateProject(id: $id, if_match: $if_match, input: $input) { ${FIELDS} } }`;
const REPLACE = `mutation($id: ID!, $if_match: String, $input: JSON!) { replaceProject(id: $id, if_match: $if_match, input: $input) { ${FIELDS} } }`;
const DELETE = `mutation($id: ID!, $if_match: String) { deleteProject(id: $id, if_match: $if_match) { ${FIELDS} } }`;

type Opts = { key?: string | null; headers?: Record<string, string> };
const gql = async (query: string, variables: Record<string, unknown>, opts: Opts = {}) => {
  const res = await t.gql<Record<string, any>>(query, variables, { key: opts.key === undefined ? alice.key : opts.key, ...(opts.headers ? { headers: opts.headers } : {}) });
  expect(res.status).toBe(200);
  return res.body;
};
/** The single error of a failed mutation, with data null. */
const failure = (body: { data?: Record<string, any> | null; errors?: GqlError[] }): GqlError => {
  expect(body.errors, JSON.stringify(body)).toHaveLength(1);
  expect(body.data ?? null).toBeNull();
  return body.errors![0]!;
};
const createProject = async (input: Record<string, unknown>, opts: Opts = {}) => {
  const body = await gql(CREATE, { input }, opts);
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data!.createProject;
};

describe('createProject', () => {
  it('returns the stored document with its etag, in the caller\'s tenant', async () => {
    const p = await createProject({ name: 'G1', tags: ['x'], owner_email: 'A@B.C' });
    expect(p).toMatchObject({ etag: '"1"', version: 1, tenant_id: alice.tenantId, name: 'G1', status: 'active', tags: ['x'], owner_email: 'a@b.c', is_deleted: false, created_by: alice.userId });
    expect(await raw(t, 'projects', p._id)).toMatchObject({ name: 'G1', version: 1 });
  });

  it('invalid input and system fields: VALIDATION_ERROR with details.errors, nothing written', async () => {
    const body = await expectNoWrite(t, ['projects'], () => gql(CREATE, { input: { budget: 'x', status: 'weird', tenant_id: bob.tenantId, version: 9 } }));
    const e = failure(body);
    expect(e.extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 422 });
    const locs = (e.extensions!.details!.errors as { loc: unknown[] }[]).map((x) => x.loc);
    expect(locs).toEqual(expect.arrayContaining([['body', 'name'], ['body', 'budget'], ['body', 'status'], ['body', 'tenant_id'], ['body', 'version']]));
  });

  it('input that is not an object: VALIDATION_ERROR, nothing written', async () => {
    const body = await expectNoWrite(t, ['projects'], () => gql(CREATE, { input: 'just a string' }));
    expect(failure(body).extensions).toMatchObject({ code: 'VALIDATION_ERROR' });
  });

  it('without credentials: AUTH_REQUIRED, nothing written', async () => {
    const body = await expectNoWrite(t, ['projects'], () => gql(CREATE, { input: { name: 'anon' } }, { key: null }));
    expect(failure(body).extensions).toMatchObject({ code: 'AUTH_REQUIRED' });
  });
});

describe('updateProject / replaceProject', () => {
  it('update with the current etag: new revision and etag; several and weak tags accepted', async () => {
    const p = await createProject({ name: 'U', budget: 1, description: 'keep' });
    const a = await gql(UPDATE, { id: p._id, if_match: '"1"', input: { budget: 2 } });
    expect(a.data!.updateProject).toMatchObject({ budget: 2, description: 'keep', version: 2, etag: '"2"', updated_by: alice.userId });
    const b = await gql(UPDATE, { id: p._id, if_match: 'W/"2"', input: { budget: 3 } });
    expect(b.data!.updateProject).toMatchObject({ budget: 3, etag: '"3"' });
    const c = await gql(UPDATE, { id: p._id, if_match: '"1", "3"', input: { budget: 4 } });
    expect(c.data!.updateProject).toMatchObject({ budget: 4, etag: '"4"' });
  });

  it('missing if_match: ETAG_REQUIRED (428); stale: ETAG_MISMATCH (412); nothing written', async () => {
    const p = await createProject({ name: 'E' });
    for (const q of [UPDATE, REPLACE]) {
      const missing = await expectNoWrite(t, ['projects'], () => gql(q, { id: p._id, input: { name: 'x' } }));
      expect(failure(missing).extensions).toMatchObject({ code: 'ETAG_REQUIRED', status: 428 });
      const stale = await expectNoWrite(t, ['projects'], () => gql(q, { id: p._id, if_match: '"2"', input: { name: 'x' } }));
      expect(failure(stale).extensions).toMatchObject({ code: 'ETAG_MISMATCH', status: 412 });
    }
  });

  it('system and unknown fields in the input: VALIDATION_ERROR at [body, field], nothing written', async () => {
    const p = await createProject({ name: 'M' });
    for (const q of [UPDATE, REPLACE]) {
      const body = await expectNoWrite(t, ['projects'], () => gql(q, { id: p._id, if_match: '"1"', input: { name: 'M', is_deleted: true, created_by: bob.userId, colour: 'red' } }));
      const e = failure(body);
      expect(e.extensions!.code).toBe('VALIDATION_ERROR');
      expect((e.extensions!.details!.errors as { loc: unknown[] }[]).map((x) => x.loc)).toEqual(
        expect.arrayContaining([['body', 'is_deleted'], ['body', 'created_by'], ['body', 'colour']]),
      );
    }
  });

  it('replace resets omitted fields to their defaults', async () => {
    const p = await createProject({ name: 'R', description: 'd', status: 'archived', tags: ['a'], budget: 9, owner_email: 'o@x.io' });
    const body = await gql(REPLACE, { id: p._id, if_match: '"1"', input: { name: 'R2' } });
    expect(body.errors).toBeUndefined();
    expect(body.data!.replaceProject).toMatchObject({ name: 'R2', description: null, status: 'active', tags: [], budget: null, owner_email: null, etag: '"2"' });
    expect(await raw(t, 'projects', p._id)).toMatchObject({ name: 'R2', status: 'active', budget: null, version: 2 });
  });

  it('replace without a required field: VALIDATION_ERROR, nothing written', async () => {
    const p = await createProject({ name: 'R' });
    const body = await expectNoWrite(t, ['projects'], () => gql(REPLACE, { id: p._id, if_match: '"1"', input: { budget: 1 } }));
    const e = failure(body);
    expect(e.extensions!.code).toBe('VALIDATION_ERROR');
    expect((e.extensions!.details!.errors as { loc: unknown[] }[]).map((x) => x.loc)).toContainEqual(['body', 'name']);
  });
});

describe('deleteProject', () => {
  it('soft-deletes and returns the deleted revision; afterwards NOT_FOUND for reads and writes', async () => {
    const p = await createProject({ name: 'D' });
    const body = await gql(DELETE, { id: p._id, if_match: '"1"' });
    expect(body.errors).toBeUndefined();
    expect(body.data!.deleteProject).toMatchObject({ _id: p._id, is_deleted: true, deleted_by: alice.userId, version: 2, etag: '"2"' });
    expect(body.data!.deleteProject.deleted_at).toEqual(expect.any(String));
    expect(await raw(t, 'projects', p._id)).toMatchObject({ is_deleted: true });

    const read = await gql('query($id: ID!) { project(id: $id) { _id } }', { id: p._id });
    expect(read.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const again = await expectNoWrite(t, ['projects'], () => gql(DELETE, { id: p._id, if_match: '"2"' }));
    expect(failure(again).extensions).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    const upd = await expectNoWrite(t, ['projects'], () => gql(UPDATE, { id: p._id, if_match: '"2"', input: { name: 'back' } }));
    expect(failure(upd).extensions!.code).toBe('NOT_FOUND');
  });

  it('missing if_match: ETAG_REQUIRED; stale: ETAG_MISMATCH; the project stays live', async () => {
    const p = await createProject({ name: 'D2' });
    const missing = await expectNoWrite(t, ['projects'], () => gql(DELETE, { id: p._id }));
    expect(failure(missing).extensions!.code).toBe('ETAG_REQUIRED');
    const stale = await expectNoWrite(t, ['projects'], () => gql(DELETE, { id: p._id, if_match: '"0"' }));
    expect(failure(stale).extensions!.code).toBe('ETAG_MISMATCH');
  });

  it('a project with live tasks: CASCADE_DENY with its details, nothing written', async () => {
    const p = await createProject({ name: 'busy' });
    const task = await gql('mutation($i: JSON!) { createTask(input: $i) { _id } }', { i: { project_id: p._id, title: 'pin' } });
    expect(task.errors).toBeUndefined();
    const body = await expectNoWrite(t, ['projects', 'tasks'], () => gql(DELETE, { id: p._id, if_match: '"1"' }));
    expect(failure(body).extensions).toMatchObject({
      code: 'CASCADE_DENY', status: 422, details: { resource: 'projects', item_id: p._id, referenced_by: 'tasks', count: 1 },
    });
  });
});

describe('guards', () => {
  it('task mutations without the `tasks` feature: ACCESS_DENIED with details.feature, nothing written', async () => {
    const p = await createProject({ name: 'for tasks' });
    const created = await gql('mutation($i: JSON!) { createTask(input: $i) { _id } }', { i: { project_id: p._id, title: 'mine' } });
    const id = created.data!.createTask._id as string;
    await expectNoWrite(t, ['tasks'], async () => {
      const calls = [
        gql('mutation($i: JSON!) { createTask(input: $i) { _id } }', { i: { project_id: p._id, title: 'no' } }, { key: noTasks.key }),
        gql('mutation($id: ID!) { updateTask(id: $id, if_match: "\\"1\\"", input: {done: true}) { _id } }', { id }, { key: noTasks.key }),
        gql('mutation($id: ID!, $i: JSON!) { replaceTask(id: $id, if_match: "\\"1\\"", input: $i) { _id } }', { id, i: { project_id: p._id, title: 'no' } }, { key: noTasks.key }),
        gql('mutation($id: ID!) { deleteTask(id: $id, if_match: "\\"1\\"") { _id } }', { id }, { key: noTasks.key }),
      ];
      for (const body of await Promise.all(calls)) {
        expect(failure(body).extensions).toMatchObject({ code: 'ACCESS_DENIED', status: 403, details: { feature: 'tasks' } });
      }
    });
  });
});

describe('tenant isolation', () => {
  it('tenant B cannot update, replace or delete tenant A\'s project: NOT_FOUND, unchanged', async () => {
    const p = await createProject({ name: 'A-owned', budget: 1 });
    await expectNoWrite(t, ['projects'], async () => {
      const u = await gql(UPDATE, { id: p._id, if_match: '"1"', input: { budget: 2 } }, { key: bob.key });
      const r = await gql(REPLACE, { id: p._id, if_match: '"1"', input: { name: 'B' } }, { key: bob.key });
      const d = await gql(DELETE, { id: p._id, if_match: '"1"' }, { key: bob.key });
      for (const body of [u, r, d]) expect(failure(body).extensions).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    });
  });

  it('created documents belong to the caller\'s tenant; a system administrator picks one with X-Tenant-Id', async () => {
    const mine = await createProject({ name: 'B-made' }, { key: bob.key, headers: { 'X-Tenant-Id': alice.tenantId } });
    expect(mine.tenant_id).toBe(bob.tenantId);
    const asAdmin = await createProject({ name: 'admin-made' }, { key: ADMIN_KEY, headers: { 'X-Tenant-Id': alice.tenantId } });
    expect(asAdmin.tenant_id).toBe(alice.tenantId);
    expect(asAdmin.created_by).not.toBe(alice.userId);
    const own = await createProject({ name: 'admin-own' }, { key: ADMIN_KEY });
    expect(own.tenant_id).not.toBe(alice.tenantId);
    expect((await gql('query($id: ID!) { project(id: $id) { name } }', { id: own._id })).errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const seen = await gql('query($id: ID!) { project(id: $id) { name } }', { id: asAdmin._id });
    expect(seen.data!.project).toEqual({ name: 'admin-made' });
  });

  it('a task cannot reference another tenant\'s project: VALIDATION_ERROR reference_not_found', async () => {
    const theirs = await createProject({ name: 'B-proj' }, { key: bob.key });
    const body = await expectNoWrite(t, ['tasks'], () => gql('mutation($i: JSON!) { createTask(input: $i) { _id } }', { i: { project_id: theirs._id, title: 'x' } }));
    const e = failure(body);
    expect(e.extensions!.code).toBe('VALIDATION_ERROR');
    expect(e.extensions!.details!.errors).toEqual([expect.objectContaining({ loc: ['body', 'project_id'], type: 'reference_not_found' })]);
  });
});

describe('Task.project relation', () => {
  const TASK = 'query($id: ID!, $d: Boolean) { task(id: $id, include_deleted: $d) { _id title project_id project { _id name etag } } }';

  it('resolves the live project; null once it is soft-deleted', async () => {
    const p = await createProject({ name: 'parent' });
    const c = await gql('mutation($i: JSON!) { createTask(input: $i) { _id project { _id name } } }', { i: { project_id: p._id, title: 'child' } });
    expect(c.errors).toBeUndefined();
    expect(c.data!.createTask.project).toEqual({ _id: p._id, name: 'parent' });
    const taskId = c.data!.createTask._id as string;

    const live = await gql(TASK, { id: taskId });
    expect(live.data!.task).toMatchObject({ project_id: p._id, project: { _id: p._id, name: 'parent', etag: '"1"' } });

    const list = await gql('{ tasks(per_page: 100) { items { _id project { name } } } }', {});
    expect(list.data!.tasks.items.find((x: any) => x._id === taskId)).toEqual({ _id: taskId, project: { name: 'parent' } });

    // Delete the task, then (no live referrer any more) the project.
    expect((await gql('mutation($id: ID!) { deleteTask(id: $id, if_match: "\\"1\\"") { _id } }', { id: taskId })).errors).toBeUndefined();
    expect((await gql(DELETE, { id: p._id, if_match: '"1"' })).errors).toBeUndefined();

    const after = await gql(TASK, { id: taskId, d: true }, { key: aliceAdmin.key });
    expect(after.errors).toBeUndefined();
    expect(after.data!.task).toMatchObject({ _id: taskId, project_id: p._id, project: null });
  });
});
