/**
 * GraphQL additions of console part 2 (docs/console.md lists them), each through gql() for a
 * system administrator, a tenant administrator and a plain user: `cronPreview`,
 * `JobSchedule.next_fire_times`, `deleteJobSchedule`, `purgeWebhookEvents`, `personalDataExport`,
 * `ledgerEntries`, `paymentRefunds`, `executePayout`; each against its REST twin, with tenant
 * isolation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { describeCron } from '../../plugins/jobs/cron-words.ts';

let t: TestApp;
let a: Awaited<ReturnType<typeof createTenantUser>>;
let u: Awaited<ReturnType<typeof createTenantUser>>;
let other: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await buildTestApp({
    plugins: builtinPlugins(),
    // Payout batches below the threshold are approved at settlement, so one can be executed here.
    config: { WEBHOOKS_ENABLED: 'true', JOBS_ENABLED: 'true', PAYMENTS_ENABLED: 'true', PAYMENTS_LEDGER_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false', PAYOUT_AUTO_APPROVE_THRESHOLD: '1000000' },
  });
  a = await createTenantUser(t, { roles: ['user', 'admin'] });
  u = await createTenantUser(t, { tenantId: a.tenantId, roles: ['user'] });
  other = await createTenantUser(t, { roles: ['user', 'admin'] });
});
afterAll(() => t?.close());

const code = (res: { body: { errors?: { extensions?: { code?: string } }[] } }) => res.body.errors?.[0]?.extensions?.code;

describe('cronPreview and JobSchedule.next_fire_times', () => {
  const Q = 'query($e: String!, $tz: String, $n: Int) { cronPreview(expression: $e, timezone: $tz, count: $n) { valid error description next } }';

  it('explains an expression in words and lists its next fire times', async () => {
    const res = await t.gql(Q, { e: '30 2 * * 1-5', tz: 'Europe/Paris' }, { key: a.key });
    expect(res.body.errors).toBeUndefined();
    const p = res.body.data.cronPreview;
    expect(p).toMatchObject({ valid: true, error: null, description: 'At 02:30, on Monday to Friday (Europe/Paris)' });
    expect(p.next).toHaveLength(5);
    const times = p.next.map((s: string) => new Date(s));
    for (const [i, d] of times.entries()) {
      const local = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', weekday: 'short', hour: '2-digit', minute: '2-digit' }).format(d);
      expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 02:30$/);
      if (i) expect(d.getTime()).toBeGreaterThan(times[i - 1]!.getTime());
    }
    const n = await t.gql(Q, { e: '*/15 * * * *', n: 3 }, { key: ADMIN_KEY });
    expect(n.body.data.cronPreview.next).toHaveLength(3);
    expect(n.body.data.cronPreview.description).toBe('Every 15 minutes, every day (UTC)');
  });

  it('says why an expression is invalid, refuses an unknown time zone and a plain user', async () => {
    const bad = await t.gql(Q, { e: '61 * * * *' }, { key: a.key });
    expect(bad.body.data.cronPreview).toMatchObject({ valid: false, description: null, next: [] });
    expect(bad.body.data.cronPreview.error).toBeTruthy();
    expect((await t.gql(Q, { e: '* * *' }, { key: a.key })).body.data.cronPreview.error).toMatch(/expected 5 fields/);
    expect(code(await t.gql(Q, { e: '0 * * * *', tz: 'Mars/Olympus' }, { key: a.key }))).toBe('VALIDATION_ERROR');
    expect(code(await t.gql(Q, { e: '0 * * * *' }, { key: u.key }))).toBe('ACCESS_DENIED');
  });

  it('describes common shapes', () => {
    expect(describeCron('0 * * * *', 'UTC')).toBe('At minute 0 of every hour, every day (UTC)');
    expect(describeCron('0 0 1 * *', 'UTC')).toBe('At 00:00, on day 1 of the month (UTC)');
    expect(describeCron('15 3 * 1,7 sun', 'UTC')).toBe('At 03:15, on Sunday, in January, July (UTC)');
    expect(describeCron('*/10 9-17 * * *', 'UTC')).toBe('At minute every 10 of hour 9 to 17, every day (UTC)');
  });

  it('gives each schedule its next five fire times, and deleteJobSchedule removes one as DELETE /jobs/schedules/{id} does', async () => {
    const created = await t.gql('mutation($i: JSON!) { upsertJobSchedule(input: $i) { id next_fire_times } }', { i: { job_name: 'nightly', job_type: 'cleanup_job_runs', cron_expression: '0 3 * * *' } }, { key: ADMIN_KEY });
    expect(created.body.errors).toBeUndefined();
    const s = created.body.data.upsertJobSchedule;
    expect(s.next_fire_times).toHaveLength(5);
    expect(new Date(s.next_fire_times[0]).getUTCHours()).toBe(3);
    const list = await t.gql('{ jobSchedules { id next_fire_times(count: 2) } }', {}, { key: ADMIN_KEY });
    expect(list.body.data.jobSchedules.find((x: any) => x.id === s.id).next_fire_times).toHaveLength(2);
    const del = 'mutation($id: String!) { deleteJobSchedule(id: $id) }';
    // A system schedule: hidden from tenant administrators, refused to plain users.
    expect(code(await t.gql(del, { id: s.id }, { key: a.key }))).toBe('NOT_FOUND');
    expect(code(await t.gql(del, { id: s.id }, { key: u.key }))).toBe('ACCESS_DENIED');
    expect((await t.gql(del, { id: s.id }, { key: ADMIN_KEY })).body.data.deleteJobSchedule).toBe(true);
    expect((await t.gql('{ jobSchedules { id } }', {}, { key: ADMIN_KEY })).body.data.jobSchedules.map((x: any) => x.id)).not.toContain(s.id);
  });
});

describe('purgeWebhookEvents', () => {
  const M = 'mutation($d: Int) { purgeWebhookEvents(retention_days: $d) { deleted_count retention_days cutoff_date } }';
  it('purges processed events for system administrators, as DELETE /webhooks/events/purge', async () => {
    const res = await t.gql(M, { d: 7 }, { key: ADMIN_KEY });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.purgeWebhookEvents).toMatchObject({ deleted_count: 0, retention_days: 7 });
    expect((await t.gql(M, {}, { key: ADMIN_KEY })).body.data.purgeWebhookEvents.retention_days).toBe(t.config.WEBHOOK_EVENT_RETENTION_DAYS);
  });
  it('refuses tenant administrators and a bad number', async () => {
    expect(code(await t.gql(M, { d: 7 }, { key: a.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql(M, { d: 0 }, { key: ADMIN_KEY }))).toBe('VALIDATION_ERROR');
  });
});

describe('personalDataExport', () => {
  const Q = 'query($id: String!) { personalDataExport(user_id: $id) { filename data } }';
  it('gives a user their own export and an administrator their tenant user\'s, as REST does', async () => {
    const own = await t.gql(Q, { id: u.userId }, { key: u.key });
    expect(own.body.errors).toBeUndefined();
    expect(own.body.data.personalDataExport.filename).toMatch(new RegExp(`^personal-data-${u.userId}-.+\\.json$`));
    const rest = await t.http('GET', `/privacy/users/${u.userId}/export`, { key: u.key });
    expect(Object.keys(own.body.data.personalDataExport.data).sort()).toEqual(Object.keys(rest.body).sort());
    expect((await t.gql(Q, { id: u.userId }, { key: a.key })).body.errors).toBeUndefined();
  });
  it('refuses another user and another tenant', async () => {
    expect(code(await t.gql(Q, { id: a.userId }, { key: u.key }))).toBe('ACCESS_DENIED');
    expect(['ACCESS_DENIED', 'NOT_FOUND']).toContain(code(await t.gql(Q, { id: u.userId }, { key: other.key })));
  });
});

describe('ledgerEntries', () => {
  const Q = '{ ledgerEntries(per_page: 10) { total items { entry_type account direction amount currency payment_id } } }';
  it('lists the tenant\'s ledger lines for administrators, as GET /ledger/entries', async () => {
    const p = await t.http('POST', '/payments', { key: a.key, json: { resource_type: 'order', resource_id: 'o1', user_id: 'c1', user_name: 'C', amount: '12.50', currency: 'EUR', provider: 'manual' } });
    expect(p.status).toBe(201);
    await t.http('POST', `/payments/${p.body._id}/process`, { key: a.key, json: {} });
    const c = await t.http('POST', `/payments/${p.body._id}/complete`, { key: a.key, json: { provider_reference: 'bank-1', provider_status: 'paid' } });
    expect(c.status).toBe(200);
    const res = await t.gql(Q, {}, { key: a.key });
    expect(res.body.errors).toBeUndefined();
    const rest = await t.http('GET', '/ledger/entries', { key: a.key });
    expect(res.body.data.ledgerEntries.total).toBe(rest.body.total);
    expect(res.body.data.ledgerEntries.items.length).toBeGreaterThan(0);
    expect(res.body.data.ledgerEntries.items.every((e: any) => e.payment_id === p.body._id && e.currency === 'EUR' && e.amount === '12.50')).toBe(true);
    expect((await t.gql(Q, {}, { key: other.key })).body.data.ledgerEntries.total).toBe(0);
  });
  it('refuses a plain user', async () => {
    expect(code(await t.gql(Q, {}, { key: u.key }))).toBe('ACCESS_DENIED');
  });
});

/** A completed payment of tenant `a` (manual provider), created through REST. */
const completedPayment = async (amount: string, rid: string) => {
  const p = await t.http('POST', '/payments', { key: a.key, json: { resource_type: 'order', resource_id: rid, user_id: u.userId, user_name: 'U', amount, currency: 'EUR', provider: 'manual' } });
  expect(p.status).toBe(201);
  expect((await t.http('POST', `/payments/${p.body._id}/process`, { key: a.key, json: {} })).status).toBe(200);
  expect((await t.http('POST', `/payments/${p.body._id}/complete`, { key: a.key, json: { provider_reference: `bank-${rid}`, provider_status: 'paid' } })).status).toBe(200);
  return p.body._id as string;
};

describe('paymentRefunds', () => {
  const Q = 'query($id: ID!) { paymentRefunds(id: $id) { id payment_id amount currency reason status provider_refund_id error created_at updated_at } }';
  it('lists the refund attempts of a payment, oldest first, as GET /payments/{id}/refunds', async () => {
    const id = await completedPayment('40.00', 'refunds-1');
    for (const amount of ['10.00', '5.50']) expect((await t.http('POST', `/payments/${id}/refund`, { key: a.key, json: { amount, reason: `part ${amount}` } })).status).toBe(200);
    const res = await t.gql(Q, { id }, { key: a.key });
    expect(res.body.errors).toBeUndefined();
    const rest = await t.http('GET', `/payments/${id}/refunds`, { key: a.key });
    expect(rest.status).toBe(200);
    expect(res.body.data.paymentRefunds).toEqual(rest.body.items);
    expect(res.body.data.paymentRefunds.map((r: any) => [r.amount, r.currency, r.reason, r.status])).toEqual([['10.00', 'EUR', 'part 10.00', 'succeeded'], ['5.50', 'EUR', 'part 5.50', 'succeeded']]);
    // The payer (a plain user of the tenant) reads them where REST lets them, with the same answer.
    const mine = await t.http('GET', `/payments/${id}/refunds`, { key: u.key });
    const g = await t.gql(Q, { id }, { key: u.key });
    if (mine.status === 200) expect(g.body.data.paymentRefunds).toEqual(mine.body.items);
    else expect(code(g)).toBe(mine.body.error.code);
  });
  it('is NOT_FOUND in another tenant and for an unknown id, as REST', async () => {
    const id = await completedPayment('3.00', 'refunds-2');
    expect((await t.http('GET', `/payments/${id}/refunds`, { key: other.key })).status).toBe(404);
    expect(code(await t.gql(Q, { id }, { key: other.key }))).toBe('NOT_FOUND');
    expect(code(await t.gql(Q, { id: '0123456789abcdef01234567' }, { key: a.key }))).toBe('NOT_FOUND');
    expect(code(await t.gql(Q, { id: 'not-an-id' }, { key: a.key }))).toBe('NOT_FOUND');
    expect((await t.gql(Q, { id }, { key: ADMIN_KEY })).body.data.paymentRefunds).toEqual([]);
  });
});

describe('executePayout', () => {
  const M = 'mutation($id: ID!, $ref: String!) { executePayout(id: $id, bank_reference: $ref) { id status bank_reference paid_at tenant_id } }';
  let batch: { id: string; status: string };
  beforeAll(async () => {
    await completedPayment('25.00', 'payout-1');
    const day = 86_400_000;
    const settled = await t.http('POST', '/payouts/settle', { key: ADMIN_KEY, json: { period_start: new Date(Date.now() - day).toISOString(), period_end: new Date(Date.now() + day).toISOString(), tenant_id: a.tenantId } });
    expect(settled.status).toBe(200);
    batch = settled.body.batches.find((b: any) => b.tenant_id === a.tenantId);
    expect(batch.status).toBe('approved');
  });

  it('refuses tenant administrators and users (payouts are for system administrators), as REST', async () => {
    for (const key of [a.key, u.key, other.key]) {
      expect((await t.http('POST', `/payouts/${batch.id}/execute`, { key, json: { bank_reference: 'X' } })).status).toBe(403);
      expect(code(await t.gql(M, { id: batch.id, ref: 'X' }, { key }))).toBe('ACCESS_DENIED');
    }
    expect((await t.gql('query($id: ID!) { payout(id: $id) { status } }', { id: batch.id }, { key: ADMIN_KEY })).body.data.payout.status).toBe('approved');
  });

  it('completes an approved batch with the bank reference; the same reference again is a no-op, another is the same error as REST', async () => {
    const res = await t.gql(M, { id: batch.id, ref: 'BANK-2026-001' }, { key: ADMIN_KEY });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.executePayout).toMatchObject({ id: batch.id, status: 'completed', bank_reference: 'BANK-2026-001', tenant_id: a.tenantId });
    expect(res.body.data.executePayout.paid_at).toBeTruthy();
    const rest = await t.http('GET', `/payouts/${batch.id}`, { key: ADMIN_KEY });
    expect(rest.body).toMatchObject({ status: 'completed', bank_reference: 'BANK-2026-001', paid_at: res.body.data.executePayout.paid_at });
    expect((await t.gql(M, { id: batch.id, ref: 'BANK-2026-001' }, { key: ADMIN_KEY })).body.data.executePayout.status).toBe('completed');
    const restConflict = await t.http('POST', `/payouts/${batch.id}/execute`, { key: ADMIN_KEY, json: { bank_reference: 'OTHER' } });
    expect(restConflict.status).toBe(409);
    expect(code(await t.gql(M, { id: batch.id, ref: 'OTHER' }, { key: ADMIN_KEY }))).toBe(restConflict.body.error.code);
  });

  it('answers NOT_FOUND for an unknown batch and VALIDATION_ERROR for an empty reference, as REST', async () => {
    const unknown = '0123456789abcdef01234567';
    expect((await t.http('POST', `/payouts/${unknown}/execute`, { key: ADMIN_KEY, json: { bank_reference: 'X' } })).body.error.code).toBe('NOT_FOUND');
    expect(code(await t.gql(M, { id: unknown, ref: 'X' }, { key: ADMIN_KEY }))).toBe('NOT_FOUND');
    expect((await t.http('POST', `/payouts/${batch.id}/execute`, { key: ADMIN_KEY, json: { bank_reference: '' } })).body.error.code).toBe('VALIDATION_ERROR');
    expect(code(await t.gql(M, { id: batch.id, ref: '' }, { key: ADMIN_KEY }))).toBe('VALIDATION_ERROR');
  });
});
