/**
 * Events this process stores go out without waiting for a poll: the fan-out runs as the relay
 * stores them and hands the deliveries to this process's sender. The sender's and the durable
 * consumer's poll intervals are ten minutes here, so a delivery that waited for either would not
 * come within the test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { OUTBOUND_CONFIG, sleep, startReceiver, until, verifies, type Receiver } from './outbound-helpers.ts';

let t: TestApp;
let recv: Receiver;
const TEN_MINUTES = '600000';

beforeAll(async () => {
  recv = await startReceiver();
  t = await buildTestApp({
    plugins: [resourcesPlugin, webhooksPlugin],
    config: { ...OUTBOUND_CONFIG, WEBHOOK_DELIVERY_POLL_INTERVAL_MS: TEN_MINUTES, EVENTS_POLL_INTERVAL_MS: TEN_MINUTES, EVENTS_RELAY_INTERVAL_MS: '20' },
  });
});
afterAll(async () => {
  await t?.close();
  await recv?.close();
});

describe('an event this process stores', () => {
  it('is delivered to each endpoint once, without waiting for the sender or the fan-out consumer to poll', async () => {
    const admin = await createTenantUser(t, { roles: ['admin'] });
    const endpoints = [];
    for (const path of ['one', 'two']) {
      const res = await t.http('POST', '/webhook-endpoints', { key: admin.key, json: { url: `${recv.url}?${path}`, event_types: ['projects.created'] } });
      expect(res.status).toBe(201);
      endpoints.push(res.body as { id: string; secret: string });
    }
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) {
      const res = await t.http('POST', '/projects', { key: admin.key, json: { name: `p${n}` } });
      expect(res.status).toBe(201);
      ids.push(res.body.id as string);
    }
    // Far below the ten-minute polls, generous for a loaded machine.
    await until(() => recv.requests.length >= 10, 60_000);
    await sleep(1000); // a duplicate would come by now
    expect(recv.requests).toHaveLength(10);
    for (const ep of endpoints) {
      const got = recv.requests.filter((r) => verifies(ep.secret, r)).map((r) => JSON.parse(r.body).data.id as string);
      expect(new Set(got)).toEqual(new Set(ids));
      expect(got).toHaveLength(5);
      // Each attempt was recorded on its own delivery: delivered, one attempt, the lease released.
      const list = await until(async () => {
        const res = await t.http('GET', `/webhook-endpoints/${ep.id}/deliveries?status=delivered`, { key: admin.key });
        return res.body.total === 5 ? res : null;
      }, 30_000);
      expect(list.body.items.every((d: { attempts: number; last_attempt: { status: number } }) => d.attempts === 1 && d.last_attempt.status === 200)).toBe(true);
    }
    const leased = await t.app.db.conn.collection('webhook_deliveries').countDocuments({ lease_until: { $ne: null } });
    expect(leased).toBe(0);
    // Reserved for this process's sender a moment after their creation: other processes' searches left them to it.
    const made = await t.app.db.conn.collection('webhook_deliveries').find({}).toArray();
    for (const d of made) expect((d.reserved_until as Date).getTime() - (d.created_at as Date).getTime()).toBe(2_000);
  }, 120_000);
});
