/**
 * A backlog found by the search (deliveries of another process, or retries): with the poll
 * interval far longer than the test, the sender drains it by its own wakes. A search that left an
 * endpoint's deliveries for its share, then found nothing else, searches again as soon as a slot of
 * that endpoint comes free (it once waited for the next poll), claims ahead for an endpoint that
 * answers, and reads each batch's events with one query and its endpoints at most once a second.
 * A delivery the fan-out on store of another process reserved for itself is left to it a moment.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { Tenancy } from '../../core/tenancy.ts';
import { createOutbound } from '../../plugins/webhooks/outbound.ts';
import { outboundEventTypes, type Receiver, startReceiver, until } from './outbound-helpers.ts';

let t: TestApp;
let recv: Receiver;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [outboundEventTypes], config: { RATE_LIMIT_ENABLED: 'false' } });
  recv = await startReceiver();
});
afterAll(async () => {
  await t?.close();
  await recv?.close();
});

describe('a backlog found by the search', () => {
  it('is drained by wakes alone, within each endpoint\'s share and claimed ahead, not at the poll interval', async () => {
    const config = {
      ...t.app.config, WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: ['127.0.0.1'], WEBHOOK_DELIVERY_POLL_INTERVAL_MS: 60_000, WEBHOOK_DELIVERY_RETRY_SCHEDULE: [0, 60],
      WEBHOOK_DELIVERY_CONCURRENCY: 4, WEBHOOK_DELIVERY_ENDPOINT_CONCURRENCY: 2,
    };
    const tenant = new Types.ObjectId().toHexString();
    const o = createOutbound({ db: t.app.db.conn, config, tenancy: new Tenancy(true), events: t.app.services.get('events'), log: t.app.log, metrics: t.app.services.get('metrics') });
    const ep = await o.endpoints.create(systemActor(tenant), { url: recv.url, event_types: ['ping'], enabled: true });
    const events = t.app.services.get('events');
    // Twenty deliveries of one endpoint, pending and due before the sender starts.
    for (let n = 0; n < 20; n++) {
      const event = await events.append('ping', { actor: systemActor(tenant), tenant_id: tenant, data: { n } });
      await o.sender.create(event, new Types.ObjectId(tenant), [new Types.ObjectId(ep.id)]);
    }
    let maxOpen = 0;
    const deliveries = t.app.db.conn.collection('webhook_deliveries');
    const started = Date.now();
    o.start();
    // The start's poll is the only one the timer makes in this test: everything after it is a wake.
    await until(async () => {
      maxOpen = Math.max(maxOpen, o.sender.slots.inFlight);
      return (await deliveries.countDocuments({ endpoint_id: new Types.ObjectId(ep.id), status: 'delivered' })) === 20;
    }, 30_000);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(maxOpen).toBeLessThanOrEqual(2);
    expect(new Set(recv.requests.map((r) => r.headers['webhook-id'])).size).toBe(20);
    expect(recv.requests).toHaveLength(20);
    // Far fewer searches than deliveries: batches claimed ahead, not one search per attempt.
    expect(o.sender.counts.claimed).toBe(20);
    expect(o.sender.counts.searches).toBeLessThan(20);
    await o.stop();
  }, 60_000);

  it('leaves a delivery reserved for the process that created it until the reservation passes, then sends it once', async () => {
    const config = { ...t.app.config, WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: ['127.0.0.1'], WEBHOOK_DELIVERY_POLL_INTERVAL_MS: 50, WEBHOOK_DELIVERY_RETRY_SCHEDULE: [0, 60] };
    const tenant = new Types.ObjectId().toHexString();
    const o = createOutbound({ db: t.app.db.conn, config, tenancy: new Tenancy(true), events: t.app.services.get('events'), log: t.app.log, metrics: t.app.services.get('metrics') });
    const ep = await o.endpoints.create(systemActor(tenant), { url: `${recv.url}?reserved`, event_types: ['ping'], enabled: true });
    const event = await t.app.services.get('events').append('ping', { actor: systemActor(tenant), tenant_id: tenant, data: {} });
    await o.sender.create(event, new Types.ObjectId(tenant), [new Types.ObjectId(ep.id)]);
    // As a fan-out on store of another process would have left it: reserved for that process's sender.
    const reservedUntil = Date.now() + 1_500;
    const deliveries = t.app.db.conn.collection('webhook_deliveries');
    await deliveries.updateOne({ endpoint_id: new Types.ObjectId(ep.id) }, { $set: { reserved_until: new Date(reservedUntil) } });
    const mine = () => recv.requests.filter((r) => r.body.includes(event.id));
    o.start();
    await until(() => mine().length === 1, 20_000);
    expect(mine()[0]!.at).toBeGreaterThanOrEqual(reservedUntil);
    await until(async () => (await deliveries.findOne({ endpoint_id: new Types.ObjectId(ep.id) }))?.status === 'delivered', 10_000);
    expect(mine()).toHaveLength(1);
    await o.stop();
  }, 60_000);
});
