/**
 * The update in one command on a resource with drafts (plugins/resources/update.ts): a PATCH or PUT
 * of a published document is one update pipeline; a document not published, a stale revision or a
 * missing document fall back to the read path, which tells them apart. Twin drafts resources with
 * the same fields, one kept on the read path by a `BEFORE_UPDATE` handler of its own, get the same
 * requests: answers, ETags, stored documents (key by key, in order) and events must be the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { commandCounter, expectNoWrite, ifMatch, raw } from './write-helpers.ts';

const fields = () => ({
  label: { type: String, required: true, trim: true, maxlength: 20 },
  size: { type: Number, min: 1, max: 10, default: null },
  parts: { type: [String], default: [] },
  secret: { type: String, private: true, default: null },
});
const fast = defineResource({ name: 'widgets', schema: new Schema(fields()), drafts: true, versions: true });
const slow = defineResource({ name: 'gadgets', schema: new Schema(fields()), drafts: true, versions: true });

const probe = definePlugin({
  name: 'one-command-drafts-probe',
  dependsOn: ['resources'],
  setup: () => ({ hooks: [onHook('BEFORE_UPDATE', () => undefined, { resources: ['gadgets'] })] }),
});

type User = { key: string; tenantId: string };
let t: TestApp;
let author: User;
let reader: User;
const counter = commandCounter();
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [fast, slow] }), probe] });
  author = await createTenantUser(t);
  reader = await createTenantUser(t, { tenantId: author.tenantId });
  counter.watch(t);
});
afterAll(async () => {
  counter.unwatch();
  await t?.close();
});

const commandsOf = counter.of;

const NOISE = ['_id', 'created_at', 'updated_at', 'saved_at', 'committed_at', 'request_id', 'source', 'doc_id', 'event_id'];
/** Values that differ between twins by nature (ids, times, the resource's name), removed at any depth. */
function strip(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(strip);
  if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).filter(([k]) => !NOISE.includes(k) && k !== 'id').map(([k, x]) => [k, strip(x)]));
  }
  return typeof v === 'string' ? v.replace('gadgets', 'widgets') : v;
}
const eventsOf = async (resource: string, id: string) => {
  await t.app.services.get('events').flush();
  const docs = await t.app.db.conn.collection('events').find({ 'source.collection': resource, 'source.id': (await raw(t, resource, id))!._id }).sort({ created_at: 1 }).toArray();
  return docs.map((d) => strip({ ...d }));
};
const versionsOf = async (resource: string, id: string) =>
  (await t.app.db.conn.collection('resource_versions').find({ resource, doc_id: (await raw(t, resource, id))!._id }).sort({ version: 1 }).toArray()).map((d) => strip({ ...d }));

/** The same request to both twins: same status, ETag and answer. */
async function both(method: string, path: (r: string) => string, key: string, json: unknown, etag: string) {
  const ra = await t.http(method, path('widgets'), { key, json, headers: ifMatch(etag) });
  const rb = await t.http(method, path('gadgets'), { key, json, headers: ifMatch(etag) });
  expect(ra.status, JSON.stringify(ra.body)).toBe(rb.status);
  expect(ra.headers.get('etag')).toBe(rb.headers.get('etag'));
  expect(strip(ra.body)).toEqual(strip(rb.body));
  return ra;
}

async function twins(json: Record<string, unknown>, query = ''): Promise<[string, string]> {
  const ids: string[] = [];
  for (const r of ['widgets', 'gadgets']) {
    const res = await t.http('POST', `/${r}${query}`, { key: author.key, json });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    await t.app.db.conn.collection(r).updateOne({ _id: (await raw(t, r, res.body._id))!._id }, { $set: { secret: 'hidden' } });
    ids.push(res.body._id as string);
  }
  return ids as [string, string];
}

async function expectSameStored(a: string, b: string) {
  await t.app.services.get('events').flush();
  const [sa, sb] = [(await raw(t, 'widgets', a))!, (await raw(t, 'gadgets', b))!];
  expect(Object.keys(sa)).toEqual(Object.keys(sb));
  expect(strip({ ...sa })).toEqual(strip({ ...sb }));
  expect(sa.secret).toBe('hidden');
  expect(await eventsOf('widgets', a)).toEqual(await eventsOf('gadgets', b));
  expect(await versionsOf('widgets', a)).toEqual(await versionsOf('gadgets', b));
}

describe('PATCH and PUT of a drafts resource without a read', () => {
  it('a published document: one command, and the answers, documents, events and versions of the read path', async () => {
    const [a, b] = await twins({ label: 'one', parts: ['x'] });
    const pa = await commandsOf('widgets', a, () => t.http('PATCH', `/widgets/${a}`, { key: author.key, json: { size: 2 }, headers: ifMatch('"1"') }));
    const pb = await commandsOf('gadgets', b, () => t.http('PATCH', `/gadgets/${b}`, { key: author.key, json: { size: 2 }, headers: ifMatch('"1"') }));
    expect(pa.out.status).toBe(200);
    expect(pa.sent).toEqual(['findAndModify']);
    expect(pb.sent).toEqual(['find', 'findAndModify']);
    expect(strip(pa.out.body)).toEqual(strip(pb.out.body));
    expect(pa.out.body).toMatchObject({ size: 2, _status: 'published' });
    // Another user of the tenant updates a published document, a draft is saved over it, then a
    // PATCH (which drops the pending draft) and a PUT.
    await both('PATCH', (r) => `/${r}/${r === 'widgets' ? a : b}`, reader.key, { label: '  trimmed  ', parts: ['a', 'b'] }, '"2"');
    await both('PATCH', (r) => `/${r}/${r === 'widgets' ? a : b}?draft=true`, author.key, { label: 'pending' }, '"3"');
    await both('PATCH', (r) => `/${r}/${r === 'widgets' ? a : b}`, author.key, { size: 7 }, '"4"');
    await both('PUT', (r) => `/${r}/${r === 'widgets' ? a : b}`, author.key, { label: 'replaced' }, '"5"');
    await expectSameStored(a, b);
    const events = await eventsOf('widgets', a);
    expect(events.map((e) => (e as { type: string }).type)).toEqual(['widgets.created', 'widgets.updated', 'widgets.updated', 'widgets.draft_saved', 'widgets.updated', 'widgets.updated']);
    // `previous` is the published document as the API shows it: no draft, no state, no private field.
    const previous = (events[4] as { previous: Record<string, unknown> }).previous;
    expect(previous).toMatchObject({ label: 'trimmed', size: 2, version: 4 });
    for (const k of ['_draft', '_published', '_status', 'secret', '_outbox']) expect(previous).not.toHaveProperty(k);
  });

  it('a document not published: its author\'s PATCH publishes it, as on the read path', async () => {
    const [a, b] = await twins({ label: 'draft' }, '?draft=true');
    const pa = await commandsOf('widgets', a, () => t.http('PATCH', `/widgets/${a}`, { key: author.key, json: { size: 3 }, headers: ifMatch('"1"') }));
    const pb = await t.http('PATCH', `/gadgets/${b}`, { key: author.key, json: { size: 3 }, headers: ifMatch('"1"') });
    expect(pa.out.status, JSON.stringify(pa.out.body)).toBe(200);
    // The one command matches nothing (not published), then the read path.
    expect(pa.sent).toEqual(['findAndModify', 'find', 'findAndModify']);
    expect(strip(pa.out.body)).toEqual(strip(pb.body));
    expect(pa.out.body._status).toBe('published');
    await expectSameStored(a, b);
    expect((await eventsOf('widgets', a)).map((e) => (e as { type: string }).type)).toEqual(['widgets.draft_saved', 'widgets.published']);
  });

  it('a draft of another user is not found, a stale revision is 412, a missing document 404; nothing is written', async () => {
    const [a] = await twins({ label: 'mine' }, '?draft=true');
    const [p] = await twins({ label: 'public' });
    const missing = '0123456789abcdef01234567';
    await expectNoWrite(t, ['widgets'], async () => {
      const hidden = await t.http('PATCH', `/widgets/${a}`, { key: reader.key, json: { size: 1 }, headers: ifMatch('"1"') });
      expect([hidden.status, envelope(hidden).code]).toEqual([404, 'NOT_FOUND']);
      const stale = await t.http('PATCH', `/widgets/${p}`, { key: reader.key, json: { size: 1 }, headers: ifMatch('"7"') });
      expect([stale.status, envelope(stale).code]).toEqual([412, 'ETAG_MISMATCH']);
      const staleDraft = await t.http('PATCH', `/widgets/${a}`, { key: author.key, json: { size: 1 }, headers: ifMatch('"7"') });
      expect([staleDraft.status, envelope(staleDraft).code]).toEqual([412, 'ETAG_MISMATCH']);
      const gone = await t.http('PUT', `/widgets/${missing}`, { key: author.key, json: { label: 'x' }, headers: ifMatch('"1"') });
      expect([gone.status, envelope(gone).code]).toEqual([404, 'NOT_FOUND']);
      const bad = await t.http('PATCH', `/widgets/${p}`, { key: author.key, json: { size: 99 }, headers: ifMatch('"1"') });
      expect([bad.status, envelope(bad).code]).toEqual([422, 'VALIDATION_ERROR']);
    });
  });
});
