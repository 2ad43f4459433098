/**
 * The pages' plots in Chromium: a job's page (its run durations and runs), an endpoint's page (its
 * success rate and delay) and the payments page (payments per status per day) each show their
 * charts, whose captions name their lines; the charts chunk is loaded only when such a page opens,
 * a plain user's payments page has no plot, and axe is clean on each. The series are stored minute
 * documents of the tenant (test/metrics-series/pages.test.ts covers how events become them), with
 * another tenant's under the same endpoint id and job name, which must not show.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { builtinPlugins } from '../../builtin-plugins.ts';
import type { App } from '../../core/kernel.ts';
import { definePlugin, type JobDefinition } from '../../core/plugin.ts';
import { z } from 'zod';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { CHROMIUM, screen, signIn, signOut, watchErrors } from './helpers.ts';

const haveBrowser = existsSync(CHROMIUM);

/** A job a tenant administrator sees in the registry (per tenant). */
const reportJob = definePlugin({
  name: 'plots-report-job',
  setup: () => ({ jobs: [{ name: 'nightly_report', description: 'Builds the nightly report', timeout: 60, max_attempts: 1, per_tenant: true, params: z.object({}), run: async () => ({}) } as unknown as JobDefinition] }),
});

describe.skipIf(!haveBrowser)('console page plots in Chromium', () => {
  let app: App;
  let origin: string;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  const ids: Record<string, string> = {};

  let started: ConsoleApp;
  const call: ConsoleApp['call'] = (...args) => started.call(...args);
  /** A stored minute (or day) of `series` for a tenant, as the series store writes it. */
  const stored = async (series: string, tenantId: string, at: number, c: Record<string, unknown>) => {
    const minute = new Date(at);
    await app.db.conn.collection('metric_minutes').insertOne({ _id: `${series}|${tenantId}|${minute.toISOString()}` as never, series, tenant_id: tenantId, minute, expires_at: new Date(Date.now() + 86_400_000), c });
  };
  const captions = () => page.locator('[data-testid=page-plot] figcaption').allTextContents();

  beforeAll(async () => {
    started = await startConsoleApp(
      { WEBHOOKS_ENABLED: 'true', JOBS_ENABLED: 'true', PAYMENTS_ENABLED: 'true', WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1' },
      [...builtinPlugins(), reportJob],
    );
    ({ app, origin } = started);
    const mkUser = async (tenant: string, email: string, roles: string[]) => (await started.mkUser(tenant, email, roles)).key;
    const acme = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    const other = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Other' })).body.id as string;
    ids.adaKey = await mkUser(acme, 'ada@acme.test', ['user', 'admin']);
    ids.patKey = await mkUser(acme, 'pat@acme.test', ['user']);
    const ep = await call('POST', '/webhook-endpoints', ids.adaKey, { url: 'http://127.0.0.1:9/hook', event_types: ['projects.created'] });
    expect(ep.status).toBe(201);
    ids.endpoint = ep.body.id as string;
    ids.job = 'nightly_report';
    const minute = Math.floor((Date.now() - 120_000) / 60_000) * 60_000;
    const day = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    await stored(`endpoint:${ids.endpoint}`, acme, minute, { ok: 3, failed: 1, delay: { 4: 3 } });
    await stored(`endpoint:${ids.endpoint}`, other, minute, { failed: 50 });
    await stored(`job:${ids.job}`, acme, minute, { n: { completed: 4, failed: 1 }, dur: { 5: 4, 8: 1 } });
    await stored(`job:${ids.job}`, other, minute, { n: { cancelled: 9 } });
    await stored('payments-day', acme, day, { n: { pending: 5, completed: 2 } });
    await stored('payments-day', acme, day - 86_400_000, { n: { pending: 1 } });
    await stored('payments-day', other, day, { n: { refunded: 8 } });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("a job's page plots its run durations and runs, an endpoint's page its success rate and delay", async () => {
    await signIn(page, origin, ids.adaKey!);
    await page.waitForSelector('[data-testid=counts]');
    await page.evaluate((job) => { location.hash = `#/jobs/trigger/${job}`; }, ids.job!);
    await page.waitForSelector('[data-testid=page-plot] figure canvas');
    const job = await captions();
    expect(job[0]).toContain(`Run duration of ${ids.job}`);
    expect(job[0]).toContain('(p50, p95)');
    expect(job[1]).toContain(`Runs of ${ids.job}`);
    expect(job[1]).toContain('4 completed, 1 failed');
    expect(job[1]).toContain('(completed, failed)');
    expect(job.join()).not.toContain('cancelled');
    await screen(page, 'plots-job');

    await page.evaluate((id) => { location.hash = `#/webhooks/${id}`; }, ids.endpoint!);
    await page.waitForSelector('h1:has-text("Endpoint")');
    await page.waitForSelector('[data-testid=page-plot] figure canvas');
    const ep = await captions();
    expect(ep[0]).toContain('Success rate');
    expect(ep[0]).toContain('75% of 4 attempts');
    expect(ep[0]).toContain('(succeeded)');
    expect(ep[1]).toContain('Delivery delay');
    expect(ep[1]).toContain('(p50, p95)');
    await page.click('[data-testid=page-plot] button:text-is("Last day")');
    await page.waitForSelector('[data-testid=page-plot] button[aria-pressed=true]:text-is("Last day")');
    await expect.poll(async () => (await captions())[0]).toContain('75% of 4 attempts');
    await screen(page, 'plots-endpoint');
  }, 90_000);

  it('the payments page plots payments per status per day (administrators); a plain user gets no plot and no chart chunk', async () => {
    await page.evaluate(() => { location.hash = '#/payments/list'; });
    await page.waitForSelector('h1:text-is("Payments")');
    await page.waitForSelector('[data-testid=page-plot] figure canvas');
    const pay = await captions();
    expect(pay[0]).toContain('Payments per status per day');
    expect(pay[0]).toContain('2 completed, 6 pending');
    expect(pay[0]).toContain('(completed, pending)');
    expect(pay[0]).not.toContain('refunded');
    await screen(page, 'plots-payments');
    await signOut(page);

    // A fresh page: nothing cached from the administrator's session.
    const fresh = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    const loaded: string[] = [];
    fresh.on('request', (r) => { if (/\/assets\/charts-.*\.js$/.test(r.url())) loaded.push(r.url()); });
    await signIn(fresh, origin, ids.patKey!);
    await fresh.evaluate(() => { location.hash = '#/payments/list'; });
    await fresh.waitForSelector('h1:text-is("Payments")');
    await fresh.waitForSelector('[data-testid=payments], [data-testid=empty]');
    expect(await fresh.locator('[data-testid=page-plot]').count()).toBe(0);
    expect(loaded).toEqual([]);
    await screen(fresh, 'plots-payments-user');
    await fresh.close();
    expect(errors).toEqual([]);
  }, 90_000);
});
