import { describe, expect, it } from 'vitest';
import { MongoClient, type ObjectId } from 'mongodb';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';

const PLUGIN = { PLUGINS: './test/fixtures/event-writer-plugin.ts', EVENTS_RELAY_INTERVAL_MS: '200' };

const post = (url: string, path: string, method: string, json: unknown) =>
  fetch(url + path, { method, headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify(json) });

describe('event log: SIGKILL between the write and its event', () => {
  it('after a restart every stored change has exactly one event, and no event exists without its change', async () => {
    const uri = uniqueDbUri();
    const first = await startServerProcess({ MONGODB_URI: uri, ...PLUGIN });
    const ids: string[] = [];
    // Acknowledged changes whose events are still in the relay's batch when the process dies.
    for (let i = 0; i < 20; i++) {
      const r = await post(first.url, '/ew-notes', 'POST', { title: `n${i}` });
      expect(r.status).toBe(201);
      ids.push(((await r.json()) as { id: string }).id);
    }
    await Promise.all(ids.slice(0, 10).map((id) => post(first.url, `/ew-notes/${id}`, 'PATCH', { title: 'changed' })));
    // The injected point: the process is killed right after a write, before anything relays it;
    // writes in flight at that moment land or not, each with its outbox.
    const inFlight = ids.slice(10).map((id) => post(first.url, `/ew-notes/${id}`, 'PATCH', { title: 'racing' }).catch(() => null));
    await post(first.url, '/ew-notes', 'POST', { title: 'killer', kill_after_write: true }).catch(() => null);
    await Promise.all(inFlight);
    await first.stop('SIGKILL');

    const client = new MongoClient(uri);
    try {
      const db = client.db();
      expect((await unrelayedEntries(db, 'ew_notes')).length).toBeGreaterThan(0);

      const second = await startServerProcess({ MONGODB_URI: uri, ...PLUGIN });
      try {
        const deadline = Date.now() + 30_000;
        while ((await unrelayedEntries(db, 'ew_notes')).length > 0) {
          if (Date.now() > deadline) throw new Error('outboxes not relayed after restart');
          await new Promise((r) => setTimeout(r, 200));
        }
      } finally {
        await second.stop();
      }
      const notes = await db.collection<{ _id: ObjectId; version: number; title: string }>('ew_notes').find().toArray();
      const events = await db.collection<{ _id: string; type: string; source: { id: ObjectId; version: number }; data: { title: string } }>('events').find({ type: /^ew_note\./ }).toArray();
      expect(notes.find((n) => n.title === 'killer')).toBeDefined();
      // Exactly one event per stored version of every note...
      for (const n of notes) {
        const mine = events.filter((e) => String(e.source.id) === String(n._id));
        expect(mine.map((e) => e.source.version).sort()).toEqual(Array.from({ length: n.version }, (_, i) => i + 1));
        expect(mine.find((e) => e.source.version === n.version)!.data.title).toBe(n.title);
      }
      // ...and no event without its change.
      const byId = new Set(notes.map((n) => String(n._id)));
      expect(events.every((e) => byId.has(String(e.source.id)))).toBe(true);
      expect(events.length).toBe(notes.reduce((s, n) => s + n.version, 0));
    } finally {
      await client.close();
    }
  }, 120_000);
});
