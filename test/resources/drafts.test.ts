/**
 * Drafts of a resource with `drafts: true` (docs/versions.md#drafts), over REST: a draft never
 * reaches a reader without `read_drafts` (list, get, count, search, populate); publish and
 * unpublish with If-Match; the default permissions (administrators and the draft's author); bad
 * input answers the envelope and writes nothing; other tenants see nothing of it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { expectNoWrite, ifMatch, raw } from './write-helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let author: User; // writes the drafts
let reader: User; // same tenant, role user: not the author
let admin: User; // same tenant, tenant administrator
let other: User; // another tenant's administrator

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource] })] });
  author = await createTenantUser(t, { features: ['tasks'] });
  reader = await createTenantUser(t, { tenantId: author.tenantId, features: ['tasks'] });
  admin = await createTenantUser(t, { tenantId: author.tenantId, roles: ['admin'], features: ['tasks'] });
  // The other tenant's user is a second membership of the first one's person: one person, two tenants.
  other = await addMembership(t, author.userId, { roles: ['admin'], features: ['tasks'] });
});
afterAll(() => t?.close());

async function ok(method: string, path: string, key: string, json?: unknown, etag?: string) {
  const res = await t.http(method, path, { key, ...(json !== undefined ? { json } : {}), ...(etag ? { headers: ifMatch(etag) } : {}) });
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
  return res;
}

/** Everything a reader learns of the projects through the list (with its total), search, and a task's populate. */
async function seenBy(key: string, word: string, taskId: string) {
  const list = await ok('GET', `/projects?per_page=100&name=${word}`, key);
  const search = await ok('GET', `/projects?q=${word}`, key);
  const task = await ok('GET', `/tasks/${taskId}?populate=project_id`, key);
  return { names: (list.body.items as { name: string }[]).map((p) => p.name), total: list.headers.get('x-total-count'), search: (search.body.items as { name: string }[]).map((p) => p.name), populated: task.body.project_id };
}

describe('a document never published', () => {
  it('exists only for its author and administrators: 404 on get, absent from list, count, search and populate', async () => {
    const created = await ok('POST', '/projects?draft=true', author.key, { name: 'secretplan' });
    expect(created.body._status).toBe('draft');
    const id = created.body._id as string;
    const task = await ok('POST', '/tasks', author.key, { project_id: id, title: 'x' });
    const taskId = task.body._id as string;

    expectError(await t.http('GET', `/projects/${id}`, { key: reader.key }), 404, 'NOT_FOUND');
    expect(await seenBy(reader.key, 'secretplan', taskId)).toEqual({ names: [], total: '0', search: [], populated: null });

    for (const key of [author.key, admin.key]) {
      const got = await ok('GET', `/projects/${id}`, key);
      expect(got.body).toMatchObject({ name: 'secretplan', _status: 'draft' });
      expect(got.body).not.toHaveProperty('_draft');
      expect(await seenBy(key, 'secretplan', taskId)).toMatchObject({ names: ['secretplan'], total: '1', search: ['secretplan'] });
    }
    // A write by someone who may not see it is a 404 too, and writes nothing.
    await expectNoWrite(t, ['projects'], async () => expectError(await t.http('PATCH', `/projects/${id}`, { key: reader.key, json: { name: 'y' }, headers: ifMatch('"1"') }), 404, 'NOT_FOUND'));

    // Published: everyone in the tenant sees it.
    const pub = await ok('POST', `/projects/${id}/publish`, author.key, undefined, '"1"');
    expect(pub.body._status).toBe('published');
    expect(pub.headers.get('etag')).toBe('"2"');
    expect((await ok('GET', `/projects/${id}`, reader.key)).body).toMatchObject({ name: 'secretplan', _status: 'published' });
    expect(await seenBy(reader.key, 'secretplan', taskId)).toMatchObject({ names: ['secretplan'], total: '1', search: ['secretplan'] });
  });
});

describe('a draft of a published document', () => {
  it('leaves the published fields to every reader; ?draft=true shows it to the author and administrators only', async () => {
    const id = (await ok('POST', '/projects', author.key, { name: 'pubname', budget: 1 })).body._id as string;
    const task = await ok('POST', '/tasks', author.key, { project_id: id, title: 'x' });
    const saved = await ok('PATCH', `/projects/${id}?draft=true`, author.key, { name: 'draftname', budget: 2 }, '"1"');
    expect(saved.body).toMatchObject({ name: 'draftname', budget: 2, _status: 'draft' });
    const stored = await raw(t, 'projects', id);
    expect(stored).toMatchObject({ name: 'pubname', budget: 1, _draft: { values: { name: 'draftname', budget: 2 } } });

    for (const key of [reader.key, author.key, admin.key]) {
      expect((await ok('GET', `/projects/${id}`, key)).body).toMatchObject({ name: 'pubname', budget: 1, _status: 'published' });
      const seen = await seenBy(key, 'draftname', task.body._id as string);
      expect(seen.names).toEqual([]);
      expect(seen.search).toEqual([]);
      expect(seen.populated).toMatchObject({ name: 'pubname' });
    }
    expect((await ok('GET', `/projects/${id}?draft=true`, reader.key)).body).toMatchObject({ name: 'pubname', _status: 'published' });
    for (const key of [author.key, admin.key]) {
      const got = await ok('GET', `/projects/${id}?draft=true`, key);
      expect(got.body).toMatchObject({ name: 'draftname', budget: 2, _status: 'draft' });
      expect(got.headers.get('etag')).toBe('"2"');
    }

    // A second draft save merges into the draft; publish applies it.
    await ok('PATCH', `/projects/${id}?draft=true`, author.key, { description: 'd' }, '"2"');
    expectError(await t.http('POST', `/projects/${id}/publish`, { key: reader.key, headers: ifMatch('"3"') }), 404, 'NOT_FOUND');
    const pub = await ok('POST', `/projects/${id}/publish`, admin.key, undefined, '"3"');
    expect(pub.body).toMatchObject({ name: 'draftname', budget: 2, description: 'd', _status: 'published' });
    expect(await raw(t, 'projects', id)).toMatchObject({ name: 'draftname', _published: true, _draft: null });
    expect((await ok('GET', `/projects/${id}`, reader.key)).body).toMatchObject({ name: 'draftname', budget: 2 });
  });

  it('a draft save by someone who may not read the pending draft replaces it and answers none of its values', async () => {
    const id = (await ok('POST', '/projects', author.key, { name: 'shared', budget: 1 })).body._id as string;
    await ok('PATCH', `/projects/${id}?draft=true`, author.key, { description: 'private plan' }, '"1"');
    const res = await ok('PATCH', `/projects/${id}?draft=true`, reader.key, { budget: 7 }, '"2"');
    expect(res.body).toMatchObject({ name: 'shared', budget: 7, description: null, _status: 'draft' });
    expect(JSON.stringify(res.body)).not.toContain('private plan');
    expect(await raw(t, 'projects', id)).toMatchObject({ _draft: { values: { budget: 7, description: null } } });
  });

  it('unpublish withdraws the document from readers (404) until it is published again', async () => {
    const id = (await ok('POST', '/projects', author.key, { name: 'withdrawn' })).body._id as string;
    expectError(await t.http('POST', `/projects/${id}/unpublish`, { key: reader.key, headers: ifMatch('"1"') }), 404, 'NOT_FOUND');
    const un = await ok('POST', `/projects/${id}/unpublish`, author.key, undefined, '"1"');
    expect(un.body._status).toBe('draft');
    expectError(await t.http('GET', `/projects/${id}`, { key: reader.key }), 404, 'NOT_FOUND');
    expect((await ok('GET', `/projects/${id}`, author.key)).body._status).toBe('draft');
    expectError(await t.http('POST', `/projects/${id}/unpublish`, { key: author.key, headers: ifMatch('"2"') }), 409, 'CONFLICT');
    await ok('POST', `/projects/${id}/publish`, author.key, undefined, '"2"');
    expect((await ok('GET', `/projects/${id}`, reader.key)).body).toMatchObject({ name: 'withdrawn', _status: 'published' });
  });

  it('a write without draft=true publishes, as every write does', async () => {
    const id = (await ok('POST', '/projects?draft=true', author.key, { name: 'direct' })).body._id as string;
    const res = await ok('PATCH', `/projects/${id}`, author.key, { budget: 5 }, '"1"');
    expect(res.body._status).toBe('published');
    expect((await ok('GET', `/projects/${id}`, reader.key)).body).toMatchObject({ name: 'direct', budget: 5 });
  });
});

describe('bad input', () => {
  it('answers the envelope with its code and writes nothing', async () => {
    const id = (await ok('POST', '/projects', author.key, { name: 'bad' })).body._id as string;
    await expectNoWrite(t, ['projects', 'resource_versions'], async () => {
      expectError(await t.http('POST', '/projects?draft=maybe', { key: author.key, json: { name: 'x' } }), 422, 'VALIDATION_ERROR');
      expectError(await t.http('POST', '/projects?draft=true&publish_at=tomorrow', { key: author.key, json: { name: 'x' } }), 422, 'VALIDATION_ERROR');
      expectError(await t.http('POST', '/projects?publish_at=2030-01-01T00:00:00Z', { key: author.key, json: { name: 'x' } }), 422, 'VALIDATION_ERROR');
      expectError(await t.http('POST', '/projects?draft=true', { key: author.key, json: { budget: 'x' } }), 422, 'VALIDATION_ERROR');
      expectError(await t.http('PATCH', `/projects/${id}?draft=true`, { key: author.key, json: { budget: 'x' }, headers: ifMatch('"1"') }), 422, 'VALIDATION_ERROR');
      expectError(await t.http('PATCH', `/projects/${id}?draft=true`, { key: author.key, json: { name: 'y' }, headers: ifMatch('"9"') }), 412, 'ETAG_MISMATCH');
      expectError(await t.http('PATCH', `/projects/${id}?draft=true`, { key: author.key, json: { name: 'y' } }), 428, 'ETAG_REQUIRED');
      expectError(await t.http('POST', `/projects/${id}/publish`, { key: author.key }), 428, 'ETAG_REQUIRED');
      expectError(await t.http('POST', `/projects/${id}/publish`, { key: author.key, headers: ifMatch('"9"') }), 412, 'ETAG_MISMATCH');
      // Nothing pending: nothing to publish.
      expectError(await t.http('POST', `/projects/${id}/publish`, { key: author.key, headers: ifMatch('"1"') }), 409, 'CONFLICT');
      expectError(await t.http('POST', '/projects/nope/publish', { key: author.key, headers: ifMatch('"1"') }), 404, 'NOT_FOUND');
    });
  });
});

describe('tenant isolation', () => {
  it('another tenant cannot read, publish or unpublish a document or its draft', async () => {
    const draft = (await ok('POST', '/projects?draft=true', author.key, { name: 'mine' })).body._id as string;
    const pub = (await ok('POST', '/projects', author.key, { name: 'mine2' })).body._id as string;
    await ok('PATCH', `/projects/${pub}?draft=true`, author.key, { name: 'mine3' }, '"1"');
    await expectNoWrite(t, ['projects'], async () => {
      for (const id of [draft, pub]) {
        expectError(await t.http('GET', `/projects/${id}?draft=true`, { key: other.key }), 404, 'NOT_FOUND');
        expectError(await t.http('POST', `/projects/${id}/publish`, { key: other.key, headers: ifMatch('"1"') }), 404, 'NOT_FOUND');
        expectError(await t.http('POST', `/projects/${id}/publish`, { key: other.key, headers: ifMatch('"2"') }), 404, 'NOT_FOUND');
        expectError(await t.http('POST', `/projects/${id}/unpublish`, { key: other.key, headers: ifMatch('"2"') }), 404, 'NOT_FOUND');
      }
      const list = await ok('GET', '/projects?q=mine', other.key);
      expect(list.body.items).toEqual([]);
    });
  });
});
