/**
 * One claimed batch with mixed results: three endpoints of a tenant get one event together, so the
 * sender claims their three deliveries in one batch; one answers 200, one 500 and one never answers
 * (the attempt times out). The answers of the first two are held until all three requests came,
 * so those two finish together and are recorded in one write: each delivery gets its own outcome.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { outboundEventsPlugin, TEST_EVENT } from '../fixtures/outbound-events-plugin.ts';
import { eventsOfType, visibleTo } from '../events/domain-helpers.ts';
import { OUTBOUND_CONFIG, until } from './outbound-helpers.ts';

/** `/ok` and `/fail` are answered (200, 500) once all three requests came; `/hang` never is. */
function heldReceiver() {
  const held: { res: ServerResponse; status: number }[] = [];
  const seen: string[] = [];
  let released = false;
  const release = () => {
    released = true;
    for (const h of held.splice(0)) h.res.writeHead(h.status).end(h.status === 200 ? 'ok' : 'nope');
  };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push(String(req.url));
      if (req.url !== '/hang') {
        const status = req.url === '/ok' ? 200 : 500;
        if (released) res.writeHead(status).end(status === 200 ? 'ok' : 'nope');
        else held.push({ res, status });
      }
      if (!released && seen.length >= 3) release();
    });
  });
  return { server, seen };
}

describe('a batch of mixed results', () => {
  const recv = heldReceiver();
  let t: Awaited<ReturnType<typeof buildTestApp>>;
  let base: string;
  beforeAll(async () => {
    await new Promise<void>((r) => recv.server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(recv.server.address() as AddressInfo).port}`;
    // A second attempt a minute later: each failure stays pending with its next attempt set.
    t = await buildTestApp({ plugins: [webhooksPlugin, outboundEventsPlugin], config: { ...OUTBOUND_CONFIG, WEBHOOK_DELIVERY_RETRY_SCHEDULE: '0,60' } });
  });
  afterAll(async () => {
    await t?.close();
    recv.server.closeAllConnections();
    await new Promise((r) => recv.server.close(r));
  });

  it('records 200 as delivered, 500 and a timeout as failed attempts due again, each with its own attempt', async () => {
    const a = await createTenantUser(t, { roles: ['admin'] });
    const ids: Record<string, string> = {};
    for (const path of ['/ok', '/fail', '/hang']) {
      const res = await t.http('POST', '/webhook-endpoints', { key: a.key, json: { url: base + path, event_types: [TEST_EVENT] } });
      expect(res.status).toBe(201);
      ids[path] = res.body.id;
    }
    const other = await createTenantUser(t, { roles: ['admin'] });
    const event = await t.app.services.get('events').append(TEST_EVENT, { actor: systemActor(a.tenantId), tenant_id: a.tenantId, data: { n: 1 } });
    const last = async (path: string) => {
      const page = (await t.http('GET', `/webhook-endpoints/${ids[path]}/deliveries`, { key: a.key })).body;
      const d = page.items[0];
      return d?.attempts === 1 ? d : null;
    };
    const [ok, fail, hang] = await Promise.all(['/ok', '/fail', '/hang'].map((p) => until(() => last(p), 30_000)));
    expect(recv.seen.sort()).toEqual(['/fail', '/hang', '/ok']);

    expect(ok).toMatchObject({ event_id: event.id, status: 'delivered', attempts: 1, next_attempt_at: null, last_attempt: { status: 200, error: null } });
    expect(ok.attempt_log).toHaveLength(1);
    expect(fail).toMatchObject({ event_id: event.id, status: 'pending', attempts: 1, last_attempt: { status: 500, error: 'HTTP 500', response_excerpt: 'nope' } });
    expect(hang).toMatchObject({ event_id: event.id, status: 'pending', attempts: 1, last_attempt: { status: null, error: `no response within ${OUTBOUND_CONFIG.WEBHOOK_DELIVERY_TIMEOUT_MS} ms` } });
    for (const d of [fail, hang]) {
      expect(d.attempt_log).toHaveLength(1);
      const wait = new Date(d.next_attempt_at).getTime() - new Date(d.last_attempt.attempted_at).getTime();
      expect(wait).toBe(60_000);
    }

    // Each recorded attempt stored its own event, in the tenant of its delivery only.
    const of = (path: string) => (e: Record<string, any>) => e.data?.endpoint_id === ids[path];
    expect(await eventsOfType(t, a.key, 'webhook_delivery.succeeded', of('/ok'))).toHaveLength(1);
    for (const path of ['/fail', '/hang']) expect(await eventsOfType(t, a.key, 'webhook_delivery.failed', of(path))).toHaveLength(1);
    expect(await visibleTo(t, other.key, 'webhook_delivery.failed', of('/fail'))).toEqual([]);
  }, 60_000);
});
