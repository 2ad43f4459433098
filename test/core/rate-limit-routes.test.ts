/**
 * Webhook receivers have a budget of their own (WEBHOOK_RATE_LIMIT_MAX per provider and client),
 * apart from RATE_LIMIT_MAX: a provider bursting from one address is not refused by the general
 * limiter, and its deliveries spend nothing of that address's general budget.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { deliver, hmac, newCalls, providersPlugin } from '../webhooks/helpers.ts';

const GENERAL = 3;
const RECEIVER = 8;
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({
    plugins: [
      examplePlugin,
      webhooksPlugin,
      providersPlugin(newCalls(), [
        { provider: 'acme', secret: 'whsec-test-secret-0123456789', verifier: { type: 'hmac-sha256' }, event_id_path: 'id' },
        { provider: 'globex', secret: 'whsec-test-secret-0123456789', verifier: { type: 'hmac-sha256' }, event_id_path: 'id' },
      ]),
    ],
    config: { WEBHOOKS_ENABLED: 'true', TRUST_PROXY: 'true', RATE_LIMIT_MAX: String(GENERAL), WEBHOOK_RATE_LIMIT_MAX: String(RECEIVER) },
  });
});
afterAll(() => t?.close());

const from = (ip: string) => ({ 'X-Forwarded-For': ip });
const event = (provider: string, ip: string) => {
  const body = JSON.stringify({ id: `evt_${randomBytes(6).toString('hex')}` });
  return deliver(t, provider, body, { ...from(ip), 'X-Signature': hmac('sha256', body) });
};
const hello = (ip: string) => t.http('GET', '/example/hello', { key: null, headers: from(ip) });

describe('WEBHOOK_RATE_LIMIT_MAX', () => {
  it('a burst above RATE_LIMIT_MAX from one address is accepted, up to the receiver budget', async () => {
    const ip = '10.2.0.1';
    const statuses: number[] = [];
    for (let i = 0; i < RECEIVER; i++) {
      const res = await event('acme', ip);
      statuses.push(res.status);
      expect(res.headers.get('ratelimit-limit')).toBe(String(RECEIVER));
    }
    expect(statuses).toEqual(Array(RECEIVER).fill(200));
    const over = await event('acme', ip);
    expect(over.status).toBe(429);
    expect(envelope(over).code).toBe('RATE_LIMITED');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Each provider has its own budget.
    expect((await event('globex', ip)).status).toBe(200);
    // The address's general budget is untouched by the deliveries.
    for (let i = 0; i < GENERAL; i++) expect((await hello(ip)).status).toBe(200);
    expect((await hello(ip)).status).toBe(429);
  });

  it('other addresses have their own receiver budget', async () => {
    for (let i = 0; i < RECEIVER; i++) expect((await event('acme', '10.2.0.2')).status).toBe(200);
    expect((await event('acme', '10.2.0.3')).status).toBe(200);
  });

  it('refused deliveries (unknown provider, bad signature) spend the general budget', async () => {
    const ip = '10.2.0.4';
    const body = '{"id":"x"}';
    expect((await deliver(t, `nobody-${randomBytes(3).toString('hex')}`, body, from(ip))).status).toBe(404);
    expect((await deliver(t, `nobody-${randomBytes(3).toString('hex')}`, body, from(ip))).status).toBe(404);
    expect((await deliver(t, 'acme', body, { ...from(ip), 'X-Signature': 'bad' })).status).toBe(401);
    // General budget spent: refused everywhere, receivers included, whatever the provider name.
    expect((await hello(ip)).status).toBe(429);
    expect((await deliver(t, `nobody-${randomBytes(3).toString('hex')}`, body, from(ip))).status).toBe(429);
    expect((await event('acme', ip)).status).toBe(429);
  });

  it('other routes from an address are not refused because of its deliveries', async () => {
    const ip = '10.2.0.5';
    for (let i = 0; i < RECEIVER; i++) await event('globex', ip);
    expect((await event('globex', ip)).status).toBe(429);
    expect((await hello(ip)).status).toBe(200);
  });
});
