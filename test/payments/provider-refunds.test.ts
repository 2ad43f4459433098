/**
 * Refunds reported by a provider's webhook (Stripe's `charge.refunded`, a cumulative total): the
 * total is checked before anything is written, and concurrent deliveries each apply their part once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import Stripe from 'stripe';
import type { TestApp } from '../helpers/app.ts';
import { col, create, paymentsApp, tenant } from './helpers.ts';

const WEBHOOK_SECRET = 'whsec_test_refunds_0123456789abcdef';
let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;

beforeAll(async () => {
  t = await paymentsApp({
    config: { WEBHOOKS_ENABLED: 'true', PAYMENTS_LEDGER_ENABLED: 'true', STRIPE_SECRET_KEY: 'sk_test_fake', STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_URL: 'http://127.0.0.1:9' },
  });
  A = await tenant(t);
});
afterAll(() => t?.close());

let seq = 0;
/** Delivers a Stripe event signed as Stripe does. */
async function deliver(type: string, object: Record<string, unknown>, id = `evt_r${++seq}_${Date.now()}`) {
  const payload = JSON.stringify({ id, object: 'event', type, data: { object } });
  const header = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
  return { id, res: await t.http('POST', '/webhooks/stripe', { key: null, body: payload, headers: { 'Content-Type': 'application/json', 'Stripe-Signature': header } }) };
}

/** A Stripe payment completed by its webhook (no API call): answers the payment id and its PaymentIntent id. */
async function captured(amount: string) {
  const p = await create(t, A.user, { provider: 'stripe', amount });
  const pi = `pi_${new Types.ObjectId().toHexString()}`;
  const done = await deliver('payment_intent.succeeded', { id: pi, object: 'payment_intent', status: 'succeeded', metadata: { payment_id: p._id } });
  expect(done.res.status).toBe(200);
  return { id: p._id as string, pi };
}

const refunded = (pi: string, total: unknown, id?: string) => deliver('charge.refunded', { id: 'ch_1', object: 'charge', payment_intent: pi, amount_refunded: total, metadata: {} }, id);
const stored = (id: string) => col(t, 'payments').findOne({ _id: new Types.ObjectId(id) });
const ledgerOf = (id: string) => col(t, 'ledger_entries').find({ payment_id: new Types.ObjectId(id) }).sort({ _id: 1 }).toArray();

describe('provider refund totals are checked, never adjusted', () => {
  it.each([
    ['a fraction of a minor unit', 10.5, /whole number of minor units/],
    ['a negative total', -100, /whole number of minor units/],
    ['a total above the captured amount', 999999, /exceeds the captured amount/],
  ])('%s fails the event with a clear error and changes nothing', async (_label, total, error) => {
    const p = await captured('2.00');
    const before = await stored(p.id);
    const ledgerBefore = await ledgerOf(p.id);
    const ev = await refunded(p.pi, total);
    expect(ev.res.status).toBe(500);
    expect(await col(t, 'webhook_events').findOne({ event_id: ev.id })).toMatchObject({ status: 'failed', error: expect.stringMatching(error) });
    expect(await stored(p.id)).toEqual(before);
    expect(await ledgerOf(p.id)).toEqual(ledgerBefore);
    expect(await col(t, 'payment_refunds').countDocuments({ payment_id: new Types.ObjectId(p.id) })).toBe(0);
  });

  it('the whole captured amount is a full refund', async () => {
    const p = await captured('2.00');
    expect((await refunded(p.pi, 200)).res.status).toBe(200);
    expect(await stored(p.id)).toMatchObject({ status: 'refunded', refunded_amount: '2.00', refunded_minor: 200, refundable_minor: 0 });
  });
});

describe('concurrent cumulative refund webhooks', () => {
  it('20 at once, with duplicates, all answer 200 and the refunded amount ends at the largest total', async () => {
    const p = await captured('20.00');
    // 16 increasing totals, two repeated under new event ids and two redelivered under the same id.
    const deliveries: [number, string | undefined][] = Array.from({ length: 16 }, (_, i) => [(i + 1) * 100, `evt_cum_${p.id}_${i}`]);
    deliveries.push([500, undefined], [1200, undefined], [300, `evt_cum_${p.id}_2`], [1600, `evt_cum_${p.id}_15`]);
    const results = await Promise.all(deliveries.map(([total, id]) => refunded(p.pi, total, id)));
    expect(results.map((r) => r.res.status)).toEqual(Array(20).fill(200));
    const doc = await stored(p.id);
    expect(doc).toMatchObject({ status: 'partially_refunded', refunded_minor: 1600, refunded_amount: '16.00', refund_reserved_minor: 0, refundable_minor: 400, open_refund_ids: [] });
    const refunds = await col(t, 'payment_refunds').find({ payment_id: new Types.ObjectId(p.id) }).toArray();
    expect(refunds.every((r) => r.status === 'succeeded')).toBe(true);
    expect(refunds.reduce((n, r) => n + r.amount_minor, 0)).toBe(1600);
    const ledger = await ledgerOf(p.id);
    const refundDebits = ledger.filter((e) => e.entry_type === 'refund' && e.direction === 'debit');
    expect(refundDebits.reduce((n, e) => n + e.amount_minor, 0)).toBe(1600);
    expect(ledger.filter((e) => e.entry_type === 'refund' && e.direction === 'credit').reduce((n, e) => n + e.amount_minor, 0)).toBe(1600);
    // A later, smaller total changes nothing.
    expect((await refunded(p.pi, 900)).res.status).toBe(200);
    expect((await stored(p.id))!.refunded_minor).toBe(1600);
  });
});
