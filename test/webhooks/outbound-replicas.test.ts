/**
 * Exactly once across replicas: two server processes on one database both run the fan-out
 * consumer and the sender; every event appended (through either process) reaches the receiver
 * exactly once per endpoint. So does every event a process stores through its relay, which that
 * process fans out as it stores it while the other's durable consumer sees it too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';
import { TEST_EVENT } from '../fixtures/outbound-events-plugin.ts';
import { OUTBOUND_CONFIG, sleep, startReceiver, until, verifies, type Receiver } from './outbound-helpers.ts';

let procs: ServerProcess[] = [];
let recv: Receiver;

beforeAll(async () => {
  recv = await startReceiver();
  const env = { ...OUTBOUND_CONFIG, MONGODB_URI: uniqueDbUri(), PLUGINS: './test/fixtures/outbound-events-plugin.ts' };
  procs = await startReplicas(2, env);
}, 90_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await recv?.close();
});

async function call(p: ServerProcess, method: string, path: string, key: string, json?: unknown) {
  const res = await fetch(p.url + path, { method, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, ...(json ? { body: JSON.stringify(json) } : {}) });
  return { status: res.status, body: (await res.json()) as any };
}

describe('two replicas', () => {
  it('deliver each event exactly once to each endpoint', async () => {
    const [a, b] = procs as [ServerProcess, ServerProcess];
    const tenant = (await call(a, 'POST', '/admin/tenants', ADMIN_KEY, { name: 'replicas' })).body.id;
    const user = (await call(a, 'POST', '/admin/users', ADMIN_KEY, { email: 'r@example.com', name: 'R', tenant_id: tenant, roles: ['admin'] })).body.id;
    const key = (await call(a, 'POST', '/admin/api-keys', ADMIN_KEY, { user_id: user, name: 'k' })).body.key as string;
    const one = await call(a, 'POST', '/webhook-endpoints', key, { url: recv.url, event_types: [TEST_EVENT] });
    const two = await call(b, 'POST', '/webhook-endpoints', key, { url: `${recv.url}?second`, event_types: ['*'] });
    expect([one.status, two.status]).toEqual([201, 201]);

    const ids: string[] = [];
    const made = await Promise.all([call(a, 'POST', '/outbound-test/events', key, { count: 40 }), call(b, 'POST', '/outbound-test/events', key, { count: 40 })]);
    for (const m of made) ids.push(...(m.body.ids as string[]));
    expect(ids).toHaveLength(80);

    await until(() => recv.requests.length >= 160, 60_000);
    await sleep(2000); // a duplicate would arrive by now
    const byEndpoint = (second: boolean) => recv.requests.filter((r) => verifies(second ? two.body.secret : one.body.secret, r));
    for (const second of [false, true]) {
      const got = byEndpoint(second).map((r) => String(r.headers['webhook-id']));
      expect(got).toHaveLength(80);
      expect(new Set(got)).toEqual(new Set(ids));
    }
    expect(recv.requests).toHaveLength(160);

    const list = await call(b, 'GET', `/webhook-endpoints/${one.body.id}/deliveries?per_page=100&status=delivered`, key);
    expect(list.body.total).toBe(80);
    expect(list.body.items.every((d: { attempts: number }) => d.attempts === 1)).toBe(true);
  }, 90_000);

  it('deliver each event a process stored exactly once to each endpoint', async () => {
    const [a, b] = procs as [ServerProcess, ServerProcess];
    const tenant = (await call(a, 'POST', '/admin/tenants', ADMIN_KEY, { name: 'stored' })).body.id;
    const user = (await call(a, 'POST', '/admin/users', ADMIN_KEY, { email: 's@example.com', name: 'S', tenant_id: tenant, roles: ['admin'] })).body.id;
    const key = (await call(a, 'POST', '/admin/api-keys', ADMIN_KEY, { user_id: user, name: 'k' })).body.key as string;
    const before = recv.requests.length;
    const ep = await call(a, 'POST', '/webhook-endpoints', key, { url: `${recv.url}?stored`, event_types: ['projects.created'] });
    expect(ep.status).toBe(201);

    const writes = await Promise.all([a, b].flatMap((p) => Array.from({ length: 20 }, (_, n) => call(p, 'POST', '/projects', key, { name: `p${n}` }))));
    expect(writes.every((w) => w.status === 201)).toBe(true);
    const ids = writes.map((w) => w.body.id as string);

    await until(() => recv.requests.length >= before + 40, 60_000);
    await sleep(2000); // a duplicate would arrive by now
    const got = recv.requests.slice(before).filter((r) => verifies(ep.body.secret, r)).map((r) => JSON.parse(r.body).data.id as string);
    expect(got).toHaveLength(40);
    expect(new Set(got)).toEqual(new Set(ids));
    expect(recv.requests).toHaveLength(before + 40);
    const list = await until(async () => {
      const res = await call(b, 'GET', `/webhook-endpoints/${ep.body.id}/deliveries?per_page=100&status=delivered`, key);
      return res.body.total === 40 ? res : null;
    }, 30_000);
    expect(list.body.items.every((d: { attempts: number }) => d.attempts === 1)).toBe(true);
  }, 90_000);
});
