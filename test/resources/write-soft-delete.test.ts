/**
 * Write path, soft delete: DELETE answers 204 with no body, marks the document (is_deleted,
 * deleted_at, deleted_by, version) instead of removing it, hides it from every read except an
 * admin's `include_deleted=true`, and refuses every later write to it with 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { expectNoWrite, ifMatch, raw } from './write-helpers.ts';

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
let aliceAdmin: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  aliceAdmin = await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'], features: ['tasks'] });
});
afterAll(() => t?.close());

const createProject = async (json: Record<string, unknown> = {}) => {
  const res = await t.http('POST', '/projects', { key: alice.key, json: { name: 'SD', ...json } });
  expect(res.status).toBe(201);
  return res.body;
};
const del = (id: string, headers: Record<string, string> = {}, key = alice.key) => t.http('DELETE', `/projects/${id}`, { key, headers });

describe('DELETE', () => {
  it('204 with an empty body; the document is marked, not removed', async () => {
    const p = await createProject({ budget: 3 });
    const started = Date.now();
    const res = await del(p._id, ifMatch('"1"'));
    expect(res.status).toBe(204);
    expect(res.body).toBe('');
    expect(res.headers.get('content-length') ?? '0').toBe('0');

    const stored = await raw(t, 'projects', p._id);
    expect(stored).not.toBeNull();
    expect(stored).toMatchObject({ name: 'SD', budget: 3, is_deleted: true, version: 2 });
    expect(String(stored!.deleted_by)).toBe(alice.userId);
    expect(String(stored!.updated_by)).toBe(alice.userId);
    expect(stored!.deleted_at).toBeInstanceOf(Date);
    expect(stored!.deleted_at.getTime()).toBeGreaterThanOrEqual(started - 1000);
    expect(stored!.deleted_at.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('the deleted document disappears from get-one, lists, filters and the count', async () => {
    const keep = await createProject({ name: 'keep-sd' });
    const p = await createProject({ name: 'gone-sd' });
    const before = await t.http('GET', '/projects?per_page=100', { key: alice.key });
    expect((await del(p._id, ifMatch('"1"'))).status).toBe(204);

    const one = await t.http('GET', `/projects/${p._id}`, { key: alice.key });
    expect(one.status).toBe(404);
    expect(envelope(one)).toMatchObject({ code: 'NOT_FOUND', details: { resource: 'projects', item_id: p._id } });

    const list = await t.http('GET', '/projects?per_page=100', { key: alice.key });
    const ids = list.body.items.map((d: any) => d._id);
    expect(ids).toContain(keep._id);
    expect(ids).not.toContain(p._id);
    expect(Number(list.headers.get('x-total-count'))).toBe(Number(before.headers.get('x-total-count')) - 1);

    // Asking for deleted rows through filters never reveals them.
    for (const q of ['is_deleted=true', `where=${encodeURIComponent('{"is_deleted":true}')}`, `_id=${p._id}`, 'q=gone']) {
      const res = await t.http('GET', `/projects?${q}`, { key: alice.key });
      expect(res.status, q).toBe(200);
      expect(res.body.items.map((d: any) => d._id), q).not.toContain(p._id);
    }
    const cursor = await t.http('GET', '/projects?limit=100', { key: alice.key });
    expect(cursor.body.items.map((d: any) => d._id)).not.toContain(p._id);
  });

  it('an admin sees it with include_deleted=true, deletion fields filled; a plain user may not ask', async () => {
    const p = await createProject();
    expect((await del(p._id, ifMatch('"1"'))).status).toBe(204);

    const one = await t.http('GET', `/projects/${p._id}?include_deleted=true`, { key: aliceAdmin.key });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ _id: p._id, is_deleted: true, deleted_by: alice.userId, version: 2 });
    expect(new Date(one.body.deleted_at).getTime()).not.toBeNaN();
    expect(one.headers.get('etag')).toBe('"2"');

    const list = await t.http('GET', '/projects?include_deleted=true&per_page=100', { key: aliceAdmin.key });
    expect(list.body.items.find((d: any) => d._id === p._id)).toMatchObject({ is_deleted: true });

    const denied = await t.http('GET', `/projects/${p._id}?include_deleted=true`, { key: alice.key });
    expect(denied.status).toBe(403);
    expect(envelope(denied).code).toBe('ACCESS_DENIED');
  });

  it('deleting it again: 404 with the old or the new ETag, nothing written', async () => {
    const p = await createProject();
    expect((await del(p._id, ifMatch('"1"'))).status).toBe(204);
    for (const tag of ['"1"', '"2"']) {
      const res = await expectNoWrite(t, ['projects'], () => del(p._id, ifMatch(tag)));
      expect(res.status).toBe(404);
      expect(envelope(res)).toMatchObject({ code: 'NOT_FOUND', details: { resource: 'projects', item_id: p._id } });
    }
  });

  it('PATCH and PUT of a deleted document: 404, nothing written (no resurrection)', async () => {
    const p = await createProject();
    expect((await del(p._id, ifMatch('"1"'))).status).toBe(204);
    await expectNoWrite(t, ['projects'], async () => {
      const a = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"2"') });
      expect(a.status).toBe(404);
      expect(envelope(a).code).toBe('NOT_FOUND');
      const b = await t.http('PUT', `/projects/${p._id}`, { key: alice.key, json: { name: 'back' }, headers: ifMatch('"2"') });
      expect(b.status).toBe(404);
      // Even an admin cannot write a deleted document.
      const c = await t.http('PATCH', `/projects/${p._id}`, { key: aliceAdmin.key, json: { budget: 1 }, headers: ifMatch('"2"') });
      expect(c.status).toBe(404);
    });
  });

  it('missing If-Match: 428; stale: 412; both leave the document live', async () => {
    const p = await createProject();
    expect((await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"1"') })).status).toBe(200);
    const missing = await expectNoWrite(t, ['projects'], () => del(p._id));
    expect(missing.status).toBe(428);
    expect(envelope(missing).code).toBe('ETAG_REQUIRED');
    const stale = await expectNoWrite(t, ['projects'], () => del(p._id, ifMatch('"1"')));
    expect(stale.status).toBe(412);
    expect(envelope(stale).code).toBe('ETAG_MISMATCH');
    expect((await t.http('GET', `/projects/${p._id}`, { key: alice.key })).status).toBe(200);
  });

  it('accepts several tags and weak tags', async () => {
    const a = await createProject();
    expect((await del(a._id, ifMatch('"5", "1"'))).status).toBe(204);
    const b = await createProject();
    expect((await del(b._id, ifMatch('W/"1"'))).status).toBe(204);
  });

  it('unknown and malformed ids: 404', async () => {
    for (const id of ['0123456789abcdef01234567', 'zzz']) {
      const res = await expectNoWrite(t, ['projects'], () => del(id, ifMatch('"1"')));
      expect(res.status).toBe(404);
    }
  });

  it('concurrent deletes with the same ETag: exactly one succeeds, the document is deleted once', async () => {
    const p = await createProject();
    const results = await Promise.all(Array.from({ length: 5 }, () => del(p._id, ifMatch('"1"'))));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 204)).toHaveLength(1);
    expect(statuses.every((s) => s === 204 || s === 404 || s === 412)).toBe(true);
    expect(await raw(t, 'projects', p._id)).toMatchObject({ is_deleted: true, version: 2 });
  });
});
