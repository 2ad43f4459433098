/**
 * The operator's test of the audit log: 300 creates, 10 at a time, all acknowledged, then SIGKILL.
 * After a restart every acknowledged change has its audit entry, once, including the last ones
 * (they waited in their documents' outboxes, and the restarted process's sweep wrote them). The
 * killed process's relay gathers for 5 s, so the last seconds of creates are surely unrelayed at the kill.
 */
import { describe, expect, it } from 'vitest';
import { MongoClient, ObjectId } from 'mongodb';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';

const ENV = { RATE_LIMIT_ENABLED: 'false', AUDIT_LOG_ENABLED: 'true', EVENTS_RELAY_INTERVAL_MS: '1000' };

describe('audit log: SIGKILL right after 300 acknowledged creates', () => {
  it('every acknowledged create has exactly one insert entry after a restart', async () => {
    const uri = uniqueDbUri();
    // The killed process gathers its events for 5 s: the last seconds of writes are surely unrelayed at
    // the kill, however long a busy machine takes from the last answer to the signal.
    const first = await startServerProcess({ MONGODB_URI: uri, ...ENV, EVENTS_RELAY_INTERVAL_MS: '5000' });
    const ids: string[] = [];
    for (let batch = 0; batch < 30; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          fetch(`${first.url}/projects`, {
            method: 'POST',
            headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' },
            body: JSON.stringify({ name: `p-${batch}-${i}` }),
          }).then(async (r) => ({ status: r.status, body: (await r.json()) as { _id: string } })),
        ),
      );
      for (const a of answers) {
        expect(a.status).toBe(201);
        ids.push(a.body._id);
      }
    }
    await first.stop('SIGKILL');

    const client = new MongoClient(uri);
    try {
      const db = client.db();
      const objectIds = ids.map((id) => new ObjectId(id));
      expect(await db.collection('projects').countDocuments({ _id: { $in: objectIds } })).toBe(300);
      // The injected point holds: some entries were not written when the process died.
      const atKill = await db.collection('audit_log').countDocuments({ resource: 'projects', operation: 'insert', item_id: { $in: objectIds } });
      expect(atKill).toBeLessThan(300);

      const second = await startServerProcess({ MONGODB_URI: uri, ...ENV });
      try {
        await waitFor(async () => (await unrelayedEntries(db, 'projects')).length === 0, 'the sweep to relay the outboxes', 30_000);
      } finally {
        await second.stop();
      }
      const entries = await db.collection('audit_log').find({ resource: 'projects', operation: 'insert', item_id: { $in: objectIds } }).toArray();
      expect(entries).toHaveLength(300);
      expect(new Set(entries.map((e) => String(e.item_id))).size).toBe(300);
      expect(await db.collection('events').countDocuments({ type: 'projects.created', 'source.id': { $in: objectIds } })).toBe(300);
    } finally {
      await client.close();
    }
  }, 120_000);
});
