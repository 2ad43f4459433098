/**
 * The operator's test of identity changes: 100 user creates and 100 API-key revocations, all
 * acknowledged, then SIGKILL. After a restart every one has its audit entry and its event, once:
 * the entries waited in the documents' outboxes and the restarted process's sweep relayed them.
 * The relay interval is raised to 1 s so that the last second of changes is surely unrelayed at the kill.
 */
import { describe, expect, it } from 'vitest';
import { MongoClient, ObjectId } from 'mongodb';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { waitFor } from '../helpers/wait.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';

const ENV = { RATE_LIMIT_ENABLED: 'false', AUDIT_LOG_ENABLED: 'true', EVENTS_RELAY_INTERVAL_MS: '1000' };

describe('identity: SIGKILL right after 100 user creates and 100 key revocations', () => {
  it('every acknowledged change has exactly one audit entry and one event after a restart', async () => {
    const uri = uniqueDbUri();
    // The killed process gathers its events for 5 s: the last seconds of writes are surely unrelayed at
    // the kill, however long a busy machine takes from the last answer to the signal.
    const first = await startServerProcess({ MONGODB_URI: uri, ...ENV, EVENTS_RELAY_INTERVAL_MS: '5000' });
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${first.url}${path}`, { method, headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
      return { status: r.status, body: (await r.json()) as { id: string } };
    };
    const tenant = await call('POST', '/admin/tenants', { name: 'killed' });
    const owner = await call('POST', '/admin/users', { email: 'owner@example.com', name: 'Owner', tenant_id: tenant.body.id });
    const keys: string[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const made = await Promise.all(Array.from({ length: 10 }, (_, i) => call('POST', '/admin/api-keys', { user_id: owner.body.id, name: `k-${batch}-${i}` })));
      for (const m of made) keys.push(m.body.id);
    }
    const users: string[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const answers = await Promise.all([
        ...Array.from({ length: 10 }, (_, i) => call('POST', '/admin/users', { email: `u-${batch}-${i}@example.com`, name: `U ${batch}-${i}`, tenant_id: tenant.body.id })),
        ...keys.slice(batch * 10, batch * 10 + 10).map((id) => call('DELETE', `/admin/api-keys/${id}`)),
      ]);
      expect(answers.map((a) => a.status)).toEqual([...Array(10).fill(201), ...Array(10).fill(200)]);
      for (const a of answers.slice(0, 10)) users.push(a.body.id);
    }
    await first.stop('SIGKILL');

    const client = new MongoClient(uri);
    try {
      const db = client.db();
      const userIds = users.map((id) => new ObjectId(id));
      const keyIds = keys.map((id) => new ObjectId(id));
      const entries = (resource: string, operation: string, ids: ObjectId[]) => db.collection('audit_log').find({ resource, operation, item_id: { $in: ids } }).toArray();
      // The injected point holds: some changes had neither entry nor event when the process died.
      const atKill = (await entries('users', 'insert', userIds)).length + (await entries('api_keys', 'update', keyIds)).length;
      expect(atKill).toBeLessThan(200);

      const second = await startServerProcess({ MONGODB_URI: uri, ...ENV });
      try {
        await waitFor(async () => (await unrelayedEntries(db, 'users')).length + (await unrelayedEntries(db, 'api_keys')).length === 0, 'the sweep to relay the outboxes', 60_000);
      } finally {
        await second.stop();
      }
      const created = await entries('users', 'insert', userIds);
      const revoked = await entries('api_keys', 'update', keyIds);
      expect(new Set(created.map((e) => String(e.item_id))).size).toBe(100);
      expect(created).toHaveLength(100);
      expect(new Set(revoked.map((e) => String(e.item_id))).size).toBe(100);
      expect(revoked).toHaveLength(100);
      expect(await db.collection('events').countDocuments({ type: 'user.created', 'source.id': { $in: userIds } })).toBe(100);
      expect(await db.collection('events').countDocuments({ type: 'api_key.revoked', 'source.id': { $in: keyIds } })).toBe(100);
    } finally {
      await client.close();
    }
  }, 180_000);
});
