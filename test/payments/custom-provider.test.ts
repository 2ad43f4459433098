import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins, loadPlugins, corePlugins } from '../../builtin-plugins.ts';
import { createApp } from '../../core/kernel.ts';
import { definePlugin } from '../../core/plugin.ts';
import { buildTestApp, TEST_SECRETS, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { ACMEPAY_SECRET } from '../fixtures/payment-provider-plugin.ts';
import { col, create, tenant } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;

beforeAll(async () => {
  // The server's own plugin list: built-ins plus the module named in PLUGINS.
  const plugins = await loadPlugins(loadConfig({ PLUGINS: './test/fixtures/payment-provider-plugin.ts', DISABLED_PLUGINS: 'openapi' }));
  expect(plugins.map((p) => p.name)).toEqual(builtinPlugins().filter((p) => p.name !== 'openapi').map((p) => p.name).concat('acmepay'));
  t = await buildTestApp({ plugins, config: { PAYMENTS_ENABLED: 'true', WEBHOOKS_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' } });
  A = await tenant(t);
});
afterAll(() => t?.close());

const sign = (body: string) => `sha256=${createHmac('sha256', ACMEPAY_SECRET).update(body).digest('hex')}`;

describe('a custom provider plugin loaded through PLUGINS', () => {
  it('is registered next to the built-ins', () => {
    expect(t.app.services.get('payments').providers()).toEqual(['manual', 'acmepay']);
    expect(t.app.services.get('webhooks').providers()).toContain('acmepay');
  });

  it('its vocabulary is normalised: AUTHORISED → processing, its webhook CAPTURED → completed', async () => {
    const p = await create(t, A.user, { provider: 'acmepay', amount: '25.00' });
    const res = await t.http('POST', `/payments/${p._id}/process`, { key: A.user, json: {} });
    expect(res.body).toMatchObject({ payment: { status: 'processing', provider_reference: `acme_${p._id}` }, provider_data: { redirect_url: `https://pay.acme.example/${p._id}` } });
    const body = JSON.stringify({ event_id: 'acme-ev-1', reference: `acme_${p._id}`, state: 'CAPTURED' });
    const hook = await t.http('POST', '/webhooks/acmepay', { key: null, body, headers: { 'Content-Type': 'application/json', 'X-Acme-Signature': sign(body) } });
    expect(hook.body).toEqual({ status: 'ok', event_id: 'acme-ev-1' });
    expect(await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) })).toMatchObject({ status: 'completed', provider_reference: `acme_${p._id}` });
    const refund = await t.http('POST', `/payments/${p._id}/refund`, { key: A.admin, json: { amount: '25' } });
    expect(refund.body).toMatchObject({ status: 'refunded', refunded_amount: '25.00' });
    expect(await col(t, 'payment_refunds').findOne({ payment_id: new Types.ObjectId(p._id) })).toMatchObject({ provider_refund_id: expect.stringMatching(/^acme_rf_/) });
  });

  it('DECLINED → failed', async () => {
    const p = await create(t, A.user, { provider: 'acmepay', amount: '13.00' });
    const res = await t.http('POST', `/payments/${p._id}/process`, { key: A.user, json: {} });
    expect(res.body.payment).toMatchObject({ status: 'failed', failure_reason: 'acme says no' });
  });
});

describe('bad registrations fail start-up with a readable message', () => {
  const boot = (provider: Record<string, unknown>) =>
    createApp({ corePlugins: corePlugins(),
      config: loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS }),
      plugins: [
        ...builtinPlugins().filter((p) => p.name !== 'openapi'),
        definePlugin({ name: 'bad-provider', dependsOn: ['payments'], setup: ({ services }) => (services.get('payments').registerProvider(provider as never), {}) }),
      ],
    });
  const ok = { name: 'x', status_map: {}, create_payment: async () => ({ status: 'a' }), refund_payment: async () => ({}) };
  it.each([
    [{ ...ok, name: 'manual' }, /"manual" is already registered/],
    [{ ...ok, name: 'Bad Name' }, /must match/],
    [{ ...ok, status_map: { ok: 'paid' } }, /status_map.ok = "paid" is not a Payment status/],
    [{ ...ok, refund_payment: undefined }, /refund_payment must be a function/],
    [{ ...ok, webhook: { secret: 's', verifier: { type: 'hmac-sha256' }, event_id_path: 'id' } }, /webhook needs handle_webhook/],
  ])('%#', async (provider, message) => {
    await expect(boot(provider)).rejects.toThrow(message);
  });
});
