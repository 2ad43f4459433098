/**
 * Console part 2 end to end in Chromium (as browser.test.ts): the plugin screens as a tenant
 * administrator, a plain user and a system administrator, each screenshotted and checked with axe.
 * A job's progress bar reaches 100% without reloading (jobRun subscription), a server validation
 * error shows next to its field, an outbound delivery fails and then succeeds on retry, a
 * dead-letter event whose handler was fixed is drained, a partial refund is followed by a refused
 * over-refund, an erasure is previewed and executed with live progress, and a plain user sees none
 * of the administrators' screens while the API refuses them too.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins, corePlugins } from '../../builtin-plugins.ts';
import { createApp, type App } from '../../core/kernel.ts';
import { definePlugin, type JobDefinition } from '../../core/plugin.ts';
import { ADMIN_KEY, TEST_SECRETS, uniqueDbUri } from '../helpers/app.ts';
import { hmac, newCalls, providersPlugin, SECRET } from '../webhooks/helpers.ts';
import { startReceiver, type Receiver } from '../webhooks/outbound-helpers.ts';
import { CHROMIUM, freePort, screen, signIn, signOut, watchErrors } from './helpers.ts';

const haveBrowser = existsSync(CHROMIUM);

/** A per-tenant job a tenant administrator may run: `steps` steps of 250 ms, each reporting progress. */
const demoJobs = definePlugin({
  name: 'console-demo-jobs',
  setup() {
    const job = {
      name: 'console_demo', description: 'Counts to `steps`, reporting progress', timeout: 60, max_attempts: 1, per_tenant: true,
      params: z.object({ steps: z.number().int().min(1).max(20).describe('How many steps'), label: z.string().max(20).optional() }),
      async run(ctx, p) {
        for (let i = 1; i <= p.steps; i++) {
          await new Promise((r) => setTimeout(r, 250));
          await ctx.progress(i, p.steps, `step ${i} of ${p.steps}`);
          ctx.log(`step ${i} done`);
        }
        return { counted: p.steps };
      },
    } satisfies JobDefinition<z.ZodObject<{ steps: z.ZodNumber; label: z.ZodOptional<z.ZodString> }>>;
    return { jobs: [job as unknown as JobDefinition] };
  },
});

describe.skipIf(!haveBrowser)('admin console part 2 in Chromium', () => {
  let app: App;
  let origin: string;
  let api: string;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  let receiver: Receiver;
  const calls = newCalls();
  const ids: Record<string, string> = {};

  const call = async (method: string, path: string, key: string | null, json?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(api + path, {
      method,
      headers: { ...(key ? { 'X-API-Key': key } : {}), ...(json !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
      ...(json !== undefined ? { body: typeof json === 'string' ? json : JSON.stringify(json) } : {}),
    });
    return { status: res.status, body: res.status === 204 ? null : ((await res.json()) as any) };
  };
  const gql = (key: string, query: string, variables: Record<string, unknown> = {}) => call('POST', '/graphql', key, { query, variables });
  const nav = (label: string) => page.click(`nav[aria-label=Main] a:text-is("${label}")`);

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://localhost:${port}`;
    api = `http://127.0.0.1:${port}`;
    receiver = await startReceiver();
    const config = loadConfig({
      NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY, MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS,
      AUTH_CACHE_TTL_MS: '0', METRICS_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false',
      WEBHOOKS_ENABLED: 'true', JOBS_ENABLED: 'true', PAYMENTS_ENABLED: 'true', PAYMENTS_LEDGER_ENABLED: 'true',
      JOBS_POLL_INTERVAL_MS: '100', EVENTS_POLL_INTERVAL_MS: '50',
      WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_DELIVERY_RETRY_SCHEDULE: '0', WEBHOOK_DELIVERY_POLL_INTERVAL_MS: '50', WEBHOOK_DELIVERY_TIMEOUT_MS: '2000',
    });
    const providers = providersPlugin(calls, [{ provider: 'acme', secret: SECRET, verifier: { type: 'hmac-sha256' }, event_id_path: 'id', max_retries: 0 }]);
    app = await createApp({ corePlugins: corePlugins(), config, plugins: [...builtinPlugins(), demoJobs, providers] });
    await app.listen(port, '127.0.0.1');

    ids.tenant = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Initech' })).body.id;
    const mkUser = async (email: string, roles: string[]) => {
      const u = await call('POST', '/admin/users', ADMIN_KEY, { email, name: email.split('@')[0], tenant_id: ids.tenant, roles, features: [] });
      const k = await call('POST', '/admin/api-keys', ADMIN_KEY, { user_id: u.body.id, name: 'setup' });
      return { id: u.body.id as string, key: k.body.key as string };
    };
    const admin = await mkUser('bill@initech.test', ['user', 'admin']);
    const plain = await mkUser('milton@initech.test', ['user']);
    const leaver = await mkUser('peter@initech.test', ['user']);
    Object.assign(ids, { adminKey: admin.key, adminId: admin.id, plainKey: plain.key, plainId: plain.id, leaverKey: leaver.key, leaverId: leaver.id });
    await call('POST', '/privacy/consents', leaver.key, { purpose: 'newsletter' });
    await call('POST', '/projects', leaver.key, { name: 'Peter project' });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await receiver?.close();
  });

  it('a tenant administrator: events live, an endpoint (secret once, failed delivery then retried), a job to 100% live, a schedule', async () => {
    await signIn(page, origin, ids.adminKey!);
    await page.waitForSelector('nav[aria-label=Main] a:text-is("Jobs")');
    expect(await page.locator('nav[aria-label=Main] a').allTextContents()).toEqual(['Overview', 'Resources', 'Audit log', 'Identity', 'Roles', 'Events', 'Webhooks', 'Jobs', 'Payments', 'Privacy', 'My account']);

    // Webhooks: create an endpoint, its secret shown once.
    await nav('Webhooks');
    await page.fill('#ep-url', receiver.url);
    await page.fill('#ep-desc', 'Our CRM');
    await page.check('label:has-text("projects.created") input');
    await page.click('button:has-text("Create endpoint")');
    const secret = (await page.textContent('[data-testid=new-secret]'))!;
    expect(secret).toMatch(/^whsec_/);
    await screen(page, 'tenant-admin-webhooks-secret-once');
    await page.click('button:has-text("I have copied it")');
    await page.click(`[data-testid=endpoints] a:has-text("${receiver.url}")`);
    await page.waitForSelector('h1:has-text("Endpoint")');

    // The receiver fails the first delivery, then accepts: the retry succeeds.
    let n = 0;
    receiver.respond = () => (++n === 1 ? 500 : 200);
    // Events, live: a project created elsewhere appears without reloading.
    await nav('Events');
    await page.waitForSelector('[data-testid=event-list]');
    await page.waitForSelector('[data-testid=event-list] tbody tr');
    await page.waitForTimeout(300); // the subscription is open
    const before = await page.locator('[data-testid=event-list] tbody tr').count();
    const created = await call('POST', '/projects', ids.adminKey!, { name: 'Live one' });
    // Newest first: the project's event is the first projects.created among the rows that arrived live
    // (a delivery's webhook_delivery.failed may arrive beside it, before or after).
    await page.waitForFunction((n) => {
      const rows = [...document.querySelectorAll('[data-testid=event-list] tbody tr')];
      return rows.slice(0, rows.length - n).some((r) => r.textContent?.includes('projects.created'));
    }, before);
    await page.locator('[data-testid=event-list] tbody tr', { hasText: 'projects.created' }).first().locator('td:first-child button').click();
    expect(await page.textContent('[data-testid=json]')).toContain(created.body._id);
    await page.selectOption('#ev-type', 'projects.created');
    await page.waitForSelector('[data-testid=event-list] tbody tr');
    await screen(page, 'tenant-admin-events');

    await nav('Webhooks');
    await page.click(`[data-testid=endpoints] a:has-text("${receiver.url}")`);
    await page.selectOption('#dl-status', 'failed');
    await page.waitForSelector('[data-testid=deliveries] tr[data-status=failed]');
    expect(await page.textContent('[data-testid=deliveries] tr[data-status=failed]')).toContain('HTTP 500');
    await screen(page, 'tenant-admin-webhooks-delivery-failed');
    await page.selectOption('#dl-status', '');
    await page.click('[data-testid=deliveries] tr[data-status=failed] button:has-text("Retry")');
    await page.waitForSelector('[data-testid=deliveries] tr[data-status=delivered]:has-text("HTTP 200")');
    expect(receiver.verified(secret).length).toBe(2);
    // Every attempt is shown: the 500, then the 200.
    const attempts = page.locator('[data-testid=deliveries] tr[data-status=delivered] [data-testid=attempt-log] li');
    expect(await attempts.count()).toBe(2);
    expect(await attempts.nth(0).textContent()).toContain('HTTP 500');
    expect(await attempts.nth(1).textContent()).toContain('HTTP 200');
    // Live: a new delivery fails, then another session retries it; the list follows both without a reload.
    const epId = (await call('GET', '/webhook-endpoints', ids.adminKey!)).body.items[0].id as string;
    let reloads = 0;
    const countNav = () => reloads++;
    page.on('framenavigated', countNav);
    receiver.respond = () => 500;
    await call('POST', '/projects', ids.adminKey!, { name: 'Delivered later' });
    await page.waitForSelector('[data-testid=deliveries] tr[data-status=failed]:has-text("HTTP 500")');
    const failedId = (await call('GET', `/webhook-endpoints/${epId}/deliveries?status=failed`, ids.adminKey!)).body.items[0].id as string;
    receiver.respond = () => 200;
    expect((await call('POST', `/webhook-endpoints/${epId}/deliveries/${failedId}/retry`, ids.adminKey!)).body.status).toBe('delivered');
    await page.waitForFunction(() => !document.querySelector('[data-testid=deliveries] tr[data-status=failed]'));
    expect(await page.locator('[data-testid=deliveries] tr[data-status=delivered]').count()).toBe(2);
    page.off('framenavigated', countNav);
    expect(reloads).toBe(0);
    await screen(page, 'tenant-admin-webhooks-attempts-live');
    // Edit event types, send a test, disable.
    await page.check('form[aria-label="Event types of this endpoint"] label:has-text("projects.updated") input');
    await page.click('button:has-text("Save event types")');
    await page.click('button:has-text("Send test")');
    await page.click('button:text-is("Disable")');
    await page.waitForSelector('button:text-is("Enable")');
    await screen(page, 'tenant-admin-webhooks-endpoint');

    // Jobs: the trigger form, a validation error from the server next to its field, then a live run to 100%.
    await nav('Jobs');
    await page.waitForSelector('[data-testid=registry] td:has-text("console_demo")');
    await screen(page, 'tenant-admin-jobs-registry');
    await page.click('a:has-text("Run console_demo…")');
    await page.fill('#jp-steps', '99');
    await page.click('button:has-text("Run now")');
    await page.waitForSelector('#jp-steps-err');
    expect(await page.getAttribute('#jp-steps', 'aria-invalid')).toBe('true');
    await screen(page, 'tenant-admin-jobs-trigger-validation-error');
    await page.fill('#jp-steps', '6');
    await page.click('button:has-text("Run now")');
    await page.waitForSelector('[data-testid=progress]');
    const url = page.url();
    let navigations = 0;
    page.on('framenavigated', () => navigations++);
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=progress]')?.getAttribute('value')) > 0 && Number(document.querySelector('[data-testid=progress]')?.getAttribute('value')) < 100, undefined, { timeout: 15_000 });
    await page.waitForSelector('[data-testid=progress-text]:text-is("100%")', { timeout: 15_000 });
    await page.waitForSelector('[data-testid=run-status]:text-is("completed")');
    expect(await page.textContent('[data-testid=run-logs]')).toContain('step 6 done');
    expect(navigations).toBe(0);
    expect(page.url()).toBe(url);
    await screen(page, 'tenant-admin-jobs-run-live');
    await page.click('nav[aria-label=Jobs] a:has-text("Runs")');
    await page.waitForSelector('[data-testid=runs] td:has-text("completed")');
    await page.waitForTimeout(300); // the subscription is open
    // A run started by another session appears, then completes, without a reload.
    const listUrl = page.url();
    let listNavs = 0;
    const countListNav = () => listNavs++;
    page.on('framenavigated', countListNav);
    const other = await call('POST', '/jobs/run/console_demo', ids.adminKey!, { parameters: { steps: 2, label: 'elsewhere' } });
    expect(other.status).toBe(202);
    const row = `[data-testid=runs] tr:has(a[href="#/jobs/runs/${other.body.id}"])`;
    await page.waitForSelector(row);
    await page.waitForSelector(`${row} td:text-is("completed")`, { timeout: 15_000 });
    page.off('framenavigated', countListNav);
    expect(listNavs).toBe(0);
    expect(page.url()).toBe(listUrl);
    await screen(page, 'tenant-admin-jobs-runs');

    // Schedules: the expression in words and five next fire times, save, disable.
    await page.click('nav[aria-label=Jobs] a:has-text("Schedules")');
    await page.click('button:has-text("New schedule")');
    await page.fill('#sc-job_name', 'nightly-demo');
    await page.selectOption('#sc-job_type', 'console_demo');
    await page.fill('#sc-cron_expression', '30 2 * * 1-5');
    await page.fill('#sc-parameters', '{"steps": 2}');
    await page.waitForSelector('[data-testid=cron-preview] strong:has-text("At 02:30, on Monday to Friday (UTC)")');
    expect(await page.locator('[data-testid=cron-preview] li').count()).toBe(5);
    await screen(page, 'tenant-admin-jobs-schedule-form');
    await page.click('button:has-text("Save schedule")');
    await page.waitForSelector('[data-testid=schedules] td:has-text("nightly-demo")');
    expect(await page.locator('[data-testid=schedules] tr:has-text("nightly-demo") li').count()).toBe(5);
    await page.click('button:has-text("Disable nightly-demo")');
    await page.waitForSelector('button:has-text("Enable nightly-demo")');
    await screen(page, 'tenant-admin-jobs-schedules');
  }, 180_000);

  it('a tenant administrator: payments (exact money, capture, partial refund, refused over-refund, history), ledger; privacy with an erasure previewed and executed live', async () => {
    const mk = async (amount: string, currency: string, rid: string) =>
      (await call('POST', '/payments', ids.adminKey!, { resource_type: 'order', resource_id: rid, user_id: ids.leaverId, user_name: 'Peter', amount, currency, provider: 'manual' })).body._id as string;
    const usd = await mk('100.00', 'USD', 'ord-usd');
    await mk('1234.50', 'EUR', 'ord-eur');
    await mk('5000', 'JPY', 'ord-jpy');
    expect((await call('POST', `/payments/${usd}/process`, ids.adminKey!, {})).status).toBe(200);
    ids.usd = usd;

    await nav('Payments');
    await page.waitForSelector('[data-testid=payments] td:has-text("¥5,000")');
    const amounts = await page.locator('[data-testid=payments] td.num').allTextContents();
    expect(amounts).toEqual(expect.arrayContaining(['$100.00', '€1,234.50', '¥5,000']));
    await screen(page, 'tenant-admin-payments-list');
    await page.click('a:has-text("order ord-usd")');
    await page.fill('#cap-ref', 'bank-42');
    await page.click('button:has-text("Capture (complete)")');
    await page.waitForSelector('[data-testid=payment-status]:text-is("completed")');
    expect(await page.textContent('[data-testid=pay-refundable]')).toBe('$100.00');
    await page.fill('#refund-amount', '30.00');
    await page.click('button:text-is("Refund")');
    await page.waitForSelector('[data-testid=payment-status]:text-is("partially_refunded")');
    expect(await page.textContent('[data-testid=pay-refundable]')).toBe('$70.00');
    await page.fill('#refund-amount', '80.00');
    await page.click('button:text-is("Refund")');
    await page.waitForSelector('[role=alert]');
    const refusal = (await page.textContent('[role=alert]'))!;
    const direct = await gql(ids.adminKey!, 'mutation($id: ID!) { refundPayment(id: $id, amount: "80.00") { _id } }', { id: usd });
    expect(refusal).toContain(direct.body.errors[0].message);
    expect(await page.textContent('[data-testid=payment-status]')).toBe('partially_refunded');
    await page.waitForSelector('[data-testid=payment-history] li:has-text("completed → partially_refunded")');
    // The refund attempts: the one refund (the refused one never became an attempt), as GraphQL paymentRefunds lists it.
    await page.waitForSelector('[data-testid=refund-attempts] tr[data-status=succeeded]');
    expect(await page.locator('[data-testid=refund-attempts] tbody tr').count()).toBe(1);
    expect(await page.textContent('[data-testid=refund-attempts] tbody tr')).toContain('$30.00');
    await screen(page, 'tenant-admin-payment-detail-refund-refused');
    await page.click('nav[aria-label=Payments] a:has-text("Ledger")');
    await page.waitForSelector('[data-testid=ledger-entries] tbody tr');
    await screen(page, 'tenant-admin-payments-ledger');

    // Privacy: consents of a user, the export downloaded, an erasure previewed then executed with live progress.
    await nav('Privacy');
    await page.selectOption('#pv-user', { label: 'peter@initech.test' });
    await page.waitForSelector('[data-testid=consents] li:has-text("newsletter")');
    const download = page.waitForEvent('download');
    await page.click('button:has-text("Download the data of peter@initech.test")');
    expect((await download).suggestedFilename()).toMatch(new RegExp(`^personal-data-${ids.leaverId}-.+\\.json$`));
    // Asked in an in-page dialog (no window.confirm): Cancel leaves nothing behind, confirming prepares the preview.
    await page.click('button:has-text("Preview the erasure of peter@initech.test")');
    await page.waitForSelector('dialog[data-testid=confirm][open]');
    await screen(page, 'tenant-admin-privacy-erasure-confirm');
    await page.click('dialog[data-testid=confirm] button:text-is("Cancel")');
    await page.waitForSelector('dialog[data-testid=confirm]', { state: 'detached' });
    expect(await page.locator('[data-testid=erasure-request]').count()).toBe(0);
    await page.click('button:has-text("Preview the erasure of peter@initech.test")');
    await page.click('dialog[data-testid=confirm] button:text-is("Prepare the erasure")');
    await page.waitForSelector('[data-testid=erasure-request] [data-testid=erasure-preview] td:has-text("projects")');
    await screen(page, 'tenant-admin-privacy-erasure-preview');
    await page.click('[data-testid=erasure-request] button:has-text("Approve and execute")');
    await page.click('dialog[data-testid=confirm] button:text-is("Approve and execute")');
    await page.waitForSelector('[data-testid=erasure-status]:text-is("completed")', { timeout: 20_000 });
    await page.waitForSelector('[data-testid=erasure-request] [data-testid=progress-text]:text-is("100%")');
    await page.waitForSelector('[data-testid=erasure-request] .notice:has-text("depersonalized")');
    await screen(page, 'tenant-admin-privacy-erasure-done');
    expect((await call('GET', '/auth/me', ids.leaverKey!)).status).toBe(401);
    await signOut(page);
  }, 180_000);

  it('a plain user: payments and privacy only; the API refuses the administrators\' screens', async () => {
    await signIn(page, origin, ids.plainKey!);
    await page.waitForSelector('nav[aria-label=Main] a:text-is("Privacy")');
    expect(await page.locator('nav[aria-label=Main] a').allTextContents()).toEqual(['Overview', 'Resources', 'Payments', 'Privacy', 'My account']);
    for (const q of ['{ webhookEndpoints { total } }', '{ jobRegistry { name } }', '{ events { items { id } } }', '{ webhookDeadLetter { total } }', '{ erasureRequests { items { id } } }', '{ ledgerBalance { account } }']) {
      expect((await gql(ids.plainKey!, q)).body.errors?.[0]?.extensions?.code, q).toBe('ACCESS_DENIED');
    }
    await page.goto(`${origin}/admin#/jobs`);
    await page.waitForSelector('h1');
    expect(await page.locator('h1').textContent()).toBe('Overview');
    await nav('Payments');
    await page.waitForSelector('[data-testid=payments] tbody tr');
    expect(await page.locator('nav[aria-label=Payments] a').allTextContents()).toEqual(['Payments']);
    await screen(page, 'user-payments');
    await nav('Privacy');
    await page.waitForSelector('h2:has-text("Consents of milton@initech.test")');
    expect(await page.locator('#h-erasure').count()).toBe(0);
    await screen(page, 'user-privacy');
    await signOut(page);
  }, 120_000);

  it('a system administrator: the dead-letter queue drained once the handler is fixed, purge, chains, payouts', async () => {
    calls.failWith = 'CRM down';
    for (const id of ['evt_1', 'evt_2']) {
      const b = JSON.stringify({ id, type: 'invoice.paid' });
      expect((await call('POST', '/webhooks/acme', null, b, { 'X-Signature': hmac('sha256', b) })).status).toBe(500);
    }
    await signIn(page, origin, ADMIN_KEY);
    await nav('Inbound webhooks');
    await page.waitForSelector('[data-testid=dlq-total]:text-is("2")');
    await page.click('[data-testid=dead-letter] button:text-is("Payload")');
    expect(await page.textContent('[data-testid=json]')).toContain('invoice.paid');
    await screen(page, 'system-admin-inbound-dead-letter');
    // A third failure arrives while the page is open: the queue updates by itself.
    const b3 = JSON.stringify({ id: 'evt_3', type: 'invoice.paid' });
    await call('POST', '/webhooks/acme', null, b3, { 'X-Signature': hmac('sha256', b3) });
    await page.waitForSelector('[data-testid=dlq-total]:text-is("3")');
    // The handler is fixed: retry one, then the selected.
    calls.failWith = null;
    // Another session retries evt_3: it leaves the queue here too, without a reload (webhook_event.recovered).
    const e3 = (await call('GET', '/webhooks/dead-letter', ADMIN_KEY)).body.items.find((e: { event_id: string }) => e.event_id === 'evt_3');
    expect((await call('POST', `/webhooks/dead-letter/${e3.id}/retry`, ADMIN_KEY)).body.status).toBe('processed');
    await page.waitForSelector('[data-testid=dlq-total]:text-is("2")');
    expect(await page.locator('input[aria-label="Select evt_3"]').count()).toBe(0);
    await page.click('button:has-text("Retry evt_1")');
    await page.waitForSelector('[data-testid=retry-outcome]:has-text("evt_1: processed")');
    await page.waitForSelector('[data-testid=dlq-total]:text-is("1")');
    await page.check('input[aria-label="Select evt_2"]');
    await page.click('button:has-text("Retry selected (1)")');
    await page.waitForSelector('[data-testid=dlq-total]:text-is("0")');
    await page.click('nav[aria-label="Inbound webhooks"] a:has-text("All events")');
    await page.selectOption('#in-status', 'processed');
    await page.click('form[aria-label="Filter webhook events"] button:has-text("Apply")');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=inbound-events] tbody tr').length === 3);
    await page.fill('#purge-days', '30');
    await page.click('button:text-is("Purge")');
    await page.waitForSelector('text=Deleted 0 processed event(s) older than 30 days');
    await screen(page, 'system-admin-inbound-events');

    const chain = await call('POST', '/jobs/chains', ADMIN_KEY, {
      name: 'month_end', description: 'Settle, then reconcile both ways', steps: [
        { job: 'settle_payouts' }, { job: 'reconcile_payment_refunds', depends_on: ['settle_payouts'] }, { job: 'reconcile_payment_ledger', depends_on: ['settle_payouts'] },
      ],
    });
    expect(chain.status).toBe(201);
    await nav('Jobs');
    await page.click('nav[aria-label=Jobs] a:has-text("Chains")');
    await page.waitForSelector('svg.graph');
    expect(await page.getAttribute('svg.graph', 'aria-label')).toBe('Steps of month_end: settle_payouts; reconcile_payment_refunds after settle_payouts; reconcile_payment_ledger after settle_payouts');
    expect(await page.textContent('[data-testid=chain-run]')).toBe('Not run yet');
    await page.waitForTimeout(300); // the subscription is open
    // Another session runs the chain: each step's state follows live, with no reload.
    const chainUrl = page.url();
    const seen: Record<string, string[]> = {};
    await page.exposeFunction('chainStepSeen', (step: string, state: string) => void (seen[step] ??= []).push(state));
    await page.evaluate(() => {
      const w = window as unknown as { chainStepSeen(step: string, state: string): void };
      new MutationObserver((ms) => ms.forEach((m) => {
        const el = m.target as Element;
        w.chainStepSeen(el.getAttribute('data-step')!, el.getAttribute('data-state')!);
      })).observe(document.querySelector('svg.graph')!, { subtree: true, attributes: true, attributeFilter: ['data-state'] });
    });
    const chainRun = await call('POST', `/jobs/chains/${chain.body.id}/run`, ADMIN_KEY, {});
    expect(chainRun.status).toBe(202);
    for (const step of ['settle_payouts', 'reconcile_payment_refunds', 'reconcile_payment_ledger']) {
      await page.waitForSelector(`[data-testid=chain-step][data-step=${step}][data-state=completed]`, { timeout: 20_000 });
    }
    await page.waitForSelector('[data-testid=chain-run] a:text-is("completed")');
    expect(page.url()).toBe(chainUrl);
    // Each step was drawn before it completed (not started, pending or running), then completed.
    for (const step of ['settle_payouts', 'reconcile_payment_refunds', 'reconcile_payment_ledger']) expect(seen[step]?.at(-1), step).toBe('completed');
    expect(seen.reconcile_payment_refunds!.length, JSON.stringify(seen)).toBeGreaterThan(1);
    await screen(page, 'system-admin-jobs-chains');

    const today = new Date();
    // Settlement by the job (the system actor), so a person may approve the batch (never its creator).
    const params = { period_start: new Date(today.getTime() - 86_400_000).toISOString(), period_end: new Date(today.getTime() + 86_400_000).toISOString() };
    const settle = await call('POST', '/jobs/run/settle_payouts', ADMIN_KEY, { parameters: params });
    expect(settle.status).toBe(202);
    await expect.poll(async () => (await call('GET', `/jobs/runs/${settle.body.id ?? settle.body.run_id}`, ADMIN_KEY)).body.status, { timeout: 15_000 }).toBe('completed');
    await nav('Payments');
    await page.click('nav[aria-label=Payments] a:has-text("Payouts")');
    await page.waitForSelector('[data-testid=payouts] tbody tr');
    if (await page.locator('[data-testid=payouts] button:text-is("Approve")').count()) await page.click('[data-testid=payouts] button:text-is("Approve")');
    await page.click('[data-testid=payouts] button:text-is("Process")');
    // The reason is asked in a labelled in-page form (no window.prompt); Escape closes it untouched.
    await page.click('[data-testid=payouts] button:has-text("Fail")');
    await page.waitForSelector('dialog[data-testid=fail-dialog][open]');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('po-fail-reason');
    await page.keyboard.press('Escape');
    await page.waitForSelector('dialog[data-testid=fail-dialog]', { state: 'detached' });
    expect(await page.evaluate(() => document.activeElement?.textContent)).toContain('Fail');
    await page.click('[data-testid=payouts] button:has-text("Fail")');
    await page.fill('#po-fail-reason', 'bank rejected the transfer');
    await screen(page, 'system-admin-payouts-fail-dialog');
    await page.click('dialog[data-testid=fail-dialog] button:text-is("Mark as failed")');
    await page.waitForSelector('[data-testid=payouts] td:has-text("failed: bank rejected the transfer")');
    // Handed to the bank again, then executed: completed with its bank reference.
    await page.click('[data-testid=payouts] button:text-is("Process")');
    // The bank reference too is asked in an in-page dialog.
    await page.click('[data-testid=payouts] button:has-text("Execute")');
    await page.waitForSelector('dialog[data-testid=execute-dialog][open]');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('po-bank-reference');
    await page.fill('#po-bank-reference', 'BANK-2026-11-27');
    await page.click('dialog[data-testid=execute-dialog] button:text-is("Mark as paid")');
    await page.waitForSelector('[data-testid=payouts] td:has-text("completed")');
    await page.waitForSelector('[data-testid=payouts] td:has-text("completed (bank reference BANK-2026-11-27)")');
    await screen(page, 'system-admin-payments-payouts');
    await signOut(page);
  }, 180_000);

  it('logged no console error, page error or CSP violation', () => {
    expect(errors).toEqual([]);
  });
});
