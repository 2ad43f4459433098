/**
 * One relay batch and its durable sinks (docs/events.md, "Durable sinks"): an entry a later write
 * kept (frozen) in the same batch reaches every sink and the log once, and the sinks of a batch run
 * side by side.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoClient, ObjectId, type Db } from 'mongodb';
import { buildTestApp, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { eventWriterPlugin } from '../fixtures/event-writer-plugin.ts';
import { scaled } from '../helpers/wait.ts';
import type { EventDoc } from '../../plugins/events/public/outbox.ts';

describe('a relay batch', () => {
  const uri = uniqueDbUri();
  let t: TestApp;
  let client: MongoClient;
  let db: Db;
  let admin: Awaited<ReturnType<typeof createTenantUser>>;
  const seenBy: Record<'first' | 'second', string[]> = { first: [], second: [] };
  let secondStarted: () => void = () => undefined;
  const started = new Promise<void>((res) => {
    secondStarted = res;
  });
  let overlapped = false;

  beforeAll(async () => {
    // A relay interval far longer than the test: the writes' events wait in one batch until flushed.
    t = await buildTestApp({ plugins: [resourcesPlugin, eventWriterPlugin], config: { MONGODB_URI: uri, EVENTS_RELAY_INTERVAL_MS: '600000' } });
    const events = t.app.services.get('events');
    events.addSink({
      name: 'first', types: '*',
      write: async (batch: EventDoc[]) => {
        seenBy.first.push(...batch.map((e) => e._id));
        // Waits for the second sink to start: one after the other, it would only start after this one.
        let waited = false;
        await Promise.race([started.then(() => (waited = true)), new Promise((r) => setTimeout(r, scaled(10_000)))]);
        overlapped ||= waited;
      },
    });
    events.addSink({
      name: 'second', types: '*',
      write: (batch: EventDoc[]) => {
        seenBy.second.push(...batch.map((e) => e._id));
        secondStarted();
        return Promise.resolve();
      },
    });
    admin = await createTenantUser(t, { roles: ['admin'] });
    client = new MongoClient(uri);
    db = client.db();
  });
  afterAll(async () => {
    await client?.close();
    await t?.close();
  });

  it('a document written three times before its batch is stored: each event reaches each sink and the log once, side by side', async () => {
    const events = t.app.services.get('events');
    await events.flush();
    seenBy.first.length = 0;
    seenBy.second.length = 0;
    const c = await t.http('POST', '/projects', { key: admin.key, json: { name: 'Batched', budget: 1 } });
    expect(c.status).toBe(201);
    const id = c.body._id as string;
    for (const [budget, version] of [[2, 1], [3, 2]] as const) {
      const u = await t.http('PATCH', `/projects/${id}`, { key: admin.key, json: { budget }, headers: { 'If-Match': `"${version}"` } });
      expect(u.status).toBe(200);
    }
    // Not relayed yet: the updates kept the entries before them, with their objects.
    const before = await db.collection('projects').findOne({ _id: new ObjectId(id) });
    expect((before?._outbox as unknown[]).length).toBe(3);

    await events.flush();
    const stored = await db.collection('events').find({ 'source.collection': 'projects', 'source.id': new ObjectId(id) }).sort({ created_at: 1 }).toArray();
    expect(stored.map((e) => e.type)).toEqual(['projects.created', 'projects.updated', 'projects.updated']);
    const ids = stored.map((e) => String(e._id)).sort();
    expect([...seenBy.first].sort()).toEqual(ids);
    expect([...seenBy.second].sort()).toEqual(ids);
    expect(overlapped).toBe(true);
    // The frozen entries are cleared all the same; the create's own (no object) was frozen, so it goes
    // too. The last update's entry, never frozen, keeps only what it replaced and stays.
    const after = await db.collection('projects').findOne({ _id: new ObjectId(id) });
    expect((after?._outbox as { id: string }[]).map((e) => e.id)).toEqual([String(stored[2]!._id)]);
  });
});
