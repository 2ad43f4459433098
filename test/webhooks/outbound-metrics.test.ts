/**
 * The sender moves the outbound series: every attempt counts by outcome (success, failure for a
 * non-2xx answer, timeout, error for no answer at all), each success observes the delay since its
 * event, and each endpoint disabled for failing counts once; read through `GET /metrics`. The
 * documented `OutboundDeliveriesFailing` alert reads series that now have samples. Every receiver
 * is on 127.0.0.1.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { outboundEventsPlugin, TEST_EVENT } from '../fixtures/outbound-events-plugin.ts';
import { samples, total } from '../observability/helpers.ts';
import { OUTBOUND_CONFIG, startReceiver, until, type Receiver } from './outbound-helpers.ts';

let t: TestApp;
let ok: Receiver;
let failing: Receiver;
let hanging: Server;

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [webhooksPlugin, outboundEventsPlugin],
    // Two attempts per delivery; two failed attempts in a row disable an endpoint (36 ms of failing).
    config: { ...OUTBOUND_CONFIG, WEBHOOK_DELIVERY_RETRY_SCHEDULE: '0,0.3', WEBHOOK_DELIVERY_TIMEOUT_MS: '1500', WEBHOOK_ENDPOINT_DISABLE_AFTER_HOURS: '0.00001' },
  });
  [ok, failing] = await Promise.all([startReceiver(), startReceiver()]);
  failing.respond = () => 500;
  hanging = createServer((req) => req.resume());
  await new Promise<void>((res) => hanging.listen(0, '127.0.0.1', res));
});
afterAll(async () => {
  hanging?.closeAllConnections();
  await new Promise((res) => hanging?.close(res));
  await t?.close();
  await Promise.all([ok?.close(), failing?.close()]);
});

/** A port nothing listens on: the connection is refused. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((res) => s.listen(0, '127.0.0.1', res));
  const port = (s.address() as AddressInfo).port;
  await new Promise((res) => s.close(res));
  return port;
}

describe('outbound metrics', () => {
  it('count attempts by outcome, the delay of each success and the endpoints disabled, in the scrape the alert reads', async () => {
    const before = {
      attempts: await total(t, 'outbound_webhook_attempts_total'),
      delay: await total(t, 'outbound_webhook_delivery_delay_seconds'),
    };
    expect(before).toEqual({ attempts: 0, delay: 0 });

    const urls = [ok.url, failing.url, `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/hang`, `http://127.0.0.1:${await closedPort()}/gone`];
    const tenants = await Promise.all(urls.map(() => createTenantUser(t, { roles: ['admin'] })));
    for (const [i, url] of urls.entries()) {
      const res = await t.http('POST', '/webhook-endpoints', { key: tenants[i]!.key, json: { url, event_types: [TEST_EVENT] } });
      expect(res.status).toBe(201);
    }
    const events = t.app.services.get('events');
    const emit = (tenantId: string) => events.append(TEST_EVENT, { actor: systemActor(tenantId), tenant_id: tenantId, data: { n: 1 } });
    for (let n = 0; n < 3; n++) await emit(tenants[0]!.tenantId);
    for (const tenant of tenants.slice(1)) await emit(tenant.tenantId);

    // 3 deliveries succeed at once; 3 fail twice each (500, no answer in time, connection refused).
    const deliveries = t.app.db.conn.collection('webhook_deliveries');
    await until(async () => (await deliveries.countDocuments({ status: { $in: ['delivered', 'failed'] } })) === 6, 20_000);
    // The endpoint is disabled right after the attempt is recorded.
    await until(async () => (await t.app.db.conn.collection('webhook_endpoints').countDocuments({ enabled: false })) === 3);

    const attempts = await samples(t, 'outbound_webhook_attempts_total');
    const byOutcome = Object.fromEntries(attempts.map((s) => [s.labels.outcome, s.value]));
    expect(byOutcome).toEqual({ success: 3, failure: 2, timeout: 2, error: 2 });
    expect(await total(t, 'outbound_webhook_delivery_delay_seconds')).toBe(3);
    expect(await total(t, 'outbound_webhook_endpoints_disabled_total')).toBe(3);
    expect(ok.requests).toHaveLength(3);
    expect(failing.requests).toHaveLength(2);

    // The documented OutboundDeliveriesFailing alert reads series that have samples now.
    const doc = readFileSync(new URL('../../docs/observability.md', import.meta.url), 'utf8');
    const expr = /- alert: OutboundDeliveriesFailing.*\n\s+expr: (.+)/.exec(doc)?.[1];
    expect(expr).toBeDefined();
    const selectors = [...expr!.matchAll(/([a-z_]+)(\{[^}]*\})?\[/g)].map((m) => ({ name: m[1]!, labels: Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!])) }));
    expect(selectors.map((s) => s.name)).toEqual(['outbound_webhook_attempts_total', 'outbound_webhook_attempts_total']);
    for (const s of selectors) expect(await total(t, s.name, s.labels), JSON.stringify(s)).toBeGreaterThan(0);
  }, 60_000);
});
