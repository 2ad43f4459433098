/**
 * The update in one command (plugins/resources/update.ts): a PATCH or PUT that nothing before the
 * write needs the document for is one update pipeline, no read. Twin resources with the same fields,
 * one with a `BEFORE_UPDATE` handler of its own (which keeps it on the read path), get the same
 * requests: answers, stored documents and events must be the same. Also: the order of errors, values
 * that look like expressions, and a hook's resource filter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { commandCounter, expectNoWrite, ifMatch, raw } from './write-helpers.ts';

const fields = () => ({
  label: { type: String, required: true, trim: true, maxlength: 20 },
  size: { type: Number, min: 1, max: 10, default: null },
  parts: { type: [String], default: [] },
  extra: { type: Schema.Types.Mixed, default: null },
  project_id: { type: Schema.Types.ObjectId, ref: 'projects', default: null },
  secret: { type: String, private: true, default: null },
});
const fast = defineResource({ name: 'gizmos', schema: new Schema(fields()) });
const read = defineResource({ name: 'doohickeys', schema: new Schema(fields()) });

const heard: string[] = [];
const probe = definePlugin({
  name: 'one-command-probe',
  dependsOn: ['resources'],
  setup: () => ({
    hooks: [
      onHook('BEFORE_UPDATE', (p) => void heard.push(p.resource), { resources: ['doohickeys'] }),
    ],
  }),
});

let t: TestApp;
let user: { key: string; tenantId: string };
let projectId: string;
const counter = commandCounter();
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource, fast, read] }), probe] });
  user = await createTenantUser(t);
  projectId = (await t.http('POST', '/projects', { key: user.key, json: { name: 'Parent' } })).body._id;
  counter.watch(t);
});
afterAll(async () => {
  counter.unwatch();
  await t?.close();
});

const commandsOf = counter.of;

const EVENT_NOISE = ['_id', 'created_at', 'committed_at', 'request_id', 'source'];
const eventsOf = async (resource: string, id: string) => {
  await t.app.services.get('events').flush();
  const docs = await t.app.db.conn.collection('events').find({ 'source.collection': resource, 'source.id': (await raw(t, resource, id))!._id }).sort({ created_at: 1 }).toArray();
  return docs.map((d) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(d)) if (!EVENT_NOISE.includes(k)) out[k] = k === 'type' ? String(v).replace('doohickeys', 'gizmos') : v;
    for (const o of [out.data, out.previous] as Record<string, unknown>[]) if (o) for (const k of ['_id', 'created_at', 'updated_at']) delete o[k];
    (out.meta as { resource?: string; audit?: { resource?: string } } | null)!.resource = 'gizmos';
    (out.meta as { audit: { resource?: string } }).audit.resource = 'gizmos';
    return out;
  });
};
/** A new document; `secret` (private: no client writes it) is set behind the API's back, as a plugin's hook would. */
async function make(resource: string, json: Record<string, unknown>, secret?: string): Promise<{ _id: string }> {
  const r = await t.http('POST', `/${resource}`, { key: user.key, json });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  if (secret) await t.app.db.conn.collection(resource).updateOne({ _id: (await raw(t, resource, r.body._id))!._id }, { $set: { secret } });
  return r.body;
}
const body = (b: Record<string, unknown>) => Object.fromEntries(Object.entries(b).filter(([k]) => !['_id', 'created_at', 'updated_at'].includes(k)));

describe('PATCH and PUT without a read', () => {
  it('a PATCH and a PUT are one command on the collection; with a BEFORE_UPDATE handler for the resource, a read and a write', async () => {
    const a = await make('gizmos', { label: 'one' });
    const b = await make('doohickeys', { label: 'one' });
    const pa = await commandsOf('gizmos', a._id, () => t.http('PATCH', `/gizmos/${a._id}`, { key: user.key, json: { size: 2 }, headers: ifMatch('"1"') }));
    const pb = await commandsOf('doohickeys', b._id, () => t.http('PATCH', `/doohickeys/${b._id}`, { key: user.key, json: { size: 2 }, headers: ifMatch('"1"') }));
    expect(pa.out.status).toBe(200);
    expect(pa.sent).toEqual(['findAndModify']);
    expect(pb.sent).toEqual(['find', 'findAndModify']);
    // A handler that names its resources hears only theirs.
    expect(heard).toEqual(['doohickeys']);
    const ua = await commandsOf('gizmos', a._id, () => t.http('PUT', `/gizmos/${a._id}`, { key: user.key, json: { label: 'put' }, headers: ifMatch('"2"') }));
    expect(ua.out.status).toBe(200);
    expect(ua.sent).toEqual(['findAndModify']);
  });

  it('answers, stored documents and events are those of the read path', async () => {
    const a = await make('gizmos', { label: 'twin', parts: ['x'] }, 'hidden');
    const b = await make('doohickeys', { label: 'twin', parts: ['x'] }, 'hidden');
    const steps: [string, Record<string, unknown>][] = [
      ['PATCH', { size: 3, extra: { nested: { deep: [1, 2] } }, project_id: projectId }],
      ['PATCH', { label: '  trimmed  ', parts: ['a', 'b'] }],
      ['PUT', { label: 'replaced', size: 5 }],
      ['PATCH', { extra: null, project_id: null }],
    ];
    for (const [i, [method, json]] of steps.entries()) {
      const ra = await t.http(method, `/gizmos/${a._id}`, { key: user.key, json, headers: ifMatch(`"${i + 1}"`) });
      const rb = await t.http(method, `/doohickeys/${b._id}`, { key: user.key, json, headers: ifMatch(`"${i + 1}"`) });
      expect(ra.status, JSON.stringify(ra.body)).toBe(200);
      expect(ra.headers.get('etag')).toBe(rb.headers.get('etag'));
      expect(body(ra.body)).toEqual(body(rb.body));
      expect(ra.body).not.toHaveProperty('secret');
    }
    await t.app.services.get('events').flush();
    const [sa, sb] = [(await raw(t, 'gizmos', a._id))!, (await raw(t, 'doohickeys', b._id))!];
    // The last update's entry stays (it keeps what the update replaced, not the whole document): the
    // same on both paths but for its own id, stamp, request and resource.
    const entry = (e: Record<string, unknown>) => {
      const { id: _i, created_at: _c, request_id: _r, type, meta: _m, before, ...rest } = e as Record<string, unknown> & { before: { values: Record<string, unknown>; absent: string[] } };
      const { updated_at: _u, ...values } = before.values;
      return { ...rest, type: String(type).replace('doohickeys', 'gizmos'), before: { ...before, values } };
    };
    const strip = (d: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(d).filter(([k]) => !['_id', 'created_at', 'updated_at'].includes(k)).map(([k, v]) => [k, k === '_outbox' ? (v as Record<string, unknown>[]).map(entry) : v]));
    expect(sa._outbox).toHaveLength(1);
    expect(Object.keys(sa)).toEqual(Object.keys(sb));
    expect(strip(sa)).toEqual(strip(sb));
    expect(sa.secret).toBe('hidden');
    const [ea, eb] = [await eventsOf('gizmos', a._id), await eventsOf('doohickeys', b._id)];
    expect(ea).toHaveLength(5);
    expect(ea).toEqual(eb);
    // `previous` is the document before each change as the API shows it: no private field, no outbox.
    expect(ea[1]!.previous).toMatchObject({ label: 'twin', size: null, version: 1 });
    expect(ea[1]!.previous).not.toHaveProperty('secret');
    expect(ea[1]!.previous).not.toHaveProperty('_outbox');
    expect(ea[1]!.tenant_id).toEqual((await raw(t, 'gizmos', a._id))!.tenant_id);
  });

  it('values that look like expressions or field paths are stored as given', async () => {
    const a = await make('gizmos', { label: 'lit' });
    const json = { label: '$label', parts: ['$size', '$$ROOT'], extra: { $literal: 1, '$set': { a: '$b' }, k: '$$NOW' } };
    const r = await t.http('PATCH', `/gizmos/${a._id}`, { key: user.key, json, headers: ifMatch('"1"') });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject(json);
    expect(await raw(t, 'gizmos', a._id)).toMatchObject(json);
  });

  it('errors come in the read path\'s order, and nothing is written', async () => {
    const a = await make('gizmos', { label: 'order' });
    const missing = '0123456789abcdef01234567';
    // A reference to nothing: 422 on the document, 404 for a missing document, 412 for a stale revision.
    const badRef = { project_id: missing };
    await expectNoWrite(t, ['gizmos'], async () => {
      const r422 = await t.http('PATCH', `/gizmos/${a._id}`, { key: user.key, json: badRef, headers: ifMatch('"1"') });
      expect([r422.status, envelope(r422).code]).toEqual([422, 'VALIDATION_ERROR']);
      const r404 = await t.http('PATCH', `/gizmos/${missing}`, { key: user.key, json: badRef, headers: ifMatch('"1"') });
      expect([r404.status, envelope(r404).code]).toEqual([404, 'NOT_FOUND']);
      const r412 = await t.http('PATCH', `/gizmos/${a._id}`, { key: user.key, json: badRef, headers: ifMatch('"7"') });
      expect([r412.status, envelope(r412).code]).toEqual([412, 'ETAG_MISMATCH']);
      const stale = await t.http('PATCH', `/gizmos/${a._id}`, { key: user.key, json: { size: 1 }, headers: ifMatch('"7"') });
      expect([stale.status, envelope(stale).code]).toEqual([412, 'ETAG_MISMATCH']);
      const gone = await t.http('PUT', `/gizmos/${missing}`, { key: user.key, json: { label: 'x' }, headers: ifMatch('"1"') });
      expect([gone.status, envelope(gone).code]).toEqual([404, 'NOT_FOUND']);
    });
    // Another tenant's document is not found, whatever its revision.
    const other = await createTenantUser(t);
    await expectNoWrite(t, ['gizmos'], async () => {
      const r = await t.http('PATCH', `/gizmos/${a._id}`, { key: other.key, json: { size: 1 }, headers: ifMatch('"1"') });
      expect([r.status, envelope(r).code]).toEqual([404, 'NOT_FOUND']);
    });
    expect((await raw(t, 'gizmos', a._id))!.version).toBe(1);
  });

  it('If-Match with several tags, or *, takes the read path with the same rules', async () => {
    const a = await make('gizmos', { label: 'tags' });
    const many = await commandsOf('gizmos', a._id, () => t.http('PATCH', `/gizmos/${a._id}`, { key: user.key, json: { size: 4 }, headers: ifMatch('"9", W/"1"') }));
    expect(many.out.status).toBe(200);
    expect(many.sent).toEqual(['find', 'findAndModify']);
    const r = await t.http('PATCH', `/gizmos/${a._id}`, { key: user.key, json: { size: 5 }, headers: ifMatch('"1", "3"') });
    expect(r.status).toBe(412);
  });
});
