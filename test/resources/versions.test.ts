/**
 * Versions of a versioned resource (docs/versions.md): every write (create, PATCH, PUT, delete,
 * restore from soft delete, bulk) stores a version, listed newest first without bodies; one version
 * shows the document as it was; a diff compares two; a restore writes the old values back through
 * the update path (If-Match, 409 on a taken unique value, its event records the version); retention
 * by count and by age; a purged document takes its versions with it; tenant isolation on every route.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, expectError, jobContext, type HttpResult, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { systemActor } from '../../core/context.ts';
import { col, expectNoWrite, ifMatch, oid } from './write-helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

const codes = defineResource({
  name: 'codes',
  schema: new Schema({ code: { type: String, required: true, unique: true }, note: { type: String, default: null } }),
  versions: { max_per_document: 3, max_age_days: 10 },
});
const plain = defineResource({ name: 'plain_docs', schema: new Schema({ name: { type: String, required: true } }) });

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let alice: User;
let bob: User;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource, codes, plain] })] });
  alice = await createTenantUser(t);
  // The other tenant's user is a second membership of the first one's person: one person, two tenants.
  bob = await addMembership(t, alice.userId);
});
afterAll(() => t?.close());

const versionsOf = (resource: string, id: string) => col(t, 'resource_versions').find({ resource, doc_id: oid(id) }).sort({ version: 1 }).toArray();

async function create(path: string, json: Record<string, unknown>, key = alice.key): Promise<string> {
  const res = await t.http('POST', path, { key, json });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body._id as string;
}
async function write(method: string, path: string, etag: string, json?: Record<string, unknown>, key = alice.key) {
  const res = await t.http(method, path, { key, json, headers: ifMatch(etag) });
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res;
}

describe('history', () => {
  it('create, PATCH, PUT, delete and restore each store a version; the list is newest first without bodies', async () => {
    const id = await create('/projects', { name: 'one', budget: 10 });
    const patched = await write('PATCH', `/projects/${id}`, '"1"', { budget: 20 });
    await write('PUT', `/projects/${id}`, '"2"', { name: 'two' });
    await write('DELETE', `/projects/${id}`, '"3"');
    await write('POST', `/projects/${id}/restore`, '"4"', undefined, (await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'] })).key);

    const res = await t.http('GET', `/projects/${id}/versions`, { key: alice.key });
    expect(res.status).toBe(200);
    expect(res.body.next_before).toBeNull();
    expect(res.body.items.map((v: { version: number }) => v.version)).toEqual([5, 4, 3, 2, 1]);
    expect(res.body.items.map((v: { operation: string }) => v.operation)).toEqual(['restored', 'deleted', 'updated', 'updated', 'created']);
    const [restored, deleted, put, patch, created] = res.body.items;
    expect(created.changed_fields).toEqual(['budget', 'name', 'status', 'tags']); // a create names the fields it set (null is no value)
    expect(patch).toMatchObject({ changed_fields: ['budget'], actor: alice.userId, request_id: patched.headers.get('x-request-id'), restored_from: null });
    expect(put.changed_fields).toEqual(['budget', 'name']);
    expect(deleted.changed_fields).toEqual(['is_deleted']);
    expect(restored.changed_fields).toEqual(['is_deleted']);
    for (const v of res.body.items) expect(v).not.toHaveProperty('document');

    // Pages by version number: each names where the next (older) one starts.
    type HistoryPage = { items: { version: number }[]; next_before: number | null };
    const pages: number[][] = [];
    let next: number | null = 0;
    while (next !== null) {
      const page: HttpResult<HistoryPage> = await t.http('GET', `/projects/${id}/versions?limit=2${next ? `&before=${next}` : ''}`, { key: alice.key });
      pages.push(page.body.items.map((v) => v.version));
      next = page.body.next_before;
    }
    expect(pages).toEqual([[5, 4], [3, 2], [1]]);
  });

  it('a bulk create stores one version per document; a failed write (412) stores none', async () => {
    const bulk = await t.http('POST', '/projects/bulk', { key: alice.key, json: { items: [{ name: 'b1' }, { name: 'b2' }] } });
    expect(bulk.status).toBe(201);
    for (const item of bulk.body.items) expect((await versionsOf('projects', item._id)).map((v) => v.version)).toEqual([1]);
    const id = bulk.body.items[0]._id as string;
    expect((await t.http('PATCH', `/projects/${id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"9"') })).status).toBe(412);
    expect(await versionsOf('projects', id)).toHaveLength(1);
  });

  it('one version is the document as it was; a diff compares it with the one before, or with `against`', async () => {
    const id = await create('/projects', { name: 'v1', budget: 1, tags: ['a'] });
    await write('PATCH', `/projects/${id}`, '"1"', { budget: 2 });
    await write('PATCH', `/projects/${id}`, '"2"', { name: 'v3', tags: ['a', 'b'] });

    const one = await t.http('GET', `/projects/${id}/versions/1`, { key: alice.key });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ version: 1, operation: 'created', document: { _id: id, name: 'v1', budget: 1, tags: ['a'], version: 1 } });

    const diff = await t.http('GET', `/projects/${id}/versions/3/diff`, { key: alice.key });
    expect(diff.body).toEqual({ version: 3, against: 2, changes: [{ field: 'name', before: 'v1', after: 'v3' }, { field: 'tags', before: ['a'], after: ['a', 'b'] }] });
    const wide = await t.http('GET', `/projects/${id}/versions/3/diff?against=1`, { key: alice.key });
    expect(wide.body.changes.map((c: { field: string }) => c.field)).toEqual(['budget', 'name', 'tags']);
    const first = await t.http('GET', `/projects/${id}/versions/1/diff`, { key: alice.key });
    expect(first.body.against).toBeNull();

    for (const path of [`/projects/${id}/versions/9`, `/projects/${id}/versions/x`, `/projects/${id}/versions/0`, `/projects/${id}/versions/3/diff?against=7`]) {
      expectError(await t.http('GET', path, { key: alice.key }), 404, 'NOT_FOUND');
    }
    expectError(await t.http('GET', `/projects/${id}/versions/3/diff?against=-1`, { key: alice.key }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', `/projects/${id}/versions?limit=101`, { key: alice.key }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', `/plain_docs/${id}/versions`, { key: alice.key }), 404, 'NOT_FOUND');
  });
});

describe('restore', () => {
  it('writes the old values as a new version through the update path; its event records the version', async () => {
    const id = await create('/projects', { name: 'orig', budget: 5, tags: ['x'] });
    await write('PUT', `/projects/${id}`, '"1"', { name: 'changed', description: 'new' });

    expectError(await t.http('POST', `/projects/${id}/versions/1/restore`, { key: alice.key }), 428, 'ETAG_REQUIRED');
    expectError(await t.http('POST', `/projects/${id}/versions/1/restore`, { key: alice.key, headers: ifMatch('"1"') }), 412, 'ETAG_MISMATCH');
    const res = await t.http('POST', `/projects/${id}/versions/1/restore`, { key: alice.key, headers: ifMatch('"2"') });
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe('"3"');
    expect(res.body).toMatchObject({ name: 'orig', budget: 5, tags: ['x'], description: null, version: 3 });

    const versions = await versionsOf('projects', id);
    expect(versions.map((v) => [v.version, v.restored_from])).toEqual([[1, null], [2, null], [3, 1]]);
    const event = await col(t, 'events').findOne({ type: 'projects.updated', 'source.id': oid(id), 'source.version': 3 });
    expect(event?.meta?.restored_version).toBe(1);
  });

  it('409 when a unique value of the version is now held by another document; nothing written', async () => {
    const id = await create('/codes', { code: 'A' });
    await write('PATCH', `/codes/${id}`, '"1"', { code: 'B' });
    await create('/codes', { code: 'A' });
    await expectNoWrite(t, ['codes', 'resource_versions'], async () => {
      const err = expectError(await t.http('POST', `/codes/${id}/versions/1/restore`, { key: alice.key, headers: ifMatch('"2"') }), 409, 'CONFLICT');
      expect(err.details).toMatchObject({ field: 'code', version: 1 });
    });
  });
});

describe('retention', () => {
  it('max_per_document keeps the newest N and the first version; pages read across the gap', async () => {
    const id = await create('/codes', { code: 'R0' });
    for (let v = 1; v <= 30; v++) await write('PATCH', `/codes/${id}`, `"${v}"`, { note: `n${v}` });
    expect((await versionsOf('codes', id)).map((v) => v.version)).toEqual([1, 29, 30, 31]);
    const first = await t.http('GET', `/codes/${id}/versions?limit=3`, { key: alice.key });
    expect(first.body.items.map((v: { version: number }) => v.version)).toEqual([31, 30, 29]);
    const rest = await t.http('GET', `/codes/${id}/versions?limit=3&before=${first.body.next_before}`, { key: alice.key });
    expect(rest.body).toMatchObject({ items: [{ version: 1 }], next_before: null });
  });

  it('the purge_versions job drops versions older than max_age_days, never the first', async () => {
    const id = await create('/codes', { code: 'AGE' });
    await write('PATCH', `/codes/${id}`, '"1"', { note: 'x' });
    await write('PATCH', `/codes/${id}`, '"2"', { note: 'y' });
    await col(t, 'resource_versions').updateMany({ doc_id: oid(id), version: { $lt: 3 } }, { $set: { created_at: new Date(Date.now() - 11 * 86_400_000) } });
    const job = t.app.kernel.jobs().find((j) => j.name === 'purge_versions')!;
    const out = await job.run(jobContext({ actor: systemActor() }), {});
    expect(out).toMatchObject({ resources: { codes: 1 } });
    expect((await versionsOf('codes', id)).map((v) => v.version)).toEqual([1, 3]);
  });

  it('purging a soft-deleted document removes its versions', async () => {
    const id = await create('/projects', { name: 'gone' });
    await write('DELETE', `/projects/${id}`, '"1"');
    await col(t, 'projects').updateOne({ _id: oid(id) }, { $set: { deleted_at: new Date(Date.now() - 100 * 86_400_000) } });
    await t.app.services.get('resources').purgeSoftDeleted(systemActor(), 30);
    expect(await versionsOf('projects', id)).toHaveLength(0);
  });
});

describe('tenant isolation', () => {
  it('another tenant gets 404 on every versions route, REST and GraphQL, and nothing is written', async () => {
    const id = await create('/projects', { name: 'mine' });
    await write('PATCH', `/projects/${id}`, '"1"', { budget: 3 });
    await expectNoWrite(t, ['projects', 'resource_versions'], async () => {
      for (const [method, path] of [['GET', 'versions'], ['GET', 'versions/1'], ['GET', 'versions/2/diff'], ['POST', 'versions/1/restore']] as const) {
        expectError(await t.http(method, `/projects/${id}/${path}`, { key: bob.key, headers: ifMatch('"2"') }), 404, 'NOT_FOUND');
      }
      const g = await t.gql(`mutation { restoreProjectVersion(id: "${id}", n: 1, if_match: "\\"2\\"") { _id } }`, {}, { key: bob.key });
      expect(g.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      const q = await t.gql(`{ project(id: "${id}") { versions { next_before } } }`, {}, { key: bob.key });
      expect(q.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    });
  });
});

describe('GraphQL', () => {
  it('versions, versionAt and versionDiff on the type, restoreProjectVersion; errors carry the REST codes', async () => {
    const id = await create('/projects', { name: 'g1' });
    await write('PATCH', `/projects/${id}`, '"1"', { name: 'g2' });
    const q = await t.gql(
      `query($id: ID!) { project(id: $id) { versions(limit: 1) { next_before items { version changed_fields } } versionAt(n: 1) { version document { name } } versionDiff(n: 2) { against changes { field before after } } } }`,
      { id }, { key: alice.key },
    );
    expect(q.body.errors).toBeUndefined();
    expect(q.body.data.project).toEqual({
      versions: { next_before: 2, items: [{ version: 2, changed_fields: ['name'] }] },
      versionAt: { version: 1, document: { name: 'g1' } },
      versionDiff: { against: 1, changes: [{ field: 'name', before: 'g1', after: 'g2' }] },
    });
    const badLimit = await t.gql(`query($id: ID!) { project(id: $id) { versions(limit: 0) { next_before } } }`, { id }, { key: alice.key });
    expect(badLimit.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const missing = await t.gql(`query($id: ID!) { project(id: $id) { versionAt(n: 7) { version } } }`, { id }, { key: alice.key });
    expect(missing.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const noEtag = await t.gql(`mutation($id: ID!) { restoreProjectVersion(id: $id, n: 1) { name } }`, { id }, { key: alice.key });
    expect(noEtag.body.errors?.[0]?.extensions?.code).toBe('ETAG_REQUIRED');
    const m = await t.gql(`mutation($id: ID!) { restoreProjectVersion(id: $id, n: 1, if_match: "\\"2\\"") { name version } }`, { id }, { key: alice.key });
    expect(m.body.data?.restoreProjectVersion).toEqual({ name: 'g1', version: 3 });
  });
});
