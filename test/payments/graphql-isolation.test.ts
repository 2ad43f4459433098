import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { printType } from 'graphql';
import { systemActor, type Actor } from '../../core/context.ts';
import { expectError, type TestApp } from '../helpers/app.ts';
import { col, completed, create, paymentsApp, tenant } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;
let B: Awaited<ReturnType<typeof tenant>>;

beforeAll(async () => {
  t = await paymentsApp({ config: { PAYMENTS_LEDGER_ENABLED: 'true', PAYOUT_AUTO_APPROVE_THRESHOLD: '0' } });
  A = await tenant(t);
  // B's administrator and user are A's administrator's and user's second memberships.
  B = await tenant(t, A);
});
afterAll(() => t?.close());

const FIELDS = '_id status amount refunded_amount currency provider provider_reference tenant_id etag';
const gql = async (query: string, variables: Record<string, unknown>, key: string): Promise<any> => {
  const res = await t.gql(query, variables, { key });
  return res.body;
};
const code = (b: any) => b.errors?.[0]?.extensions?.code;

describe('GraphQL: the same service and the same rules', () => {
  it('the schema pieces', () => {
    const s = t.app.schema;
    for (const type of ['Payment', 'PaymentPage', 'ProcessedPayment', 'PayoutBatch', 'PayoutBatchPage', 'LedgerBalance']) expect(printType(s.getType(type)!)).toMatchSnapshot(type);
    const mut = s.getMutationType()!.getFields();
    const sig = (name: string) => `${name}(${mut[name]!.args.map((a) => `${a.name}: ${String(a.type)}`).join(', ')}): ${String(mut[name]!.type)}`;
    expect(['createPayment', 'updatePayment', 'processPayment', 'completePayment', 'cancelPayment', 'refundPayment', 'approvePayout', 'executePayout', 'processPayout', 'failPayout'].map(sig)).toMatchSnapshot('mutations');
    const query = s.getQueryType()!.getFields();
    expect(['payments', 'payment', 'payouts', 'payout', 'ledgerBalance'].every((f) => f in query)).toBe(true);
  });

  it('create, process, complete, refund and cancel through GraphQL', async () => {
    const created = await gql(`mutation($input: JSON!) { createPayment(input: $input) { ${FIELDS} } }`, {
      input: { resource_type: 'order', resource_id: 'g1', user_id: 'c1', user_name: 'Grace', amount: 12.5, currency: 'USD', provider: 'manual' },
    }, A.user);
    expect(created.data.createPayment).toMatchObject({ status: 'pending', amount: '12.50', tenant_id: A.tenantId, etag: '"1"' });
    const id = created.data.createPayment._id;
    const bad = await gql(`mutation($input: JSON!) { createPayment(input: $input) { _id } }`, { input: { resource_type: 'o', resource_id: '1', user_id: 'c', amount: '1.001', currency: 'USD', provider: 'manual' } }, A.user);
    expect(code(bad)).toBe('VALIDATION_ERROR');
    expect(bad.errors[0].extensions.details.errors[0].loc).toEqual(['body', 'amount']);

    const processed = await gql(`mutation($id: ID!) { processPayment(id: $id) { payment { status } provider_data } }`, { id }, A.user);
    expect(processed.data.processPayment).toEqual({ payment: { status: 'processing' }, provider_data: {} });
    const asUser = await gql(`mutation($id: ID!) { completePayment(id: $id, provider_reference: "g-ref", provider_status: "paid") { status } }`, { id }, A.user);
    expect(code(asUser)).toBe('ACCESS_DENIED');
    const done = await gql(`mutation($id: ID!) { completePayment(id: $id, provider_reference: "g-ref", provider_status: "paid") { ${FIELDS} paid_at } }`, { id }, A.admin);
    expect(done.data.completePayment).toMatchObject({ status: 'completed', provider_reference: 'g-ref' });
    const again = await gql(`mutation($id: ID!) { completePayment(id: $id, provider_reference: "g-ref", provider_status: "paid") { paid_at etag } }`, { id }, A.admin);
    expect(again.data.completePayment).toEqual({ paid_at: done.data.completePayment.paid_at, etag: done.data.completePayment.etag });

    const r1 = await gql(`mutation($id: ID!) { refundPayment(id: $id, amount: "2.50", reason: "gql") { status refunded_amount } }`, { id }, A.admin);
    expect(r1.data.refundPayment).toEqual({ status: 'partially_refunded', refunded_amount: '2.50' });
    const over = await gql(`mutation($id: ID!) { refundPayment(id: $id, amount: "10.01") { status } }`, { id }, A.admin);
    expect(code(over)).toBe('REFUND_EXCEEDS_CAPTURED');
    expect(over.errors[0].extensions.status).toBe(400);
    const cancel = await gql(`mutation($id: ID!) { cancelPayment(id: $id) { status } }`, { id }, A.admin);
    expect(code(cancel)).toBe('CONFLICT');
    expect(cancel.errors[0].extensions.details).toMatchObject({ status: 'partially_refunded' });

    const upd = await gql(`mutation($id: ID!) { updatePayment(id: $id, if_match: "\\"4\\"", input: {metadata: {a: 1}}) { version } }`, { id }, A.admin);
    expect(upd.data.updatePayment).toEqual({ version: 5 });
    const updBad = await gql(`mutation($id: ID!) { updatePayment(id: $id, if_match: "\\"5\\"", input: {amount: "1"}) { version } }`, { id }, A.admin);
    expect(code(updBad)).toBe('VALIDATION_ERROR');

    const list = await gql(`{ payments(filter: {status: "partially_refunded"}, sort: "-created_at") { total items { _id refunded_amount } } }`, {}, A.user);
    expect(list.data.payments).toEqual({ total: 1, items: [{ _id: id, refunded_amount: '2.50' }] });
    const one = await gql(`query($id: ID!) { payment(id: $id) { amount status } }`, { id }, A.user);
    expect(one.data.payment).toEqual({ amount: '12.50', status: 'partially_refunded' });
  });

  it('each field declares its permission: anonymous callers get AUTH_REQUIRED, callers without the role ACCESS_DENIED, and nothing changes', async () => {
    const id = String((await create(t, A.user, { amount: '3.00' }))._id);
    const anon = async (query: string, variables: Record<string, unknown> = {}): Promise<any> => (await t.gql(query, variables, { key: null })).body;
    const fields: [string, Record<string, unknown>][] = [
      ['{ payouts { total } }', {}],
      ['query($id: ID!) { payout(id: $id) { id } }', { id: String(new Types.ObjectId()) }],
      ['query($id: ID!) { paymentRefunds(id: $id) { id } }', { id }],
      ['{ ledgerBalance { account } }', {}],
      [`mutation($id: ID!) { completePayment(id: $id, provider_reference: "anon", provider_status: "paid") { status } }`, { id }],
      [`mutation($id: ID!) { refundPayment(id: $id, amount: "1.00") { status } }`, { id }],
      [`mutation($id: ID!) { cancelPayment(id: $id) { status } }`, { id }],
      [`mutation($id: ID!) { approvePayout(id: $id) { status } }`, { id: String(new Types.ObjectId()) }],
    ];
    for (const [query, variables] of fields) {
      const res = await anon(query, variables);
      expect(code(res), query).toBe('AUTH_REQUIRED');
      expect(res.errors[0].extensions.status, query).toBe(401);
    }
    const denied = await gql(`mutation($id: ID!) { refundPayment(id: $id, amount: "1.00") { status } }`, { id }, A.user);
    expect(code(denied)).toBe('ACCESS_DENIED');
    expect(denied.errors[0].message).toBe('Administrator role required');
    const sys = await gql('{ payouts { total } }', {}, A.admin);
    expect(code(sys)).toBe('ACCESS_DENIED');
    expect(sys.errors[0].message).toBe('System administrator required');
    expect((await gql(`query($id: ID!) { paymentRefunds(id: $id) { id } }`, { id }, A.user)).data.paymentRefunds).toEqual([]);
    expect((await gql(`mutation($id: ID!) { cancelPayment(id: $id) { status } }`, { id }, A.user)).data.cancelPayment.status).toBe('cancelled');
  });

  it("the payments service checks the payout permission for a plugin that calls it on someone's behalf", async () => {
    const payments = t.app.services.get('payments');
    const admin: Actor = { ...systemActor(A.tenantId), id: String(new Types.ObjectId()), scope: null, is_system_user: false, acting_tenant_id: null };
    for (const call of [() => payments.approve_payout(admin, String(new Types.ObjectId())), () => payments.execute_payout(admin, String(new Types.ObjectId()), 'X')]) {
      await expect(call()).rejects.toMatchObject({ status: 403, code: 'ACCESS_DENIED' });
    }
    // The system actor holds every permission: an unknown batch is then 404.
    await expect(payments.process_payout(systemActor(), String(new Types.ObjectId()))).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('payouts: system administrators only; approve and execute', async () => {
    await completed(t, A.admin, { amount: '20.00' });
    const settled = await t.http('POST', '/payouts/settle', { json: { tenant_id: A.tenantId, period_start: new Date(Date.now() - 3600_000).toISOString(), period_end: new Date(Date.now() + 3600_000).toISOString() } });
    const batch = settled.body.batches[0];
    expect(code(await gql('{ payouts { total } }', {}, A.admin))).toBe('ACCESS_DENIED');
    expect(code(await gql(`mutation($id: ID!) { approvePayout(id: $id) { status } }`, { id: batch.id }, A.admin))).toBe('ACCESS_DENIED');
    const list = await t.gql('{ payouts(status: "draft") { total items { id net_amount status } } }');
    // 20.00 plus the 12.50 less 2.50 refunded of the previous test.
    expect(list.body.data.payouts.items).toContainEqual({ id: batch.id, net_amount: '30.00', status: 'draft' });
    // The bootstrap admin created the batch (POST /payouts/settle), so it may not approve it.
    const own = await t.gql(`mutation($id: ID!) { approvePayout(id: $id) { status } }`, { id: batch.id });
    expect(code(own.body)).toBe('ACCESS_DENIED');
    await col(t, 'payout_batches').updateOne({ _id: new Types.ObjectId(batch.id) }, { $set: { created_by: new Types.ObjectId() } });
    const ok = await t.gql(`mutation($id: ID!) { approvePayout(id: $id) { status approved_by } }`, { id: batch.id });
    expect(ok.body.data.approvePayout.status).toBe('approved');
    const exec = await t.gql(`mutation($id: ID!) { executePayout(id: $id, bank_reference: "G-1") { status bank_reference paid_at } }`, { id: batch.id });
    expect(exec.body.data.executePayout).toMatchObject({ status: 'completed', bank_reference: 'G-1' });
    const badExec = await t.gql(`mutation($id: ID!) { executePayout(id: $id, bank_reference: "") { status } }`, { id: batch.id });
    expect(code(badExec.body)).toBe('VALIDATION_ERROR');
  });

  it('payouts: processing and failed through processPayout and failPayout', async () => {
    const C = await tenant(t);
    await completed(t, C.admin, { amount: '3.00' });
    const settled = await t.http('POST', '/payouts/settle', { json: { tenant_id: C.tenantId, period_start: new Date(Date.now() - 3600_000).toISOString(), period_end: new Date(Date.now() + 3600_000).toISOString() } });
    const id = settled.body.batches[0].id;
    await col(t, 'payout_batches').updateOne({ _id: new Types.ObjectId(id) }, { $set: { status: 'approved' } });
    const run = (q: string) => t.gql(q, { id });
    expect((await run('mutation($id: ID!) { processPayout(id: $id) { status } }')).body.data.processPayout.status).toBe('processing');
    expect(code((await run('mutation($id: ID!) { failPayout(id: $id, reason: "") { status } }')).body)).toBe('VALIDATION_ERROR');
    expect((await run('mutation($id: ID!) { failPayout(id: $id, reason: "closed account") { status failure_reason } }')).body.data.failPayout).toEqual({ status: 'failed', failure_reason: 'closed account' });
    expect(code((await run('mutation($id: ID!) { executePayout(id: $id, bank_reference: "Z") { status } }')).body)).toBe('CONFLICT');
  });
});

describe('tenant isolation on every route', () => {
  it('REST: another tenant reads, counts and writes nothing of A', async () => {
    const p = await completed(t, A.admin, { amount: '9.00', resource_id: 'iso' });
    const q = await create(t, A.user, { resource_id: 'iso' });
    await t.app.services.get('events').flush(); // the relay empties each outbox: compare the documents after it
    const before = await col(t, 'payments').find({ _id: { $in: [p._id, q._id].map((x) => new Types.ObjectId(x)) } }).toArray();
    for (const key of [B.admin, B.user]) {
      expectError(await t.http('GET', `/payments/${p._id}`, { key }), 404, 'NOT_FOUND');
      const list = await t.http('GET', '/payments?resource_id=iso', { key });
      expect(list.body).toMatchObject({ total: 0, items: [] });
      expect((await t.http('GET', `/payments?limit=100&where=${encodeURIComponent(JSON.stringify({ _id: p._id }))}`, { key })).body.items).toEqual([]);
      expect((await t.http('GET', `/payments?tenant_id=${A.tenantId}`, { key })).body.items).toEqual([]);
      expectError(await t.http('PUT', `/payments/${q._id}`, { key, json: { metadata: { x: 1 } }, headers: { 'If-Match': '"1"' } }), 404, 'NOT_FOUND');
      expectError(await t.http('POST', `/payments/${q._id}/process`, { key, json: {} }), 404, 'NOT_FOUND');
      expectError(await t.http('POST', `/payments/${q._id}/cancel`, { key, json: {} }), 404, 'NOT_FOUND');
    }
    expectError(await t.http('POST', `/payments/${q._id}/complete`, { key: B.admin, json: { provider_reference: 'x', provider_status: 'paid' } }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', `/payments/${p._id}/refund`, { key: B.admin, json: { amount: '1.00' } }), 404, 'NOT_FOUND');
    for (const r of await Promise.all([t.http('GET', '/ledger/entries', { key: B.admin }), t.http('GET', '/ledger/balance', { key: B.admin })])) {
      expect(JSON.stringify(r.body)).not.toContain(A.tenantId);
    }
    expect(await col(t, 'payments').find({ _id: { $in: [p._id, q._id].map((x) => new Types.ObjectId(x)) } }).toArray()).toEqual(before);
    // A new payment always lands in the caller's tenant.
    expect((await create(t, B.user)).tenant_id).toBe(B.tenantId);
    // A system administrator acting in tenant B sees only B.
    const sys = await t.http('GET', '/payments?resource_id=iso', { headers: { 'X-Tenant-Id': B.tenantId } });
    expect(sys.body.total).toBe(0);
    expect((await t.http('GET', '/payments?resource_id=iso')).body.total).toBe(2);
  });

  it('GraphQL payouts: tenant staff are refused; a system admin acting in another tenant finds nothing and changes nothing', async () => {
    await completed(t, A.admin, { amount: '6.00' });
    const settled = await t.http('POST', '/payouts/settle', { json: { tenant_id: A.tenantId, period_start: new Date(Date.now() - 3600_000).toISOString(), period_end: new Date(Date.now() + 3600_000).toISOString() } });
    const id = settled.body.batches[0].id;
    const before = await col(t, 'payout_batches').findOne({ _id: new Types.ObjectId(id) });
    const ops = [
      'query($id: ID!) { payout(id: $id) { id } }',
      'mutation($id: ID!) { approvePayout(id: $id) { id } }',
      'mutation($id: ID!) { processPayout(id: $id) { id } }',
      'mutation($id: ID!) { failPayout(id: $id, reason: "r") { id } }',
      'mutation($id: ID!) { executePayout(id: $id, bank_reference: "b") { id } }',
    ];
    for (const q of ops) {
      for (const key of [A.admin, A.user, B.admin]) expect(code(await gql(q, { id }, key))).toBe('ACCESS_DENIED');
      expect(code((await t.gql(q, { id }, { headers: { 'X-Tenant-Id': B.tenantId } })).body)).toBe('NOT_FOUND');
    }
    const list = await t.gql('{ payouts(per_page: 100) { total items { id tenant_id } } }', {}, { headers: { 'X-Tenant-Id': B.tenantId } });
    expect(list.body.data.payouts.items.every((b: any) => b.tenant_id === B.tenantId)).toBe(true);
    expect(await col(t, 'payout_batches').findOne({ _id: new Types.ObjectId(id) })).toEqual(before);
  });

  it('GraphQL: the same', async () => {
    const p = await completed(t, A.admin, { amount: '4.00', resource_id: 'iso-g' });
    const q = await create(t, A.user, { resource_id: 'iso-g' });
    await t.app.services.get('events').flush(); // the relay empties each outbox: compare the documents after it
    const before = await col(t, 'payments').find({ _id: { $in: [p._id, q._id].map((x) => new Types.ObjectId(x)) } }).toArray();
    expect(code(await gql(`query($id: ID!) { payment(id: $id) { _id } }`, { id: p._id }, B.admin))).toBe('NOT_FOUND');
    expect((await gql(`{ payments(filter: {resource_id: "iso-g"}) { total items { _id } } }`, {}, B.admin)).data.payments).toEqual({ total: 0, items: [] });
    for (const [m, id] of [
      [`refundPayment(id: $id, amount: "1.00") { _id }`, p._id],
      [`completePayment(id: $id, provider_reference: "x", provider_status: "paid") { _id }`, q._id],
      [`processPayment(id: $id) { provider_data }`, q._id],
      [`cancelPayment(id: $id) { _id }`, q._id],
      [`updatePayment(id: $id, if_match: "\\"1\\"", input: {metadata: {}}) { _id }`, q._id],
    ] as const) {
      expect(code(await gql(`mutation($id: ID!) { ${m} }`, { id }, B.admin))).toBe('NOT_FOUND');
    }
    const bal = await gql('{ ledgerBalance { tenant_id } }', {}, B.admin);
    expect(bal.data.ledgerBalance.every((r: any) => r.tenant_id === B.tenantId)).toBe(true);
    expect(await col(t, 'payments').find({ _id: { $in: [p._id, q._id].map((x) => new Types.ObjectId(x)) } }).toArray()).toEqual(before);
  });
});
