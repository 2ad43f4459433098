/**
 * The points a new user hit, in Chromium: a webhook endpoint's "All events" (`*`) shown and chosen,
 * and no silent save without event types; Identity without Disable/Delete on the signed-in
 * administrator's own row or a tenant's last administrator, an aligned Actions column, API keys by
 * e-mail; a readable event log whose detail opens in view (Escape closes it); relative times with
 * the exact time on hover; a resource named in the singular; a missing field in plain words; the
 * side navigation by area, the tenant switcher (X-Tenant-Id), toasts, breadcrumbs and the dark
 * theme. Each step is screenshotted and checked with axe.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins, corePlugins } from '../../builtin-plugins.ts';
import { createApp, type App } from '../../core/kernel.ts';
import { ADMIN_KEY, TEST_SECRETS, uniqueDbUri } from '../helpers/app.ts';
import { CHROMIUM, freePort, screen, signIn, signOut, watchErrors } from './helpers.ts';

const haveBrowser = existsSync(CHROMIUM);

describe.skipIf(!haveBrowser)('console round 3 in Chromium: what a new user hit', () => {
  let app: App;
  let origin: string;
  let api: string;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  const ids: Record<string, string> = {};

  const call = async (method: string, path: string, key: string, json?: unknown) => {
    const res = await fetch(api + path, { method, headers: { 'X-API-Key': key, ...(json !== undefined ? { 'Content-Type': 'application/json' } : {}) }, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) });
    return { status: res.status, body: res.status === 204 ? null : ((await res.json()) as any) };
  };
  const nav = (label: string) => page.click(`nav[aria-label=Main] a:text-is("${label}")`);
  /** Whether `el` lies inside the viewport. */
  const inView = (selector: string) =>
    page.evaluate((s) => {
      const r = document.querySelector(s)!.getBoundingClientRect();
      return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth && r.height > 0;
    }, selector);

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://localhost:${port}`;
    api = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY, MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS,
      AUTH_CACHE_TTL_MS: '0', METRICS_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', WEBHOOKS_ENABLED: 'true', EVENTS_POLL_INTERVAL_MS: '50',
      WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1',
    });
    app = await createApp({ corePlugins: corePlugins(), config, plugins: builtinPlugins() });
    await app.listen(port, '127.0.0.1');
    const mkTenant = async (name: string) => (await call('POST', '/admin/tenants', ADMIN_KEY, { name })).body.id as string;
    const mkUser = async (tenant: string, email: string, roles: string[]) => {
      const u = await call('POST', '/admin/users', ADMIN_KEY, { email, name: email.split('@')[0], tenant_id: tenant, roles, features: [] });
      const k = await call('POST', '/admin/api-keys', ADMIN_KEY, { user_id: u.body.id, name: `${email.split('@')[0]} laptop` });
      return { id: u.body.id as string, key: k.body.key as string };
    };
    ids.acme = await mkTenant('Acme');
    ids.solo = await mkTenant('Solo');
    const ada = await mkUser(ids.acme, 'ada@acme.test', ['user', 'admin']);
    const pat = await mkUser(ids.acme, 'pat@acme.test', ['user']);
    await mkUser(ids.solo, 'sol@solo.test', ['user', 'admin']);
    Object.assign(ids, { adaKey: ada.key, adaId: ada.id, patKey: pat.key });
    // 40 events: the event log is longer than the window.
    for (let i = 1; i <= 40; i++) await call('POST', '/projects', ada.key, { name: `Project ${i}` });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('webhooks: "All events" is a choice, `*` shows as it, and saving no event type says so instead of keeping `*`', async () => {
    await signIn(page, origin, ids.adaKey!);
    // The side navigation, grouped by area (the plugins' screens join once the schema's root fields have arrived).
    await expect.poll(() => page.locator('nav[aria-label=Main] ul').evaluateAll((uls) => uls.map((u) => u.getAttribute('aria-label'))), { timeout: 15_000 }).toEqual(['Content', 'Administration', 'Integrations', 'Business', 'You']);
    await nav('Webhooks');
    await page.waitForSelector('[data-testid=empty]:has-text("No endpoints yet")');
    await page.fill('#ep-url', 'http://127.0.0.1:9/hook');
    await page.click('button:has-text("Create endpoint")');
    await page.waitForSelector('.field-error:has-text("Choose at least one event type, or \\"All events\\".")');
    expect((await call('GET', '/webhook-endpoints', ids.adaKey!)).body.items).toHaveLength(0);
    await page.check('#ep-new-type-all');
    expect(await page.locator('#ep-new-type-0').isDisabled()).toBe(true);
    await page.click('button:has-text("Create endpoint")');
    await page.waitForSelector('[data-testid=new-secret]');
    await page.waitForSelector('[data-testid=toasts] .toast:has-text("Endpoint http://127.0.0.1:9/hook created")');
    const ep = (await call('GET', '/webhook-endpoints', ids.adaKey!)).body.items[0];
    expect(ep.event_types).toEqual(['*']);
    await page.waitForSelector('[data-testid=endpoints] td:text-is("all events")');
    await screen(page, 'round3-webhooks-all-events');

    await page.click(`a[href="#/webhooks/${ep.id}"]`);
    await page.waitForSelector('nav[aria-label=Breadcrumbs] a:text-is("Webhooks")');
    expect(await page.isChecked('#ep-type-all')).toBe(true);
    expect(await page.locator('[id^=ep-type-]:not(#ep-type-all)').evaluateAll((els) => els.every((e) => (e as HTMLInputElement).checked && (e as HTMLInputElement).disabled))).toBe(true);
    await page.uncheck('#ep-type-all');
    await page.click('button:has-text("Save event types")');
    await page.waitForSelector('#ep-type-err:has-text("Choose at least one event type")');
    expect(await page.getAttribute('fieldset.types', 'aria-invalid')).toBe('true');
    await screen(page, 'round3-webhooks-no-types');
    expect((await call('GET', `/webhook-endpoints/${ep.id}`, ids.adaKey!)).body.event_types).toEqual(['*']);
    await page.check('label:has-text("projects.created") input');
    await page.click('button:has-text("Save event types")');
    await page.waitForSelector('[data-testid=toasts] .toast:has-text("Event types saved: projects.created")');
    expect((await call('GET', `/webhook-endpoints/${ep.id}`, ids.adaKey!)).body.event_types).toEqual(['projects.created']);
  });

  it('identity: no Disable or Delete on my own row nor on a last administrator, an aligned Actions column, keys by e-mail', async () => {
    await nav('Identity');
    await page.waitForSelector('[data-testid=users] tr:has-text("pat@acme.test") button:has-text("Disable")');
    const row = (email: string) => page.locator(`[data-testid=users] tr:has-text("${email}")`);
    expect(await row('ada@acme.test').locator('button:has-text("Disable"), button:has-text("Delete")').count()).toBe(0);
    expect(await row('ada@acme.test').locator('[data-testid=kept]').textContent()).toBe('you');
    expect(await row('pat@acme.test').locator('button:has-text("Delete")').count()).toBe(1);
    // Every cell of a row starts and ends on the same lines (the Actions cell is no flex box breaking the table).
    const misaligned = await page.locator('[data-testid=users] tbody tr').evaluateAll((rows) =>
      rows.filter((r) => {
        const boxes = [...r.children].map((c) => c.getBoundingClientRect());
        return boxes.some((b) => Math.abs(b.top - boxes[0]!.top) > 0.5 || Math.abs(b.bottom - boxes[0]!.bottom) > 0.5);
      }).length);
    expect(misaligned).toBe(0);
    await page.waitForSelector('[data-testid=keys] td:text-is("pat@acme.test")');
    expect(await page.locator('[data-testid=keys] tbody td:nth-child(2)').allTextContents()).toEqual(expect.arrayContaining(['ada@acme.test', 'pat@acme.test']));
    // Relative times, the exact one on hover.
    const t = page.locator('[data-testid=keys] time').first();
    expect(await t.textContent()).toMatch(/ago|^now$/);
    expect(await t.getAttribute('title')).toMatch(/UTC$/);
    await screen(page, 'round3-identity-tenant-admin');
    // The server refuses anyway.
    const self = await call('POST', '/graphql', ids.adaKey!, { query: 'mutation($id: String!) { deleteUser(id: $id) }', variables: { id: ids.adaId } });
    expect(self.body.errors[0].extensions.code).toBe('ACCESS_DENIED');
  });

  it('events: a table that does not break timestamps or ids, and a detail view in view with Close and Escape', async () => {
    await nav('Events');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=event-list] tbody tr').length >= 25);
    // Each time and id is one line (one client rect: no break inside it).
    const broken = await page.locator('[data-testid=event-list] time, [data-testid=event-list] .short-id code').evaluateAll((els) => els.filter((e) => e.getClientRects().length !== 1).length);
    expect(broken).toBe(0);
    const last = page.locator('[data-testid=event-list] tbody tr').last();
    await last.scrollIntoViewIfNeeded();
    await last.locator('td:first-child button').click();
    await page.waitForSelector('[data-testid=event-detail]');
    expect(await inView('[data-testid=event-detail]')).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H2');
    await screen(page, 'round3-events-detail');
    await page.keyboard.press('Escape');
    await page.waitForSelector('[data-testid=event-detail]', { state: 'detached' });
    await last.locator('td:first-child button').click();
    await page.click('[data-testid=event-detail] button:has-text("Close")');
    await page.waitForSelector('[data-testid=event-detail]', { state: 'detached' });
  });

  it('resources: "New project", and a missing required field in plain words', async () => {
    await page.goto(`${origin}/admin#/resources/projects`);
    // An empty list says what to do.
    await page.fill('#f-q', 'nothing like this');
    await page.click('button:text-is("Apply")');
    await page.waitForSelector('[data-testid=empty]:has-text("No projects match. Clear the search and filters, or create one with “New project”.")');
    await page.click('a:text-is("New project")');
    await page.waitForSelector('h2:text-is("New project")');
    await page.click('button:text-is("Create and publish")');
    await page.waitForSelector('#fld-name-err');
    expect(await page.textContent('#fld-name-err')).toBe('name is required');
    expect(await page.content()).not.toContain('Invalid input');
    await screen(page, 'round3-resources-required');
    await signOut(page);
  });

  it('a system administrator: a last administrator keeps no Disable/Delete, the tenant switcher sends X-Tenant-Id, and the dark theme', async () => {
    await signIn(page, origin, ADMIN_KEY);
    await nav('Identity');
    await page.waitForSelector('[data-testid=users] tr:has-text("sol@solo.test")');
    const sol = page.locator('[data-testid=users] tr:has-text("sol@solo.test")');
    expect(await sol.locator('button:has-text("Disable"), button:has-text("Delete")').count()).toBe(0);
    expect(await sol.locator('[data-testid=kept]').textContent()).toBe('last administrator of its tenant');

    const sent: (string | undefined)[] = [];
    page.on('request', (r) => { if (r.url().endsWith('/graphql')) sent.push(r.headers()['x-tenant-id']); });
    await page.selectOption('#acting-tenant', { label: 'Acme' });
    await page.waitForSelector('[data-testid=acting]:has-text("Acme")');
    await page.waitForSelector('[data-testid=users] tr:has-text("ada@acme.test")');
    expect(sent).toContain(ids.acme);
    // Acting for Acme: a document created now is Acme's.
    await page.goto(`${origin}/admin#/resources/projects/new`);
    await page.fill('#fld-name', 'Made for Acme');
    await page.click('button:text-is("Create and publish")');
    await page.waitForSelector('[data-testid=toasts] .toast:has-text("project created")');
    const acme = await call('GET', '/projects?q=Made%20for%20Acme', ids.adaKey!);
    expect(acme.body.items.map((p: { name: string }) => p.name)).toContain('Made for Acme');
    await page.selectOption('#acting-tenant', { label: 'All tenants' });
    await page.waitForSelector('[data-testid=acting]', { state: 'detached' });

    // The plots: loaded with the overview, the last hour, then the last day.
    await nav('Overview');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=charts] canvas').length >= 8);
    expect(await page.locator('[data-testid=charts] figcaption strong').allTextContents()).toEqual(['Requests per second', 'Error rate (5xx)', 'Latency', 'Outbound deliveries', 'Delivery delay (p95)', 'Job runs', 'Job duration (p95)', 'Events per type']);
    expect(await page.textContent('[data-testid=charts] figure[aria-label="Events per type"] figcaption')).toContain('projects.created');
    await page.click('button:text-is("Last day")');
    await page.waitForSelector('button:text-is("Last day")[aria-pressed=true]');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=charts] canvas').length >= 8);
    await screen(page, 'round3-overview-plots');

    await page.emulateMedia({ colorScheme: 'dark' });
    const bg = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    expect(bg).toBe('rgb(13, 17, 23)');
    await screen(page, 'round3-overview-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await signOut(page);
  });

  it('a plain user: the overview without plots, and the charts chunk never loaded', async () => {
    const scripts: string[] = [];
    page.on('request', (r) => { if (r.url().includes('/admin-console/assets/')) scripts.push(r.url()); });
    await signIn(page, origin, ids.patKey!);
    await page.waitForSelector('[data-testid=counts]');
    expect(await page.locator('[data-testid=charts]').count()).toBe(0);
    expect(scripts.filter((u) => u.includes('/charts-'))).toEqual([]);
    await screen(page, 'round3-overview-user');
    expect(errors).toEqual([]);
  });
});
