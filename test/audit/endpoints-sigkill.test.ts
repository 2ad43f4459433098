/**
 * The operator's test of webhook endpoint changes: 50 endpoint creates and 25 deletes, all
 * acknowledged, then SIGKILL. After a restart every one has its event and its audit entry, once,
 * and no deleted endpoint is left behind: the events waited in the endpoints' outboxes (a delete's
 * in its tombstone) and the restarted process's sweep relayed them and removed the tombstones.
 * The relay interval is raised to 1 s so that the last second of changes is surely unrelayed at the kill.
 */
import { describe, expect, it } from 'vitest';
import { MongoClient, ObjectId } from 'mongodb';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';

const ENV = {
  RATE_LIMIT_ENABLED: 'false', AUDIT_LOG_ENABLED: 'true', EVENTS_RELAY_INTERVAL_MS: '1000',
  WEBHOOKS_ENABLED: 'true', WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1',
};

describe('webhook endpoints: SIGKILL right after 50 creates and 25 deletes', () => {
  it('every acknowledged change has exactly one event and one audit entry after a restart; no tombstone is left', async () => {
    const uri = uniqueDbUri();
    // The killed process gathers its events for 5 s: the last seconds of writes are surely unrelayed at
    // the kill, however long a busy machine takes from the last answer to the signal.
    const first = await startServerProcess({ MONGODB_URI: uri, ...ENV, EVENTS_RELAY_INTERVAL_MS: '5000' });
    let tenantId = '';
    const call = async (method: string, path: string, body?: unknown) => {
      const headers: Record<string, string> = { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json', ...(tenantId ? { 'X-Tenant-Id': tenantId } : {}) };
      const r = await fetch(`${first.url}${path}`, { method, headers, body: body ? JSON.stringify(body) : undefined });
      return { status: r.status, body: (r.status === 204 ? {} : await r.json()) as { id: string; secret?: string } };
    };
    tenantId = (await call('POST', '/admin/tenants', { name: 'killed' })).body.id;
    const created: string[] = [];
    const secrets: string[] = [];
    for (let batch = 0; batch < 5; batch++) {
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => call('POST', '/webhook-endpoints', { url: `http://127.0.0.1:9/e-${batch}-${i}`, event_types: ['ping'], enabled: false })));
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201));
      for (const a of answers) {
        created.push(a.body.id);
        secrets.push(a.body.secret!);
      }
    }
    // Every other endpoint deleted, the last ones right after their creation (both events unrelayed).
    const deleted = created.filter((_, i) => i % 2 === 1);
    const answers = await Promise.all(deleted.map((id) => call('DELETE', `/webhook-endpoints/${id}`)));
    expect(answers.map((a) => a.status)).toEqual(Array(25).fill(204));
    await first.stop('SIGKILL');

    const client = new MongoClient(uri);
    try {
      const db = client.db();
      const ids = (list: string[]) => list.map((id) => new ObjectId(id));
      const entries = (operation: string, list: string[]) => db.collection('audit_log').find({ resource: 'webhook_endpoints', operation, item_id: { $in: ids(list) } }).toArray();
      const tombstones = () => db.collection('webhook_endpoints').countDocuments({ _removed: true });
      // The injected point holds: some changes had neither entry nor event when the process died, and deletes left tombstones.
      expect((await entries('insert', created)).length + (await entries('delete', deleted)).length).toBeLessThan(75);
      expect(await tombstones()).toBeGreaterThan(0);

      const second = await startServerProcess({ MONGODB_URI: uri, ...ENV });
      try {
        await waitFor(async () => (await unrelayedEntries(db, 'webhook_endpoints')).length === 0 && (await tombstones()) === 0, 'the sweep to relay the outboxes and remove the tombstones', 60_000);
        // The restarted server answers as if the deletes were done: 404, and not listed.
        const seen = await fetch(`${second.url}/webhook-endpoints/${deleted[0]}`, { headers: { 'X-API-Key': ADMIN_KEY, 'X-Tenant-Id': tenantId } });
        expect(seen.status).toBe(404);
      } finally {
        await second.stop();
      }
      const inserts = await entries('insert', created);
      const deletes = await entries('delete', deleted);
      expect(new Set(inserts.map((e) => String(e.item_id))).size).toBe(50);
      expect(inserts).toHaveLength(50);
      expect(new Set(deletes.map((e) => String(e.item_id))).size).toBe(25);
      expect(deletes).toHaveLength(25);
      expect(deletes.every((e) => e.snapshot?.id && String(e.tenant_id) === tenantId)).toBe(true);
      const events = db.collection('events');
      expect(await events.countDocuments({ type: 'webhook_endpoint.created', 'source.id': { $in: ids(created) } })).toBe(50);
      expect(await events.countDocuments({ type: 'webhook_endpoint.deleted', 'source.id': { $in: ids(deleted) } })).toBe(25);
      expect(await db.collection('webhook_endpoints').countDocuments({ _id: { $in: ids(created) } })).toBe(25);
      // Never a secret in an event or an audit entry.
      const text = JSON.stringify([await events.find({ type: /^webhook_endpoint\./ }).toArray(), inserts, deletes]);
      expect(text).not.toContain('whsec_');
      for (const s of secrets) expect(text).not.toContain(s.slice(6, 30));
    } finally {
      await client.close();
    }
  }, 180_000);
});
