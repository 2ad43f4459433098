/**
 * `GET /events/stream` over real HTTP: the SSE frame, 401/422/400/410 before the stream starts,
 * keep-alive comments, Last-Event-ID resume in committed order, a late-committing event found by
 * the look-back, and who sees what (tenant, feature and attribute guards, private fields,
 * administrators-only event types).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { eventWriterPlugin } from '../fixtures/event-writer-plugin.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';
import { eventStream, sleep, until, type SseStream } from './helpers.ts';

let t: TestApp;
let tenantA: Awaited<ReturnType<typeof createTenantUser>>;
let adminA: Awaited<ReturnType<typeof createTenantUser>>;
let tenantB: Awaited<ReturnType<typeof createTenantUser>>;
const open: SseStream[] = [];
const stream = async (opts: Parameters<typeof eventStream>[1]) => {
  const s = await eventStream(t.url, opts);
  open.push(s);
  return s;
};

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin, eventWriterPlugin, resourceEventsPlugin],
    config: { SAMPLE_RESOURCES_ENABLED: 'false', REALTIME_KEEPALIVE_MS: '200', EVENTS_POLL_INTERVAL_MS: '50', RATE_LIMIT_ENABLED: 'false' },
  });
  tenantA = await createTenantUser(t, { features: ['memos'], attributes: { region: 'eu' } });
  adminA = await createTenantUser(t, { tenantId: tenantA.tenantId, roles: ['admin'], features: ['memos'], attributes: { region: 'eu' } });
  tenantB = await createTenantUser(t, { features: ['memos'], attributes: { region: 'eu' } });
});
afterAll(async () => {
  for (const s of open) s.close();
  await t?.close();
});

const note = (key: string, title = 'n') => t.http('POST', '/ew-notes', { key, json: { title } });
const memo = (key: string, title = 'm') => t.http('POST', '/memos', { key, json: { title } });

describe('GET /events/stream: the stream itself', () => {
  it('401 in the envelope without credentials, and with a rejected key', async () => {
    const none = await stream({ key: '' });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('AUTH_REQUIRED');
    const bad = await stream({ key: 'ak_not-a-key-0000000000000000' });
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe('AUTH_REQUIRED');
  });

  it('422 for a type that is not in the catalogue; 400 for a malformed Last-Event-ID', async () => {
    const res = await t.http('GET', '/events/stream?types=ew_note.created,nope.nothing');
    const err = expectError(res, 422, 'VALIDATION_ERROR');
    expect(err.details.errors).toEqual([expect.objectContaining({ loc: ['query', 'types'], type: 'enum' })]);
    expectError(await t.http('GET', '/events/stream', { headers: { 'Last-Event-ID': 'garbage' } }), 400, 'BAD_REQUEST');
  });

  it('sends each event as id, event type and the event as JSON, live, with keep-alive comments', async () => {
    const s = await stream({ key: adminA.key, query: 'types=ew_note.created' });
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const r = await note(adminA.key, 'hello');
    await note(adminA.key, 'second');
    await t.http('PATCH', `/ew-notes/${r.body.id}`, { key: adminA.key, json: { title: 'changed' } }); // another type: filtered out
    await until(() => s.events.length >= 2, 15_000, 'two events');
    const [first] = s.events;
    expect(first!.event).toBe('ew_note.created');
    expect(first!.id).toMatch(/^evt_[0-9a-f]{24}$/);
    const data = JSON.parse(first!.data);
    expect(data).toEqual({ id: first!.id, type: 'ew_note.created', tenant_id: tenantA.tenantId, created_at: expect.any(String), data: { id: r.body.id, title: 'hello', tenant_id: tenantA.tenantId, version: 1 }, actor: adminA.userId, request_id: expect.any(String) });
    expect(s.data().map((e) => e.data.title), JSON.stringify(s.events.map((e) => [e.id, e.data.slice(0, 120)]))).toEqual(['hello', 'second']);
    await until(() => s.comments.filter((c) => c.includes('keep-alive')).length >= 2, 3000, 'keep-alive comments');
    await sleep(300);
    expect(s.events).toHaveLength(2);
  });

  it('Last-Event-ID: a reconnecting client first gets the 3 events it missed, in committed order, then live ones', async () => {
    const s1 = await stream({ key: adminA.key, query: 'types=ew_note.created' });
    await note(adminA.key, 'seen');
    await until(() => s1.events.length === 1);
    const last = s1.events[0]!.id!;
    s1.close();
    for (const title of ['m1', 'm2', 'm3']) await note(adminA.key, title);
    await t.app.services.get('events').flush();
    const s2 = await stream({ key: adminA.key, query: 'types=ew_note.created', headers: { 'Last-Event-ID': last } });
    await until(() => s2.events.length === 3, 15_000, 'the missed events');
    await note(adminA.key, 'live');
    await until(() => s2.events.length === 4, 15_000, 'the live event');
    expect(s2.data().map((e) => e.data.title)).toEqual(['m1', 'm2', 'm3', 'live']);
    // Committed order is the log's (committed_at, id) order.
    const stored = await t.app.db.conn.collection('events').find({ _id: { $in: s2.events.map((e) => e.id) } as never }).sort({ committed_at: 1, _id: 1 }).toArray();
    expect(stored.map((d) => d._id)).toEqual(s2.events.map((e) => e.id));
    // The same with the query parameter (EventSource cannot set headers on its first request).
    const s3 = await stream({ key: adminA.key, query: `types=ew_note.created&last_event_id=${last}` });
    await until(() => s3.events.length === 4);
    expect(s3.data().map((e) => e.data.title)).toEqual(['m1', 'm2', 'm3', 'live']);
  });

  it('410 GONE in the envelope for an id older than the log keeps; an unknown recent id resumes from its time', async () => {
    const old = `evt_${Types.ObjectId.createFromTime(Math.floor(Date.now() / 1000) - 31 * 86_400).toHexString()}`;
    const gone = await t.http('GET', '/events/stream', { headers: { 'Last-Event-ID': old } });
    const err = expectError(gone, 410, 'GONE');
    expect(err.details).toEqual({ last_event_id: old, retention_days: 30 });
    const recent = `evt_${Types.ObjectId.createFromTime(Math.floor(Date.now() / 1000) - 60).toHexString()}`;
    const s = await stream({ key: adminA.key, query: 'types=ew_note.created', headers: { 'Last-Event-ID': recent } });
    expect(s.status).toBe(200);
    await until(() => s.events.length > 0, 15_000, 'events of the last minute');
  });

  it('an event written as soon as the stream answered 200 is delivered (the stream listens before it answers), 20 times over', async () => {
    // Another stream keeps the tail polling, so a new one often joins while a poll runs and waits for the next.
    const busy = await stream({ key: adminA.key, query: 'types=ew_note.updated' });
    expect(busy.status).toBe(200);
    for (let i = 0; i < 20; i++) {
      const s = await stream({ key: adminA.key, query: 'types=ew_note.created' });
      expect(s.status).toBe(200);
      const r = await note(adminA.key, `race ${i}`);
      expect(r.status).toBe(201);
      await until(() => s.data().some((e) => e.data.id === r.body.id), 5_000, `the event of write ${i}`);
      s.close();
    }
  }, 120_000);

  it('a late-committing event (committed_at in the past, inside the look-back window) is not skipped', async () => {
    const s = await stream({ key: adminA.key, query: 'types=ew_note.updated' });
    await note(adminA.key, 'tick'); // the tail moves on past now
    await sleep(300);
    const id = `evt_${new Types.ObjectId().toHexString()}`;
    await t.app.db.conn.collection('events').insertOne({
      _id: id as never, type: 'ew_note.updated', tenant_id: new Types.ObjectId(tenantA.tenantId), created_at: new Date(Date.now() - 900), committed_at: new Date(Date.now() - 800),
      data: { id: 'late', title: 'late', tenant_id: tenantA.tenantId, version: 2 }, actor: null, request_id: null, previous: null, meta: null, source: null,
    });
    await until(() => s.events.some((e) => e.id === id), 15_000, 'the late event');
    await sleep(300);
    expect(s.events.filter((e) => e.id === id)).toHaveLength(1);
  });
});

describe('GET /events/stream: who sees what', () => {
  it("tenants: each sees only its own tenant's events; the system administrator all, or one with X-Tenant-Id", async () => {
    const a = await stream({ key: tenantA.key, query: 'types=memos.created' });
    const b = await stream({ key: tenantB.key, query: 'types=memos.created' });
    const sys = await stream({ key: ADMIN_KEY, query: 'types=memos.created' });
    const sysB = await stream({ key: ADMIN_KEY, query: 'types=memos.created', headers: { 'X-Tenant-Id': tenantB.tenantId } });
    await memo(tenantA.key, 'of A');
    await memo(tenantB.key, 'of B');
    await until(() => sys.events.length === 2 && a.events.length === 1 && b.events.length === 1 && sysB.events.length === 1, 15_000, 'deliveries');
    await sleep(300);
    expect(a.data().map((e) => e.data.title)).toEqual(['of A']);
    expect(b.data().map((e) => e.data.title)).toEqual(['of B']);
    expect(sysB.data().map((e) => e.data.title)).toEqual(['of B']);
    expect(sys.data().map((e) => e.data.title).sort()).toEqual(['of A', 'of B']);
  });

  it('feature guard: a user without the feature gets none of the resource events; private fields never appear', async () => {
    const noFeature = await createTenantUser(t, { tenantId: tenantA.tenantId, features: [], attributes: { region: 'eu' } });
    const without = await stream({ key: noFeature.key });
    const withIt = await stream({ key: tenantA.key });
    const r = await memo(tenantA.key, 'guarded');
    expect(r.status).toBe(201);
    expect((await t.app.db.conn.collection('memos').findOne({ _id: new Types.ObjectId(r.body._id as string) }))!.secret).toBe('hidden-value');
    // What a query shows each of them.
    expectError(await t.http('GET', '/memos', { key: noFeature.key }), 403, 'ACCESS_DENIED');
    await until(() => withIt.events.some((e) => e.event === 'memos.created'), 15_000, 'the memo event');
    await sleep(300);
    expect(without.events.filter((e) => e.event?.startsWith('memos.'))).toEqual([]);
    const ev = withIt.data('memos.created').find((e) => e.data.title === 'guarded');
    expect(ev.data).not.toHaveProperty('secret');
    expect(JSON.stringify(withIt.events)).not.toContain('hidden-value');
  });

  it('attribute guard: field rules are matched on the event object (region eu sees eu sites only)', async () => {
    const us = await createTenantUser(t, { tenantId: tenantA.tenantId, attributes: { region: 'us' } });
    const noRegion = await createTenantUser(t, { tenantId: tenantA.tenantId });
    const eu = await stream({ key: tenantA.key, query: 'types=sites.created' });
    const usS = await stream({ key: us.key, query: 'types=sites.created' });
    const none = await stream({ key: noRegion.key, query: 'types=sites.created' });
    // The system administrator writes both (attribute rules bind writers too), in tenant A.
    const inA = { 'X-Tenant-Id': tenantA.tenantId };
    expect((await t.http('POST', '/sites', { headers: inA, json: { name: 'paris', region: 'eu' } })).status).toBe(201);
    expect((await t.http('POST', '/sites', { headers: inA, json: { name: 'ohio', region: 'us' } })).status).toBe(201);
    await until(() => eu.events.length === 1 && usS.events.length === 1, 15_000, 'site events');
    await sleep(300);
    expect(eu.data().map((e) => e.data.name)).toEqual(['paris']);
    expect(usS.data().map((e) => e.data.name)).toEqual(['ohio']);
    expect(none.events).toEqual([]);
  });

  it('events of no resource (here ew_note.*) reach administrators only', async () => {
    const user = await stream({ key: tenantA.key, query: 'types=ew_note.created' });
    const admin = await stream({ key: adminA.key, query: 'types=ew_note.created' });
    const otherAdmin = await createTenantUser(t, { tenantId: tenantB.tenantId, roles: ['admin'] });
    const adminB = await stream({ key: otherAdmin.key, query: 'types=ew_note.created' });
    await note(tenantA.key, 'by a user');
    await until(() => admin.events.length === 1);
    await sleep(300);
    expect(user.events).toEqual([]);
    expect(adminB.events).toEqual([]);
  });

  it('a resumed stream applies the same rules to the missed events', async () => {
    const start = await stream({ key: tenantB.key, query: 'types=memos.created' });
    await memo(tenantB.key, 'b0');
    await until(() => start.events.length === 1);
    start.close();
    await memo(tenantA.key, 'a-missed');
    await memo(tenantB.key, 'b-missed');
    await t.app.services.get('events').flush();
    const resumed = await stream({ key: tenantB.key, query: 'types=memos.created', headers: { 'Last-Event-ID': start.events[0]!.id! } });
    await until(() => resumed.events.length === 1);
    await sleep(300);
    expect(resumed.data().map((e) => e.data.title)).toEqual(['b-missed']);
  });
});
