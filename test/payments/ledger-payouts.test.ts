import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { expectError, jobContext, type TestApp } from '../helpers/app.ts';
import { systemActor, type Actor } from '../../core/context.ts';
import { col, completed, create, paymentsApp, tenant } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;
let B: Awaited<ReturnType<typeof tenant>>;

beforeAll(async () => {
  t = await paymentsApp({ config: { PAYMENTS_LEDGER_ENABLED: 'true', PAYOUT_FEE_PERCENT: '2.5', PAYOUT_AUTO_APPROVE_THRESHOLD: '100.00' } });
  A = await tenant(t);
  B = await tenant(t);
});
afterAll(() => t?.close());

const post = (path: string, json: unknown, key = A.admin) => t.http('POST', path, { key, json });

describe('ledger', () => {
  it('balances after a mix of payments and refunds; a refund posts reversing entries', async () => {
    const p1 = await completed(t, A.admin, { amount: '100.00' });
    const p2 = await completed(t, A.admin, { amount: '0.30' });
    const p3 = await completed(t, A.admin, { amount: '1000', currency: 'JPY' });
    await create(t, A.user, { amount: '999.00' }); // pending: posts nothing
    await post(`/payments/${p1._id}/refund`, { amount: '33.33' });
    await post(`/payments/${p2._id}/refund`, { amount: '0.10' });
    await post(`/payments/${p2._id}/refund`, { amount: '0.20' });
    await post(`/payments/${p3._id}/refund`, { amount: '1' });
    await completed(t, B.admin, { amount: '5.00' });

    const bal = await t.http('GET', '/ledger/balance', { key: A.admin });
    expect(bal.status).toBe(200);
    expect(bal.body.balanced).toBe(true);
    expect(bal.body.items).toEqual([
      { tenant_id: A.tenantId, account: 'provider_clearing', currency: 'JPY', debit: '1000', credit: '1', balance: '999' },
      { tenant_id: A.tenantId, account: 'sales', currency: 'JPY', debit: '1', credit: '1000', balance: '-999' },
      { tenant_id: A.tenantId, account: 'provider_clearing', currency: 'USD', debit: '100.30', credit: '33.63', balance: '66.67' },
      { tenant_id: A.tenantId, account: 'sales', currency: 'USD', debit: '33.63', credit: '100.30', balance: '-66.67' },
    ]);
    // Per posting, debits equal credits.
    const entries = await col(t, 'ledger_entries').find({ tenant_id: new Types.ObjectId(A.tenantId) }).toArray();
    const byTx = new Map<string, number>();
    for (const e of entries) byTx.set(e.transaction_id, (byTx.get(e.transaction_id) ?? 0) + (e.direction === 'debit' ? e.amount_minor : -e.amount_minor));
    expect(byTx.size).toBe(3 + 4);
    expect([...byTx.values()].every((v) => v === 0)).toBe(true);

    const list = await t.http('GET', `/ledger/entries?payment_id=${p1._id}`, { key: A.admin });
    expect(list.body.items.map((e: any) => [e.entry_type, e.account, e.direction, e.amount])).toEqual(
      expect.arrayContaining([['capture', 'provider_clearing', 'debit', '100.00'], ['capture', 'sales', 'credit', '100.00'], ['refund', 'sales', 'debit', '33.33'], ['refund', 'provider_clearing', 'credit', '33.33']]),
    );
  });

  it('reconcile_payment_ledger posts what a crash left out, once', async () => {
    const p = await completed(t, B.admin, { amount: '8.00' });
    await post(`/payments/${p._id}/refund`, { amount: '3.00' }, B.admin);
    const pid = new Types.ObjectId(p._id);
    const before = await col(t, 'ledger_entries').find({ payment_id: pid }, { projection: { _id: 0, created_at: 0 } }).sort({ transaction_id: 1, direction: 1 }).toArray();
    expect(before).toHaveLength(4);
    // The state a crash between the transitions and their postings leaves.
    await col(t, 'ledger_entries').deleteMany({ payment_id: pid });
    const job = t.app.kernel.jobs().find((j) => j.name === 'reconcile_payment_ledger')!;
    expect(await job.run(jobContext(), {})).toEqual({ captures: 1, refunds: 1 });
    const after = await col(t, 'ledger_entries').find({ payment_id: pid }, { projection: { _id: 0, created_at: 0 } }).sort({ transaction_id: 1, direction: 1 }).toArray();
    expect(after).toEqual(before);
    expect(await job.run(jobContext(), {})).toEqual({ captures: 0, refunds: 0 });
  });

  it('is read by admins only, each tenant its own; a system admin sees every tenant', async () => {
    expectError(await t.http('GET', '/ledger/balance', { key: A.user }), 403, 'ACCESS_DENIED');
    expectError(await t.http('GET', '/ledger/entries', { key: A.user }), 403, 'ACCESS_DENIED');
    const b = await t.http('GET', '/ledger/balance', { key: B.admin });
    expect(b.body.items.every((r: any) => r.tenant_id === B.tenantId)).toBe(true);
    expect((await t.http('GET', '/ledger/entries', { key: B.admin })).body.items.every((e: any) => e.tenant_id === B.tenantId)).toBe(true);
    const all = await t.http('GET', '/ledger/balance');
    expect(new Set(all.body.items.map((r: any) => r.tenant_id))).toEqual(new Set([A.tenantId, B.tenantId]));
    const onlyB = await t.http('GET', '/ledger/balance', { headers: { 'X-Tenant-Id': B.tenantId } });
    expect(onlyB.body.items.every((r: any) => r.tenant_id === B.tenantId)).toBe(true);
  });
});

describe('payouts and settlement', () => {
  const settleJob = () => t.app.kernel.jobs().find((j) => j.name === 'settle_payouts')!;
  const window = () => ({ period_start: new Date(Date.now() - 3600_000).toISOString(), period_end: new Date(Date.now() + 3600_000).toISOString() });

  it('settle_payouts builds batches per tenant and currency, less refunds and fees, and never double-counts', async () => {
    const C = await tenant(t);
    const p1 = await completed(t, C.admin, { amount: '40.00' });
    const p2 = await completed(t, C.admin, { amount: '10.00' });
    await completed(t, C.admin, { amount: '7.00', currency: 'EUR' });
    await create(t, C.user, { amount: '70.00' }); // pending: not settled
    await post(`/payments/${p2._id}/refund`, { amount: '4.00' }, C.admin);
    const params = { ...window(), tenant_id: C.tenantId };

    // Concurrent runs: each payment lands in exactly one batch.
    const runs = await Promise.all(Array.from({ length: 4 }, () => settleJob().run(jobContext(), params))) as { batch_ids: string[]; payment_count: number }[];
    expect(runs.reduce((n, r) => n + r.payment_count, 0)).toBe(3);
    const batches = await col(t, 'payout_batches').find({ tenant_id: new Types.ObjectId(C.tenantId) }).toArray();
    const ids = batches.flatMap((b) => b.payment_ids.map(String));
    expect(ids.sort()).toEqual([...new Set(ids)].sort());
    expect(ids).toHaveLength(3);
    const usd = batches.filter((b) => b.currency === 'USD');
    const sum = (k: string) => usd.reduce((n, b) => n + b[k], 0);
    // gross = 40.00 + (10.00 - 4.00) = 46.00; fee 2.5% per batch, rounded half-up to the cent.
    expect(sum('gross_minor')).toBe(4600);
    expect(sum('net_minor') + sum('fee_minor')).toBe(4600);
    expect(batches.every((b) => !b.building && b.payment_count === b.payment_ids.length && b.recipient_type === 'tenant' && b.recipient_id === C.tenantId)).toBe(true);
    const paidOut = await col(t, 'payments').find({ _id: { $in: [p1._id, p2._id].map((x) => new Types.ObjectId(x)) } }).toArray();
    expect(paidOut.every((p) => p.payout_batch_id)).toBe(true);

    // Run again: nothing left.
    const again = (await settleJob().run(jobContext(), params)) as { payment_count: number };
    expect(again.payment_count).toBe(0);
  });

  it('one batch shows every documented field; below the threshold it is approved automatically', async () => {
    const D = await tenant(t);
    await completed(t, D.admin, { amount: '19.99' });
    await completed(t, D.admin, { amount: '30.01' });
    const res = (await settleJob().run(jobContext(), { ...window(), tenant_id: D.tenantId })) as { batch_ids: string[] };
    const one = await t.http('GET', `/payouts/${res.batch_ids[0]}`);
    expect(one.body).toMatchObject({
      recipient_type: 'tenant', recipient_id: D.tenantId, gross_amount: '50.00', fee_amount: '1.25', net_amount: '48.75', currency: 'USD',
      status: 'approved', auto_approved: true, payment_count: 2, bank_reference: null, paid_at: null, created_by: null,
    });
    for (const k of ['period_start', 'period_end', 'payment_ids']) expect(one.body[k]).toBeTruthy();
    const exec = await t.http('POST', `/payouts/${res.batch_ids[0]}/execute`, { json: { bank_reference: 'SEPA-123' } });
    expect(exec.body).toMatchObject({ status: 'completed', bank_reference: 'SEPA-123' });
    expect(exec.body.paid_at).toBeTruthy();
    // Executing again with the same reference is a no-op; another is 409.
    expect((await t.http('POST', `/payouts/${res.batch_ids[0]}/execute`, { json: { bank_reference: 'SEPA-123' } })).body.paid_at).toBe(exec.body.paid_at);
    expectError(await t.http('POST', `/payouts/${res.batch_ids[0]}/execute`, { json: { bank_reference: 'SEPA-999' } }), 409, 'CONFLICT');
  });

  it('above the threshold a person approves, never the creator; draft → approved → completed', async () => {
    const E = await tenant(t);
    await completed(t, E.admin, { amount: '500.00' });
    // A system admin runs settlement by hand: the batch records them as creator.
    const settled = await t.http('POST', '/payouts/settle', { json: { ...window(), tenant_id: E.tenantId } });
    expect(settled.status).toBe(200);
    const batch = settled.body.batches[0];
    expect(batch).toMatchObject({ status: 'draft', net_amount: '487.50', auto_approved: false });
    expect(batch.created_by).toEqual(expect.any(String));
    expectError(await t.http('POST', `/payouts/${batch.id}/execute`, { json: { bank_reference: 'x' } }), 409, 'CONFLICT');
    // Its creator may not approve it.
    const own = expectError(await t.http('POST', `/payouts/${batch.id}/approve`, { json: {} }), 403, 'ACCESS_DENIED');
    expect(own.message).toMatch(/creator/);

    // Another system administrator approves (the admin API cannot mint system users: promoted in the database).
    const other = await t.http('POST', '/admin/users', { json: { email: `ops-${Date.now()}@example.com`, name: 'Ops', tenant_id: E.tenantId, roles: ['admin'] } });
    expect(other.status).toBe(201);
    await col(t, 'users').updateOne({ _id: new Types.ObjectId(other.body.id) }, { $set: { scope: 'system', is_system_user: true } });
    const key = (await t.http('POST', '/admin/api-keys', { json: { user_id: other.body.id, name: 'ops' } })).body.key;
    const approved = await t.http('POST', `/payouts/${batch.id}/approve`, { key, json: {} });
    expect(approved.body).toMatchObject({ status: 'approved', approved_by: other.body.id, auto_approved: false });
    expectError(await t.http('POST', `/payouts/${batch.id}/approve`, { key, json: {} }), 409, 'CONFLICT');
    const done = await t.http('POST', `/payouts/${batch.id}/execute`, { key, json: { bank_reference: 'WIRE-1' } });
    expect(done.body).toMatchObject({ status: 'completed', bank_reference: 'WIRE-1' });
  });

  it('payout routes are for system administrators only; bad input is 422, unknown ids 404', async () => {
    for (const key of [A.admin, A.user]) {
      expectError(await t.http('GET', '/payouts', { key }), 403, 'ACCESS_DENIED');
      expectError(await t.http('POST', '/payouts/settle', { key, json: {} }), 403, 'ACCESS_DENIED');
    }
    expectError(await t.http('GET', `/payouts/${new Types.ObjectId()}`), 404, 'NOT_FOUND');
    expectError(await t.http('GET', '/payouts/nope'), 404, 'NOT_FOUND');
    expectError(await t.http('POST', `/payouts/${new Types.ObjectId()}/execute`, { json: {} }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', '/payouts?status=paid'), 422, 'VALIDATION_ERROR');
    const list = await t.http('GET', '/payouts?per_page=100');
    expect(list.body.total).toBeGreaterThan(0);
    const scoped = await t.http('GET', '/payouts', { headers: { 'X-Tenant-Id': A.tenantId } });
    expect(scoped.body.items.every((b: any) => b.tenant_id === A.tenantId)).toBe(true);
  });

  it('the settlement runner approves nothing above the threshold', async () => {
    const H = await tenant(t);
    await completed(t, H.admin, { amount: '150.00' });
    const res = (await settleJob().run(jobContext(), { ...window(), tenant_id: H.tenantId })) as { batch_ids: string[] };
    expect((await t.http('GET', `/payouts/${res.batch_ids[0]}`)).body).toMatchObject({ status: 'draft', created_by: null, net_amount: '146.25' });
    // The payout service operation, as the system actor (what a job would call): refused above the threshold.
    const payments = t.app.services.get('payments');
    await expect(payments.approve_payout(systemActor(), res.batch_ids[0]!)).rejects.toMatchObject({ status: 403, code: 'ACCESS_DENIED' });
    await expect(payments.execute_payout(systemActor(), res.batch_ids[0]!, 'X')).rejects.toMatchObject({ status: 409, code: 'CONFLICT', details: { status: 'draft' } });
  });

  it('processing and failed: approved → processing → failed (reason) → processing (retry) → completed; other moves are 409', async () => {
    const K = await tenant(t);
    await completed(t, K.admin, { amount: '20.00' });
    const id = ((await settleJob().run(jobContext(), { ...window(), tenant_id: K.tenantId })) as { batch_ids: string[] }).batch_ids[0]!;
    const move = (op: string, json: unknown = {}) => t.http('POST', `/payouts/${id}/${op}`, { json });
    expect((await t.http('GET', `/payouts/${id}`)).body.status).toBe('approved');
    // fail only from processing
    expect(expectError(await move('fail', { reason: 'x' }), 409, 'CONFLICT').details).toMatchObject({ status: 'approved', operation: 'fail', allowed_from: ['processing'] });
    expect((await move('process')).body).toMatchObject({ status: 'processing', failure_reason: null });
    expect((await move('process')).body.status).toBe('processing'); // repeating is a no-op
    expectError(await move('approve'), 409, 'CONFLICT');
    expectError(await move('fail', {}), 422, 'VALIDATION_ERROR');
    const failed = await move('fail', { reason: 'IBAN rejected by the bank' });
    expect(failed.body).toMatchObject({ status: 'failed', failure_reason: 'IBAN rejected by the bank', bank_reference: null, paid_at: null });
    expect(expectError(await move('execute', { bank_reference: 'W' }), 409, 'CONFLICT').details).toMatchObject({ status: 'failed', allowed_from: ['approved', 'processing'] });
    // The batch keeps its payments while failed: a new settlement does not take them again.
    expect(((await settleJob().run(jobContext(), { ...window(), tenant_id: K.tenantId })) as { payment_count: number }).payment_count).toBe(0);
    expect((await move('process')).body).toMatchObject({ status: 'processing', failure_reason: null });
    const done = await move('execute', { bank_reference: 'WIRE-2' });
    expect(done.body).toMatchObject({ status: 'completed', bank_reference: 'WIRE-2', failure_reason: null });
    for (const op of ['process', 'fail', 'approve']) expectError(await move(op, op === 'fail' ? { reason: 'late' } : {}), 409, 'CONFLICT');
  });

  it('the payout service operations succeed as well as refuse: approve_payout, process_payout, fail_payout, execute_payout', async () => {
    const L = await tenant(t);
    await completed(t, L.admin, { amount: '300.00' });
    const id = ((await settleJob().run(jobContext(), { ...window(), tenant_id: L.tenantId })) as { batch_ids: string[] }).batch_ids[0]!;
    const payments = t.app.services.get('payments');
    // A person (a system administrator who did not create the batch) approves above the threshold.
    const person: Actor = { ...systemActor(), id: String(new Types.ObjectId()), name: 'Ops', email: 'ops@example.com' };
    expect(await payments.approve_payout(person, id)).toMatchObject({ status: 'approved', approved_by: person.id, auto_approved: false });
    expect(await payments.process_payout(systemActor(), id)).toMatchObject({ status: 'processing' });
    expect(await payments.fail_payout(systemActor(), id, 'timeout at the bank')).toMatchObject({ status: 'failed', failure_reason: 'timeout at the bank' });
    expect(await payments.process_payout(systemActor(), id)).toMatchObject({ status: 'processing' });
    const done = await payments.execute_payout(systemActor(L.tenantId), id, 'SEPA-9');
    expect(done).toMatchObject({ status: 'completed', bank_reference: 'SEPA-9' });
    expect(done.paid_at).toBeInstanceOf(Date);
    // Another tenant's system actor does not reach it.
    const M = await tenant(t);
    await expect(payments.execute_payout(systemActor(M.tenantId), id, 'SEPA-9')).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('tenant isolation: tenant staff get 403 on every payout route; a system admin acting in another tenant gets 404 and changes nothing', async () => {
    const N = await tenant(t);
    const O = await tenant(t);
    await completed(t, N.admin, { amount: '2.00' });
    const id = ((await settleJob().run(jobContext(), { ...window(), tenant_id: N.tenantId })) as { batch_ids: string[] }).batch_ids[0]!;
    const before = await col(t, 'payout_batches').findOne({ _id: new Types.ObjectId(id) });
    const routes: [string, string, unknown][] = [
      ['GET', `/payouts/${id}`, undefined], ['POST', `/payouts/${id}/approve`, {}], ['POST', `/payouts/${id}/process`, {}],
      ['POST', `/payouts/${id}/fail`, { reason: 'r' }], ['POST', `/payouts/${id}/execute`, { bank_reference: 'b' }],
    ];
    for (const key of [N.admin, N.user, O.admin]) {
      for (const [method, path, json] of routes) expectError(await t.http(method, path, { key, json }), 403, 'ACCESS_DENIED');
    }
    for (const [method, path, json] of routes) {
      expectError(await t.http(method, path, { json, headers: { 'X-Tenant-Id': O.tenantId } }), 404, 'NOT_FOUND');
    }
    expect(await col(t, 'payout_batches').findOne({ _id: new Types.ObjectId(id) })).toEqual(before);
    // Listing while acting in O: O's batches only, even when asking for N's (and never a batch of no tenant, e.g. a partner's).
    const now = new Date();
    await col(t, 'payout_batches').insertOne({
      recipient_type: 'partner', recipient_id: 'partner-1', tenant_id: null, gross_amount: '1.00', fee_amount: '0.00', net_amount: '1.00', gross_minor: 100, fee_minor: 0, net_minor: 100,
      currency: 'USD', period_start: now, period_end: now, status: 'draft', payment_count: 0, payment_ids: [], bank_reference: null, paid_at: null, failure_reason: null,
      building: false, auto_approved: false, created_by: null, approved_by: null, approved_at: null, created_at: now, updated_at: now,
    });
    const scoped = await t.http('GET', `/payouts?tenant_id=${N.tenantId}`, { headers: { 'X-Tenant-Id': O.tenantId } });
    expect(scoped.body).toMatchObject({ items: [], total: 0 });
    const mine = await t.http('GET', `/payouts?tenant_id=${N.tenantId}`);
    expect(mine.body.items.map((b: any) => b.id)).toEqual([id]);
  });

  it('POST /payouts/settle: a system admin acting in one tenant cannot settle another (403, nothing settled) and settles only its own', async () => {
    const N = await tenant(t);
    const O = await tenant(t);
    const pn = await completed(t, N.admin, { amount: '3.00' });
    const po = await completed(t, O.admin, { amount: '4.00' });
    const unsettled = async (id: string) => (await col(t, 'payments').findOne({ _id: new Types.ObjectId(id) }))!.payout_batch_id ?? null;
    const batchesOf = (tenantId: string) => col(t, 'payout_batches').countDocuments({ tenant_id: new Types.ObjectId(tenantId) });

    const denied = await t.http('POST', '/payouts/settle', { json: { ...window(), tenant_id: N.tenantId }, headers: { 'X-Tenant-Id': O.tenantId } });
    expect(expectError(denied, 403, 'ACCESS_DENIED').message).toMatch(/another tenant/);
    expect(await unsettled(pn._id)).toBeNull();
    expect(await unsettled(po._id)).toBeNull();
    expect(await batchesOf(N.tenantId)).toBe(0);
    expect(await batchesOf(O.tenantId)).toBe(0);

    const own = await t.http('POST', '/payouts/settle', { json: window(), headers: { 'X-Tenant-Id': O.tenantId } });
    expect(own.status).toBe(200);
    expect(own.body.payment_count).toBe(1);
    expect(own.body.batches).toHaveLength(1);
    expect(own.body.batches[0]).toMatchObject({ tenant_id: O.tenantId, recipient_id: O.tenantId, payment_ids: [po._id], gross_amount: '4.00' });
    expect(String(await unsettled(po._id))).toBe(own.body.batches[0].id);
    expect(await unsettled(pn._id)).toBeNull();
    expect(await batchesOf(N.tenantId)).toBe(0);
  });

  it('settlement takes the period: paid outside it is left out, the default is yesterday (UTC), a refund in flight waits; each claim is audited', async () => {
    const P = await tenant(t);
    const day = 86_400_000;
    const midnight = new Date();
    midnight.setUTCHours(0, 0, 0, 0);
    const paidAt = async (p: Record<string, any>, at: Date, extra: Record<string, unknown> = {}) =>
      col(t, 'payments').updateOne({ _id: new Types.ObjectId(String(p._id)) }, { $set: { paid_at: at, ...extra } });
    const yesterday = await completed(t, P.admin, { amount: '1.00' });
    await paidAt(yesterday, new Date(midnight.getTime() - day / 2));
    const twoDaysAgo = await completed(t, P.admin, { amount: '2.00' });
    await paidAt(twoDaysAgo, new Date(midnight.getTime() - day - 1));
    const today = await completed(t, P.admin, { amount: '4.00' });
    await paidAt(today, midnight);
    const inFlight = await completed(t, P.admin, { amount: '8.00' });
    await paidAt(inFlight, new Date(midnight.getTime() - 1), { refund_reserved_minor: 100 });

    const res = (await settleJob().run(jobContext(), { tenant_id: P.tenantId })) as { batch_ids: string[]; payment_count: number; period_start: Date; period_end: Date };
    expect(res.payment_count).toBe(1);
    expect(new Date(res.period_start).getTime()).toBe(midnight.getTime() - day);
    expect(new Date(res.period_end).getTime()).toBe(midnight.getTime());
    const batch = (await t.http('GET', `/payouts/${res.batch_ids[0]}`)).body;
    expect(batch).toMatchObject({ payment_ids: [yesterday._id], gross_amount: '1.00' });
    // The claim is a Payment write: audited, as the system for a job.
    await t.app.services.get('audit').flush();
    const entry = await col(t, 'audit_log').findOne({ resource: 'payments', item_id: new Types.ObjectId(yesterday._id), 'changes.payout_batch_id': { $exists: true } });
    expect(entry).toMatchObject({ operation: 'update', user_id: null });
    expect(String(entry!.changes.payout_batch_id.new)).toBe(res.batch_ids[0]);
    // Once the refund settles, the waiting payment goes into the next run.
    await col(t, 'payments').updateOne({ _id: new Types.ObjectId(inFlight._id) }, { $set: { refund_reserved_minor: 0 } });
    expect(((await settleJob().run(jobContext(), { tenant_id: P.tenantId })) as { payment_count: number }).payment_count).toBe(1);
  });

  it('the job acting for one tenant settles that tenant only', async () => {
    const F = await tenant(t);
    const G = await tenant(t);
    await completed(t, F.admin, { amount: '1.00' });
    await completed(t, G.admin, { amount: '1.00' });
    const res = (await settleJob().run(jobContext({ tenant_id: F.tenantId, actor: systemActor(F.tenantId) }), window())) as { batch_ids: string[] };
    const batches = await col(t, 'payout_batches').find({ _id: { $in: res.batch_ids.map((x) => new Types.ObjectId(x)) } }).toArray();
    expect(batches.map((b) => String(b.tenant_id))).toEqual([F.tenantId]);
  });
});
