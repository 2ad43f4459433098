import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin] });
  alice = await createTenantUser(t, { features: ['tasks'] });
});
afterAll(() => t?.close());

const create = (json: unknown, key = alice.key) => t.http('POST', '/projects', { key, json });

describe('create', () => {
  it('201 with the document, base fields, ETag and Location', async () => {
    const res = await create({ name: 'Apollo', tags: ['a'], budget: 10 });
    expect(res.status).toBe(201);
    const doc = res.body;
    expect(doc).toMatchObject({ name: 'Apollo', status: 'active', tags: ['a'], budget: 10, tenant_id: alice.tenantId, created_by: alice.userId, updated_by: alice.userId, is_deleted: false, deleted_at: null, deleted_by: null, version: 1 });
    expect(doc._id).toMatch(/^[0-9a-f]{24}$/);
    expect(typeof doc.created_at).toBe('string');
    expect(res.headers.get('etag')).toBe('"1"');
    expect(res.headers.get('location')).toBe(`/projects/${doc._id}`);
  });

  it('422 listing every problem, and system fields are rejected (mass assignment)', async () => {
    const res = await create({ budget: 'x', status: 'weird', tenant_id: '0123456789abcdef01234567', version: 9 });
    expect(res.status).toBe(422);
    const e = envelope(res);
    expect(e.code).toBe('VALIDATION_ERROR');
    const locs = (e.details.errors as { loc: string[] }[]).map((x) => x.loc.join('.'));
    expect(locs).toEqual(expect.arrayContaining(['body.name', 'body.budget', 'body.status']));
    expect(JSON.stringify(e.details.errors)).toContain('tenant_id');
    expect(JSON.stringify(e.details.errors)).toContain('version');
    const list = await t.http('GET', '/projects?per_page=100', { key: alice.key });
    expect(list.body.items.some((p: any) => p.status === 'weird')).toBe(false);
  });
});

describe('get, update, replace, delete with ETags', () => {
  it('runs the whole lifecycle', async () => {
    const { body: p } = await create({ name: 'Gemini', description: 'orbit', budget: 5 });
    const got = await t.http('GET', `/projects/${p._id}`, { key: alice.key });
    expect(got.status).toBe(200);
    expect(got.headers.get('etag')).toBe('"1"');

    const noMatch = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 6 } });
    expect(noMatch.status).toBe(428);
    expect(envelope(noMatch).code).toBe('ETAG_REQUIRED');

    const stale = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 6 }, headers: { 'If-Match': '"7"' } });
    expect(stale.status).toBe(412);
    expect(envelope(stale).code).toBe('ETAG_MISMATCH');

    const patched = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 6 }, headers: { 'If-Match': '"1"' } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Gemini', description: 'orbit', budget: 6, version: 2 });
    expect(patched.headers.get('etag')).toBe('"2"');

    const replaced = await t.http('PUT', `/projects/${p._id}`, { key: alice.key, json: { name: 'Gemini II' }, headers: { 'If-Match': 'W/"2"' } });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ name: 'Gemini II', description: null, budget: null, status: 'active', version: 3 });

    const del = await t.http('DELETE', `/projects/${p._id}`, { key: alice.key, headers: { 'If-Match': '"3"' } });
    expect(del.status).toBe(204);
    const gone = await t.http('GET', `/projects/${p._id}`, { key: alice.key });
    expect(gone.status).toBe(404);
    expect(envelope(gone)).toMatchObject({ code: 'NOT_FOUND', details: { resource: 'projects', item_id: p._id } });
  });

  it('two concurrent writers with the same ETag: exactly one wins', async () => {
    const { body: p } = await create({ name: 'Race' });
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: i }, headers: { 'If-Match': '"1"' } })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(5);
  });
});
