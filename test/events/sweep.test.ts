/**
 * What stays in an outbox once relayed, and how the sweep passes tell a relayed entry from a lost
 * one (docs/events.md, "Finding what a dead writer left"): a create's entry (no object of its own)
 * stays in its document; the next update drops it when its process knows it is in the log, or
 * freezes and clears it when it does not; the `recent` pass finds a dead writer's entry 5 s after
 * it was stamped, and the `late` pass finds one that committed after the recent pass read its window.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoClient, ObjectId, type Db } from 'mongodb';
import { buildTestApp, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { eventWriterPlugin } from '../fixtures/event-writer-plugin.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';
import { waitFor } from '../helpers/wait.ts';
import { createLogger } from '../../core/logger.ts';

describe('outbox entries after the relay', () => {
  const uri = uniqueDbUri();
  let p: TestApp;
  let q: TestApp;
  let client: MongoClient;
  let db: Db;
  let admin: Awaited<ReturnType<typeof createTenantUser>>;
  beforeAll(async () => {
    p = await buildTestApp({ plugins: [resourcesPlugin, eventWriterPlugin], config: { MONGODB_URI: uri } });
    q = await buildTestApp({ plugins: [resourcesPlugin, eventWriterPlugin], config: { MONGODB_URI: uri, ADMIN_API_KEY: '' } });
    admin = await createTenantUser(p, { roles: ['admin'] });
    client = new MongoClient(uri);
    db = client.db();
  });
  afterAll(async () => {
    await client?.close();
    await Promise.all([p?.close(), q?.close()]);
  });

  const outboxOf = async (id: string) => ((await db.collection('projects').findOne({ _id: new ObjectId(id) }))?._outbox ?? []) as Record<string, unknown>[];
  const eventsOf = (id: string) => db.collection('events').find({ 'source.collection': 'projects', 'source.id': new ObjectId(id) }).sort({ created_at: 1 }).toArray();

  it('a relayed create stays in its document; an update in the same process drops it, so documents do not grow', async () => {
    const c = await p.http('POST', '/projects', { key: admin.key, json: { name: 'Stays', budget: 1 } });
    expect(c.status).toBe(201);
    const id = c.body._id as string;
    const [created] = await eventsOf(id);
    expect(created).toMatchObject({ type: 'projects.created' });
    expect(await outboxOf(id)).toEqual([expect.objectContaining({ id: created!._id, version: 1 })]);
    expect((await outboxOf(id))[0]).not.toHaveProperty('data');

    const u = await p.http('PATCH', `/projects/${id}`, { key: admin.key, json: { budget: 2 }, headers: { 'If-Match': '"1"' } });
    expect(u.status).toBe(200);
    // The create's entry was dropped by the write. The update's keeps only what it replaced (`before`),
    // not the whole document, so it stays too; its event has the whole document before.
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(['projects.created', 'projects.updated']);
    const [entry] = await outboxOf(id);
    expect(await outboxOf(id)).toHaveLength(1);
    expect(entry).toMatchObject({ id: events[1]!._id, version: 2, before: { values: { budget: 1, version: 1 }, keys: expect.arrayContaining(['budget', 'version', 'updated_at']) } });
    expect(entry).not.toHaveProperty('previous');
    expect(entry).not.toHaveProperty('data');
    expect(events[1]!.previous).toEqual(events[0]!.data);

    const v = await p.http('PATCH', `/projects/${id}`, { key: admin.key, json: { budget: 3 }, headers: { 'If-Match': '"2"' } });
    expect(v.status).toBe(200);
    expect((await outboxOf(id)).map((e) => e.version)).toEqual([3]);
  });

  it("an update's entry lost by its writer comes back with the whole document before, frozen or not", async () => {
    /** A document updated by `p`, whose update's event is then lost (as if `p` died before its relay). */
    const lostUpdate = async (name: string) => {
      const c = await p.http('POST', '/projects', { key: admin.key, json: { name, budget: 1, description: 'kept' } });
      const id = c.body._id as string;
      const u = await p.http('PATCH', `/projects/${id}`, { key: admin.key, json: { budget: 2, status: 'archived' }, headers: { 'If-Match': '"1"' } });
      expect(u.status).toBe(200);
      const [created, updated] = await eventsOf(id);
      expect(updated!.previous).toEqual(created!.data);
      await db.collection('events').deleteOne({ _id: updated!._id } as never);
      return { id, created: created!, updated: updated! };
    };
    const swept = await lostUpdate('Swept');
    const frozen = await lostUpdate('Frozen');
    // An entry stored before `before.keys` existed names the fields its change added in `before.absent`:
    // still read. Here the change also added `owner_email` (the document had none before it).
    const older = await lostUpdate('Older form');
    await db.collection('projects').updateOne({ _id: new ObjectId(older.id) }, [
      { $set: { _outbox: { $map: { input: '$_outbox', in: { $mergeObjects: ['$$this', { before: { values: '$$this.before.values', absent: ['owner_email'] } }] } } } } },
    ]);

    // Superseded by another process, which cannot know it is lost and freezes it: stored with its write.
    const w = await q.http('PATCH', `/projects/${frozen.id}`, { key: admin.key, json: { budget: 3 }, headers: { 'If-Match': '"2"' } });
    expect(w.status).toBe(200);
    const refrozen = await db.collection('events').findOne({ _id: frozen.updated._id } as never);
    expect(refrozen!.previous).toEqual(frozen.created.data);
    expect(refrozen!.data).toEqual(frozen.updated.data);
    expect((await outboxOf(frozen.id)).map((e) => e.version)).toEqual([3]);

    // Found by another process's sweep (the writer's own knows it stored the event) once 5 s old.
    await new Promise((r) => setTimeout(r, 5_200));
    await q.app.services.get('events').sweep(new Date(Date.now() - 60_000));
    const relayed = { _id: { $in: [swept.updated._id, older.updated._id] } } as never;
    await waitFor(async () => (await db.collection('events').countDocuments(relayed)) === 2, 'the sweep to relay both lost entries', 20_000);
    const back = await db.collection('events').findOne({ _id: swept.updated._id } as never);
    expect(back!.previous).toEqual(swept.created.data);
    expect(back!.data).toEqual(swept.updated.data);
    const { owner_email: _added, ...before } = older.created.data as Record<string, unknown>;
    expect((await db.collection('events').findOne({ _id: older.updated._id } as never))!.previous).toEqual(before);
  }, 60_000);

  it('an update through another process freezes the create it cannot know is relayed, stores no duplicate, and clears it', async () => {
    const c = await p.http('POST', '/projects', { key: admin.key, json: { name: 'Elsewhere', budget: 1 } });
    const id = c.body._id as string;
    // In-process listeners (realtime) of the updating process hear only what its insert added.
    const heard: string[] = [];
    q.app.services.get('events').onStored((docs) => heard.push(...docs.map((d) => d.type)));
    // Nor do its durable sinks: the relay looks the frozen entry up in the log first, and finds it.
    const sunk: string[] = [];
    q.app.services.get('events').addSink({ name: 'sweep-test', types: '*', write: (docs) => Promise.resolve(void sunk.push(...docs.map((d) => d.type))) });
    const u = await q.http('PATCH', `/projects/${id}`, { key: admin.key, json: { budget: 5 }, headers: { 'If-Match': '"1"' } });
    expect(u.status).toBe(200);
    expect(heard).toEqual(['projects.updated']);
    expect(sunk).toEqual(['projects.updated']);
    const events = await eventsOf(id);
    // Only the update's own entry is left (it stays: see above).
    expect((await outboxOf(id)).map((e) => e.id)).toEqual([events[1]!._id]);
    expect(events.map((e) => e.type)).toEqual(['projects.created', 'projects.updated']);
    expect(events[0]!.data).toMatchObject({ budget: 1, version: 1 });
    expect(events[1]!.data).toMatchObject({ budget: 5, version: 2 });
    expect(await unrelayedEntries(db, 'projects')).toEqual([]);
  });

  it('the late pass finds an entry that committed after the recent pass had read its window', async () => {
    // Stamped 10 minutes ago less 3 s, as by a write that took that long to commit, or a writer
    // whose clock ran behind: the recent pass read that window long ago; the late one reaches it in 3 s.
    // (The passes' first windows reach back to the log's retention: wait until both ran once.)
    await waitFor(async () => (await db.collection('event_sweeps').countDocuments({ horizon: { $gt: new Date(Date.now() - 601_000) } })) === 2, 'both passes to run once', 10_000);
    const id = `evt_${new ObjectId().toHexString()}`;
    await db.collection('ew_notes').insertOne({
      _id: new ObjectId(), tenant_id: new ObjectId(admin.tenantId), title: 'late', version: 1,
      _outbox: [{ id, type: 'ew_note.created', tenant_id: new ObjectId(admin.tenantId), created_at: new Date(Date.now() - 600_000 + 3_000), actor: null, request_id: null, version: 1 }],
    });
    const insertedAt = Date.now();
    await waitFor(async () => (await db.collection('events').countDocuments({ _id: id } as never)) > 0, 'the late pass to relay the entry', 20_000);
    await new Promise((r) => setTimeout(r, 1500)); // further passes on both processes
    expect(await db.collection('events').countDocuments({ _id: id } as never)).toBe(1);
    // Stored by the late pass (3 s on), not earlier: the recent pass had read that window.
    expect((await db.collection('events').findOne({ _id: id } as never))!.committed_at.getTime() - insertedAt).toBeGreaterThanOrEqual(2_900);
  });

  it('the passes share their windows through event_sweeps: each pass has one horizon, moving forward', async () => {
    const before = await db.collection('event_sweeps').find().sort({ _id: 1 }).toArray();
    expect(before.map((s) => s._id)).toEqual(['late', 'recent']);
    const lag = { recent: 5000, late: 600_000 } as Record<string, number>;
    // `recent` runs every second, `late` every ten seconds, each on whichever process takes its lease.
    await waitFor(async () => {
      const after = await db.collection('event_sweeps').find().toArray();
      return after.every((s) => s.horizon.getTime() > before.find((b) => b._id === s._id)!.horizon.getTime());
    }, 'both horizons to move', 15_000);
    for (const s of await db.collection('event_sweeps').find().toArray()) {
      expect(s.horizon.getTime()).toBeLessThanOrEqual(Date.now() - lag[String(s._id)]!);
      expect(s.horizon.getTime()).toBeGreaterThan(Date.now() - lag[String(s._id)]! - 12_000);
    }
  }, 30_000);
});

describe('a sweep under way when the app closes', () => {
  it('finishes before the connection closes: no "outbox sweep failed" on the way out', async () => {
    const warned: string[] = [];
    const logger = createLogger('warn', { write: (line: string) => void warned.push(String(JSON.parse(line).msg)) });
    const app = await buildTestApp({ plugins: [resourcesPlugin, eventWriterPlugin], logger });
    // A catch-up over the log's whole retention: still reading when close() starts.
    const sweeping = app.app.services.get('events').sweep(new Date(Date.now() - 7 * 86_400_000));
    const closed = app.close();
    await expect(sweeping).resolves.toBeTypeOf('number');
    await closed;
    expect(warned).toEqual([]);
  });
});
