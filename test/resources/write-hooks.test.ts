/**
 * Write path, document hooks on the kernel bus: BEFORE_* transform and veto (the veto's status and
 * code reach the client, nothing is written), AFTER_* payloads (resource, id, old, doc, actor,
 * tenant_id, ip, request_id, secret_fields, bulk), one event per document for bulk calls, and
 * AFTER_* failures that never fail the request.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook, type HookEvents, type HookName } from '../../core/hooks.ts';
import { AppError } from '../../core/errors.ts';
import { expectNoWrite, ifMatch, raw } from './write-helpers.ts';

const vaults = defineResource({
  name: 'vaults',
  schema: new Schema({ label: { type: String, required: true }, secret: { type: String, private: true } }),
});

type Seen = { [K in HookName]: { event: K; payload: HookEvents[K] } }[HookName];
const seen: Seen[] = [];
const record = <K extends HookName>(event: K) => (payload: HookEvents[K]) => void seen.push({ event, payload } as Seen);
const of = <K extends HookName>(event: K) => seen.filter((s) => s.event === event).map((s) => s.payload as HookEvents[K]);
let afterFailures = 0;

const probe = definePlugin({
  name: 'hook-probe',
  dependsOn: ['resources'],
  setup: () => ({
    hooks: [
      onHook('BEFORE_CREATE', (p) => {
        record('BEFORE_CREATE')(p);
        const name = typeof p.data.name === 'string' ? p.data.name : '';
        if (name.startsWith('veto')) throw new AppError(451, 'VETOED_BY_HOOK', 'Hook says no', { name });
        if (name.startsWith('upper:')) return { ...p, data: { ...p.data, name: name.slice('upper:'.length).toUpperCase() } };
        if (p.resource === 'vaults') return { ...p, data: { ...p.data, secret: `s3cr3t-${String(p.data.label)}` } };
      }),
      onHook('BEFORE_UPDATE', (p) => {
        record('BEFORE_UPDATE')(p);
        if (p.old.name === 'locked' || p.data.description === 'veto') throw new AppError(423, 'LOCKED_BY_HOOK', 'Locked', { id: p.id });
        if (typeof p.data.name === 'string' && p.data.name.startsWith('upper:')) return { ...p, data: { ...p.data, name: p.data.name.slice(6).toUpperCase() } };
      }),
      onHook('BEFORE_DELETE', (p) => {
        record('BEFORE_DELETE')(p);
        if (p.old.name === 'undeletable') throw new AppError(409, 'KEEP_ME', 'This one stays', { id: p.id });
      }),
      onHook('AFTER_CREATE', record('AFTER_CREATE')),
      onHook('AFTER_UPDATE', record('AFTER_UPDATE')),
      onHook('AFTER_DELETE', record('AFTER_DELETE')),
    ],
  }),
});

/** Every AFTER_* event also reaches a handler that throws. */
const broken = definePlugin({
  name: 'broken-after',
  dependsOn: ['resources'],
  setup: () => ({
    hooks: (['AFTER_CREATE', 'AFTER_UPDATE', 'AFTER_DELETE'] as const).map((e) =>
      onHook(e, () => {
        afterFailures++;
        throw new Error(`${e} listener exploded`);
      }),
    ),
  }),
});

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource, vaults] }), probe, broken] });
  alice = await createTenantUser(t, { features: ['tasks'] });
});
afterAll(() => t?.close());
beforeEach(() => {
  seen.length = 0;
  afterFailures = 0;
});

const reqId = () => `req-${Math.random().toString(36).slice(2, 10)}`;
const createProject = async (json: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const res = await t.http('POST', '/projects', { key: alice.key, json, headers });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
};
const expectBase = (p: HookEvents['AFTER_CREATE'], requestId: string, bulk = false) => {
  expect(p.actor).toMatchObject({ id: alice.userId, tenant_id: alice.tenantId });
  expect(p.tenant_id).toBe(alice.tenantId);
  expect(p.ip).toMatch(/127\.0\.0\.1$/);
  expect(p.request_id).toBe(requestId);
  expect(p.bulk).toBe(bulk);
};

describe('BEFORE_CREATE', () => {
  it('can transform the data: the stored document, the answer and AFTER_CREATE see the result', async () => {
    const body = await createProject({ name: 'upper:quiet' });
    expect(body.name).toBe('QUIET');
    expect((await raw(t, 'projects', body._id))!.name).toBe('QUIET');
    expect(of('AFTER_CREATE')[0]!.doc.name).toBe('QUIET');
    const before = of('BEFORE_CREATE')[0]!;
    expect(before).toMatchObject({ resource: 'projects', data: { name: 'upper:quiet' }, tenant_id: alice.tenantId, bulk: false });
  });

  it('a veto with an AppError: its status, code, message and details reach the client; nothing written, no AFTER event', async () => {
    const res = await expectNoWrite(t, ['projects'], () => t.http('POST', '/projects', { key: alice.key, json: { name: 'veto me' } }));
    expect(res.status).toBe(451);
    expect(envelope(res)).toEqual({ code: 'VETOED_BY_HOOK', message: 'Hook says no', details: { name: 'veto me' } });
    expect(of('BEFORE_CREATE')).toHaveLength(1);
    expect(of('AFTER_CREATE')).toHaveLength(0);
  });

  it('runs after input validation: an invalid body never reaches the hook', async () => {
    const res = await t.http('POST', '/projects', { key: alice.key, json: { name: 'veto', version: 2 } });
    expect(res.status).toBe(422);
    expect(of('BEFORE_CREATE')).toHaveLength(0);
  });
});

describe('BEFORE_UPDATE and BEFORE_DELETE', () => {
  it('BEFORE_UPDATE can transform the data and gets id, old, data and replace', async () => {
    const p = await createProject({ name: 'plain' });
    const res = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { name: 'upper:loud' }, headers: ifMatch('"1"') });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('LOUD');
    const before = of('BEFORE_UPDATE')[0]!;
    expect(before).toMatchObject({ resource: 'projects', id: p._id, data: { name: 'upper:loud' }, replace: false, bulk: false });
    expect(before.old).toMatchObject({ name: 'plain', version: 1 });
    const put = await t.http('PUT', `/projects/${p._id}`, { key: alice.key, json: { name: 'again' }, headers: ifMatch('"2"') });
    expect(put.status).toBe(200);
    expect(of('BEFORE_UPDATE')[1]).toMatchObject({ replace: true, data: { name: 'again' } });
  });

  it('a BEFORE_UPDATE veto (PATCH and PUT): the hook\'s error, nothing written, no AFTER_UPDATE', async () => {
    const p = await createProject({ name: 'locked' });
    await expectNoWrite(t, ['projects'], async () => {
      const patch = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"1"') });
      expect(patch.status).toBe(423);
      expect(envelope(patch)).toMatchObject({ code: 'LOCKED_BY_HOOK', details: { id: p._id } });
      const put = await t.http('PUT', `/projects/${p._id}`, { key: alice.key, json: { name: 'unlocked' }, headers: ifMatch('"1"') });
      expect(put.status).toBe(423);
    });
    expect(of('AFTER_UPDATE')).toHaveLength(0);
  });

  it('a BEFORE_DELETE veto: the hook\'s error, the document stays live, no AFTER_DELETE', async () => {
    const p = await createProject({ name: 'undeletable' });
    const res = await expectNoWrite(t, ['projects'], () => t.http('DELETE', `/projects/${p._id}`, { key: alice.key, headers: ifMatch('"1"') }));
    expect(res.status).toBe(409);
    expect(envelope(res)).toMatchObject({ code: 'KEEP_ME', message: 'This one stays', details: { id: p._id } });
    expect(of('BEFORE_DELETE')[0]).toMatchObject({ resource: 'projects', id: p._id, old: { name: 'undeletable' }, bulk: false });
    expect(of('AFTER_DELETE')).toHaveLength(0);
  });

  it('rejected requests (stale ETag, unknown id) never reach BEFORE hooks', async () => {
    const p = await createProject({ name: 'quiet' });
    await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"7"') });
    await t.http('DELETE', `/projects/0123456789abcdef01234567`, { key: alice.key, headers: ifMatch('"1"') });
    expect(of('BEFORE_UPDATE')).toHaveLength(0);
    expect(of('BEFORE_DELETE')).toHaveLength(0);
  });
});

describe('AFTER_* payloads', () => {
  it('AFTER_CREATE: resource, id, doc, actor, tenant_id, ip, request_id, secret_fields, bulk=false', async () => {
    const rid = reqId();
    const body = await createProject({ name: 'after-create', budget: 3 }, { 'X-Request-Id': rid });
    const [p] = of('AFTER_CREATE');
    expect(of('AFTER_CREATE')).toHaveLength(1);
    expect(p).toMatchObject({ resource: 'projects', id: body._id, secret_fields: [] });
    expect(p!).not.toHaveProperty('old');
    expect(String(p!.doc._id)).toBe(body._id);
    expect(p!.doc).toMatchObject({ name: 'after-create', budget: 3, version: 1, is_deleted: false });
    expectBase(p!, rid);
  });

  it('AFTER_UPDATE: old is the previous revision, doc the new one; replace tells PATCH from PUT', async () => {
    const p = await createProject({ name: 'before', budget: 1 });
    seen.length = 0;
    const rid = reqId();
    const res = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 2 }, headers: { ...ifMatch('"1"'), 'X-Request-Id': rid } });
    expect(res.status).toBe(200);
    const [u] = of('AFTER_UPDATE');
    expect(u).toMatchObject({ resource: 'projects', id: p._id, replace: false, secret_fields: [] });
    expect(u!.old).toMatchObject({ budget: 1, version: 1 });
    expect(u!.doc).toMatchObject({ budget: 2, version: 2 });
    expectBase(u as never, rid);

    const rid2 = reqId();
    const put = await t.http('PUT', `/projects/${p._id}`, { key: alice.key, json: { name: 'after' }, headers: { ...ifMatch('"2"'), 'X-Request-Id': rid2 } });
    expect(put.status).toBe(200);
    const r = of('AFTER_UPDATE')[1]!;
    expect(r).toMatchObject({ replace: true, request_id: rid2 });
    expect(r.old).toMatchObject({ name: 'before', budget: 2, version: 2 });
    expect(r.doc).toMatchObject({ name: 'after', budget: null, version: 3 });
  });

  it('AFTER_DELETE: old is live, doc is the soft-deleted revision', async () => {
    const p = await createProject({ name: 'to delete' });
    seen.length = 0;
    const rid = reqId();
    const res = await t.http('DELETE', `/projects/${p._id}`, { key: alice.key, headers: { ...ifMatch('"1"'), 'X-Request-Id': rid } });
    expect(res.status).toBe(204);
    const [d] = of('AFTER_DELETE');
    expect(of('AFTER_DELETE')).toHaveLength(1);
    expect(d).toMatchObject({ resource: 'projects', id: p._id, old: { is_deleted: false, version: 1 }, doc: { is_deleted: true, version: 2 } });
    expect(String(d!.doc.deleted_by)).toBe(alice.userId);
    expectBase(d as never, rid);
  });

  it('secret_fields names the private fields; the payload carries them, the client answer never does', async () => {
    const res = await t.http('POST', '/vaults', { key: alice.key, json: { label: 'v' } });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('secret');
    const [c] = of('AFTER_CREATE');
    expect(c!.secret_fields).toEqual(['secret']);
    expect(c!.doc.secret).toBe('s3cr3t-v');
    const upd = await t.http('PATCH', `/vaults/${res.body._id}`, { key: alice.key, json: { label: 'w' }, headers: ifMatch('"1"') });
    expect(upd.status).toBe(200);
    expect(upd.body).not.toHaveProperty('secret');
    expect(of('AFTER_UPDATE')[0]).toMatchObject({ secret_fields: ['secret'], old: { secret: 's3cr3t-v' }, doc: { secret: 's3cr3t-v', label: 'w' } });
  });

  it('a system administrator acting in a tenant: actor is the admin, tenant_id the chosen tenant', async () => {
    const res = await t.http('POST', '/projects', { json: { name: 'by admin' }, headers: { 'X-Tenant-Id': alice.tenantId } });
    expect(res.status).toBe(201);
    const [c] = of('AFTER_CREATE');
    expect(c!.tenant_id).toBe(alice.tenantId);
    expect(c!.actor).toMatchObject({ scope: 'system' });
    expect(c!.actor!.tenant_id).not.toBe(alice.tenantId);
  });

  it('GraphQL mutations emit the same events with the request id', async () => {
    const rid = reqId();
    const res = await t.gql<{ createProject: { _id: string } }>('mutation($i: JSON!) { createProject(input: $i) { _id } }', { i: { name: 'via gql' } }, { key: alice.key, headers: { 'X-Request-Id': rid } });
    expect(res.body.errors).toBeUndefined();
    const [c] = of('AFTER_CREATE');
    expect(c).toMatchObject({ resource: 'projects', id: res.body.data!.createProject._id, bulk: false, request_id: rid });
    expectBase(c!, rid);
  });
});

describe('bulk calls', () => {
  it('bulk create emits one BEFORE_CREATE and one AFTER_CREATE per document, all with bulk=true', async () => {
    const rid = reqId();
    const res = await t.http('POST', '/projects/bulk', { key: alice.key, json: { items: [{ name: 'b1' }, { name: 'upper:b2' }, { name: 'b3' }] }, headers: { 'X-Request-Id': rid } });
    expect(res.status).toBe(201);
    const after = of('AFTER_CREATE');
    expect(after.map((e) => e.id)).toEqual(res.body.items.map((d: any) => d._id));
    expect(after.map((e) => e.doc.name)).toEqual(['b1', 'B2', 'b3']);
    for (const e of after) expectBase(e, rid, true);
    expect(of('BEFORE_CREATE').map((e) => e.bulk)).toEqual([true, true, true]);
  });

  it('a vetoed item is a per-item error with the hook\'s code (207); the others are created', async () => {
    const res = await t.http('POST', '/projects/bulk', { key: alice.key, json: { items: [{ name: 'fine' }, { name: 'veto-2' }] } });
    expect(res.status).toBe(207);
    expect(res.body.errors).toEqual([{ index: 1, error: { status: 451, code: 'VETOED_BY_HOOK', message: 'Hook says no', details: { name: 'veto-2' } } }]);
    expect(of('AFTER_CREATE').map((e) => e.doc.name)).toEqual(['fine']);
  });

  it('every item vetoed the same way: the hook\'s status and code, each item listed, nothing written', async () => {
    const res = await expectNoWrite(t, ['projects'], () => t.http('POST', '/projects/bulk', { key: alice.key, json: { items: [{ name: 'veto-a' }, { name: 'veto-b' }] } }));
    expect(res.status).toBe(451);
    const e = envelope(res);
    expect(e.code).toBe('VETOED_BY_HOOK');
    expect((e.details.errors as any[]).map((x) => [x.index, x.error.code])).toEqual([[0, 'VETOED_BY_HOOK'], [1, 'VETOED_BY_HOOK']]);
    expect(of('AFTER_CREATE')).toHaveLength(0);
  });

  it('bulk delete emits one BEFORE_DELETE and AFTER_DELETE per deleted document, bulk=true; vetoed rows are errors', async () => {
    const a = await createProject({ name: 'bd-a' });
    const b = await createProject({ name: 'bd-b' });
    const keep = await createProject({ name: 'undeletable' });
    seen.length = 0;
    const rid = reqId();
    const res = await t.http('DELETE', '/projects/bulk', {
      key: alice.key,
      json: { items: [{ id: a._id, etag: '"1"' }, { id: keep._id, etag: '"1"' }, { id: b._id, etag: '"1"' }] },
      headers: { 'X-Request-Id': rid },
    });
    expect(res.status).toBe(207);
    expect(res.body.deleted).toEqual([a._id, b._id]);
    expect(res.body.errors.map((r: any) => [r.index, r.error.code])).toEqual([[1, 'KEEP_ME']]);
    const after = of('AFTER_DELETE');
    expect(after.map((e) => e.id)).toEqual([a._id, b._id]);
    for (const e of after) {
      expectBase(e as never, rid, true);
      expect(e.doc.is_deleted).toBe(true);
    }
    expect(of('BEFORE_DELETE').map((e) => [e.id, e.bulk])).toEqual([[a._id, true], [keep._id, true], [b._id, true]]);
    expect(await raw(t, 'projects', keep._id)).toMatchObject({ is_deleted: false });
  });
});

describe('a throwing AFTER handler', () => {
  it('never fails the request, and the other listeners still get the event', async () => {
    const p = await createProject({ name: 'resilient' });
    const upd = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"1"') });
    expect(upd.status).toBe(200);
    const del = await t.http('DELETE', `/projects/${p._id}`, { key: alice.key, headers: ifMatch('"2"') });
    expect(del.status).toBe(204);
    expect(afterFailures).toBe(3);
    expect(of('AFTER_CREATE')).toHaveLength(1);
    expect(of('AFTER_UPDATE')).toHaveLength(1);
    expect(of('AFTER_DELETE')).toHaveLength(1);
    expect(await raw(t, 'projects', p._id)).toMatchObject({ is_deleted: true, budget: 1, version: 3 });
  });
});
