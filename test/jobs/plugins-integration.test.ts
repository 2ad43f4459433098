/**
 * Other plugins' jobs through the real jobs plugin (Agenda, job_runs): privacy's erasure runs as a
 * job with its progress on the run, and payments' settlement is in the registry and runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { paymentsPlugin } from '../../plugins/payments/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { collectionsHolding, createSubject, seedSubject } from '../privacy/helpers.ts';
import { privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { FAST, trigger, until, waitRun } from './helpers.ts';

let t: TestApp;
let admin: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin, auditPlugin, webhooksPlugin, jobsPlugin, paymentsPlugin, privacyPlugin, privacyDataPlugin],
    config: { ...FAST, PAYMENTS_ENABLED: 'true' },
  });
  admin = await createTenantUser(t, { roles: ['admin'] });
});
afterAll(() => t?.close());

describe('privacy erasure as a job', () => {
  it('execute answers 202 with the job run; the run completes the request and its progress ends at the total', async () => {
    const s = await createSubject(t, admin.tenantId);
    const seeded = await seedSubject(t, s, { notes: 2 });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(r.status).toBe(201);
    const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(ex.status).toBe(202);
    const runId = ex.body.job_run_id as string;
    expect(runId).toBeTruthy();
    const run = await waitRun(t, runId);
    expect(run).toMatchObject({ job_name: 'execute_erasure', status: 'completed' });
    expect(run).toMatchObject({ progress_current: 8, progress_total: 8, percentage: 100 });
    const done = await until(async () => {
      const g = await t.http('GET', `/privacy/erasure-requests/${r.body.id}`, { key: admin.key });
      return g.body.status === 'completed' ? g.body : null;
    }, 20_000, 'request completed');
    expect(done.job_run_id).toBe(runId);
    expect(await collectionsHolding(t, [s.email, s.name, seeded.oldName])).toEqual([]);
    // The tenant admin who asked sees the run; it ran in the request's tenant.
    const seen = await t.http('GET', `/jobs/runs/${runId}`, { key: admin.key });
    expect(seen.status).toBe(200);
  });
});

describe('payments jobs in the registry', () => {
  it('settle_payouts, the refund reconciler and the erasure job are registered with their plugin and run', async () => {
    const reg = await t.http('GET', '/jobs/registry');
    expect(reg.status).toBe(200);
    const names = (Array.isArray(reg.body) ? reg.body : reg.body.jobs ?? reg.body.items).map((j: { name: string }) => j.name);
    expect(names).toEqual(expect.arrayContaining(['settle_payouts', 'reconcile_payment_refunds', 'execute_erasure']));
    const res = await trigger(t, 'settle_payouts');
    expect(res.status).toBe(202);
    const run = await waitRun(t, res.body.id);
    expect(run.status).toBe('completed');
  });
});
