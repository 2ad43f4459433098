/**
 * Keep-alive connections to receivers (plugins/webhooks/agents.ts, transport.ts): consecutive
 * attempts to an endpoint reuse a connection, no more connections are open to it than its share,
 * a connection the receiver closed as it was reused is replaced by a new one within the attempt
 * (nothing fails), and the sender's stop closes them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { Tenancy } from '../../core/tenancy.ts';
import { createOutbound } from '../../plugins/webhooks/outbound.ts';
import { ReceiverAgents } from '../../plugins/webhooks/agents.ts';
import { httpTransport } from '../../plugins/webhooks/transport.ts';
import { outboundEventTypes, until } from './outbound-helpers.ts';

let t: TestApp;
const servers: Server[] = [];
beforeAll(async () => {
  t = await buildTestApp({ plugins: [outboundEventTypes], config: { RATE_LIMIT_ENABLED: 'false' } });
});
afterAll(async () => {
  await t?.close();
});
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A receiver counting connections and requests; `answer` may cut a request instead of answering it. */
async function receiver(answer: (req: IncomingMessage, res: ServerResponse, nth: number) => void = (_q, res) => res.end('ok')) {
  const r = { connections: 0, requests: 0, url: '' };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(req, res, ++r.requests));
  });
  server.on('connection', () => r.connections++);
  servers.push(server);
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return r;
}

describe('keep-alive connections to receivers', () => {
  it('reuse one connection for consecutive attempts, hold no more than the share at once, and close on stop', async () => {
    const recv = await receiver();
    const config = { ...t.app.config, WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: ['127.0.0.1'], WEBHOOK_DELIVERY_POLL_INTERVAL_MS: 50, WEBHOOK_DELIVERY_RETRY_SCHEDULE: [0, 60] };
    const tenant = new Types.ObjectId().toHexString();
    const o = createOutbound({ db: t.app.db.conn, config, tenancy: new Tenancy(true), events: t.app.services.get('events'), log: t.app.log, metrics: t.app.services.get('metrics') });
    const ep = await o.endpoints.create(systemActor(tenant), { url: recv.url, event_types: ['ping'], enabled: true });
    const events = t.app.services.get('events');
    o.start();
    // One at a time: each attempt after the previous one was received.
    for (let n = 0; n < 5; n++) {
      const event = await events.append('ping', { actor: systemActor(tenant), tenant_id: tenant, data: { n } });
      await o.sender.create(event, new Types.ObjectId(tenant), [new Types.ObjectId(ep.id)]);
      o.sender.wake();
      await until(() => recv.requests === n + 1, 10_000);
    }
    expect(recv.connections).toBe(1);
    // Twenty at once: at most the endpoint's share of connections (2) is ever open.
    for (let n = 0; n < 20; n++) {
      const event = await events.append('ping', { actor: systemActor(tenant), tenant_id: tenant, data: { n } });
      await o.sender.create(event, new Types.ObjectId(tenant), [new Types.ObjectId(ep.id)]);
    }
    o.sender.wake();
    await until(() => recv.requests === 25, 20_000);
    expect(recv.connections).toBeLessThanOrEqual(2);
    const deliveries = t.app.db.conn.collection('webhook_deliveries');
    await until(async () => (await deliveries.countDocuments({ endpoint_id: new Types.ObjectId(ep.id), status: 'delivered' })) === 25, 20_000);
    expect(o.sender.openConnections).toBeGreaterThan(0);
    await o.stop();
    expect(o.sender.openConnections).toBe(0);
  }, 60_000);

  it('sends again on a new connection when the receiver closed the reused one before answering', async () => {
    let first: Socket | null = null;
    // The second request on the first connection is cut unanswered (as a receiver closing an idle connection would).
    const recv = await receiver((req, res) => {
      first ??= req.socket;
      if (req.socket === first && recv.requests === 2) req.socket.destroy();
      else res.end('ok');
    });
    const agents = new ReceiverAgents(2);
    const url = new URL(recv.url);
    const addresses = [{ address: '127.0.0.1', family: 4 }];
    const send = () => httpTransport({ url, addresses, headers: {}, body: '{}', timeoutMs: 5_000, agent: agents.for(url, addresses) });
    expect(await send()).toMatchObject({ status: 200, error: null });
    expect(await send()).toMatchObject({ status: 200, error: null });
    expect(recv.requests).toBe(3);
    expect(recv.connections).toBe(2);
    agents.close();
  });

  it('keeps one agent per origin and set of checked addresses', () => {
    const agents = new ReceiverAgents(2);
    const a = agents.for(new URL('http://receiver.example:8080/a'), [{ address: '93.184.216.34', family: 4 }]);
    expect(agents.for(new URL('http://receiver.example:8080/b'), [{ address: '93.184.216.34', family: 4 }])).toBe(a);
    expect(agents.for(new URL('http://receiver.example:8080/a'), [{ address: '93.184.216.35', family: 4 }])).not.toBe(a);
    expect(agents.for(new URL('https://receiver.example:8080/a'), [{ address: '93.184.216.34', family: 4 }])).not.toBe(a);
    agents.close();
  });
});
