/**
 * Write path, single documents: create / PATCH / PUT answers and ETags, If-Match rules (428, 412,
 * several tags, weak tags, the version check inside the update filter), PUT resetting omitted
 * fields, mass assignment of system and unknown fields, and relation ids that must reference a
 * visible live document. Every rejected write is checked against the stored collections.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Schema, type Types } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { col, dump, expectNoWrite, ifMatch, raw } from './write-helpers.ts';

/** A resource with fields that have no default and a private one: PUT must unset the former and keep the latter. */
const notes = defineResource({
  name: 'notes',
  schema: new Schema({
    title: { type: String, required: true },
    body: { type: String },
    count: { type: Number },
    pinned: { type: Boolean, default: false },
    secret: { type: String, private: true },
  }),
});

/**
 * Simulates a concurrent writer that commits between the service's read and its conditional write:
 * on a marked payload it bumps (or soft-deletes) the stored document straight in the collection.
 */
const interloper = definePlugin({
  name: 'interloper',
  dependsOn: ['resources'],
  setup: ({ db }) => {
    const bump = (id: unknown, set: Record<string, unknown> = {}) => db.collection('projects').updateOne({ _id: id as Types.ObjectId }, { $inc: { version: 1 }, $set: set });
    return {
      hooks: [
        onHook('BEFORE_UPDATE', async (p) => {
          if (p.data.description === 'race:bump') await bump(p.old._id, { budget: 999 });
          if (p.data.description === 'race:delete') await bump(p.old._id, { is_deleted: true });
        }),
        onHook('BEFORE_DELETE', async (p) => {
          if (p.old.description === 'race:bump') await bump(p.old._id, { budget: 999 });
        }),
        onHook('BEFORE_CREATE', (p) => {
          // A hook may add a private field; clients never can.
          if (p.resource === 'notes') return { ...p, data: { ...p.data, secret: 'hook-set' } };
        }),
      ],
    };
  },
});

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
let bob: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource, notes] }), interloper] });
  alice = await createTenantUser(t, { features: ['tasks'] });
  bob = await createTenantUser(t, { features: ['tasks'] });
});
afterAll(() => t?.close());

const createProject = async (json: Record<string, unknown> = {}, key = alice.key) => {
  const res = await t.http('POST', '/projects', { key, json: { name: 'P', ...json } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
};
const patch = (path: string, json: unknown, headers: Record<string, string> = {}, key = alice.key) => t.http('PATCH', path, { key, json, headers });
const put = (path: string, json: unknown, headers: Record<string, string> = {}, key = alice.key) => t.http('PUT', path, { key, json, headers });
const locs = (e: { details: Record<string, unknown> }) => (e.details.errors as { loc: (string | number)[] }[]).map((x) => x.loc);

const SYSTEM_VALUES: Record<string, unknown> = {
  _id: '0123456789abcdef01234567',
  tenant_id: '0123456789abcdef01234567',
  created_at: '2020-01-01T00:00:00.000Z',
  updated_at: '2020-01-01T00:00:00.000Z',
  created_by: '0123456789abcdef01234567',
  updated_by: '0123456789abcdef01234567',
  is_deleted: true,
  deleted_at: '2020-01-01T00:00:00.000Z',
  deleted_by: '0123456789abcdef01234567',
  version: 42,
};

describe('create', () => {
  it('201 with the stored document, ETag of its version and a Location that reads it back', async () => {
    const res = await t.http('POST', '/projects', { key: alice.key, json: { name: '  Trimmed ', owner_email: 'Boss@Example.COM', tags: ['x'] } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: 'Trimmed', owner_email: 'boss@example.com', tags: ['x'], status: 'active', description: null, budget: null,
      tenant_id: alice.tenantId, created_by: alice.userId, updated_by: alice.userId, is_deleted: false, deleted_at: null, deleted_by: null, version: 1,
    });
    expect(res.headers.get('etag')).toBe('"1"');
    const location = res.headers.get('location')!;
    expect(location).toBe(`/projects/${res.body._id}`);
    const back = await t.http('GET', location, { key: alice.key });
    expect(back.status).toBe(200);
    expect(back.body).toEqual(res.body);
    expect(back.headers.get('etag')).toBe('"1"');
    const stored = await raw(t, 'projects', res.body._id);
    expect(String(stored!.tenant_id)).toBe(alice.tenantId);
    expect(String(stored!.created_by)).toBe(alice.userId);
    expect(stored!.created_at).toEqual(stored!.updated_at);
  });

  it.each(Object.keys(SYSTEM_VALUES))('system field %s in the body: 422 at [body, field], nothing written', async (field) => {
    const res = await expectNoWrite(t, ['projects'], () => t.http('POST', '/projects', { key: alice.key, json: { name: 'Mass', [field]: SYSTEM_VALUES[field] } }));
    expect(res.status).toBe(422);
    const e = envelope(res);
    expect(e.code).toBe('VALIDATION_ERROR');
    expect(locs(e)).toContainEqual(['body', field]);
  });

  it('unknown field: 422 unrecognized key at [body, field], nothing written', async () => {
    const res = await expectNoWrite(t, ['projects'], () => t.http('POST', '/projects', { key: alice.key, json: { name: 'X', owner: 'eve', secret_flag: true } }));
    expect(res.status).toBe(422);
    const e = envelope(res);
    expect(locs(e)).toEqual(expect.arrayContaining([['body', 'owner'], ['body', 'secret_flag']]));
    expect((e.details.errors as { type: string }[]).every((x) => x.type === 'unrecognized_keys')).toBe(true);
  });

  it('a private field is not writable by clients (422) and never answered, even when a hook stores it', async () => {
    const rejected = await expectNoWrite(t, ['notes'], () => t.http('POST', '/notes', { key: alice.key, json: { title: 'n', secret: 'mine' } }));
    expect(rejected.status).toBe(422);
    expect(locs(envelope(rejected))).toContainEqual(['body', 'secret']);

    const res = await t.http('POST', '/notes', { key: alice.key, json: { title: 'n' } });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('secret');
    expect((await raw(t, 'notes', res.body._id))!.secret).toBe('hook-set');
  });

  it('schema constraints the input schema does not express (maxlength, trim to empty) are still 422 and write nothing', async () => {
    for (const name of ['x'.repeat(201), '   ']) {
      const res = await expectNoWrite(t, ['projects'], () => t.http('POST', '/projects', { key: alice.key, json: { name } }));
      expect(res.status).toBe(422);
      const e = envelope(res);
      expect(e.code).toBe('VALIDATION_ERROR');
      expect(locs(e)).toContainEqual(['body', 'name']);
    }
  });

  it('malformed JSON and a non-object body write nothing', async () => {
    await expectNoWrite(t, ['projects'], async () => {
      const bad = await t.http('POST', '/projects', { key: alice.key, body: '{"name":', headers: { 'Content-Type': 'application/json' } });
      expect(bad.status).toBe(400);
      const arr = await t.http('POST', '/projects', { key: alice.key, json: [{ name: 'in an array' }] });
      expect(arr.status).toBe(422);
    });
  });
});

describe('PATCH', () => {
  it('200 with the document, changes only the sent fields, bumps version and ETag, records the updater', async () => {
    const p = await createProject({ name: 'Orig', description: 'd', budget: 1, tags: ['a'] });
    const before = await raw(t, 'projects', p._id);
    await new Promise((r) => setTimeout(r, 5));
    const res = await patch(`/projects/${p._id}`, { budget: 2, owner_email: ' MiXeD@Case.io ' }, ifMatch('"1"'));
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe('"2"');
    expect(res.body).toMatchObject({ _id: p._id, name: 'Orig', description: 'd', tags: ['a'], budget: 2, owner_email: 'mixed@case.io', version: 2 });
    const after = await raw(t, 'projects', p._id);
    expect(after!.version).toBe(2);
    expect(after!.created_at).toEqual(before!.created_at);
    expect(after!.updated_at.getTime()).toBeGreaterThan(before!.updated_at.getTime());
    expect(String(after!.updated_by)).toBe(alice.userId);
    expect(res.body.updated_at).toBe(after!.updated_at.toISOString());
  });

  it('If-Match may list several tags and weak tags compare by value', async () => {
    const p = await createProject();
    const several = await patch(`/projects/${p._id}`, { budget: 1 }, ifMatch('"7", "1", "9"'));
    expect(several.status).toBe(200);
    expect(several.headers.get('etag')).toBe('"2"');
    const weak = await patch(`/projects/${p._id}`, { budget: 2 }, ifMatch('W/"2"'));
    expect(weak.status).toBe(200);
    const mixed = await patch(`/projects/${p._id}`, { budget: 3 }, ifMatch('W/"1",W/"3"'));
    expect(mixed.status).toBe(200);
    expect(mixed.body.version).toBe(4);
  });

  it('missing If-Match: 428 ETAG_REQUIRED, nothing written', async () => {
    const p = await createProject();
    const res = await expectNoWrite(t, ['projects'], () => patch(`/projects/${p._id}`, { budget: 5 }));
    expect(res.status).toBe(428);
    expect(envelope(res).code).toBe('ETAG_REQUIRED');
  });

  it('stale If-Match (an older revision, or none of several): 412 ETAG_MISMATCH, nothing written', async () => {
    const p = await createProject();
    expect((await patch(`/projects/${p._id}`, { budget: 1 }, ifMatch('"1"'))).status).toBe(200);
    for (const tag of ['"1"', '"3"', '"1", "3"']) {
      const res = await expectNoWrite(t, ['projects'], () => patch(`/projects/${p._id}`, { budget: 99 }, ifMatch(tag)));
      expect(res.status, tag).toBe(412);
      expect(envelope(res).code).toBe('ETAG_MISMATCH');
    }
    // Not entity tags (the current revision without its quotes, trailing text): a format mistake, 400.
    for (const tag of ['2', '"2"x']) {
      const res = await expectNoWrite(t, ['projects'], () => patch(`/projects/${p._id}`, { budget: 99 }, ifMatch(tag)));
      expect(res.status, tag).toBe(400);
      expect(envelope(res).code).toBe('BAD_REQUEST');
    }
    expect((await raw(t, 'projects', p._id))!.budget).toBe(1);
  });

  it('a writer that commits between the read and the write loses nothing: 412, the other write stays', async () => {
    const p = await createProject();
    const res = await patch(`/projects/${p._id}`, { description: 'race:bump', name: 'mine' }, ifMatch('"1"'));
    expect(res.status).toBe(412);
    expect(envelope(res).code).toBe('ETAG_MISMATCH');
    const stored = await raw(t, 'projects', p._id);
    expect(stored).toMatchObject({ name: 'P', budget: 999, version: 2, description: null });
  });

  it('a document deleted between the read and the write: 404, not resurrected', async () => {
    const p = await createProject();
    const res = await patch(`/projects/${p._id}`, { description: 'race:delete' }, ifMatch('"1"'));
    expect(res.status).toBe(404);
    expect(envelope(res)).toMatchObject({ code: 'NOT_FOUND', details: { resource: 'projects', item_id: p._id } });
    expect(await raw(t, 'projects', p._id)).toMatchObject({ is_deleted: true, version: 2, description: null });
  });

  it.each(Object.keys(SYSTEM_VALUES))('system field %s: 422 at [body, field] even with a valid If-Match, nothing written', async (field) => {
    const p = await createProject();
    const res = await expectNoWrite(t, ['projects'], () => patch(`/projects/${p._id}`, { budget: 3, [field]: SYSTEM_VALUES[field] }, ifMatch('"1"')));
    expect(res.status).toBe(422);
    const e = envelope(res);
    expect(e.code).toBe('VALIDATION_ERROR');
    expect(locs(e)).toContainEqual(['body', field]);
  });

  it('unknown fields, wrong types and null for a required field: 422 listing each, nothing written', async () => {
    const p = await createProject();
    const res = await expectNoWrite(t, ['projects'], () => patch(`/projects/${p._id}`, { name: null, budget: 'lots', status: 'gone', colour: 'red' }, ifMatch('"1"')));
    expect(res.status).toBe(422);
    expect(locs(envelope(res))).toEqual(expect.arrayContaining([['body', 'name'], ['body', 'budget'], ['body', 'status'], ['body', 'colour']]));
  });

  it('maxlength enforced on update too: 422, nothing written', async () => {
    const p = await createProject();
    const res = await expectNoWrite(t, ['projects'], () => patch(`/projects/${p._id}`, { name: 'y'.repeat(201) }, ifMatch('"1"')));
    expect(res.status).toBe(422);
    expect(locs(envelope(res))).toContainEqual(['body', 'name']);
  });

  it('unknown or malformed id: 404 NOT_FOUND', async () => {
    for (const id of ['0123456789abcdef01234567', 'not-an-id']) {
      const res = await expectNoWrite(t, ['projects'], () => patch(`/projects/${id}`, { budget: 1 }, ifMatch('"1"')));
      expect(res.status).toBe(404);
      expect(envelope(res).code).toBe('NOT_FOUND');
    }
  });

  it('DELETE also checks the version inside its write: a commit between read and write gives 412, nothing deleted', async () => {
    const p = await createProject({ description: 'race:bump' });
    const res = await t.http('DELETE', `/projects/${p._id}`, { key: alice.key, headers: ifMatch('"1"') });
    expect(res.status).toBe(412);
    expect(envelope(res).code).toBe('ETAG_MISMATCH');
    expect(await raw(t, 'projects', p._id)).toMatchObject({ is_deleted: false, deleted_at: null, budget: 999, version: 2 });
  });
});

describe('PUT', () => {
  it('200, new ETag, omitted fields back to their defaults', async () => {
    const p = await createProject({ name: 'Full', description: 'text', status: 'archived', tags: ['a', 'b'], budget: 7, owner_email: 'o@x.io' });
    const res = await put(`/projects/${p._id}`, { name: 'Bare' }, ifMatch('"1"'));
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe('"2"');
    expect(res.body).toMatchObject({ _id: p._id, name: 'Bare', description: null, status: 'active', tags: [], budget: null, owner_email: null, version: 2 });
    expect(res.body.created_at).toBe(p.created_at);
    expect(res.body.tenant_id).toBe(alice.tenantId);
    const stored = await raw(t, 'projects', p._id);
    expect(stored).toMatchObject({ name: 'Bare', description: null, status: 'active', tags: [], budget: null, owner_email: null, version: 2 });
  });

  it('omitted fields without a default are removed; private fields are left alone', async () => {
    const created = await t.http('POST', '/notes', { key: alice.key, json: { title: 't', body: 'b', count: 3, pinned: true } });
    expect(created.status).toBe(201);
    const res = await put(`/notes/${created.body._id}`, { title: 't2' }, ifMatch('"1"'));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ title: 't2', pinned: false, version: 2 });
    expect(res.body).not.toHaveProperty('body');
    expect(res.body).not.toHaveProperty('count');
    expect(res.body).not.toHaveProperty('secret');
    const stored = await raw(t, 'notes', created.body._id);
    expect(stored).not.toHaveProperty('body');
    expect(stored).not.toHaveProperty('count');
    expect(stored!.secret).toBe('hook-set');
  });

  it('a required field missing: 422 at [body, name], nothing written', async () => {
    const p = await createProject();
    const res = await expectNoWrite(t, ['projects'], () => put(`/projects/${p._id}`, { budget: 3 }, ifMatch('"1"')));
    expect(res.status).toBe(422);
    expect(locs(envelope(res))).toContainEqual(['body', 'name']);
  });

  it.each(['tenant_id', 'version', 'is_deleted', 'created_by', '_id'])('system field %s: 422, nothing written', async (field) => {
    const p = await createProject();
    const res = await expectNoWrite(t, ['projects'], () => put(`/projects/${p._id}`, { name: 'N', [field]: SYSTEM_VALUES[field] }, ifMatch('"1"')));
    expect(res.status).toBe(422);
    expect(locs(envelope(res))).toContainEqual(['body', field]);
  });

  it('missing If-Match 428, stale 412, a concurrent commit 412: nothing written', async () => {
    const p = await createProject({ budget: 4 });
    const missing = await expectNoWrite(t, ['projects'], () => put(`/projects/${p._id}`, { name: 'N' }));
    expect(missing.status).toBe(428);
    expect(envelope(missing).code).toBe('ETAG_REQUIRED');
    const stale = await expectNoWrite(t, ['projects'], () => put(`/projects/${p._id}`, { name: 'N' }, ifMatch('"2"')));
    expect(stale.status).toBe(412);
    expect(envelope(stale).code).toBe('ETAG_MISMATCH');
    const race = await put(`/projects/${p._id}`, { name: 'N', description: 'race:bump' }, ifMatch('"1"'));
    expect(race.status).toBe(412);
    expect(await raw(t, 'projects', p._id)).toMatchObject({ name: 'P', budget: 999, version: 2 });
  });
});

describe('relation ids must reference a visible live document', () => {
  let mine: any;
  let theirs: any;
  let deleted: any;
  let task: any;
  beforeEach(async () => {
    mine = await createProject({ name: 'mine' });
    theirs = await createProject({ name: 'theirs' }, bob.key);
    deleted = await createProject({ name: 'deleted' });
    expect((await t.http('DELETE', `/projects/${deleted._id}`, { key: alice.key, headers: ifMatch('"1"') })).status).toBe(204);
    const tr = await t.http('POST', '/tasks', { key: alice.key, json: { project_id: mine._id, title: 'T' } });
    expect(tr.status).toBe(201);
    task = tr.body;
  });

  const cases = () => [
    ['another tenant', theirs._id],
    ['soft-deleted', deleted._id],
    ['non-existent', '0123456789abcdef01234567'],
  ] as const;

  it('create: 422 reference_not_found at [body, project_id], nothing written', async () => {
    for (const [label, projectId] of cases()) {
      const res = await expectNoWrite(t, ['tasks'], () => t.http('POST', '/tasks', { key: alice.key, json: { project_id: projectId, title: label } }));
      expect(res.status, label).toBe(422);
      const e = envelope(res);
      expect(e.code).toBe('VALIDATION_ERROR');
      expect(e.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'project_id'], type: 'reference_not_found' })]);
    }
  });

  it('PATCH and PUT: 422 reference_not_found, the task unchanged', async () => {
    for (const [label, projectId] of cases()) {
      const p1 = await expectNoWrite(t, ['tasks'], () => patch(`/tasks/${task._id}`, { project_id: projectId }, ifMatch('"1"')));
      expect(p1.status, label).toBe(422);
      expect(envelope(p1).details.errors).toEqual([expect.objectContaining({ loc: ['body', 'project_id'], type: 'reference_not_found' })]);
      const p2 = await expectNoWrite(t, ['tasks'], () => put(`/tasks/${task._id}`, { project_id: projectId, title: 'T2' }, ifMatch('"1"')));
      expect(p2.status, label).toBe(422);
      expect(envelope(p2).details.errors).toEqual([expect.objectContaining({ loc: ['body', 'project_id'], type: 'reference_not_found' })]);
    }
  });

  it('a visible live project is accepted on create, PATCH and PUT', async () => {
    const other = await createProject({ name: 'other' });
    const res = await patch(`/tasks/${task._id}`, { project_id: other._id }, ifMatch('"1"'));
    expect(res.status).toBe(200);
    expect(res.body.project_id).toBe(other._id);
    const rep = await put(`/tasks/${task._id}`, { project_id: mine._id, title: 'again' }, ifMatch('"2"'));
    expect(rep.status).toBe(200);
    expect(rep.body).toMatchObject({ project_id: mine._id, title: 'again', done: false, version: 3 });
    expect(String((await raw(t, 'tasks', task._id))!.project_id)).toBe(mine._id);
  });
});

describe('sanity of the fixtures', () => {
  it('collections hold what the suite created (guards against vacuous no-write checks)', async () => {
    expect((await dump(t, 'projects')).length).toBeGreaterThan(10);
    expect(await col(t, 'tasks').countDocuments()).toBeGreaterThan(0);
  });
});
