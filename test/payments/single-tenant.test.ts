/**
 * `MULTI_TENANT_ENABLED=false`: the deployment is one tenant, so the ledger and the payout batches
 * add no tenant term to their reads, as every other plugin (writes still stamp `tenant_id`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { completed, paymentsApp, tenant } from './helpers.ts';

let t: TestApp;
let A: Awaited<ReturnType<typeof tenant>>;
let B: Awaited<ReturnType<typeof tenant>>;
const window = () => ({ period_start: new Date(Date.now() - 3600_000).toISOString(), period_end: new Date(Date.now() + 3600_000).toISOString() });

beforeAll(async () => {
  t = await paymentsApp({ config: { MULTI_TENANT_ENABLED: 'false', PAYMENTS_LEDGER_ENABLED: 'true' } });
  A = await tenant(t);
  B = await tenant(t);
});
afterAll(() => t?.close());

describe('with MULTI_TENANT_ENABLED off', () => {
  it('the ledger shows an administrator the entries of every tenant (REST and GraphQL)', async () => {
    const pa = await completed(t, A.admin, { amount: '3.00' });
    const pb = await completed(t, B.admin, { amount: '4.00' });
    const entries = await t.http('GET', '/ledger/entries?per_page=100', { key: A.admin });
    expect(entries.status).toBe(200);
    const payments = new Set(entries.body.items.map((e: any) => e.payment_id));
    expect(payments.has(pa._id) && payments.has(pb._id)).toBe(true);
    // Written with their own tenant all the same.
    expect(entries.body.items.find((e: any) => e.payment_id === pb._id).tenant_id).toBe(B.tenantId);
    const balance = await t.http('GET', '/ledger/balance', { key: A.admin });
    expect(new Set(balance.body.items.map((r: any) => r.tenant_id))).toEqual(new Set([A.tenantId, B.tenantId]));
    const gql = await t.gql('{ ledgerBalance { tenant_id } }', {}, { key: A.admin });
    expect(new Set(gql.body.data.ledgerBalance.map((r: any) => r.tenant_id))).toEqual(new Set([A.tenantId, B.tenantId]));
  });

  it('payouts: a system administrator acting in one tenant reaches the batches of every tenant (REST and GraphQL)', async () => {
    await completed(t, A.admin, { amount: '5.00' });
    await completed(t, B.admin, { amount: '6.00' });
    const asA = { 'X-Tenant-Id': A.tenantId };
    const settled = await t.http('POST', '/payouts/settle', { json: window(), headers: asA });
    expect(settled.status).toBe(200);
    expect(new Set(settled.body.batches.map((b: any) => b.tenant_id))).toEqual(new Set([A.tenantId, B.tenantId]));
    const ofB = settled.body.batches.find((b: any) => b.tenant_id === B.tenantId);
    expect((await t.http('GET', `/payouts/${ofB.id}`, { headers: asA })).body).toMatchObject({ id: ofB.id, tenant_id: B.tenantId });
    const list = await t.http('GET', `/payouts?tenant_id=${B.tenantId}`, { headers: asA });
    expect(list.body.items.map((b: any) => b.id)).toEqual([ofB.id]);
    const gql = await t.gql('query($id: ID!) { payout(id: $id) { id tenant_id } }', { id: ofB.id }, { headers: asA });
    expect(gql.body.data.payout).toEqual({ id: ofB.id, tenant_id: B.tenantId });
    // Tenant staff still get 403: payouts are for system administrators, whatever the setting.
    expect((await t.http('GET', `/payouts/${ofB.id}`, { key: B.admin })).status).toBe(403);
  });
});
