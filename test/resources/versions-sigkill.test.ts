/**
 * The crash guarantee of versions: 30 projects, then 300 updates of them, 10 at a time, all
 * acknowledged, then SIGKILL. The relay interval is 1 s, so the last updates' events (and so their
 * versions) are surely still in the documents' outboxes when the process dies. After a restart the
 * sweep stores them: exactly one version per acknowledged write, none extra, none missing.
 */
import { describe, expect, it } from 'vitest';
import { MongoClient, ObjectId } from 'mongodb';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';

const ENV = { RATE_LIMIT_ENABLED: 'false', EVENTS_RELAY_INTERVAL_MS: '1000' };
const headers = { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' };

describe('versions: SIGKILL right after 300 acknowledged updates', () => {
  it('has exactly 300 update versions after a restart', async () => {
    const uri = uniqueDbUri();
    // The killed process gathers its events for 5 s: the last seconds of writes are surely unrelayed at
    // the kill, however long a busy machine takes from the last answer to the signal.
    const first = await startServerProcess({ MONGODB_URI: uri, ...ENV, EVENTS_RELAY_INTERVAL_MS: '5000' });
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await fetch(`${first.url}/projects`, { method: 'POST', headers, body: JSON.stringify({ name: `p-${i}` }) });
      expect(r.status).toBe(201);
      ids.push(((await r.json()) as { _id: string })._id);
    }
    // Round r updates every one of the 30 documents from version r + 1, 10 requests at a time.
    for (let round = 0; round < 10; round++) {
      for (let chunk = 0; chunk < 3; chunk++) {
        const statuses = await Promise.all(ids.slice(chunk * 10, chunk * 10 + 10).map((id) =>
          fetch(`${first.url}/projects/${id}`, { method: 'PATCH', headers: { ...headers, 'If-Match': `"${round + 1}"` }, body: JSON.stringify({ budget: round }) }).then((r) => r.status),
        ));
        expect(statuses).toEqual(Array(10).fill(200));
      }
    }
    await first.stop('SIGKILL');

    const client = new MongoClient(uri);
    try {
      const db = client.db();
      const objectIds = ids.map((id) => new ObjectId(id));
      const updates = { resource: 'projects', doc_id: { $in: objectIds }, version: { $gte: 2 } };
      // The injected point holds: some versions were not written when the process died.
      expect(await db.collection('resource_versions').countDocuments(updates)).toBeLessThan(300);

      const second = await startServerProcess({ MONGODB_URI: uri, ...ENV });
      try {
        await waitFor(async () => (await unrelayedEntries(db, 'projects')).length === 0, 'the sweep to relay the outboxes', 30_000);
      } finally {
        await second.stop();
      }
      const versions = await db.collection('resource_versions').find({ resource: 'projects', doc_id: { $in: objectIds } }).toArray();
      expect(versions.filter((v) => v.version >= 2)).toHaveLength(300);
      expect(versions).toHaveLength(330);
      // One per (document, version): 1..11 for each of the 30 documents.
      expect(new Set(versions.map((v) => `${String(v.doc_id)}:${v.version}`)).size).toBe(330);
      for (const v of versions.filter((x) => x.version >= 2)) expect(v.data.budget).toBe(v.version - 2);
    } finally {
      await client.close();
    }
  }, 180_000);
});
