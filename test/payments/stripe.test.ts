import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import Stripe from 'stripe';
import { expectError, type TestApp } from '../helpers/app.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { isSystemActor } from '../../core/context.ts';
import { col, create, paymentsApp, tenant } from './helpers.ts';
import { startFakeStripe, type FakeStripe } from './stripe-server.ts';

const WEBHOOK_SECRET = 'whsec_test_0123456789abcdef';
let t: TestApp;
let fake: FakeStripe;
let A: Awaited<ReturnType<typeof tenant>>;
const events: { name: string; payment_id: string; system: boolean; tenant_id: string | null }[] = [];
const listener = definePlugin({
  name: 'stripe-event-listener',
  setup: () => ({
    hooks: [
      onHook('PAYMENT_COMPLETED', (e) => void events.push({ name: 'completed', payment_id: String(e.payment._id), system: isSystemActor(e.actor), tenant_id: e.tenant_id })),
      onHook('PAYMENT_REFUNDED', (e) => void events.push({ name: 'refunded', payment_id: String(e.payment._id), system: isSystemActor(e.actor), tenant_id: e.tenant_id })),
    ],
  }),
});

beforeAll(async () => {
  fake = await startFakeStripe();
  t = await paymentsApp({
    plugins: [listener],
    config: { WEBHOOKS_ENABLED: 'true', STRIPE_SECRET_KEY: 'sk_test_fake', STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_URL: fake.url },
  });
  A = await tenant(t);
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

let seq = 0;
/** Delivers a Stripe event signed as Stripe does (the SDK's test header helper). */
async function deliver(type: string, object: Record<string, unknown>, id = `evt_${++seq}_${Date.now()}`, secret = WEBHOOK_SECRET) {
  const payload = JSON.stringify({ id, object: 'event', type, data: { object } });
  const header = Stripe.webhooks.generateTestHeaderString({ payload, secret });
  return { id, res: await t.http('POST', '/webhooks/stripe', { key: null, body: payload, headers: { 'Content-Type': 'application/json', 'Stripe-Signature': header } }) };
}
const stored = (id: string) => col(t, 'payments').findOne({ _id: new Types.ObjectId(id) });

describe('registration', () => {
  it('stripe is registered when its key and webhook secret are set, with the webhook on the webhooks plugin', async () => {
    expect(t.app.services.get('payments').providers()).toEqual(['manual', 'stripe']);
    expect(t.app.services.get('webhooks').providers()).toContain('stripe');
  });

  it.each([
    ['only the secret key', { STRIPE_SECRET_KEY: 'sk_test_only' }],
    ['only the webhook secret', { WEBHOOKS_ENABLED: 'true', STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET }],
  ])('without both it is not (%s): a payment naming it is 422', async (_label, config) => {
    const bare = await paymentsApp({ config });
    try {
      expect(bare.app.services.get('payments').providers()).toEqual(['manual']);
      const B = await tenant(bare);
      expectError(await bare.http('POST', '/payments', { key: B.user, json: { resource_type: 'o', resource_id: '1', user_id: 'u', user_name: 'n', amount: '1.00', currency: 'USD', provider: 'stripe' } }), 422, 'VALIDATION_ERROR');
    } finally {
      await bare.close();
    }
  });
});

describe('PaymentIntents and Refunds through the SDK', () => {
  it('process creates a PaymentIntent in minor units with an idempotency key: pending → processing', async () => {
    const p = await create(t, A.user, { provider: 'stripe', amount: '12.34', currency: 'EUR' });
    const res = await t.http('POST', `/payments/${p._id}/process`, { key: A.user, json: {} });
    expect(res.status).toBe(200);
    const call = fake.requests.find((r) => r.path === '/v1/payment_intents' && r.form['metadata[payment_id]'] === p._id)!;
    expect(call.form).toMatchObject({ amount: '1234', currency: 'eur', 'metadata[tenant_id]': A.tenantId });
    expect(call.idempotencyKey).toBe(`payment-${p._id}`);
    expect(call.authorization).toBe('Bearer sk_test_fake');
    expect(res.body.payment).toMatchObject({ status: 'processing', provider_reference: expect.stringMatching(/^pi_test_/) });
    expect(res.body.provider_data.client_secret).toMatch(/_secret_/);
  });

  it('a zero-decimal currency goes out as whole units', async () => {
    const p = await create(t, A.user, { provider: 'stripe', amount: '500', currency: 'JPY' });
    await t.http('POST', `/payments/${p._id}/process`, { key: A.user, json: {} });
    expect(fake.requests.find((r) => r.form['metadata[payment_id]'] === p._id)!.form).toMatchObject({ amount: '500', currency: 'jpy' });
  });

  it('a refund calls Refunds with the PaymentIntent, the minor amount and the refund id as idempotency key', async () => {
    const p = await create(t, A.user, { provider: 'stripe', amount: '20.00' });
    const pi = (await t.http('POST', `/payments/${p._id}/process`, { key: A.user, json: {} })).body.payment.provider_reference;
    await deliver('payment_intent.succeeded', { id: pi, object: 'payment_intent', status: 'succeeded', metadata: { payment_id: p._id } });
    const res = await t.http('POST', `/payments/${p._id}/refund`, { key: A.admin, json: { amount: '7.50', reason: 'size' } });
    expect(res.body).toMatchObject({ status: 'partially_refunded', refunded_amount: '7.50' });
    const refund = await col(t, 'payment_refunds').findOne({ payment_id: new Types.ObjectId(p._id) });
    const call = fake.requests.filter((r) => r.path === '/v1/refunds').at(-1)!;
    expect(call.form).toMatchObject({ payment_intent: pi, amount: '750', 'metadata[reason]': 'size' });
    expect(call.idempotencyKey).toBe(`refund-${String(refund!._id)}`);
    expect(refund).toMatchObject({ status: 'succeeded', provider_refund_id: expect.stringMatching(/^re_test_/) });

    // Stripe refusing a refund: 502, and the amount is refundable again.
    fake.failRefunds = 1;
    expectError(await t.http('POST', `/payments/${p._id}/refund`, { key: A.admin, json: { amount: '12.50' } }), 502, 'PROVIDER_ERROR');
    expect(await stored(p._id)).toMatchObject({ refundable_minor: 1250, refund_reserved_minor: 0, refunded_minor: 750 });
  });
});

describe('the asynchronous payment flow, end to end', () => {
  it('create pending, call Stripe, store its id with PUT, a signed webhook completes; a redelivery is a no-op', async () => {
    const p = await create(t, A.user, { provider: 'stripe', amount: '49.90' });
    // The client calls the provider itself (as a shop backend would with the SDK)...
    const stripe = new Stripe('sk_test_fake', { host: new URL(fake.url).hostname, port: new URL(fake.url).port, protocol: 'http' });
    const pi = await stripe.paymentIntents.create({ amount: 4990, currency: 'usd' });
    // ...and stores the provider's payment id with PUT.
    const put = await t.http('PUT', `/payments/${p._id}`, { key: A.user, json: { provider_reference: pi.id }, headers: { 'If-Match': `"${p.version}"` } });
    expect(put.body).toMatchObject({ status: 'pending', provider_reference: pi.id });

    // The customer pays at Stripe; Stripe's webhook (no metadata: matched by the PaymentIntent id).
    const charge = { id: pi.id, object: 'payment_intent', status: 'succeeded', metadata: {} };
    const first = await deliver('payment_intent.succeeded', charge, 'evt_flow_1');
    expect(first.res.status).toBe(200);
    expect(first.res.body).toEqual({ status: 'ok', event_id: 'evt_flow_1' });
    const done = await stored(p._id);
    expect(done).toMatchObject({ status: 'completed', provider_reference: pi.id });
    expect(done!.paid_at).toBeInstanceOf(Date);

    // Redelivery of the same event: stored once, nothing changes.
    const again = await deliver('payment_intent.succeeded', charge, 'evt_flow_1');
    expect(again.res.body).toEqual({ status: 'already_processed' });
    // A second event saying the same: the completion is idempotent.
    const other = await deliver('payment_intent.succeeded', charge, 'evt_flow_2');
    expect(other.res.body.status).toBe('ok');
    expect(await stored(p._id)).toEqual(done);

    // Webhook writes are audited as the system (user_id null): pending → processing → completed.
    await t.app.services.get('audit').flush();
    const entries = await col(t, 'audit_log').find({ resource: 'payments', item_id: new Types.ObjectId(p._id), operation: 'update' }).sort({ created_at: 1, _id: 1 }).toArray();
    expect(entries.map((e) => [e.user_id, e.changes.status?.new ?? null])).toEqual([[new Types.ObjectId(A.userId), null], [null, 'processing'], [null, 'completed']]);
    expect(entries.every((e) => String(e.tenant_id) === A.tenantId)).toBe(true);
    // One domain event for the webhook's completion, by the system actor of the payment's tenant.
    expect(events.filter((e) => e.payment_id === p._id)).toEqual([{ name: 'completed', payment_id: p._id, system: true, tenant_id: A.tenantId }]);

    // A late failure event for a captured payment changes nothing.
    await deliver('payment_intent.payment_failed', { id: pi.id, status: 'requires_payment_method', metadata: {} });
    expect(await stored(p._id)).toEqual(done);
  });

  it('a bad signature is 401 and changes nothing; an unknown PaymentIntent fails the event (dead-letter, redelivered later)', async () => {
    const p = await create(t, A.user, { provider: 'stripe' });
    const bad = await deliver('payment_intent.succeeded', { id: 'pi_x', status: 'succeeded', metadata: { payment_id: p._id } }, 'evt_bad', 'whsec_wrong');
    expectError(bad.res, 401, 'AUTH_REQUIRED');
    expect((await stored(p._id))!.status).toBe('pending');
    const unknown = await deliver('payment_intent.succeeded', { id: 'pi_nobody', status: 'succeeded', metadata: {} }, 'evt_unknown');
    expect(unknown.res.status).toBe(500);
    expect(await col(t, 'webhook_events').findOne({ event_id: 'evt_unknown' })).toMatchObject({ status: 'failed', error: expect.stringMatching(/no stripe payment matches pi_nobody/) });
  });

  it('payment_failed fails the payment', async () => {
    const p = await create(t, A.user, { provider: 'stripe' });
    const pi = (await t.http('POST', `/payments/${p._id}/process`, { key: A.user, json: {} })).body.payment.provider_reference;
    await deliver('payment_intent.payment_failed', { id: pi, status: 'requires_payment_method', metadata: { payment_id: p._id }, last_payment_error: { message: 'Your card was declined.' } });
    expect(await stored(p._id)).toMatchObject({ status: 'failed', failure_reason: 'Your card was declined.' });
    // Written by the webhook handler as the system: audited with user_id null.
    await t.app.services.get('audit').flush();
    const entries = await col(t, 'audit_log').find({ resource: 'payments', item_id: new Types.ObjectId(p._id) }).sort({ created_at: 1, _id: 1 }).toArray();
    expect(entries.at(-1)).toMatchObject({ operation: 'update', user_id: null, changes: { status: { old: 'processing', new: 'failed' } } });
  });

  it('a webhook never touches a payment of another provider', async () => {
    const p = await create(t, A.user, { provider: 'manual' });
    const res = await deliver('payment_intent.succeeded', { id: 'pi_m', status: 'succeeded', metadata: { payment_id: p._id } });
    expect(res.res.status).toBe(500);
    expect((await stored(p._id))!.status).toBe('pending');
  });

  it('charge.refunded applies a refund made in the Stripe dashboard once; our own refunds are not counted twice', async () => {
    const p = await create(t, A.user, { provider: 'stripe', amount: '30.00' });
    const pi = (await t.http('POST', `/payments/${p._id}/process`, { key: A.user, json: {} })).body.payment.provider_reference;
    await deliver('payment_intent.succeeded', { id: pi, status: 'succeeded', metadata: { payment_id: p._id } });
    await t.http('POST', `/payments/${p._id}/refund`, { key: A.admin, json: { amount: '10.00' } });
    // Stripe reports our own refund: cumulative 10.00, already known.
    await deliver('charge.refunded', { id: 'ch_1', object: 'charge', payment_intent: pi, amount_refunded: 1000, metadata: {} });
    expect(await stored(p._id)).toMatchObject({ refunded_amount: '10.00' });
    // Someone refunds 5.00 more in the dashboard: cumulative 15.00.
    const ev = await deliver('charge.refunded', { id: 'ch_1', object: 'charge', payment_intent: pi, amount_refunded: 1500, metadata: {} });
    expect(ev.res.body.status).toBe('ok');
    expect(await stored(p._id)).toMatchObject({ refunded_amount: '15.00', status: 'partially_refunded', refundable_minor: 1500 });
    await deliver('charge.refunded', { id: 'ch_1', object: 'charge', payment_intent: pi, amount_refunded: 1500, metadata: {} });
    expect((await stored(p._id))!.refunded_minor).toBe(1500);
    // The dashboard refund is audited as a system change (user_id null), after our own refund by the admin.
    await t.app.services.get('audit').flush();
    const entries = await col(t, 'audit_log').find({ resource: 'payments', item_id: new Types.ObjectId(p._id) }).sort({ created_at: 1, _id: 1 }).toArray();
    expect(events.filter((e) => e.payment_id === p._id && e.name === 'refunded').map((e) => e.system)).toEqual([false, true]);
    const refunds = entries.filter((e) => e.changes?.refunded_amount);
    expect(refunds.map((e) => [e.changes.refunded_amount.new, e.user_id === null ? null : String(e.user_id)])).toEqual([['10.00', A.adminId], ['15.00', null]]);
  });
});
