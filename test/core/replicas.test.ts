import { setTimeout as sleep } from 'node:timers/promises';
import mongoose from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { hashKey } from '../../core/authentication.ts';
import { startReplicas, startServerProcess, type ServerProcess } from '../helpers/processes.ts';

const TTL_MS = 500;
const get = (p: ServerProcess, path: string, key: string, ip?: string) =>
  fetch(p.url + path, { headers: { 'X-API-Key': key, ...(ip ? { 'X-Forwarded-For': ip } : {}) } });

describe('two replicas on one database', () => {
  const uri = uniqueDbUri();
  let a: ServerProcess;
  let b: ServerProcess;
  /** In-process app on the same database, without a rate limit, to set up users and keys. */
  let setup: TestApp;
  beforeAll(async () => {
    const env = { MONGODB_URI: uri, RATE_LIMIT_MAX: '10', AUTH_FAILURE_LIMIT: '4', AUTH_CACHE_TTL_MS: String(TTL_MS), TRUST_PROXY: 'true' };
    [a, b] = (await startReplicas(2, env)) as [ServerProcess, ServerProcess];
    setup = await buildTestApp({ config: { MONGODB_URI: uri, RATE_LIMIT_ENABLED: 'false' } });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop(), setup?.close()]);
  });

  it('share one request budget: 10 requests alternating between them, then 429 on both', async () => {
    const { key } = await createTenantUser(setup);
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await get(i % 2 ? b : a, '/auth/me', key)).status);
    expect(statuses).toEqual(Array(10).fill(200));
    // Counts reach the store in each replica's next sync (RATE_LIMIT_SYNC_MS), not per request: once
    // both replicas' counts are there, each reads the total back within its next syncs.
    const limits = setup.app.db.conn.db!.collection('rate_limits');
    for (let i = 0; i < 200 && ((await limits.findOne({ key: `rate_limits:key:${hashKey(key).slice(0, 32)}` }))?.points ?? 0) < 10; i++) await sleep(50);
    await sleep(500);
    expect((await get(a, '/auth/me', key)).status).toBe(429);
    expect((await get(b, '/auth/me', key)).status).toBe(429);
  });

  it('share the failed-authentication counters', async () => {
    const ip = '10.77.0.1';
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await get(i % 2 ? b : a, '/auth/me', `ak_wrong${i}`, ip)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 429]);
  });

  it('a key revoked through one is refused by the other within AUTH_CACHE_TTL_MS', async () => {
    const user = await createTenantUser(setup);
    expect((await get(b, '/auth/me', user.key)).status).toBe(200); // now cached by B
    const revoked = await fetch(`${a.url}/admin/api-keys/${user.keyId}`, { method: 'DELETE', headers: { 'X-API-Key': ADMIN_KEY } });
    expect(revoked.status).toBe(200);
    expect((await get(a, '/auth/me', user.key)).status).toBe(401); // at once where it was revoked
    // B cached the key before the revocation: by AUTH_CACHE_TTL_MS later the entry has expired.
    await sleep(TTL_MS + 100);
    expect((await get(b, '/auth/me', user.key)).status).toBe(401);
  });

  it('a user disabled through one is refused by the other within AUTH_CACHE_TTL_MS', async () => {
    const user = await createTenantUser(setup);
    expect((await get(b, '/auth/me', user.key)).status).toBe(200);
    const patched = await fetch(`${a.url}/admin/users/${user.userId}`, {
      method: 'PATCH', headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ is_active: false }),
    });
    expect(patched.status).toBe(200);
    await sleep(TTL_MS + 100);
    expect((await get(b, '/auth/me', user.key)).status).toBe(401);
  });
});

describe('graceful shutdown (SIGTERM) stores the events and audit entries still waiting', () => {
  it('N writes, then SIGTERM, then exactly N audit entries', async () => {
    const uri = uniqueDbUri();
    // A relay interval of a minute: the entries wait with their events, and only the flush on shutdown stores them.
    const p = await startServerProcess({ MONGODB_URI: uri, EVENTS_RELAY_INTERVAL_MS: '60000' });
    const N = 25;
    const conn = await mongoose.createConnection(uri).asPromise();
    try {
      const tenant = await fetch(`${p.url}/admin/tenants`, {
        method: 'POST', headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'flush' }),
      });
      const tenantId = ((await tenant.json()) as { id: string }).id;
      const created = await Promise.all(
        Array.from({ length: N }, (_, i) =>
          fetch(`${p.url}/projects`, {
            method: 'POST',
            headers: { 'X-API-Key': ADMIN_KEY, 'X-Tenant-Id': tenantId, 'Content-Type': 'application/json' },
            body: JSON.stringify({ name: `p${i}` }),
          }),
        ),
      );
      expect(created.map((r) => r.status)).toEqual(Array(N).fill(201));
      // Still waiting: proof that the test exercises the shutdown flush.
      expect(await conn.collection('audit_log').countDocuments({ resource: 'projects' })).toBe(0);
      expect(await p.stop('SIGTERM')).toBe(0);
      expect(await conn.collection('audit_log').countDocuments({ resource: 'projects', operation: 'insert' })).toBe(N);
    } finally {
      await p.stop('SIGKILL');
      await conn.close();
    }
  });
});
