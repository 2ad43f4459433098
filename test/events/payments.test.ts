/**
 * Payment transitions in the event log: every status a transition reaches is stored as
 * `payment.<status>` with the payment as the API shows it, written in the payment's outbox by the
 * transition's own compare-and-set (docs/events.md), readable by the tenant's administrators only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import type { TestApp } from '../helpers/app.ts';
import { col, create, paymentsApp, tenant } from '../payments/helpers.ts';
import { catalogue, eventsOfType, expectConforms, visibleTo } from './domain-helpers.ts';
import { unrelayedEntries } from '../helpers/outbox.ts';

const TYPES = ['payment.processing', 'payment.completed', 'payment.partially_refunded', 'payment.refunded', 'payment.cancelled', 'payment.failed'];
const PRIVATE = ['refundable_minor', 'refund_reserved_minor', 'open_refund_ids', 'applied_refund_ids', '_outbox'];

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;
let B: Awaited<ReturnType<typeof tenant>>;
let schemas: Record<string, Record<string, any>>;
beforeAll(async () => {
  t = await paymentsApp();
  A = await tenant(t);
  B = await tenant(t);
  schemas = await catalogue(t, A.user, TYPES, 'payments');
});
afterAll(() => t?.close());

const post = (path: string, json: Record<string, unknown> = {}, key = A.admin) => t.http('POST', path, { key, json });
const ofPayment = (id: string) => (e: Record<string, any>) => e.data._id === id;

describe('payment.<status> events', () => {
  it('the catalogue lists one type per status a transition reaches, each with the JSON Schema of the payment', async () => {
    const all = (await t.http('GET', '/events/types', { key: A.user })).body.items.map((x: { name: string }) => x.name);
    expect(all.filter((n: string) => n.startsWith('payment.')).sort()).toEqual([...TYPES].sort());
    const s = schemas['payment.completed']!.schema;
    expect(s.properties).toMatchObject({ _id: { type: 'string' }, status: { enum: expect.arrayContaining(['completed', 'refunded']) }, amount: { type: 'string' }, paid_at: expect.any(Object) });
    expect(Object.keys(s.properties)).not.toContain('refundable_minor');
  });

  it('process, complete, a partial and a full refund: one event each, with the payment after its own change', async () => {
    const p = await create(t, A.admin);
    expect((await post(`/payments/${p._id}/process`)).status).toBe(200);
    expect((await post(`/payments/${p._id}/complete`, { provider_reference: 'bank-1', provider_status: 'paid' })).status).toBe(200);
    expect((await post(`/payments/${p._id}/refund`, { amount: '3.00', reason: 'damaged' })).status).toBe(200);
    expect((await post(`/payments/${p._id}/refund`, { amount: '7.00' })).status).toBe(200);

    const seen: Record<string, any> = {};
    for (const type of ['payment.processing', 'payment.completed', 'payment.partially_refunded', 'payment.refunded']) {
      const [e] = await eventsOfType(t, A.admin, type, ofPayment(p._id));
      expect(e).toMatchObject({ type, tenant_id: A.tenantId, actor: A.adminId, id: expect.stringMatching(/^evt_[0-9a-f]{24}$/) });
      expect(e!.data.status).toBe(type.slice('payment.'.length));
      for (const f of PRIVATE) expect(e!.data).not.toHaveProperty(f);
      expectConforms(schemas[type]!, e!.data);
      seen[type] = e!.data;
    }
    expect(seen['payment.processing']).toMatchObject({ version: 2, amount: '10.00', currency: 'USD', refunded_amount: '0.00' });
    expect(seen['payment.completed']).toMatchObject({ version: 3, provider_reference: 'bank-1', paid_at: expect.any(String) });
    expect(seen['payment.partially_refunded']).toMatchObject({ version: 4, refunded_amount: '3.00', refund_reason: 'damaged' });
    expect(seen['payment.refunded']).toMatchObject({ version: 5, refunded_amount: '10.00' });
    // The payment as the API shows it: the same fields and values as GET /payments/{id}.
    const got = await t.http('GET', `/payments/${p._id}`, { key: A.admin });
    expect(seen['payment.refunded']).toEqual(got.body);

    // Another tenant's administrator sees none of them; the event itself is 404 there.
    for (const type of TYPES) expect(await visibleTo(t, B.admin, type, ofPayment(p._id))).toEqual([]);
    const [completed] = await eventsOfType(t, A.admin, 'payment.completed', ofPayment(p._id));
    expect((await t.http('GET', `/events/${completed!.id}`, { key: B.admin })).status).toBe(404);
    expect((await t.http('GET', `/events/${completed!.id}`, { key: A.admin })).body).toMatchObject({ type: 'payment.completed', tenant_id: A.tenantId });
    // A plain user of the tenant does not read the log.
    expect((await t.http('GET', '/events?type=payment.completed', { key: A.user })).status).toBe(403);
    // What stays in the outbox is in the log: the last transition's entry, which carries no object
    // of its own (docs/events.md); the others were frozen by the next transition, then removed.
    const left = ((await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) }))?._outbox ?? []) as Record<string, unknown>[];
    expect(left.every((e) => !e.data && !e.previous)).toBe(true);
    expect(await unrelayedEntries(t.app.db.conn.db!, 'payments')).toEqual([]);
  });

  it('cancel and a declined completion store payment.cancelled and payment.failed', async () => {
    const c = await create(t, A.admin);
    expect((await post(`/payments/${c._id}/cancel`, { reason: 'changed my mind' })).status).toBe(200);
    const f = await create(t, A.admin);
    expect((await post(`/payments/${f._id}/process`)).status).toBe(200);
    expect((await post(`/payments/${f._id}/complete`, { provider_reference: 'bank-x', provider_status: 'declined' })).status).toBe(200);

    const [cancelled] = await eventsOfType(t, A.admin, 'payment.cancelled', ofPayment(c._id));
    expect(cancelled).toMatchObject({ tenant_id: A.tenantId, data: { status: 'cancelled', failure_reason: 'changed my mind', cancelled_at: expect.any(String) } });
    const [failed] = await eventsOfType(t, A.admin, 'payment.failed', ofPayment(f._id));
    expect(failed).toMatchObject({ tenant_id: A.tenantId, data: { status: 'failed', failure_reason: 'declined (declined)' } });
    expectConforms(schemas['payment.failed']!, failed!.data);
    expect(await visibleTo(t, B.admin, 'payment.cancelled', ofPayment(c._id))).toEqual([]);
    expect(await visibleTo(t, B.admin, 'payment.failed', ofPayment(f._id))).toEqual([]);
  });

  it('a refused transition stores nothing; a repeated completion with the same reference stores no second event', async () => {
    const p = await create(t, A.admin);
    expect((await post(`/payments/${p._id}/cancel`)).status).toBe(200);
    expect((await post(`/payments/${p._id}/process`)).status).toBe(409);
    const q = await create(t, A.admin);
    await post(`/payments/${q._id}/process`);
    expect((await post(`/payments/${q._id}/complete`, { provider_reference: 'same', provider_status: 'paid' })).status).toBe(200);
    expect((await post(`/payments/${q._id}/complete`, { provider_reference: 'same', provider_status: 'paid' })).status).toBe(200);
    await t.app.services.get('events').flush();
    expect(await visibleTo(t, A.admin, 'payment.processing', ofPayment(p._id))).toEqual([]);
    expect(await visibleTo(t, A.admin, 'payment.completed', ofPayment(q._id))).toHaveLength(1);
  });

  it('the event is written with the transition: held back from the relay (a process that died), the sweep stores it once', async () => {
    const events = t.app.services.get('events');
    const p = await create(t, A.admin);
    await post(`/payments/${p._id}/process`);
    const committed = events.committed.bind(events);
    // This process "dies" after the write: the relay never hears of it.
    events.committed = async () => undefined;
    try {
      expect((await post(`/payments/${p._id}/complete`, { provider_reference: 'bank-s', provider_status: 'paid' })).status).toBe(200);
    } finally {
      events.committed = committed;
    }
    const raw = await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) });
    expect(raw!.status).toBe('completed');
    expect(raw!._outbox).toHaveLength(1);
    expect(raw!._outbox[0]).toMatchObject({ type: 'payment.completed', version: raw!.version, tenant_id: new Types.ObjectId(A.tenantId) });
    expect(await visibleTo(t, A.admin, 'payment.completed', ofPayment(p._id))).toEqual([]);
    // Left behind a minute ago: a catch-up sweep from before then (the passes every process runs
    // once a second find it 5 s after it was written).
    await col(t, 'payments').updateOne({ _id: raw!._id }, { $set: { '_outbox.0.created_at': new Date(Date.now() - 60_000) } });
    const from = new Date(Date.now() - 120_000);
    await events.sweep(from);
    await events.sweep(from);
    const stored = await eventsOfType(t, A.admin, 'payment.completed', ofPayment(p._id));
    expect(stored).toHaveLength(1);
    expect(stored[0]!.data).toMatchObject({ status: 'completed', provider_reference: 'bank-s', version: raw!.version });
    // Its entry carries the payment before the change (`previous`, for its audit entry): it leaves the document once its event is in the log.
    expect(stored[0]!.data).toMatchObject({ status: 'completed' });
    expect((await col(t, 'payments').findOne({ _id: raw!._id }))!._outbox).toEqual([]);
  });

  it('a payout claim of a payment whose event still waits freezes the event\'s object: the event keeps the payment of its own change', async () => {
    const events = t.app.services.get('events');
    const p = await create(t, A.admin);
    await post(`/payments/${p._id}/process`);
    const committed = events.committed.bind(events);
    events.committed = async () => undefined;
    try {
      expect((await post(`/payments/${p._id}/complete`, { provider_reference: 'bank-c', provider_status: 'paid' })).status).toBe(200);
    } finally {
      events.committed = committed;
    }
    const hour = 3_600_000;
    const settle = await t.http('POST', '/payouts/settle', { json: { tenant_id: A.tenantId, period_start: new Date(Date.now() - hour).toISOString(), period_end: new Date(Date.now() + hour).toISOString() } });
    expect(settle.status).toBe(200);
    const raw = await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) });
    expect(raw!.payout_batch_id).toBeTruthy();
    // The claim's write froze the waiting entry and added its own event; its relay stored both and cleared them.
    expect(raw!._outbox).toEqual([]);
    const [e] = await eventsOfType(t, A.admin, 'payment.completed', ofPayment(p._id));
    expect(e!.data).toMatchObject({ status: 'completed', provider_reference: 'bank-c', payout_batch_id: null, version: raw!.version - 1 });
    expectConforms(schemas['payment.completed']!, e!.data);
    const [claim] = await eventsOfType(t, A.admin, 'payments.updated', ofPayment(p._id));
    expect(claim!.data).toMatchObject({ status: 'completed', version: raw!.version });
    expect(String(claim!.data.payout_batch_id)).toBe(String(raw!.payout_batch_id));
  });
});
