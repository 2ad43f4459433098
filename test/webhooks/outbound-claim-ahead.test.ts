/**
 * The sender claims fresh deliveries ahead of its free slots (up to twice an endpoint's
 * concurrency), so the next attempt starts the moment a slot frees, with no round trip. What it
 * claimed ahead and never started is released when it stops: another process sends it at once,
 * not after the lease (here over two minutes) runs out. Two apps on one database, in turn.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import mongoose from 'mongoose';
import { afterAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { OUTBOUND_CONFIG, until } from './outbound-helpers.ts';

/** A receiver that holds every answer while `held` is true, and answers 200 once released. */
async function gatedReceiver() {
  const waiting: ServerResponse[] = [];
  const bodies: string[] = [];
  let held = true;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      if (held) waiting.push(res);
      else res.end('ok');
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    bodies,
    waiting,
    release() {
      held = false;
      for (const res of waiting.splice(0)) res.end('ok');
    },
    close: () => new Promise<void>((res) => { server.closeAllConnections(); server.close(() => res()); }),
  };
}

const apps: TestApp[] = [];
let recv: Awaited<ReturnType<typeof gatedReceiver>> | undefined;
let observer: mongoose.Connection | undefined;
afterAll(async () => {
  for (const a of apps) await a.close().catch(() => undefined);
  await observer?.close();
  await recv?.close();
});

describe('deliveries claimed ahead', () => {
  it('wait leased beside the attempt under way, and are released on stop for another process to send at once', async () => {
    recv = await gatedReceiver();
    const config = {
      ...OUTBOUND_CONFIG,
      MONGODB_URI: uniqueDbUri(),
      // One attempt at a time, two claimed per endpoint; a lease (timeout + margin) far longer than the test waits.
      WEBHOOK_DELIVERY_CONCURRENCY: '1',
      WEBHOOK_DELIVERY_ENDPOINT_CONCURRENCY: '1',
      WEBHOOK_DELIVERY_TIMEOUT_MS: '120000',
      EVENTS_RELAY_INTERVAL_MS: '20',
    };
    const a = await buildTestApp({ plugins: [resourcesPlugin, webhooksPlugin], config });
    apps.push(a);
    const admin = await createTenantUser(a, { roles: ['admin'] });
    const ep = await a.http('POST', '/webhook-endpoints', { key: admin.key, json: { url: recv.url, event_types: ['projects.created'] } });
    expect(ep.status).toBe(201);
    for (let n = 0; n < 4; n++) expect((await a.http('POST', '/projects', { key: admin.key, json: { name: `p${n}` } })).status).toBe(201);

    // The test's own connection, which outlives each app.
    observer = await mongoose.createConnection(config.MONGODB_URI).asPromise();
    const deliveries = observer.collection('webhook_deliveries');
    await until(async () => recv!.waiting.length === 1 && (await deliveries.countDocuments({})) === 4, 60_000);
    // One attempt under way, one claimed ahead beside it (leased, not attempted), the rest left to the search.
    const leased = await until(async () => {
      const n = await deliveries.countDocuments({ lease_until: { $ne: null } });
      return n === 2 ? n : null;
    }, 30_000);
    expect(leased).toBe(2);
    expect(await deliveries.countDocuments({ attempts: 0, lease_until: null })).toBe(2);

    // Stop: the attempt under way is answered and recorded; the one claimed ahead is released.
    const closing = a.close();
    await until(() => recv!.waiting.length === 1, 10_000);
    recv.release();
    await closing;
    apps.splice(apps.indexOf(a), 1);
    expect(await deliveries.countDocuments({ status: 'delivered' })).toBe(1);
    expect(await deliveries.countDocuments({ status: 'pending', lease_until: null, lease_owner: null })).toBe(3);

    // Another process on the database sends the three at once, well inside the two-minute lease.
    const b = await buildTestApp({ plugins: [resourcesPlugin, webhooksPlugin], config });
    apps.push(b);
    await until(async () => (await deliveries.countDocuments({ status: 'delivered' })) === 4, 60_000);
    expect(recv.bodies).toHaveLength(4);
    expect(new Set(recv.bodies.map((body) => JSON.parse(body).data.name))).toEqual(new Set(['p0', 'p1', 'p2', 'p3']));
  }, 180_000);
});
