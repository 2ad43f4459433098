/** The payment routes in /openapi.json (valid OpenAPI 3.1), the personal-data declaration, and the plugin switched off. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { openapiPlugin } from '../../plugins/openapi/index.ts';
import type { TestApp } from '../helpers/app.ts';
import { paymentsApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await paymentsApp({ plugins: [openapiPlugin], config: { PAYMENTS_LEDGER_ENABLED: 'true' } });
});
afterAll(() => t?.close());

describe('payments in OpenAPI', () => {
  it('documents every payment, ledger and payout route and stays valid', async () => {
    const doc = (await t.http('GET', '/openapi.json', { key: null })).body;
    expect(Object.keys(doc.paths['/payments']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/payments/{id}']).sort()).toEqual(['get', 'put']);
    for (const op of ['process', 'complete', 'cancel', 'refund']) expect(doc.paths[`/payments/{id}/${op}`].post).toBeDefined();
    for (const p of ['/ledger/entries', '/ledger/balance', '/payouts', '/payouts/{id}']) expect(doc.paths[p].get).toBeDefined();
    for (const p of ['/payouts/settle', '/payouts/{id}/approve', '/payouts/{id}/process', '/payouts/{id}/fail', '/payouts/{id}/execute']) expect(doc.paths[p].post).toBeDefined();
    expect(doc.paths['/payments/{id}/refund'].post.responses).toHaveProperty('400');
    const res = await new Validator().validate(structuredClone(doc));
    expect(res.errors).toBeUndefined();
    expect(res.valid).toBe(true);
  });

  it('declares the personal data of payments for the privacy plugin, through its resource definition', () => {
    const decls = t.app.kernel.personalData().filter((d) => d.name === 'payments');
    expect(decls).toEqual([expect.objectContaining({
      plugin: 'resources', name: 'payments', model: 'payments', subject_field: 'user_id', gdpr_fields: ['user_name'], neutral: { user_name: null }, on_erasure: 'depersonalize',
    })]);
    expect(t.app.db.conn.models.payments).toBeDefined();
  });

  it('offers its jobs to the jobs plugin', () => {
    expect(t.app.kernel.jobs().filter((j) => j.plugin === 'payments').map((j) => j.name)).toEqual(['settle_payouts', 'reconcile_payment_refunds', 'reconcile_payment_ledger']);
  });
});

describe('PAYMENTS_ENABLED=false', () => {
  it('mounts nothing, but the provider registry exists', async () => {
    const off = await paymentsApp({ config: { PAYMENTS_ENABLED: 'false' } });
    try {
      expect((await off.http('GET', '/payments')).status).toBe(404);
      expect((await off.http('GET', '/payouts')).status).toBe(404);
      expect(Object.keys(off.app.schema.getQueryType()!.getFields())).not.toContain('payments');
      expect(off.app.services.get('payments').providers()).toEqual(['manual']);
    } finally {
      await off.close();
    }
  });
});
