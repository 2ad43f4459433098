/**
 * Write path, cascade rules on delete: `deny` (the demo tasks → projects rule), `cascade`
 * (children soft-deleted with the parent) and `set_null` (children's reference cleared, version
 * bumped), including the events each child write emits.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { definePlugin } from '../../core/plugin.ts';
import { expectNoWrite, ifMatch, raw } from './write-helpers.ts';

const folders = defineResource({ name: 'folders', schema: new Schema({ name: { type: String, required: true } }) });
const files = defineResource({
  name: 'files',
  schema: new Schema({ name: { type: String, required: true }, folder_id: { type: Schema.Types.ObjectId, ref: 'folders', default: null } }),
  cascade: [{ field: 'folder_id', references: 'folders', on_delete: 'cascade' }],
});
const labels = defineResource({
  name: 'labels',
  schema: new Schema({ name: { type: String, required: true }, folder_id: { type: Schema.Types.ObjectId, ref: 'folders', default: null } }),
  cascade: [{ field: 'folder_id', references: 'folders', on_delete: 'set_null' }],
});

/** Second level below files: `deny` and `cascade` rules of a child that the folder's cascade deletes. */
const chunks = defineResource({
  name: 'chunks',
  schema: new Schema({ name: { type: String, required: true }, file_id: { type: Schema.Types.ObjectId, ref: 'files', default: null } }),
  cascade: [{ field: 'file_id', references: 'files', on_delete: 'deny' }],
});
const pages = defineResource({
  name: 'pages',
  schema: new Schema({ name: { type: String, required: true }, file_id: { type: Schema.Types.ObjectId, ref: 'files', default: null } }),
  cascade: [{ field: 'file_id', references: 'files', on_delete: 'cascade' }],
});

const events: { event: string; resource: string; id: string; bulk: boolean; doc: any }[] = [];
/** Records the `.deleted` and `.updated` events the relay stores (a relay listener, in this process). */
const recorder = definePlugin({
  name: 'cascade-recorder',
  dependsOn: ['resources'],
  setup: ({ services }) => {
    services.get('events').onStored((batch) => {
      for (const e of batch) {
        const [resource, verb] = e.type.split('.');
        if (verb !== 'deleted' && verb !== 'updated') continue;
        events.push({ event: verb, resource: resource!, id: String(e.source!.id), bulk: (e.meta as { bulk?: boolean } | null)?.bulk ?? false, doc: e.data });
      }
    });
    return {};
  },
});

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
let noTasks: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource, folders, files, labels, chunks, pages] }), recorder] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  noTasks = await createTenantUser(t, { tenantId: alice.tenantId });
});
afterAll(() => t?.close());
beforeEach(() => {
  events.length = 0;
});

const post = async (path: string, json: Record<string, unknown>, key = alice.key) => {
  const res = await t.http('POST', path, { key, json });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
};
const del = (path: string, etag: string, key = alice.key) => t.http('DELETE', path, { key, headers: ifMatch(etag) });

describe('deny (tasks → projects)', () => {
  it('422 CASCADE_DENY with resource, item_id, referenced_by and the live count; nothing written', async () => {
    const p = await post('/projects', { name: 'busy' });
    await post('/tasks', { project_id: p._id, title: 'a' });
    await post('/tasks', { project_id: p._id, title: 'b' });
    const res = await expectNoWrite(t, ['projects', 'tasks'], () => del(`/projects/${p._id}`, '"1"'));
    expect(res.status).toBe(422);
    const e = envelope(res);
    expect(e.code).toBe('CASCADE_DENY');
    expect(e.details).toEqual({ resource: 'projects', item_id: p._id, referenced_by: 'tasks', count: 2 });
    const still = await t.http('GET', `/projects/${p._id}`, { key: alice.key });
    expect(still.status).toBe(200);
    expect(still.body).toMatchObject({ is_deleted: false, version: 1 });
    expect(events).toEqual([]);
  });

  it('only live referencing documents count; once every task is deleted the project deletes', async () => {
    const p = await post('/projects', { name: 'draining' });
    const a = await post('/tasks', { project_id: p._id, title: 'a' });
    const b = await post('/tasks', { project_id: p._id, title: 'b' });
    expect((await del(`/tasks/${a._id}`, '"1"')).status).toBe(204);
    const one = await del(`/projects/${p._id}`, '"1"');
    expect(one.status).toBe(422);
    expect(envelope(one).details.count).toBe(1);
    expect((await del(`/tasks/${b._id}`, '"1"')).status).toBe(204);
    const ok = await del(`/projects/${p._id}`, '"1"');
    expect(ok.status).toBe(204);
    expect(await raw(t, 'projects', p._id)).toMatchObject({ is_deleted: true });
  });

  it('applies to callers who cannot see the referencing resource (no `tasks` feature)', async () => {
    const p = await post('/projects', { name: 'hidden refs' });
    await post('/tasks', { project_id: p._id, title: 'invisible to noTasks' });
    const res = await expectNoWrite(t, ['projects'], () => del(`/projects/${p._id}`, '"1"', noTasks.key));
    expect(res.status).toBe(422);
    expect(envelope(res)).toMatchObject({ code: 'CASCADE_DENY', details: { referenced_by: 'tasks', count: 1 } });
  });

  it('the stale-ETag check comes first: a stale delete of a referenced project is 412', async () => {
    const p = await post('/projects', { name: 'stale+busy' });
    await post('/tasks', { project_id: p._id, title: 'a' });
    const res = await expectNoWrite(t, ['projects'], () => del(`/projects/${p._id}`, '"9"'));
    expect(res.status).toBe(412);
  });

  it('a referenced project can still be updated', async () => {
    const p = await post('/projects', { name: 'busy but editable' });
    await post('/tasks', { project_id: p._id, title: 'a' });
    const res = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 4 }, headers: ifMatch('"1"') });
    expect(res.status).toBe(200);
  });
});

describe('cascade (files → folders)', () => {
  it('deleting the folder soft-deletes its live files, one deleted event each; others are untouched', async () => {
    const folder = await post('/folders', { name: 'f' });
    const other = await post('/folders', { name: 'other' });
    const f1 = await post('/files', { name: '1', folder_id: folder._id });
    const f2 = await post('/files', { name: '2', folder_id: folder._id });
    const gone = await post('/files', { name: 'already', folder_id: folder._id });
    const elsewhere = await post('/files', { name: 'elsewhere', folder_id: other._id });
    expect((await del(`/files/${gone._id}`, '"1"')).status).toBe(204);
    const goneBefore = await raw(t, 'files', gone._id);
    events.length = 0;

    const started = Date.now();
    expect((await del(`/folders/${folder._id}`, '"1"')).status).toBe(204);

    for (const f of [f1, f2]) {
      const stored = await raw(t, 'files', f._id);
      expect(stored).toMatchObject({ is_deleted: true, version: 2 });
      expect(String(stored!.deleted_by)).toBe(alice.userId);
      expect(stored!.deleted_at.getTime()).toBeGreaterThanOrEqual(started - 1000);
      expect((await t.http('GET', `/files/${f._id}`, { key: alice.key })).status).toBe(404);
    }
    expect(await raw(t, 'files', gone._id)).toEqual(goneBefore);
    expect(await raw(t, 'files', elsewhere._id)).toMatchObject({ is_deleted: false, version: 1 });
    expect(await raw(t, 'folders', other._id)).toMatchObject({ is_deleted: false });

    const fileEvents = events.filter((e) => e.resource === 'files');
    expect(fileEvents.map((e) => e.id).sort()).toEqual([f1._id, f2._id].sort());
    expect(fileEvents.every((e) => e.event === 'deleted' && e.doc.is_deleted === true)).toBe(true);
    expect(events.filter((e) => e.resource === 'folders').map((e) => e.id)).toEqual([folder._id]);
  });

  it('a rejected folder delete (stale ETag) cascades nothing', async () => {
    const folder = await post('/folders', { name: 'f' });
    await post('/files', { name: '1', folder_id: folder._id });
    const res = await expectNoWrite(t, ['folders', 'files'], () => del(`/folders/${folder._id}`, '"2"'));
    expect(res.status).toBe(412);
  });
});

describe('rules below a cascaded child', () => {
  it('a `deny` on a child that the cascade would delete blocks the whole delete; nothing written', async () => {
    const folder = await post('/folders', { name: 'deep' });
    const file = await post('/files', { name: 'f', folder_id: folder._id });
    const chunk = await post('/chunks', { name: 'c', file_id: file._id });
    const res = await expectNoWrite(t, ['folders', 'files', 'chunks', 'labels', 'pages'], () => del(`/folders/${folder._id}`, '"1"'));
    expect(res.status).toBe(422);
    expect(envelope(res)).toMatchObject({ code: 'CASCADE_DENY', details: { resource: 'files', item_id: file._id, referenced_by: 'chunks', count: 1 } });
    expect(events).toEqual([]);

    expect((await del(`/chunks/${chunk._id}`, '"1"')).status).toBe(204);
    expect((await del(`/folders/${folder._id}`, '"1"')).status).toBe(204);
    expect(await raw(t, 'files', file._id)).toMatchObject({ is_deleted: true });
  });

  it('a `cascade` below a cascaded child follows it down', async () => {
    const folder = await post('/folders', { name: 'tree' });
    const file = await post('/files', { name: 'f', folder_id: folder._id });
    const page = await post('/pages', { name: 'p', file_id: file._id });
    events.length = 0;
    expect((await del(`/folders/${folder._id}`, '"1"')).status).toBe(204);
    expect(await raw(t, 'files', file._id)).toMatchObject({ is_deleted: true });
    expect(await raw(t, 'pages', page._id)).toMatchObject({ is_deleted: true, version: 2 });
    expect(events.map((e) => `${e.event}:${e.resource}`)).toEqual(['deleted:folders', 'deleted:files', 'deleted:pages']);
  });
});

describe('set_null (labels → folders)', () => {
  it('deleting the folder clears folder_id on its live labels and bumps their version; they stay live', async () => {
    const folder = await post('/folders', { name: 'f' });
    const other = await post('/folders', { name: 'other' });
    const l1 = await post('/labels', { name: '1', folder_id: folder._id });
    const l2 = await post('/labels', { name: '2', folder_id: folder._id });
    const elsewhere = await post('/labels', { name: 'elsewhere', folder_id: other._id });
    events.length = 0;

    expect((await del(`/folders/${folder._id}`, '"1"')).status).toBe(204);

    for (const l of [l1, l2]) {
      const res = await t.http('GET', `/labels/${l._id}`, { key: alice.key });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ folder_id: null, is_deleted: false, version: 2, name: l.name, updated_by: alice.userId });
      expect(res.headers.get('etag')).toBe('"2"');
    }
    expect(await raw(t, 'labels', elsewhere._id)).toMatchObject({ version: 1 });
    expect(String((await raw(t, 'labels', elsewhere._id))!.folder_id)).toBe(other._id);

    const labelEvents = events.filter((e) => e.resource === 'labels');
    expect(labelEvents.map((e) => e.id).sort()).toEqual([l1._id, l2._id].sort());
    expect(labelEvents.every((e) => e.event === 'updated' && e.doc.folder_id === null)).toBe(true);
  });

  it('the old ETag of a cleared label is stale afterwards', async () => {
    const folder = await post('/folders', { name: 'f' });
    const l = await post('/labels', { name: 'x', folder_id: folder._id });
    expect((await del(`/folders/${folder._id}`, '"1"')).status).toBe(204);
    const res = await t.http('PATCH', `/labels/${l._id}`, { key: alice.key, json: { name: 'y' }, headers: ifMatch('"1"') });
    expect(res.status).toBe(412);
  });
});
