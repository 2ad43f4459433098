import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { expectError, jobContext, type TestApp } from '../helpers/app.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import type { PaymentProvider } from '../../plugins/payments/index.ts';
import { col, completed, create, paymentsApp, providerPlugin, tenant } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;
const completedEvents: string[] = [];

/** A provider whose refunds can be told to fail or to wait on a gate. */
const flaky = {
  failNext: 0,
  gate: null as Promise<void> | null,
  refundCalls: [] as string[],
};
const flakyProvider: PaymentProvider = {
  name: 'flaky',
  status_map: { ok: 'processing', paid: 'completed' },
  async create_payment() {
    return { status: 'ok' };
  },
  async refund_payment(req) {
    flaky.refundCalls.push(req.idempotency_key);
    if (flaky.gate) await flaky.gate;
    if (flaky.failNext > 0) {
      flaky.failNext--;
      throw new Error('provider timeout');
    }
    return { provider_refund_id: `re_${req.idempotency_key}` };
  },
};
const counter = definePlugin({
  name: 'completion-counter',
  setup: () => ({ hooks: [onHook('PAYMENT_COMPLETED', (e) => void completedEvents.push(String(e.payment._id)))] }),
});

beforeAll(async () => {
  t = await paymentsApp({ plugins: [providerPlugin(flakyProvider), counter], config: { PAYMENTS_LEDGER_ENABLED: 'true' } });
  A = await tenant(t);
});
afterAll(() => t?.close());

const post = (path: string, json: unknown) => t.http('POST', path, { key: A.admin, json });

describe('races', () => {
  it('50 parallel partial refunds never pass the captured amount; the rejects are 400', async () => {
    const p = await completed(t, A.admin, { amount: '1.00' });
    const results = await Promise.all(Array.from({ length: 50 }, () => post(`/payments/${p._id}/refund`, { amount: '0.03' })));
    const ok = results.filter((r) => r.status === 200);
    const rejected = results.filter((r) => r.status !== 200);
    expect(ok).toHaveLength(33);
    for (const r of rejected) expectError(r, 400, 'REFUND_EXCEEDS_CAPTURED');
    const stored = await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) });
    expect(stored).toMatchObject({ refunded_minor: 99, refunded_amount: '0.99', status: 'partially_refunded', refund_reserved_minor: 0, refundable_minor: 1, open_refund_ids: [] });
    expect(stored!.applied_refund_ids).toHaveLength(33);
    expect(await col(t, 'payment_refunds').countDocuments({ payment_id: new Types.ObjectId(p._id), status: 'succeeded' })).toBe(33);
    expect(await col(t, 'payment_refunds').countDocuments({ payment_id: new Types.ObjectId(p._id), status: { $ne: 'succeeded' } })).toBe(0);
    // The ledger agrees: one reversing posting per applied refund.
    expect(await col(t, 'ledger_entries').countDocuments({ payment_id: new Types.ObjectId(p._id), entry_type: 'refund' })).toBe(66);
  });

  it('20 concurrent identical completions: one transition, one event, one audit entry, one ledger posting', async () => {
    const p = await create(t, A.user);
    await post(`/payments/${p._id}/process`, {});
    const results = await Promise.all(Array.from({ length: 20 }, () => post(`/payments/${p._id}/complete`, { provider_reference: 'tx-20', provider_status: 'paid' })));
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(new Set(results.map((r) => r.body.paid_at)).size).toBe(1);
    expect(results.every((r) => r.body.status === 'completed' && r.body.version === 3)).toBe(true);
    expect(completedEvents.filter((id) => id === p._id)).toHaveLength(1);
    await t.app.services.get('audit').flush();
    const audits = await col(t, 'audit_log').find({ resource: 'payments', item_id: new Types.ObjectId(p._id), 'changes.status.new': 'completed' }).toArray();
    expect(audits).toHaveLength(1);
    expect(await col(t, 'ledger_entries').countDocuments({ payment_id: new Types.ObjectId(p._id) })).toBe(2);
  });

  it('concurrent completions with different references: one wins, the others are 409', async () => {
    const p = await create(t, A.user);
    await post(`/payments/${p._id}/process`, {});
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => post(`/payments/${p._id}/complete`, { provider_reference: `tx-${i}`, provider_status: 'paid' })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expectError(r, 409, 'CONFLICT');
  });

  it('cancel racing process on a pending payment: exactly one of them wins', async () => {
    const p = await create(t, A.user);
    const [cancel, proc] = await Promise.all([post(`/payments/${p._id}/cancel`, {}), post(`/payments/${p._id}/process`, {})]);
    expect([cancel.status, proc.status].sort()).toEqual([200, 409]);
    const stored = await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) });
    expect(['cancelled', 'processing']).toContain(stored!.status);
  });
});

describe('provider failures', () => {
  it('a provider failing mid-refund answers 502 and releases the reservation', async () => {
    const p = await completed(t, A.admin, { amount: '5.00', provider: 'flaky' });
    flaky.failNext = 1;
    const err = expectError(await post(`/payments/${p._id}/refund`, { amount: '5.00' }), 502, 'PROVIDER_ERROR');
    expect(err.message).toMatch(/provider timeout/);
    const stored = await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) });
    expect(stored).toMatchObject({ status: 'completed', refunded_minor: 0, refund_reserved_minor: 0, refundable_minor: 500, open_refund_ids: [] });
    expect(await col(t, 'payment_refunds').findOne({ payment_id: new Types.ObjectId(p._id) })).toMatchObject({ status: 'failed', error: 'provider timeout' });
    // The full amount is refundable again.
    expect((await post(`/payments/${p._id}/refund`, { amount: '5.00' })).body).toMatchObject({ status: 'refunded', refunded_amount: '5.00' });
  });

  it('while a refund waits on the provider its amount is held; a failure gives it back', async () => {
    const p = await completed(t, A.admin, { amount: '5.00', provider: 'flaky' });
    let open!: () => void;
    flaky.gate = new Promise((r) => (open = r));
    flaky.failNext = 1;
    const first = post(`/payments/${p._id}/refund`, { amount: '4.00' });
    while ((await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) }))!.refund_reserved_minor !== 400) await new Promise((r) => setTimeout(r, 10));
    expectError(await post(`/payments/${p._id}/refund`, { amount: '1.01' }), 400, 'REFUND_EXCEEDS_CAPTURED');
    flaky.gate = null;
    open();
    expectError(await first, 502, 'PROVIDER_ERROR');
    expect((await post(`/payments/${p._id}/refund`, { amount: '5.00' })).status).toBe(200);
  });

  it('reconcile_payment_refunds finishes a refund a crash left reserved, with the same idempotency key', async () => {
    const p = await completed(t, A.admin, { amount: '8.00', provider: 'flaky' });
    // The state a crash right after the reservation leaves: the record and the hold, no provider answer.
    const rid = new Types.ObjectId();
    const old = new Date(Date.now() - 3600_000);
    await col(t, 'payment_refunds').insertOne({ _id: rid, payment_id: new Types.ObjectId(p._id), tenant_id: new Types.ObjectId(A.tenantId), amount: '3.00', amount_minor: 300, currency: 'USD', reason: 'crash', status: 'reserved', provider_refund_id: null, error: null, requested_by: null, created_at: old, updated_at: old });
    await col(t, 'payments').updateOne({ _id: new Types.ObjectId(p._id) }, { $inc: { refundable_minor: -300, refund_reserved_minor: 300 }, $push: { open_refund_ids: String(rid) } } as never);
    // And a record whose reservation never happened.
    const orphan = new Types.ObjectId();
    await col(t, 'payment_refunds').insertOne({ _id: orphan, payment_id: new Types.ObjectId(p._id), tenant_id: null, amount: '1.00', amount_minor: 100, currency: 'USD', reason: null, status: 'reserved', provider_refund_id: null, error: null, requested_by: null, created_at: old, updated_at: old });
    const job = t.app.kernel.jobs().find((j) => j.name === 'reconcile_payment_refunds')!;
    const res = await job.run(jobContext(), { older_than_seconds: 60 });
    expect(res).toMatchObject({ examined: 2, succeeded: 1, abandoned: 1 });
    expect(flaky.refundCalls).toContain(String(rid));
    expect(await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) })).toMatchObject({ refunded_amount: '3.00', status: 'partially_refunded', refund_reserved_minor: 0, refundable_minor: 500 });
    expect(await col(t, 'payment_refunds').findOne({ _id: rid })).toMatchObject({ status: 'succeeded', provider_refund_id: `re_${String(rid)}` });
    expect(await col(t, 'payment_refunds').findOne({ _id: orphan })).toMatchObject({ status: 'abandoned' });
    // The refund the reconciler applied is audited like any other, as the system (user_id null).
    await t.app.services.get('audit').flush();
    const entries = await col(t, 'audit_log').find({ resource: 'payments', item_id: new Types.ObjectId(p._id) }).sort({ created_at: 1, _id: 1 }).toArray();
    expect(entries.at(-1)).toMatchObject({ operation: 'update', user_id: null, changes: { refunded_amount: { old: '0.00', new: '3.00' }, status: { old: 'completed', new: 'partially_refunded' } } });
    // Run again: nothing left to do.
    expect(await job.run(jobContext(), { older_than_seconds: 60 })).toMatchObject({ examined: 0 });
  });

  it('reconcile_payment_refunds releases the reservation when the provider fails the retried refund again', async () => {
    const p = await completed(t, A.admin, { amount: '6.00', provider: 'flaky' });
    const pid = new Types.ObjectId(p._id);
    // A crash right after the reservation (as above), then the provider still failing on the retry.
    const rid = new Types.ObjectId();
    const old = new Date(Date.now() - 3600_000);
    await col(t, 'payment_refunds').insertOne({ _id: rid, payment_id: pid, tenant_id: new Types.ObjectId(A.tenantId), amount: '4.00', amount_minor: 400, currency: 'USD', reason: 'crash', status: 'reserved', provider_refund_id: null, error: null, requested_by: null, created_at: old, updated_at: old });
    await col(t, 'payments').updateOne({ _id: pid }, { $inc: { refundable_minor: -400, refund_reserved_minor: 400 }, $push: { open_refund_ids: String(rid) } } as never);
    flaky.failNext = 1;
    const job = t.app.kernel.jobs().find((j) => j.name === 'reconcile_payment_refunds')!;
    expect(await job.run(jobContext(), { older_than_seconds: 60 })).toEqual({ examined: 1, succeeded: 0, released: 1, abandoned: 0 });
    expect(flaky.failNext).toBe(0);
    expect(flaky.refundCalls.filter((k) => k === String(rid))).toHaveLength(1);
    // The hold is given back, nothing was refunded, and the record is failed with the provider's error.
    expect(await col(t, 'payments').findOne({ _id: pid })).toMatchObject({ status: 'completed', refunded_minor: 0, refunded_amount: '0.00', refund_reserved_minor: 0, refundable_minor: 600, open_refund_ids: [], applied_refund_ids: [] });
    expect(await col(t, 'payment_refunds').findOne({ _id: rid })).toMatchObject({ status: 'failed', error: 'provider timeout', provider_refund_id: null });
    expect(await col(t, 'ledger_entries').countDocuments({ payment_id: pid, entry_type: 'refund' })).toBe(0);
    // Nothing left for the next run, and the full amount can be refunded.
    expect(await job.run(jobContext(), { older_than_seconds: 60 })).toMatchObject({ examined: 0 });
    expect((await post(`/payments/${p._id}/refund`, { amount: '6.00' })).body).toMatchObject({ status: 'refunded', refunded_amount: '6.00' });
    expect(await col(t, 'payments').findOne({ _id: pid })).toMatchObject({ refunded_minor: 600, refund_reserved_minor: 0, refundable_minor: 0 });
  });
});
