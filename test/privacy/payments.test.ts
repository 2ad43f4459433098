/** Erasure across plugins: a completed payment of the subject is exported with the payer's name, then keeps its money and loses the name. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { paymentsPlugin } from '../../plugins/payments/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import type { declaredData} from './helpers.ts';
import { auditEntries, collectionsHolding, createSubject, expectExportCovers, exportThenErase, type Subject } from './helpers.ts';

let t: TestApp;
let admin: { key: string; tenantId: string; userId: string };
let s: Subject;
let other: Subject;
let paid: any;
let othersPayment: any;
let exported: any;
let raw: Awaited<ReturnType<typeof declaredData>>;
let preview: any;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, webhooksPlugin, paymentsPlugin, privacyPlugin], config: { PAYMENTS_ENABLED: 'true' } });
  admin = await createTenantUser(t, { roles: ['admin'] });
  s = await createSubject(t, admin.tenantId);
  other = await createSubject(t, admin.tenantId);
  const pay = async (who: Subject) => {
    const r = await t.http('POST', '/payments', { key: who.key, json: { resource_type: 'order', resource_id: 'o-1', user_id: who.userId, user_name: who.name, amount: '12.50', currency: 'EUR', provider: 'manual' } });
    expect(r.status).toBe(201);
    return r.body;
  };
  paid = await pay(s);
  othersPayment = await pay(other);
  expect((await t.http('POST', `/payments/${paid._id}/process`, { key: s.key })).status).toBe(200);
  const done = await t.http('POST', `/payments/${paid._id}/complete`, { key: admin.key, json: { provider_reference: 'bank-1', provider_status: 'paid' } });
  expect(done.status).toBe(200);

  ({ exported, raw, preview } = await exportThenErase(t, s, admin.key));
  expect(preview.collections).toContainEqual({ name: 'payments', action: 'depersonalize', count: 1, fields: ['user_name'] });
});
afterAll(() => t?.close());

describe('the export before erasure', () => {
  it('lists the subject’s payment with its payer name and money fields, and not another payer’s', () => {
    expect(exported.collections.payments).toEqual([
      expect.objectContaining({ _id: String(paid._id), user_id: s.userId, user_name: s.name, currency: 'EUR', status: 'completed', provider_reference: 'bank-1' }),
    ]);
    expect(JSON.stringify(exported)).not.toContain(other.name);
  });

  it('holds the subject’s value of every field, in every collection, the erasure preview lists', () => {
    expect(preview.collections.map((c: any) => c.name)).toEqual(expect.arrayContaining(['payments', 'users']));
    expectExportCovers(exported, preview, raw);
  });
});

describe('a payment of an erased subject', () => {
  it('keeps its amount, currency, status and references; its payer name is null', async () => {
    const r = await t.http('GET', `/payments/${paid._id}`, { key: admin.key });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ amount: '12.50', currency: 'EUR', status: 'completed', provider_reference: 'bank-1', user_id: s.userId, user_name: null });
  });

  it('no collection holds the name any more; another payer is untouched', async () => {
    expect(await collectionsHolding(t, [s.name, s.email])).toEqual([]);
    const r = await t.http('GET', `/payments/${othersPayment._id}`, { key: admin.key });
    expect(r.body.user_name).toBe(other.name);
  });

  it('one depersonalize audit entry for the payment, naming the field and the subject', async () => {
    await t.app.services.get('audit').flush();
    const all = await auditEntries(t);
    const entries = all.filter((e: any) => e.operation === 'depersonalize' && e.resource === 'payments');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ item_id: String(paid._id), user_id: null, changes: { gdpr_fields: ['user_name'], user_id: s.userId } });
  });
});
