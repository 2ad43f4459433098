/**
 * Write path, document hooks on the kernel bus: BEFORE_* transform and veto (the veto's status and
 * code reach the client, nothing is written, no event). What follows a write is its event on the
 * log, written by the same write: its object, the object before, actor, tenant, ip, request id and
 * bulk, one event per document for bulk calls, never a private field.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook, type HookEvents, type HookName } from '../../core/hooks.ts';
import type { EventDoc } from '../../plugins/events/public/outbox.ts';
import { AppError } from '../../core/errors.ts';
import { col, expectNoWrite, ifMatch, oid, raw } from './write-helpers.ts';

const vaults = defineResource({
  name: 'vaults',
  schema: new Schema({ label: { type: String, required: true }, secret: { type: String, private: true } }),
});

type Seen = { [K in HookName]: { event: K; payload: HookEvents[K] } }[HookName];
const seen: Seen[] = [];
const record = <K extends HookName>(event: K) => (payload: HookEvents[K]) => void seen.push({ event, payload } as Seen);
const of = <K extends HookName>(event: K) => seen.filter((s) => s.event === event).map((s) => s.payload as HookEvents[K]);

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
    ],
  }),
});

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, tasksResource, vaults] }), probe] });
  alice = await createTenantUser(t, { features: ['tasks'] });
});
afterAll(() => t?.close());
let since = new Date(0);
beforeEach(() => {
  seen.length = 0;
  since = new Date();
});

/** The events stored since the test began (the relay runs before each answer in tests), oldest first; `type` filters. */
const stored = async (type?: string): Promise<EventDoc[]> =>
  (await col(t, 'events').find({ committed_at: { $gte: since }, ...(type ? { type } : { type: { $regex: /^(projects|vaults)\./ } }) }).sort({ created_at: 1, _id: 1 }).toArray()) as unknown as EventDoc[];

const reqId = () => `req-${Math.random().toString(36).slice(2, 10)}`;
const createProject = async (json: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const res = await t.http('POST', '/projects', { key: alice.key, json, headers });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
};
const expectBase = (e: EventDoc, requestId: string, bulk = false) => {
  expect(e.actor).toBe(alice.userId);
  expect(String(e.tenant_id)).toBe(alice.tenantId);
  expect(e.meta).toMatchObject({ resource: 'projects', bulk });
  expect(e.meta!.ip).toMatch(/127\.0\.0\.1$/);
  expect(e.request_id).toBe(requestId);
};

describe('BEFORE_CREATE', () => {
  it('can transform the data: the stored document, the answer and the event see the result', async () => {
    const body = await createProject({ name: 'upper:quiet' });
    expect(body.name).toBe('QUIET');
    expect((await raw(t, 'projects', body._id))!.name).toBe('QUIET');
    expect((await stored('projects.created'))[0]!.data.name).toBe('QUIET');
    const before = of('BEFORE_CREATE')[0]!;
    expect(before).toMatchObject({ resource: 'projects', data: { name: 'upper:quiet' }, tenant_id: alice.tenantId, bulk: false });
  });

  it('a veto with an AppError: its status, code, message and details reach the client; nothing written, no event', async () => {
    const res = await expectNoWrite(t, ['projects', 'events'], () => t.http('POST', '/projects', { key: alice.key, json: { name: 'veto me' } }));
    expect(res.status).toBe(451);
    expect(envelope(res)).toEqual({ code: 'VETOED_BY_HOOK', message: 'Hook says no', details: { name: 'veto me' } });
    expect(of('BEFORE_CREATE')).toHaveLength(1);
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

  it('a BEFORE_UPDATE veto (PATCH and PUT): the hook\'s error, nothing written, no event', async () => {
    const p = await createProject({ name: 'locked' });
    await expectNoWrite(t, ['projects', 'events'], async () => {
      const patch = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"1"') });
      expect(patch.status).toBe(423);
      expect(envelope(patch)).toMatchObject({ code: 'LOCKED_BY_HOOK', details: { id: p._id } });
      const put = await t.http('PUT', `/projects/${p._id}`, { key: alice.key, json: { name: 'unlocked' }, headers: ifMatch('"1"') });
      expect(put.status).toBe(423);
    });
  });

  it('a BEFORE_DELETE veto: the hook\'s error, the document stays live, no event', async () => {
    const p = await createProject({ name: 'undeletable' });
    const res = await expectNoWrite(t, ['projects', 'events'], () => t.http('DELETE', `/projects/${p._id}`, { key: alice.key, headers: ifMatch('"1"') }));
    expect(res.status).toBe(409);
    expect(envelope(res)).toMatchObject({ code: 'KEEP_ME', message: 'This one stays', details: { id: p._id } });
    expect(of('BEFORE_DELETE')[0]).toMatchObject({ resource: 'projects', id: p._id, old: { name: 'undeletable' }, bulk: false });
  });

  it('rejected requests (stale ETag, unknown id) never reach BEFORE hooks', async () => {
    const p = await createProject({ name: 'quiet' });
    await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 1 }, headers: ifMatch('"7"') });
    await t.http('DELETE', `/projects/0123456789abcdef01234567`, { key: alice.key, headers: ifMatch('"1"') });
    expect(of('BEFORE_UPDATE')).toHaveLength(0);
    expect(of('BEFORE_DELETE')).toHaveLength(0);
  });
});

describe('the change\'s event', () => {
  it('created: the document after the change, no previous, actor, tenant, ip, request id, bulk=false', async () => {
    const rid = reqId();
    const body = await createProject({ name: 'after-create', budget: 3 }, { 'X-Request-Id': rid });
    const events = await stored();
    expect(events.map((e) => e.type)).toEqual(['projects.created']);
    const [e] = events;
    expect(e!.source).toMatchObject({ collection: 'projects', version: 1 });
    expect(String(e!.source!.id)).toBe(body._id);
    expect(e!.previous).toBeNull();
    expect(e!.data).toMatchObject({ name: 'after-create', budget: 3, version: 1, is_deleted: false });
    expectBase(e!, rid);
  });

  it('updated: previous is the revision before, data the new one; meta.replace tells PATCH from PUT', async () => {
    const p = await createProject({ name: 'before', budget: 1 });
    since = new Date();
    const rid = reqId();
    const res = await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { budget: 2 }, headers: { ...ifMatch('"1"'), 'X-Request-Id': rid } });
    expect(res.status).toBe(200);
    const [u] = await stored('projects.updated');
    expect(u!.meta).toMatchObject({ replace: false });
    expect(u!.previous).toMatchObject({ budget: 1, version: 1 });
    expect(u!.data).toMatchObject({ budget: 2, version: 2 });
    expectBase(u!, rid);

    const rid2 = reqId();
    const put = await t.http('PUT', `/projects/${p._id}`, { key: alice.key, json: { name: 'after' }, headers: { ...ifMatch('"2"'), 'X-Request-Id': rid2 } });
    expect(put.status).toBe(200);
    const r = (await stored('projects.updated'))[1]!;
    expect(r).toMatchObject({ request_id: rid2, meta: { replace: true } });
    expect(r.previous).toMatchObject({ name: 'before', budget: 2, version: 2 });
    expect(r.data).toMatchObject({ name: 'after', budget: null, version: 3 });
  });

  it('deleted: previous is live, data the soft-deleted revision', async () => {
    const p = await createProject({ name: 'to delete' });
    since = new Date();
    const rid = reqId();
    const res = await t.http('DELETE', `/projects/${p._id}`, { key: alice.key, headers: { ...ifMatch('"1"'), 'X-Request-Id': rid } });
    expect(res.status).toBe(204);
    const events = await stored();
    expect(events.map((e) => e.type)).toEqual(['projects.deleted']);
    expect(events[0]).toMatchObject({ previous: { is_deleted: false, version: 1 }, data: { is_deleted: true, version: 2 } });
    expect(String(events[0]!.data.deleted_by)).toBe(alice.userId);
    expectBase(events[0]!, rid);
  });

  it('private fields: the hook payload carries them, the event and the client answer never do', async () => {
    const res = await t.http('POST', '/vaults', { key: alice.key, json: { label: 'v' } });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('secret');
    expect(of('BEFORE_CREATE')[0]!.secret_fields).toEqual(['secret']);
    expect((await raw(t, 'vaults', res.body._id))!.secret).toBe('s3cr3t-v');
    const upd = await t.http('PATCH', `/vaults/${res.body._id}`, { key: alice.key, json: { label: 'w' }, headers: ifMatch('"1"') });
    expect(upd.status).toBe(200);
    expect(upd.body).not.toHaveProperty('secret');
    expect(of('BEFORE_UPDATE')[0]).toMatchObject({ secret_fields: ['secret'], old: { secret: 's3cr3t-v' } });
    const events = await stored();
    expect(events.map((e) => e.type)).toEqual(['vaults.created', 'vaults.updated']);
    expect(JSON.stringify(events)).not.toContain('s3cr3t');
  });

  it('a system administrator acting in a tenant: the event has the chosen tenant and the administrator as actor', async () => {
    const res = await t.http('POST', '/projects', { json: { name: 'by admin' }, headers: { 'X-Tenant-Id': alice.tenantId } });
    expect(res.status).toBe(201);
    const [c] = await stored('projects.created');
    expect(String(c!.tenant_id)).toBe(alice.tenantId);
    expect(of('BEFORE_CREATE')[0]!.actor).toMatchObject({ scope: 'system' });
    expect(c!.actor).toBe(String(of('BEFORE_CREATE')[0]!.actor!.id));
  });

  it('GraphQL mutations store the same events with the request id', async () => {
    const rid = reqId();
    const res = await t.gql<{ createProject: { _id: string } }>('mutation($i: JSON!) { createProject(input: $i) { _id } }', { i: { name: 'via gql' } }, { key: alice.key, headers: { 'X-Request-Id': rid } });
    expect(res.body.errors).toBeUndefined();
    const [c] = await stored('projects.created');
    expect(String(c!.source!.id)).toBe(res.body.data!.createProject._id);
    expectBase(c!, rid);
  });
});

describe('bulk calls', () => {
  it('bulk create runs one BEFORE_CREATE and stores one event per document, all with bulk=true', async () => {
    const rid = reqId();
    const res = await t.http('POST', '/projects/bulk', { key: alice.key, json: { items: [{ name: 'b1' }, { name: 'upper:b2' }, { name: 'b3' }] }, headers: { 'X-Request-Id': rid } });
    expect(res.status).toBe(201);
    const after = await stored('projects.created');
    expect(after.map((e) => String(e.source!.id)).sort()).toEqual(res.body.items.map((d: any) => d._id).sort());
    expect(after.map((e) => e.data.name).sort()).toEqual(['B2', 'b1', 'b3']);
    for (const e of after) expectBase(e, rid, true);
    expect(of('BEFORE_CREATE').map((e) => e.bulk)).toEqual([true, true, true]);
  });

  it('a vetoed item is a per-item error with the hook\'s code (207); the others are created', async () => {
    const res = await t.http('POST', '/projects/bulk', { key: alice.key, json: { items: [{ name: 'fine' }, { name: 'veto-2' }] } });
    expect(res.status).toBe(207);
    expect(res.body.errors).toEqual([{ index: 1, error: { status: 451, code: 'VETOED_BY_HOOK', message: 'Hook says no', details: { name: 'veto-2' } } }]);
    expect((await stored('projects.created')).map((e) => e.data.name)).toEqual(['fine']);
  });

  it('every item vetoed the same way: the hook\'s status and code, each item listed, nothing written', async () => {
    const res = await expectNoWrite(t, ['projects', 'events'], () => t.http('POST', '/projects/bulk', { key: alice.key, json: { items: [{ name: 'veto-a' }, { name: 'veto-b' }] } }));
    expect(res.status).toBe(451);
    const e = envelope(res);
    expect(e.code).toBe('VETOED_BY_HOOK');
    expect((e.details.errors as any[]).map((x) => [x.index, x.error.code])).toEqual([[0, 'VETOED_BY_HOOK'], [1, 'VETOED_BY_HOOK']]);
  });

  it('bulk delete runs one BEFORE_DELETE per document and stores one event per deleted one, bulk=true; vetoed rows are errors', async () => {
    const a = await createProject({ name: 'bd-a' });
    const b = await createProject({ name: 'bd-b' });
    const keep = await createProject({ name: 'undeletable' });
    seen.length = 0;
    since = new Date();
    const rid = reqId();
    const res = await t.http('DELETE', '/projects/bulk', {
      key: alice.key,
      json: { items: [{ id: a._id, etag: '"1"' }, { id: keep._id, etag: '"1"' }, { id: b._id, etag: '"1"' }] },
      headers: { 'X-Request-Id': rid },
    });
    expect(res.status).toBe(207);
    expect(res.body.deleted).toEqual([a._id, b._id]);
    expect(res.body.errors.map((r: any) => [r.index, r.error.code])).toEqual([[1, 'KEEP_ME']]);
    const after = await stored('projects.deleted');
    expect(after.map((e) => String(e.source!.id)).sort()).toEqual([a._id, b._id].sort());
    for (const e of after) {
      expectBase(e, rid, true);
      expect(e.data.is_deleted).toBe(true);
    }
    expect(of('BEFORE_DELETE').map((e) => [e.id, e.bulk])).toEqual([[a._id, true], [keep._id, true], [b._id, true]]);
    expect(await raw(t, 'projects', keep._id)).toMatchObject({ is_deleted: false });
    expect(await col(t, 'events').countDocuments({ 'source.id': oid(keep._id), type: 'projects.deleted' })).toBe(0);
  });
});
