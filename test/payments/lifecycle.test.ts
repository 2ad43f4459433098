import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { expectError, type TestApp } from '../helpers/app.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import type { HookEvents } from '../../core/hooks.ts';
import type { PaymentProvider } from '../../plugins/payments/index.ts';
import { body, col, completed, create, paymentsApp, providerPlugin, tenant } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;
const calls: string[] = [];
const events: { name: string; payload: any }[] = [];

/** Declines everything at create_payment; counts calls so "nothing charged on create" is visible. */
const declining: PaymentProvider = {
  name: 'decliner',
  status_map: { OK: 'processing', PAID: 'completed', DECLINED: 'failed' },
  async create_payment(intent) {
    calls.push(`create:${intent.payment_id}`);
    return { status: 'DECLINED', failure_reason: 'insufficient funds' };
  },
  async refund_payment() {
    return {};
  },
};
/** Captures inline: create_payment answers captured. */
const inline: PaymentProvider = {
  name: 'inline',
  status_map: { CAPTURED: 'completed' },
  async create_payment(intent) {
    calls.push(`create:${intent.payment_id}`);
    return { status: 'CAPTURED', provider_reference: `inl_${intent.payment_id}`, receipt_url: 'https://receipts.example/1' };
  },
  async refund_payment() {
    return {};
  },
};
/** Answers a status its map does not know. */
const confused: PaymentProvider = {
  name: 'confused',
  status_map: { OK: 'processing' },
  async create_payment() {
    return { status: 'WHO_KNOWS' };
  },
  async refund_payment() {
    return {};
  },
};
const listener = definePlugin({
  name: 'payment-listener',
  setup: () => ({
    hooks: [
      onHook('PAYMENT_COMPLETED', (p: HookEvents['PAYMENT_COMPLETED']) => void events.push({ name: 'completed', payload: p })),
      onHook('PAYMENT_REFUNDED', (p: HookEvents['PAYMENT_REFUNDED']) => void events.push({ name: 'refunded', payload: p })),
    ],
  }),
});

beforeAll(async () => {
  t = await paymentsApp({ plugins: [providerPlugin(declining, inline, confused), listener] });
  A = await tenant(t);
});
afterAll(() => t?.close());

const post = (path: string, json: unknown, key = A.admin) => t.http('POST', path, { key, json });

describe('money', () => {
  it.each([
    ['10', 'USD', '10.00', 1000],
    ['0.1', 'USD', '0.10', 10],
    [12.5, 'USD', '12.50', 1250],
    [0.1, 'USD', '0.10', 10],
    ['100', 'JPY', '100', 100],
    [5, 'JPY', '5', 5],
    ['1.001', 'KWD', '1.001', 1001],
    ['1.5', 'KWD', '1.500', 1500],
    ['123456789012.34', 'EUR', '123456789012.34', 12345678901234],
  ])('amount %j %s is stored exactly as %s (%d minor units)', async (amount, currency, shown, minor) => {
    const p = await create(t, A.user, { amount, currency });
    expect(p).toMatchObject({ amount: shown, amount_minor: minor, currency, refunded_amount: currency === 'JPY' ? '0' : currency === 'KWD' ? '0.000' : '0.00' });
  });

  it.each([
    ['100.5', 'JPY', 'amount', /JPY allows at most 0 decimal places/],
    ['1.001', 'USD', 'amount', /USD allows at most 2/],
    [0.001, 'USD', 'amount', /USD allows at most 2/],
    ['1.0001', 'KWD', 'amount', /KWD allows at most 3/],
    ['0', 'USD', 'amount', /greater than zero/],
    [0, 'USD', 'amount', /greater than zero/],
    ['-1.00', 'USD', 'amount', /greater than zero/],
    [-5, 'USD', 'amount', /greater than zero/],
    ['1e3', 'USD', 'amount', /decimal string/],
    ['ten', 'USD', 'amount', /decimal string/],
    ['+5', 'USD', 'amount', /decimal string/],
    [' 10 ', 'USD', 'amount', /decimal string/],
    ['1.', 'USD', 'amount', /decimal string/],
    ['.5', 'USD', 'amount', /decimal string/],
    ['010', 'USD', 'amount', /decimal string/],
    ['1,50', 'USD', 'amount', /decimal string/],
    [true, 'USD', 'amount', /./],
    ['99999999999999999', 'USD', 'amount', /too large/],
    ['1.00', 'usd', 'currency', /ISO 4217/],
    ['1.00', 'ABC', 'currency', /ISO 4217/],
    ['1.00', 'XXX', 'currency', /ISO 4217/],
    ['1.00', 'XAU', 'currency', /ISO 4217/],
  ])('amount %j %s is a 422 on %s and writes nothing', async (amount, currency, field, msg) => {
    const before = await col(t, 'payments').countDocuments();
    const err = expectError(await post('/payments', body({ amount, currency }), A.user), 422, 'VALIDATION_ERROR');
    const issues = err.details.errors as { loc: string[]; msg: string }[];
    expect(issues.some((i) => i.loc.join('.') === `body.${field}` && msg.test(i.msg))).toBe(true);
    expect(await col(t, 'payments').countDocuments()).toBe(before);
  });

  it('an unknown provider, a missing field or a system field is 422', async () => {
    expectError(await post('/payments', body({ provider: 'nope' })), 422, 'VALIDATION_ERROR');
    const { user_id: _u, ...noUser } = body();
    expectError(await post('/payments', noUser), 422, 'VALIDATION_ERROR');
    for (const extra of [{ status: 'completed' }, { refunded_amount: '1.00' }, { paid_at: new Date().toISOString() }, { tenant_id: A.tenantId }]) {
      const err = expectError(await post('/payments', { ...body(), ...extra }), 422, 'VALIDATION_ERROR');
      expect((err.details.errors as { loc: string[] }[])[0]!.loc).toEqual(['body', Object.keys(extra)[0]]);
    }
  });

  it('ten refunds of 0.10 on 1.00 leave exactly 0.00', async () => {
    const p = await completed(t, A.admin, { amount: '1.00' });
    let last: any;
    for (let i = 0; i < 10; i++) {
      const r = await post(`/payments/${p._id}/refund`, { amount: '0.10' });
      expect(r.status).toBe(200);
      last = r.body;
    }
    expect(last).toMatchObject({ refunded_amount: '1.00', refunded_minor: 100, status: 'refunded' });
    expectError(await post(`/payments/${p._id}/refund`, { amount: '0.01' }), 409, 'CONFLICT');
  });
});

describe('lifecycle', () => {
  it('POST /payments creates a pending payment and charges nothing', async () => {
    const res = await t.http('POST', '/payments', { key: A.user, json: body({ provider: 'decliner', metadata: { cart: 7 } }) });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/payments/${res.body._id}`);
    expect(res.body).toMatchObject({
      status: 'pending', amount: '10.00', currency: 'USD', provider: 'decliner', user_name: 'Ada Lovelace', tenant_id: A.tenantId,
      provider_reference: null, paid_at: null, refunded_amount: '0.00', metadata: { cart: 7 },
    });
    for (const hidden of ['refundable_minor', 'refund_reserved_minor', 'open_refund_ids', 'applied_refund_ids']) expect(res.body).not.toHaveProperty(hidden);
    expect(calls.filter((c) => c.endsWith(res.body._id))).toEqual([]);
  });

  it('pending → processing → completed (manual): paid_at and provider_reference set', async () => {
    const p = await create(t, A.user);
    const pr = await post(`/payments/${p._id}/process`, {}, A.user);
    expect(pr.status).toBe(200);
    expect(pr.body.payment).toMatchObject({ status: 'processing', paid_at: null });
    expect(pr.body.provider_data).toEqual({});
    const c = await post(`/payments/${p._id}/complete`, { provider_reference: 'bank-tx-1', provider_status: 'received', receipt_url: 'https://bank.example/r/1' });
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ status: 'completed', provider_reference: 'bank-tx-1', receipt_url: 'https://bank.example/r/1', version: 3 });
    expect(new Date(c.body.paid_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
  });

  it('completing again with the same provider_reference is a no-op; another reference is 409', async () => {
    const p = await completed(t, A.admin, {}, 'ref-same');
    const again = await post(`/payments/${p._id}/complete`, { provider_reference: 'ref-same', provider_status: 'paid' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'completed', version: p.version, paid_at: p.paid_at });
    const other = expectError(await post(`/payments/${p._id}/complete`, { provider_reference: 'ref-other', provider_status: 'paid' }), 409, 'CONFLICT');
    expect(other.details).toMatchObject({ status: 'completed', provider_reference: 'ref-same' });
  });

  it('a provider that captures inline takes pending to completed in one call', async () => {
    const p = await create(t, A.user, { provider: 'inline' });
    const res = await post(`/payments/${p._id}/process`, {}, A.user);
    expect(res.body.payment).toMatchObject({ status: 'completed', provider_reference: `inl_${p._id}`, receipt_url: 'https://receipts.example/1' });
  });

  it('a provider that declines moves pending to failed (terminal)', async () => {
    const p = await create(t, A.user, { provider: 'decliner' });
    const res = await post(`/payments/${p._id}/process`, {}, A.user);
    expect(res.body.payment).toMatchObject({ status: 'failed', failure_reason: 'insufficient funds' });
    expect(calls).toContain(`create:${p._id}`);
    for (const op of ['process', 'cancel']) expectError(await post(`/payments/${p._id}/${op}`, {}), 409, 'CONFLICT');
  });

  it('a status the provider map does not know is 502 PROVIDER_ERROR and leaves the payment pending', async () => {
    const p = await create(t, A.user, { provider: 'confused' });
    const err = expectError(await post(`/payments/${p._id}/process`, {}, A.user), 502, 'PROVIDER_ERROR');
    expect(err.details).toMatchObject({ provider: 'confused' });
    expect((await t.http('GET', `/payments/${p._id}`, { key: A.user })).body.status).toBe('pending');
  });

  it('complete with a declining provider_status fails a processing payment; an unmapped one is 422', async () => {
    const p = await create(t, A.user);
    await post(`/payments/${p._id}/process`, {});
    const bad = expectError(await post(`/payments/${p._id}/complete`, { provider_reference: 'r', provider_status: 'maybe' }), 422, 'VALIDATION_ERROR');
    expect((bad.details.errors as { loc: string[] }[])[0]!.loc).toEqual(['body', 'provider_status']);
    const res = await post(`/payments/${p._id}/complete`, { provider_reference: 'r', provider_status: 'bounced' });
    expect(res.body).toMatchObject({ status: 'failed' });
  });

  it('pending → cancelled; cancelled is terminal', async () => {
    const p = await create(t, A.user);
    const res = await post(`/payments/${p._id}/cancel`, { reason: 'customer changed mind' }, A.user);
    expect(res.body).toMatchObject({ status: 'cancelled', failure_reason: 'customer changed mind' });
    expect(res.body.cancelled_at).toBeTruthy();
    for (const [op, json] of [['process', {}], ['cancel', {}], ['refund', { amount: '1.00' }], ['complete', { provider_reference: 'x', provider_status: 'paid' }]] as const) {
      const err = expectError(await post(`/payments/${p._id}/${op}`, json), 409, 'CONFLICT');
      expect(err.details).toMatchObject({ status: 'cancelled' });
    }
  });

  it('every refused transition is 409 with the current status, and changes nothing', async () => {
    const pending = await create(t, A.user);
    const processing = await create(t, A.user);
    await post(`/payments/${processing._id}/process`, {});
    const done = await completed(t, A.admin);
    const refunded = await completed(t, A.admin, { amount: '2.00' });
    await post(`/payments/${refunded._id}/refund`, { amount: '2.00' });
    const partial = await completed(t, A.admin, { amount: '2.00' });
    await post(`/payments/${partial._id}/refund`, { amount: '1.00' });
    const failed = await create(t, A.user, { provider: 'decliner' });
    await post(`/payments/${failed._id}/process`, {}, A.user);
    const complete = { provider_reference: 'r', provider_status: 'paid' };
    const cases: [any, string, unknown, string][] = [
      [pending, 'complete', { provider_reference: 'r', provider_status: 'paid' }, 'pending'],
      [pending, 'refund', { amount: '1.00' }, 'pending'],
      [processing, 'process', {}, 'processing'],
      [processing, 'cancel', {}, 'processing'],
      [processing, 'refund', { amount: '1.00' }, 'processing'],
      [done, 'process', {}, 'completed'],
      [done, 'cancel', {}, 'completed'],
      [refunded, 'refund', { amount: '0.01' }, 'refunded'],
      [refunded, 'cancel', {}, 'refunded'],
      [refunded, 'process', {}, 'refunded'],
      [refunded, 'complete', complete, 'refunded'],
      [partial, 'process', {}, 'partially_refunded'],
      [partial, 'cancel', {}, 'partially_refunded'],
      [partial, 'complete', complete, 'partially_refunded'],
      [failed, 'process', {}, 'failed'],
      [failed, 'cancel', {}, 'failed'],
      [failed, 'complete', { provider_reference: 'r', provider_status: 'PAID' }, 'failed'],
      [failed, 'refund', { amount: '1.00' }, 'failed'],
    ];
    for (const [p, op, json, status] of cases) {
      const before = await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) });
      const err = expectError(await post(`/payments/${p._id}/${op}`, json), 409, 'CONFLICT');
      expect(err.details).toMatchObject({ status, operation: op });
      expect(await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) })).toEqual(before);
    }
    // A decline reported again for a failed payment is a no-op, like a repeated completion.
    const before = await col(t, 'payments').findOne({ _id: new Types.ObjectId(failed._id) });
    const again = await post(`/payments/${failed._id}/complete`, { provider_reference: 'r', provider_status: 'DECLINED' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: 'failed', version: before!.version });
    expect(await col(t, 'payments').findOne({ _id: new Types.ObjectId(failed._id) })).toEqual(before);
  });

  it('refunds: partial then the rest; above the captured amount is 400; bad amounts 422', async () => {
    const p = await completed(t, A.admin, { amount: '50.00' });
    const r1 = await post(`/payments/${p._id}/refund`, { amount: '20.00', reason: 'damaged' });
    expect(r1.body).toMatchObject({ status: 'partially_refunded', refunded_amount: '20.00', refund_reason: 'damaged' });
    const over = expectError(await post(`/payments/${p._id}/refund`, { amount: '30.01' }), 400, 'REFUND_EXCEEDS_CAPTURED');
    expect(over.details).toMatchObject({ requested: '30.01', refundable: '30.00', refunded_amount: '20.00', amount: '50.00' });
    expectError(await post(`/payments/${p._id}/refund`, { amount: '1.001' }), 422, 'VALIDATION_ERROR');
    expectError(await post(`/payments/${p._id}/refund`, { amount: '0' }), 422, 'VALIDATION_ERROR');
    expectError(await post(`/payments/${p._id}/refund`, { amount: '-1.00' }), 422, 'VALIDATION_ERROR');
    expectError(await post(`/payments/${p._id}/refund`, { amount: -1 }), 422, 'VALIDATION_ERROR');
    expectError(await post(`/payments/${p._id}/refund`, { amount: '1', extra: 1 }), 422, 'VALIDATION_ERROR');
    // Only the canonical decimal form: no sign, no blanks, digits on both sides of the point.
    const untouched = await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) });
    for (const amount of ['+5', ' 10 ', '1.', '.5', '05', '5 ']) {
      const err = expectError(await post(`/payments/${p._id}/refund`, { amount }), 422, 'VALIDATION_ERROR');
      expect(err.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'amount'], msg: expect.stringMatching(/decimal string/) })]);
    }
    const gqlErr = await t.gql('mutation($id: ID!) { refundPayment(id: $id, amount: "+5") { status } }', { id: p._id }, { key: A.admin });
    expect(gqlErr.body.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_ERROR' });
    expect(await col(t, 'payments').findOne({ _id: new Types.ObjectId(p._id) })).toEqual(untouched);
    expect(await col(t, 'payment_refunds').countDocuments({ payment_id: new Types.ObjectId(p._id) })).toBe(1);
    const r2 = await post(`/payments/${p._id}/refund`, { amount: 30 });
    expect(r2.body).toMatchObject({ status: 'refunded', refunded_amount: '50.00' });
    expect(r2.body.refunded_at).toBeTruthy();
    const list = await t.http('GET', `/payments/${p._id}/refunds`, { key: A.user });
    expect(list.body.items.map((r: any) => [r.amount, r.reason, r.status])).toEqual([['20.00', 'damaged', 'succeeded'], ['30.00', null, 'succeeded']]);
    const B = await tenant(t);
    expectError(await t.http('GET', `/payments/${p._id}/refunds`, { key: B.admin }), 404, 'NOT_FOUND');
  });

  it('refund and complete need the admin role; a plain user gets 403', async () => {
    const p = await completed(t, A.admin);
    expectError(await post(`/payments/${p._id}/refund`, { amount: '1.00' }, A.user), 403, 'ACCESS_DENIED');
    const q = await create(t, A.user);
    expectError(await post(`/payments/${q._id}/complete`, { provider_reference: 'r', provider_status: 'paid' }, A.user), 403, 'ACCESS_DENIED');
  });

  it('PUT updates only provider_reference, receipt_url and metadata (If-Match); other fields are 422', async () => {
    const p = await create(t, A.user);
    const get = await t.http('GET', `/payments/${p._id}`, { key: A.user });
    const etag = get.headers.get('etag')!;
    expectError(await t.http('PUT', `/payments/${p._id}`, { key: A.user, json: { provider_reference: 'pi_1' } }), 428, 'ETAG_REQUIRED');
    for (const bad of [{ amount: '1.00' }, { status: 'completed' }, { refunded_amount: '0.00' }, { user_name: 'x' }, { paid_at: null }]) {
      const err = expectError(await t.http('PUT', `/payments/${p._id}`, { key: A.user, json: bad, headers: { 'If-Match': etag } }), 422, 'VALIDATION_ERROR');
      expect((err.details.errors as { loc: string[] }[])[0]!.loc).toEqual(['body', Object.keys(bad)[0]]);
    }
    const ok = await t.http('PUT', `/payments/${p._id}`, { key: A.user, json: { provider_reference: 'pi_1', receipt_url: 'https://r.example/1', metadata: { a: 1 } }, headers: { 'If-Match': etag } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ provider_reference: 'pi_1', receipt_url: 'https://r.example/1', metadata: { a: 1 }, status: 'pending', amount: '10.00' });
    expectError(await t.http('PUT', `/payments/${p._id}`, { key: A.user, json: { metadata: {} }, headers: { 'If-Match': etag } }), 412, 'ETAG_MISMATCH');
  });

  it('PUT cannot change provider_reference once captured (409); metadata still can', async () => {
    const p = await completed(t, A.admin, {}, 'cap-1');
    const etag = `"${p.version}"`;
    const err = expectError(await t.http('PUT', `/payments/${p._id}`, { key: A.admin, json: { provider_reference: 'other' }, headers: { 'If-Match': etag } }), 409, 'CONFLICT');
    expect(err.details).toMatchObject({ status: 'completed' });
    const ok = await t.http('PUT', `/payments/${p._id}`, { key: A.admin, json: { metadata: { note: 'vip' } }, headers: { 'If-Match': etag } });
    expect(ok.body).toMatchObject({ metadata: { note: 'vip' }, provider_reference: 'cap-1' });
  });

  it('payments cannot be deleted or patched (no such operation)', async () => {
    const p = await create(t, A.user);
    const del = await t.http('DELETE', `/payments/${p._id}`, { key: A.admin, headers: { 'If-Match': '"1"' } });
    expect([404, 405]).toContain(del.status);
    const patch = await t.http('PATCH', `/payments/${p._id}`, { key: A.admin, json: { metadata: {} }, headers: { 'If-Match': '"1"' } });
    expect([404, 405]).toContain(patch.status);
    const fields = Object.keys(t.app.schema.getMutationType()!.getFields());
    expect(fields).not.toContain('deletePayment');
    expect(fields).not.toContain('replacePayment');
    expect(await col(t, 'payments').countDocuments({ _id: new Types.ObjectId(p._id), is_deleted: false })).toBe(1);
  });
});

describe('audit and domain events', () => {
  it('every write is audited: create, process, complete, refund, PUT', async () => {
    const p = await create(t, A.user);
    await post(`/payments/${p._id}/process`, {});
    await post(`/payments/${p._id}/complete`, { provider_reference: 'aud-1', provider_status: 'paid' });
    await post(`/payments/${p._id}/refund`, { amount: '1.00' });
    await t.http('PUT', `/payments/${p._id}`, { key: A.admin, json: { metadata: { x: 1 } }, headers: { 'If-Match': '"4"' } });
    await t.app.services.get('audit').flush();
    const entries = await col(t, 'audit_log').find({ resource: 'payments', item_id: new Types.ObjectId(p._id) }).sort({ created_at: 1, _id: 1 }).toArray();
    expect(entries.map((e) => e.operation)).toEqual(['insert', 'update', 'update', 'update', 'update']);
    expect(entries[2]!.changes).toMatchObject({ status: { old: 'processing', new: 'completed' }, provider_reference: { old: null, new: 'aud-1' } });
    expect(entries[3]!.changes).toMatchObject({ status: { old: 'completed', new: 'partially_refunded' }, refunded_amount: { old: '0.00', new: '1.00' } });
    expect(JSON.stringify(entries)).not.toMatch(/refundable_minor|open_refund_ids/);
    expect(String(entries[1]!.user_id)).toBe(A.adminId);
  });

  it('cancel and a decline are audited too', async () => {
    const c = await create(t, A.user);
    await post(`/payments/${c._id}/cancel`, { reason: 'no' }, A.user);
    const d = await create(t, A.user, { provider: 'decliner' });
    await post(`/payments/${d._id}/process`, {}, A.user);
    await t.app.services.get('audit').flush();
    const last = async (id: string) =>
      (await col(t, 'audit_log').find({ resource: 'payments', item_id: new Types.ObjectId(id) }).sort({ created_at: 1, _id: 1 }).toArray()).at(-1)!;
    const cancelled = await last(c._id);
    expect(cancelled.operation).toBe('update');
    expect(cancelled.changes).toMatchObject({ status: { old: 'pending', new: 'cancelled' } });
    expect(String(cancelled.user_id)).toBe(A.userId);
    const declined = await last(d._id);
    expect(declined.changes).toMatchObject({ status: { old: 'pending', new: 'failed' }, failure_reason: { old: null, new: 'insufficient funds' } });
  });

  it('PAYMENT_COMPLETED and PAYMENT_REFUNDED carry the payment, the actor and the tenant', async () => {
    const p = await completed(t, A.admin, { amount: '3.00' });
    await post(`/payments/${p._id}/refund`, { amount: '1.25', reason: 'late' });
    const done = events.filter((e) => e.name === 'completed' && e.payload.payment._id.toString() === p._id);
    expect(done).toHaveLength(1);
    expect(done[0]!.payload).toMatchObject({ tenant_id: A.tenantId, payment: { status: 'completed', amount: '3.00' } });
    expect(done[0]!.payload.actor.id).toBe(A.adminId);
    expect(done[0]!.payload.request_id).toEqual(expect.any(String));
    const refunded = events.filter((e) => e.name === 'refunded' && e.payload.payment._id.toString() === p._id);
    expect(refunded).toHaveLength(1);
    expect(refunded[0]!.payload).toMatchObject({ payment: { status: 'partially_refunded', refunded_amount: '1.25' }, refund: { amount: '1.25', currency: 'USD', reason: 'late' } });
  });
});

describe('listing (standard list filtering of the resources plugin)', () => {
  it('filters by status, provider, resource and user; sorts; both pagination modes', async () => {
    const B = await tenant(t);
    await create(t, B.user, { resource_id: 'r-9', user_id: 'u-9', amount: '1.00' });
    await create(t, B.user, { resource_id: 'r-9', user_id: 'u-8', amount: '3.00' });
    await completed(t, B.admin, { resource_id: 'r-7', user_id: 'u-9', amount: '2.00' });
    const q = (s: string) => t.http('GET', `/payments?${s}`, { key: B.user });
    expect((await q('status=completed')).body.items.map((p: any) => p.amount)).toEqual(['2.00']);
    expect((await q('resource_type=order&resource_id=r-9&sort=amount_minor')).body.items.map((p: any) => p.amount)).toEqual(['1.00', '3.00']);
    expect((await q('user_id=u-9&provider=manual')).body.total).toBe(2);
    expect((await q('amount_minor__gte=200&sort=-amount_minor')).body.items.map((p: any) => p.amount)).toEqual(['3.00', '2.00']);
    const offset = await q('per_page=2&page=2');
    expect(offset.headers.get('x-total-count')).toBe('3');
    expect(offset.body.items).toHaveLength(1);
    const first = await q('limit=2');
    expect(first.body.items).toHaveLength(2);
    const next = await q(`limit=2&cursor=${encodeURIComponent(first.body.cursors.next)}`);
    expect(next.body.items).toHaveLength(1);
    expectError(await q('refundable_minor=0'), 400, 'BAD_REQUEST');
  });
});

describe('PAYMENTS_LEDGER_ENABLED off (the default)', () => {
  it('completing and refunding post no ledger entries, and the ledger routes and job are absent', async () => {
    const p = await completed(t, A.admin, { amount: '9.00' });
    expect((await post(`/payments/${p._id}/refund`, { amount: '4.00' })).body).toMatchObject({ status: 'partially_refunded', refunded_amount: '4.00' });
    expect((await post(`/payments/${p._id}/refund`, { amount: '5.00' })).body).toMatchObject({ status: 'refunded', refunded_amount: '9.00' });
    expect(await col(t, 'ledger_entries').countDocuments({})).toBe(0);
    for (const path of ['/ledger/entries', '/ledger/balance']) {
      expect((await t.http('GET', path, { key: A.admin })).status).toBe(404);
      expect((await t.http('GET', path)).status).toBe(404);
    }
    expect(t.app.kernel.jobs().map((j) => j.name)).not.toContain('reconcile_payment_ledger');
  });
});
