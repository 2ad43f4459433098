/**
 * SIGKILL of a sender in the middle of a batch: a server process claims a batch of deliveries and
 * posts them, the receiver holds its answers and the process is killed. Another process on the
 * same database sends each of them again once the lease passed (at least once), with the same
 * delivery id (`webhook-id`), and records each once.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess, type ServerProcess } from '../helpers/processes.ts';
import { OUTBOUND_CONFIG, until } from './outbound-helpers.ts';

const COUNT = 6;
const env = {
  ...OUTBOUND_CONFIG, MONGODB_URI: uniqueDbUri(), PLUGINS: './test/fixtures/outbound-events-plugin.ts',
  // One endpoint may take every slot: the whole stream is one batch of the first process.
  WEBHOOK_DELIVERY_CONCURRENCY: String(COUNT), WEBHOOK_DELIVERY_ENDPOINT_CONCURRENCY: String(COUNT),
  // No held request times out before the kill, however slow the events come on a busy machine.
  WEBHOOK_DELIVERY_TIMEOUT_MS: '15000',
};
const procs: ServerProcess[] = [];
/** The `webhook-id` of every request, in order; answers are held while `hold` is set. */
const ids: string[] = [];
const held: ServerResponse[] = [];
let hold = true;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    ids.push(String(req.headers['webhook-id']));
    if (hold) held.push(res);
    else res.end('ok');
  });
});

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  procs.push(await startServerProcess(env));
}, 90_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

async function call(p: ServerProcess, method: string, path: string, key: string, json?: unknown) {
  const res = await fetch(p.url + path, { method, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, ...(json ? { body: JSON.stringify(json) } : {}) });
  return { status: res.status, body: (await res.json()) as any };
}

describe('a sender killed mid-batch', () => {
  it('leaves its claimed deliveries to the other process after the lease: re-sent with the same id, recorded once', async () => {
    const victim = procs[0]!;
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const tenant = (await call(victim, 'POST', '/admin/tenants', ADMIN_KEY, { name: 'sigkill' })).body.id;
    const user = (await call(victim, 'POST', '/admin/users', ADMIN_KEY, { email: 'k@example.com', name: 'K', tenant_id: tenant, roles: ['admin'] })).body.id;
    const key = (await call(victim, 'POST', '/admin/api-keys', ADMIN_KEY, { user_id: user, name: 'k' })).body.key as string;
    const ep = await call(victim, 'POST', '/webhook-endpoints', key, { url, event_types: ['*'] });
    expect(ep.status).toBe(201);
    const made = await call(victim, 'POST', '/outbound-test/events', key, { count: COUNT });
    const events = made.body.ids as string[];

    await until(() => ids.length >= COUNT, 30_000);
    expect(await victim.stop('SIGKILL')).toBeNull();
    const first = ids.splice(0);
    expect(new Set(first).size).toBe(COUNT);
    hold = false;

    const survivor = await startServerProcess(env);
    procs.push(survivor);
    // The lease is the timeout plus a 30 s margin.
    await until(() => ids.length >= COUNT, 120_000);
    expect(new Set(ids)).toEqual(new Set(first));
    expect(ids).toHaveLength(COUNT);

    const list = await until(async () => {
      const r = await call(survivor, 'GET', `/webhook-endpoints/${ep.body.id}/deliveries?per_page=100&status=delivered`, key);
      return r.body.total === COUNT ? r.body : null;
    });
    expect(new Set(list.items.map((d: { event_id: string }) => d.event_id))).toEqual(new Set(events));
    // The killed attempt was never recorded: each delivery shows the one attempt that got its 2xx.
    expect(list.items.map((d: { attempts: number; attempt_log: unknown[] }) => [d.attempts, d.attempt_log.length])).toEqual(events.map(() => [1, 1]));
  }, 240_000);
});
