import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoClient } from 'mongodb';
import { buildTestApp, createTenantUser, expectError, uniqueDbUri, ADMIN_KEY, type TestApp } from '../helpers/app.ts';
import { eventWriterPlugin } from '../fixtures/event-writer-plugin.ts';
import type { EventConsumer } from '../../plugins/events/public/contributions.ts';
import { ConsumerRunner } from '../../plugins/events/consumers.ts';
import { eventClaimModel, eventCursorModel, eventModel } from '../../plugins/events/model.ts';
import { waitFor } from '../helpers/wait.ts';

/** Polls `fn` until it returns a truthy value (or fails after `ms`). */
async function until<T>(fn: () => Promise<T | null | undefined | false>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('event log', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof createTenantUser>>;
  let aUser: Awaited<ReturnType<typeof createTenantUser>>;
  let b: Awaited<ReturnType<typeof createTenantUser>>;
  const seen: string[] = [];
  const consumer: EventConsumer = { name: 'test-consumer', types: ['ew_note.created'], handle: async (e) => void seen.push(e.id) };
  /** Acts only on the events of `selectTenant` (`select`): the others get no claim and no call. */
  const kept: string[] = [];
  const offered: string[] = [];
  let selectTenant = '';
  const selective: EventConsumer = {
    name: 'selective-consumer',
    types: ['ew_note.created'],
    select: async (heads) => {
      offered.push(...heads.map((e) => e.id));
      return new Set(heads.filter((e) => e.tenant_id === selectTenant).map((e) => e.id));
    },
    handle: async (e) => void kept.push(String(e.data.title)),
  };
  beforeAll(async () => {
    // Batched relay (the default), so two quick writes meet the outbox of the first.
    t = await buildTestApp({ plugins: [eventWriterPlugin.configure(undefined), { ...eventWriterPlugin, name: 'event-consumer', setup: () => ({ eventConsumers: [consumer, selective] }) }], config: { EVENTS_RELAY_INTERVAL_MS: '50' } });
    a = await createTenantUser(t, { roles: ['admin'] });
    aUser = await createTenantUser(t, { tenantId: a.tenantId, roles: ['user'] });
    b = await createTenantUser(t, { roles: ['admin'] });
  });
  afterAll(() => t?.close());

  const events = (key: string, q = '') => t.http('GET', `/events${q}`, { key });
  /** The fixture's events of a page (the tenants' own users and keys have events too). */
  const notes = (items: any[]) => items.filter((e) => e.type.startsWith('ew_note.'));

  it('stores one event per change, with the object as the API shows it, the actor and the request id', async () => {
    const created = await t.http('POST', '/ew-notes', { key: a.key, json: { title: 'first', secret: 'hidden' } });
    expect(created.status).toBe(201);
    const updated = await t.http('PATCH', `/ew-notes/${created.body.id}`, { key: a.key, json: { title: 'second' } });
    expect(updated.status).toBe(200);
    const page = await until(async () => {
      const r = await events(a.key, '?limit=100');
      return notes(r.body.items ?? []).length === 2 ? r : null;
    });
    const [upd, cre] = notes(page.body.items);
    expect(upd).toMatchObject({ type: 'ew_note.updated', tenant_id: a.tenantId, actor: a.userId, data: { id: created.body.id, title: 'second', version: 2 } });
    expect(cre).toMatchObject({ type: 'ew_note.created', tenant_id: a.tenantId, actor: a.userId, data: { title: 'first', version: 1 } });
    expect(cre.data).not.toHaveProperty('secret');
    expect(upd.id).toMatch(/^evt_[0-9a-f]{24}$/);
    expect(cre.request_id).toBe(created.headers.get('x-request-id'));
    expect(Object.keys(upd).sort()).toEqual(['actor', 'created_at', 'data', 'id', 'request_id', 'tenant_id', 'type']);
    expect(page.body.cursors).toMatchObject({ has_next: false, has_prev: false, next: null, prev: null });

    const one = await t.http('GET', `/events/${upd.id}`, { key: a.key });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(upd);
  });

  it('keeps each event its own object when two writes come before the relay', async () => {
    const c = await t.http('POST', '/ew-notes', { key: a.key, json: { title: 'v1' } });
    await t.http('PATCH', `/ew-notes/${c.body.id}`, { key: a.key, json: { title: 'v2' } });
    await t.http('PATCH', `/ew-notes/${c.body.id}`, { key: a.key, json: { title: 'v3' } });
    const mine = await until(async () => {
      const r = await events(a.key, '?limit=100');
      const list = (r.body.items as any[]).filter((e) => e.data.id === c.body.id);
      return list.length === 3 ? list : null;
    });
    expect(mine.map((e: any) => [e.type, e.data.title, e.data.version])).toEqual([
      ['ew_note.updated', 'v3', 3],
      ['ew_note.updated', 'v2', 2],
      ['ew_note.created', 'v1', 1],
    ]);
  });

  it('is tenant-scoped over REST and GraphQL: no read or count crosses tenants', async () => {
    await t.http('POST', '/ew-notes', { key: b.key, json: { title: 'tenant b' } });
    const bEvents = await until(async () => {
      const r = await events(b.key, '?limit=100');
      return notes(r.body.items ?? []).length === 1 ? notes(r.body.items) : null;
    });
    const aList = (await events(a.key, '?limit=100')).body.items as any[];
    expect(aList.every((e) => e.tenant_id === a.tenantId)).toBe(true);
    expectError(await t.http('GET', `/events/${bEvents[0].id}`, { key: a.key }), 404, 'NOT_FOUND');
    const g = await t.gql('{ events(limit: 100) { items { id tenant_id } } }', {}, { key: a.key });
    expect(g.body.errors).toBeUndefined();
    expect(g.body.data.events.items.length).toBe(aList.length);
    expect(g.body.data.events.items.every((e: any) => e.tenant_id === a.tenantId)).toBe(true);
    // A system administrator sees both tenants, or one with X-Tenant-Id.
    const all = (await t.http('GET', '/events?limit=100', { key: ADMIN_KEY })).body.items as any[];
    expect(new Set(all.map((e) => e.tenant_id))).toEqual(new Set([a.tenantId, b.tenantId]));
    const onlyB = (await t.http('GET', '/events?limit=100', { key: ADMIN_KEY, headers: { 'X-Tenant-Id': b.tenantId } })).body.items as any[];
    expect(notes(onlyB).map((e) => e.id)).toEqual([bEvents[0].id]);
    expect(onlyB.every((e) => e.tenant_id === b.tenantId)).toBe(true);
  });

  it('refuses non-administrators (403) and anonymous callers (401), REST and GraphQL', async () => {
    expectError(await events(aUser.key), 403, 'ACCESS_DENIED');
    expectError(await t.http('GET', '/events', { key: null }), 401, 'AUTH_REQUIRED');
    const g = await t.gql('{ events { items { id } } }', {}, { key: aUser.key });
    expect(g.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
  });

  it('pages newest first with signed cursors, both directions', async () => {
    for (let i = 0; i < 5; i++) await t.http('POST', '/ew-notes', { key: b.key, json: { title: `p${i}` } });
    const only = '&type=ew_note.created';
    await until(async () => (await events(b.key, `?limit=100${only}`)).body.items.length === 6);
    const all = (await events(b.key, `?limit=100${only}`)).body.items.map((e: any) => e.id);
    const p1 = await events(b.key, `?limit=4${only}`);
    expect(p1.body.items.map((e: any) => e.id)).toEqual(all.slice(0, 4));
    expect(p1.body.cursors.has_next).toBe(true);
    const p2 = await events(b.key, `?limit=4${only}&cursor=${p1.body.cursors.next}`);
    expect(p2.body.items.map((e: any) => e.id)).toEqual(all.slice(4));
    expect(p2.body.cursors).toMatchObject({ has_next: false, has_prev: true });
    const back = await events(b.key, `?limit=4${only}&direction=prev&cursor=${p2.body.cursors.prev}`);
    expect(back.body.items.map((e: any) => e.id)).toEqual(all.slice(0, 4));
    expectError(await events(b.key, `?cursor=${p1.body.cursors.next.slice(0, -3)}abc`), 400, 'BAD_REQUEST');
  });

  it('validates its query: an unknown type names the known ones (422), bad limit and id are refused', async () => {
    const bad = expectError(await events(a.key, '?type=nope.never'), 422, 'VALIDATION_ERROR');
    expect(JSON.stringify(bad.details)).toContain('ew_note.created');
    expectError(await events(a.key, '?limit=100000'), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', '/events/not-an-id', { key: a.key }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', `/events/evt_${'0'.repeat(24)}`, { key: a.key }), 404, 'NOT_FOUND');
    const filtered = (await events(a.key, '?type=ew_note.updated&limit=100')).body.items as any[];
    expect(filtered.length).toBeGreaterThan(0);
    expect(filtered.every((e) => e.type === 'ew_note.updated')).toBe(true);
  });

  it('serves the catalogue with a JSON Schema per type, REST and GraphQL', async () => {
    const r = await t.http('GET', '/events/types', { key: aUser.key });
    expect(r.status).toBe(200);
    const names = r.body.items.map((x: any) => x.name);
    expect(names).toEqual(expect.arrayContaining(['ping', 'ew_note.created', 'ew_note.updated']));
    const created = r.body.items.find((x: any) => x.name === 'ew_note.created');
    expect(created).toMatchObject({ plugin: 'event-writer', schema: { type: 'object', properties: { title: { type: 'string' } } } });
    const g = await t.gql('{ eventTypes { name plugin schema } }', {}, { key: aUser.key });
    expect(g.body.data.eventTypes.map((x: any) => x.name)).toEqual(names);
  });

  it('delivers every matching event to a durable consumer exactly once', async () => {
    const before = seen.length;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await t.http('POST', '/ew-notes', { key: a.key, json: { title: `c${i}` } })).body.id);
    await until(async () => seen.length >= before + 5);
    await new Promise((r) => setTimeout(r, 800));
    expect(seen.length).toBe(new Set(seen).size);
    const client = new MongoClient(t.config.MONGODB_URI!);
    try {
      const claims = await client.db().collection('event_claims').countDocuments({ consumer: 'test-consumer', status: 'done' });
      expect(claims).toBe(seen.length);
    } finally {
      await client.close();
    }
  });

  it('a consumer with select is handed only the events it selects: the others get no claim, and its position moves past them', async () => {
    // Tenant a's notes are selected, tenant b's passed over.
    selectTenant = a.tenantId;
    const titles: [string, string][] = [['skip-1', b.key], ['keep-1', a.key], ['skip-2', b.key], ['keep-2', a.key], ['skip-3', b.key]];
    const ids: string[] = [];
    for (const [title, key] of titles) ids.push((await t.http('POST', '/ew-notes', { key, json: { title } })).body.id);
    const eventIds = await until(async () => {
      const pages = await Promise.all([a.key, b.key].map(async (k) => (await events(k, '?type=ew_note.created&limit=100')).body as { items: { id: string; data: { id: string } }[] }));
      const mine = pages.flatMap((p) => p.items).filter((e) => ids.includes(e.data.id));
      return mine.length === titles.length ? mine.map((e) => e.id) : null;
    });
    await until(async () => eventIds.every((id) => offered.includes(id)) && kept.length >= 2);
    await new Promise((r) => setTimeout(r, 800));
    expect(kept.sort()).toEqual(['keep-1', 'keep-2']);
    const client = new MongoClient(t.config.MONGODB_URI!);
    try {
      const db = client.db();
      const claims = await db.collection('event_claims').find({ consumer: 'selective-consumer' }).toArray();
      expect(claims.map((c) => c.status)).toEqual(['done', 'done']);
      const stored = await db.collection('events').find({ _id: { $in: eventIds } } as never).sort({ committed_at: -1 }).toArray();
      const cursor = await until(async () => {
        const c = await db.collection('event_consumers').findOne({ _id: 'selective-consumer' } as never);
        return c && c.position >= stored[0]!.committed_at ? c : null;
      });
      expect(cursor.position.getTime()).toBeGreaterThanOrEqual(stored[0]!.committed_at.getTime());
    } finally {
      await client.close();
    }
  });
});

describe('event log: a consumer under a burst', () => {
  it('keeps up when the look-back window holds more events than a page (relay batches share one commit time)', async () => {
    const t = await buildTestApp({});
    try {
      const conn = t.app.db.conn;
      const models = { events: eventModel(conn), claims: eventClaimModel(conn), cursors: eventCursorModel(conn) };
      const handled: string[] = [];
      // Pages of 20 (batch 5): 60 events of one commit time are three pages of one look-back window.
      const runner = new ConsumerRunner({ name: 'burst-consumer', types: ['burst.test'], handle: async (e) => void handled.push(e.id) }, models, { pollMs: 10, lookbackMs: 2000, leaseMs: 30_000, batch: 5 }, t.app.log);
      await runner.poll(); // registers the consumer: it starts at "now"
      const committed_at = new Date(Date.now() + 50);
      const ids = Array.from({ length: 60 }, (_, i) => `evt_burst_${String(i).padStart(3, '0')}`);
      await conn.collection('events').insertMany(ids.map((_id) => ({ _id, type: 'burst.test', tenant_id: null, created_at: committed_at, committed_at, data: {}, actor: null, request_id: null, previous: null, meta: null, source: null })) as never[]);
      runner.start();
      try {
        await until(async () => handled.length >= 60, 15_000);
      } finally {
        await runner.stop();
      }
      expect([...handled].sort()).toEqual(ids);
      expect(await conn.collection('event_claims').countDocuments({ consumer: 'burst-consumer', status: 'done' })).toBe(60);
    } finally {
      await t.close();
    }
  });
});

describe('event log: left-behind outboxes', () => {
  it('the sweep relays an entry whose writer never did, once, however many processes sweep', async () => {
    const uri = uniqueDbUri();
    const [p, q] = await Promise.all([
      buildTestApp({ plugins: [eventWriterPlugin], config: { MONGODB_URI: uri } }),
      buildTestApp({ plugins: [eventWriterPlugin], config: { MONGODB_URI: uri, ADMIN_API_KEY: '' } }),
    ]);
    try {
      const client = new MongoClient(uri);
      try {
        const tenant = (await createTenantUser(p, { roles: ['admin'] })).tenantId;
        const { ObjectId } = await import('mongodb');
        // Notes written with their outbox, as if their writer died before relaying.
        const orphan = async (title: string, at: Date) => {
          const id = `evt_${new ObjectId().toHexString()}`;
          await client.db().collection('ew_notes').insertOne({
            _id: new ObjectId(), tenant_id: new ObjectId(tenant), title, version: 1,
            _outbox: [{ id, type: 'ew_note.created', tenant_id: new ObjectId(tenant), created_at: at, actor: null, request_id: null, version: 1 }],
          });
          return id;
        };
        const storedOf = (title: string) => client.db().collection('events').find({ type: 'ew_note.created', 'data.title': title }).toArray();

        // Just written: both processes' sweep passes (every second, entries 5 s old) find it, and it is stored once.
        const fresh = await orphan('fresh', new Date());
        await waitFor(async () => (await storedOf('fresh')).length > 0, 'the sweep to relay the fresh orphan', 20_000);
        await new Promise((r) => setTimeout(r, 2500)); // more passes on both processes
        const freshStored = await storedOf('fresh');
        expect(freshStored.map((e) => e._id)).toEqual([fresh]);
        expect(freshStored[0]!.actor).toBeNull();
        // A relayed create's entry stays in its document: the sweep tells it by its id in the log.
        expect((await client.db().collection('ew_notes').findOne({ title: 'fresh' }))!._outbox).toEqual([expect.objectContaining({ id: fresh })]);

        // Older than the passes' windows: a catch-up sweep from a given time, run three times at once.
        const old = await orphan('orphan', new Date(Date.now() - 60_000));
        const events = p.app.services.get('events');
        const other = q.app.services.get('events');
        const from = new Date(Date.now() - 120_000);
        const counts = await Promise.all([events.sweep(from), other.sweep(from), events.sweep(from)]);
        expect(counts.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
        const stored = await storedOf('orphan');
        expect(stored.map((e) => e._id)).toEqual([old]);
        expect(await events.sweep(from)).toBe(0);
      } finally {
        await client.close();
      }
    } finally {
      await Promise.all([p.close(), q.close()]);
    }
  });
});
