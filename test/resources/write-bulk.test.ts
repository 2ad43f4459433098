/**
 * Write path, bulk operations: `POST <path>/bulk` (201 all / 207 some / 422 none / size limits)
 * and `DELETE <path>/bulk` (200 all / 207 some / 409 none, per-row ETag, NOT_FOUND and
 * CASCADE_DENY), their absence on resources that do not enable them, and the feature guard.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { col, expectNoWrite, ifMatch, oid, raw, rowCodes } from './write-helpers.ts';

const gadgets = defineResource({
  name: 'gadgets',
  schema: new Schema({ name: { type: String, required: true } }),
  guards: { features: ['gadgets'] },
  allow_bulk_create: true,
  allow_bulk_delete: true,
  max_bulk_size: 3,
});
const plain = defineResource({ name: 'plain_items', schema: new Schema({ name: { type: String, required: true } }) });
const half = defineResource({ name: 'half_bulks', schema: new Schema({ name: { type: String, required: true } }), allow_bulk_create: true });

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
let noGadgets: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource, gadgets, plain, half] })] });
  alice = await createTenantUser(t, { features: ['tasks', 'gadgets'] });
  noGadgets = await createTenantUser(t, { tenantId: alice.tenantId, features: ['tasks'] });
});
afterAll(() => t?.close());

const bulkCreate = (items: unknown, key = alice.key, path = '/projects') => t.http('POST', `${path}/bulk`, { key, json: { items } });
const bulkDelete = (items: unknown, key = alice.key, path = '/projects') => t.http('DELETE', `${path}/bulk`, { key, json: { items } });
const createProject = async (name: string) => {
  const res = await t.http('POST', '/projects', { key: alice.key, json: { name } });
  expect(res.status).toBe(201);
  return res.body as { _id: string };
};
const issues = (e: { details: Record<string, unknown> }) => e.details.errors as { loc: (string | number)[]; type: string }[];

describe('POST /projects/bulk', () => {
  it('all valid: 201 with every created document in order, no errors, counts', async () => {
    const before = await col(t, 'projects').countDocuments();
    const res = await bulkCreate([{ name: 'b1', budget: 1 }, { name: 'b2', tags: ['t'] }, { name: 'b3' }]);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ errors: [], created_count: 3, error_count: 0 });
    expect(res.body.items.map((d: any) => d.name)).toEqual(['b1', 'b2', 'b3']);
    for (const d of res.body.items) {
      expect(d).toMatchObject({ tenant_id: alice.tenantId, created_by: alice.userId, version: 1, is_deleted: false });
      expect((await raw(t, 'projects', d._id))!.name).toBe(d.name);
    }
    expect(await col(t, 'projects').countDocuments()).toBe(before + 3);
  });

  it('some invalid: 207, valid ones created, each rejected item reported by index with loc [body, index, field]', async () => {
    const before = await col(t, 'projects').countDocuments();
    const res = await bulkCreate([
      { name: 'ok-1' },
      { name: 'bad type', budget: 'many' },
      { name: 'mass', tenant_id: '0123456789abcdef01234567' },
      { name: 'ok-2' },
      { name: 'x'.repeat(201) },
    ]);
    expect(res.status).toBe(207);
    expect(res.body.created_count).toBe(2);
    expect(res.body.error_count).toBe(3);
    expect(res.body.items.map((d: any) => d.name)).toEqual(['ok-1', 'ok-2']);
    expect(rowCodes(res.body.errors)).toEqual(['1:VALIDATION_ERROR', '2:VALIDATION_ERROR', '4:VALIDATION_ERROR']);
    for (const row of res.body.errors) {
      expect(typeof row.error.message).toBe('string');
      expect(row.error.details.errors.length).toBeGreaterThan(0);
    }
    expect(res.body.errors[0].error.details.errors.map((e: any) => e.loc)).toEqual([['body', 1, 'budget']]);
    expect(res.body.errors[1].error.details.errors.map((e: any) => e.loc)).toEqual([['body', 2, 'tenant_id']]);
    expect(res.body.errors[2].error.details.errors.map((e: any) => e.loc)).toEqual([['body', 4, 'name']]);
    expect(await col(t, 'projects').countDocuments()).toBe(before + 2);
    expect(await col(t, 'projects').countDocuments({ name: { $in: ['bad type', 'mass'] } })).toBe(0);
  });

  it('none valid: 422 VALIDATION_ERROR listing every problem at [body, index, field], nothing written', async () => {
    const res = await expectNoWrite(t, ['projects'], () => bulkCreate([{ budget: 1 }, { name: 'n', status: 'nope', version: 3 }, { name: 'y'.repeat(300) }]));
    expect(res.status).toBe(422);
    const e = envelope(res);
    expect(e.code).toBe('VALIDATION_ERROR');
    expect(issues(e).map((x) => x.loc)).toEqual(expect.arrayContaining([['body', 0, 'name'], ['body', 1, 'status'], ['body', 1, 'version'], ['body', 2, 'name']]));
    expect(issues(e).every((x) => x.loc[0] === 'body' && typeof x.loc[1] === 'number')).toBe(true);
  });

  it('max_bulk_size (100) items are accepted; 101 is a 422 and nothing is written', async () => {
    const items = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `many-${n}-${i}` }));
    const over = await expectNoWrite(t, ['projects'], () => bulkCreate(items(101)));
    expect(over.status).toBe(422);
    expect(envelope(over).code).toBe('VALIDATION_ERROR');
    expect(issues(envelope(over)).map((x) => x.loc)).toContainEqual(['body', 'items']);

    const ok = await bulkCreate(items(100));
    expect(ok.status).toBe(201);
    expect(ok.body.created_count).toBe(100);
    expect(await col(t, 'projects').countDocuments({ name: /^many-100-/ })).toBe(100);
  });

  it('a resource-specific max_bulk_size applies', async () => {
    const res = await expectNoWrite(t, ['gadgets'], () => bulkCreate([{ name: 'a' }, { name: 'b' }, { name: 'c' }, { name: 'd' }], alice.key, '/gadgets'));
    expect(res.status).toBe(422);
    expect((await bulkCreate([{ name: 'a' }, { name: 'b' }, { name: 'c' }], alice.key, '/gadgets')).status).toBe(201);
  });

  it('malformed envelopes (no items, empty items, extra keys, not an array): 422, nothing written', async () => {
    await expectNoWrite(t, ['projects'], async () => {
      for (const json of [{}, { items: [] }, { items: [{ name: 'x' }], dry_run: true }, { items: { name: 'x' } }]) {
        const res = await t.http('POST', '/projects/bulk', { key: alice.key, json });
        expect(res.status, JSON.stringify(json)).toBe(422);
        expect(envelope(res).code).toBe('VALIDATION_ERROR');
      }
    });
  });
});

describe('DELETE /projects/bulk', () => {
  it('all accepted: 200 with deleted ids in order, no errors, counts; every document soft-deleted', async () => {
    const a = await createProject('d1');
    const b = await createProject('d2');
    const res = await bulkDelete([{ id: b._id, etag: '"1"' }, { id: a._id, etag: 'W/"1"' }]);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ deleted: [b._id, a._id], errors: [], deleted_count: 2, error_count: 0 });
    for (const d of [a, b]) {
      const stored = await raw(t, 'projects', d._id);
      expect(stored).toMatchObject({ is_deleted: true, version: 2 });
      expect(String(stored!.deleted_by)).toBe(alice.userId);
    }
  });

  it('some rejected: 207; stale ETag, unknown id and cascade rows reported by index and id; only good rows deleted', async () => {
    const good = await createProject('good');
    const stale = await createProject('stale');
    const busy = await createProject('busy');
    const task = await t.http('POST', '/tasks', { key: alice.key, json: { project_id: busy._id, title: 'pin' } });
    expect(task.status).toBe(201);
    const unknown = '0123456789abcdef01234567';
    const res = await bulkDelete([
      { id: good._id, etag: '"1"' },
      { id: stale._id, etag: '"5"' },
      { id: unknown, etag: '"1"' },
      { id: busy._id, etag: '"1"' },
    ]);
    expect(res.status).toBe(207);
    expect(res.body).toMatchObject({ deleted: [good._id], deleted_count: 1, error_count: 3 });
    expect(res.body.errors.map((e: any) => [e.index, e.id, e.error.code])).toEqual([
      [1, stale._id, 'ETAG_MISMATCH'],
      [2, unknown, 'NOT_FOUND'],
      [3, busy._id, 'CASCADE_DENY'],
    ]);
    expect(res.body.errors[2].error.details).toEqual({ resource: 'projects', item_id: busy._id, referenced_by: 'tasks', count: 1 });
    expect(res.body.errors[1].error.details).toMatchObject({ resource: 'projects', item_id: unknown });
    expect((await raw(t, 'projects', good._id))!.is_deleted).toBe(true);
    for (const d of [stale, busy]) expect(await raw(t, 'projects', d._id)).toMatchObject({ is_deleted: false, version: 1 });
  });

  it('every row rejected: 409 CONFLICT with the per-row errors in details, nothing written', async () => {
    const stale = await createProject('stale-all');
    const busy = await createProject('busy-all');
    expect((await t.http('POST', '/tasks', { key: alice.key, json: { project_id: busy._id, title: 'pin' } })).status).toBe(201);
    const res = await expectNoWrite(t, ['projects', 'tasks'], () =>
      bulkDelete([
        { id: stale._id, etag: '"2"' },
        { id: 'ffffffffffffffffffffffff', etag: '"1"' },
        { id: busy._id, etag: '"1"' },
      ]),
    );
    expect(res.status).toBe(409);
    const e = envelope(res);
    expect(e.code).toBe('CONFLICT');
    expect(rowCodes(e.details.errors as any)).toEqual(['0:ETAG_MISMATCH', '1:NOT_FOUND', '2:CASCADE_DENY']);
    expect((e.details.errors as any[]).map((r) => r.id)).toEqual([stale._id, 'ffffffffffffffffffffffff', busy._id]);
  });

  it('the same id twice: the second row is NOT_FOUND (207), the document is deleted once', async () => {
    const p = await createProject('twice');
    const res = await bulkDelete([{ id: p._id, etag: '"1"' }, { id: p._id, etag: '"1"' }]);
    expect(res.status).toBe(207);
    expect(res.body.deleted).toEqual([p._id]);
    expect(rowCodes(res.body.errors)).toEqual(['1:NOT_FOUND']);
    expect(await raw(t, 'projects', p._id)).toMatchObject({ is_deleted: true, version: 2 });
  });

  it('malformed rows (bad id, missing or empty etag, extra keys, too many): 422, nothing written', async () => {
    const p = await createProject('kept');
    await expectNoWrite(t, ['projects'], async () => {
      const bodies = [
        [{ id: 'nope', etag: '"1"' }],
        [{ id: p._id }],
        [{ id: p._id, etag: '' }],
        [{ id: p._id, etag: '"1"', force: true }],
        [],
        Array.from({ length: 101 }, () => ({ id: p._id, etag: '"1"' })),
      ];
      for (const items of bodies) {
        const res = await bulkDelete(items);
        expect(res.status, JSON.stringify(items).slice(0, 80)).toBe(422);
        expect(envelope(res).code).toBe('VALIDATION_ERROR');
      }
    });
  });
});

describe('bulk routes exist only where enabled', () => {
  it('a resource without allow_bulk_*: POST and DELETE <path>/bulk are not successful and write nothing', async () => {
    const p = await t.http('POST', '/plain_items', { key: alice.key, json: { name: 'solo' } });
    expect(p.status).toBe(201);
    await expectNoWrite(t, ['plain_items'], async () => {
      const create = await t.http('POST', '/plain_items/bulk', { key: alice.key, json: { items: [{ name: 'x' }] } });
      expect(create.status).toBeGreaterThanOrEqual(400);
      const del = await t.http('DELETE', '/plain_items/bulk', { key: alice.key, json: { items: [{ id: p.body._id, etag: '"1"' }] }, headers: ifMatch('"1"') });
      expect(del.status).toBeGreaterThanOrEqual(400);
    });
    expect(await raw(t, 'plain_items', p.body._id)).toMatchObject({ is_deleted: false });
  });

  it('the demo /tasks has no bulk routes', async () => {
    await expectNoWrite(t, ['tasks'], async () => {
      const create = await t.http('POST', '/tasks/bulk', { key: alice.key, json: { items: [{ title: 'x' }] } });
      expect(create.status).toBeGreaterThanOrEqual(400);
      const del = await t.http('DELETE', '/tasks/bulk', { key: alice.key, json: { items: [] }, headers: ifMatch('"1"') });
      expect(del.status).toBeGreaterThanOrEqual(400);
    });
  });

  it('allow_bulk_create alone does not enable bulk delete', async () => {
    const res = await t.http('POST', '/half_bulks/bulk', { key: alice.key, json: { items: [{ name: 'h1' }] } });
    expect(res.status).toBe(201);
    const id = res.body.items[0]._id;
    const del = await t.http('DELETE', '/half_bulks/bulk', { key: alice.key, json: { items: [{ id, etag: '"1"' }] }, headers: ifMatch('"1"') });
    expect(del.status).toBeGreaterThanOrEqual(400);
    expect(await raw(t, 'half_bulks', id)).toMatchObject({ is_deleted: false });
  });
});

describe('feature guard on bulk operations', () => {
  it('a caller without the feature gets 403 with details.feature, for bulk create and bulk delete, nothing written', async () => {
    const seeded = await bulkCreate([{ name: 'g' }], alice.key, '/gadgets');
    expect(seeded.status).toBe(201);
    const id = seeded.body.items[0]._id;
    await expectNoWrite(t, ['gadgets'], async () => {
      const create = await bulkCreate([{ name: 'x' }, { name: 'y' }], noGadgets.key, '/gadgets');
      expect(create.status).toBe(403);
      expect(envelope(create)).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'gadgets' } });
      const del = await bulkDelete([{ id, etag: '"1"' }], noGadgets.key, '/gadgets');
      expect(del.status).toBe(403);
      expect(envelope(del)).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'gadgets' } });
    });
    expect(await col(t, 'gadgets').countDocuments({ _id: oid(id), is_deleted: false })).toBe(1);
  });
});
