/**
 * The console's single sign-on in Chromium: `/admin?tenant=<id>` shows "Sign in with <provider>",
 * the browser signs in at a real local OpenID provider's login form, and comes back signed in: the
 * callback hands a one-time code over in the fragment, the console exchanges it for its token and
 * takes it out of the address bar.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { ADMIN_KEY } from '../helpers/app.ts';
import { CHROMIUM, signedIn } from '../admin-console/helpers.ts';
import { startConsoleApp, type ConsoleApp } from '../admin-console/console-app.ts';
import { startProvider, type TestProvider } from './provider.ts';

const SECRET = 'console-secret-0123456789abcdef';

describe.skipIf(!existsSync(CHROMIUM))('console sign-in through SSO in Chromium', () => {
  let c: ConsoleApp;
  let op: TestProvider;
  let browser: Browser;
  let tenantId: string;

  beforeAll(async () => {
    c = await startConsoleApp({ NODE_ENV: 'development' });
    tenantId = (await c.call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    op = await startProvider({
      accounts: [{ sub: 'bob', email: 'bob@acme.test', email_verified: true, name: 'Bob Acme', groups: ['admins'] }],
      clients: [{ client_id: 'console', client_secret: SECRET, redirect_uris: [`${c.origin}/auth/sso/${tenantId}/acme/callback`] }],
    });
    const p = await c.call('POST', '/admin/sso/providers', ADMIN_KEY, {
      name: 'acme', issuer: op.issuer, client_id: 'console', client_secret: SECRET, scopes: ['email', 'profile', 'groups'], role_mapping: { admins: ['admin'] }, jit: true,
    }, { 'X-Tenant-Id': tenantId });
    expect(p.status).toBe(201);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await op?.close();
    await c?.app.close();
  });

  it('offers "Sign in with acme" for the tenant and comes back signed in as the provider\'s person, with the mapped role', async () => {
    const page = await (await browser.newContext()).newPage();
    // Errors of our pages only: the test provider's own pages load assets from the internet.
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' && page.url().startsWith(c.origin)) errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${c.origin}/admin?tenant=${tenantId}`);
    await page.click('a:text-is("Sign in with acme")');
    await page.waitForSelector('input[name=login]');
    await page.fill('input[name=login]', 'bob');
    await page.fill('input[name=password]', 'any');
    await page.click('button[type=submit]');
    await signedIn(page, 60_000);
    expect(page.url()).not.toContain('sso_code');
    expect(await page.textContent('[data-testid=who]')).toContain('bob@acme.test');
    const users = await c.call('GET', '/admin/users?per_page=100', ADMIN_KEY, undefined, { 'X-Tenant-Id': tenantId });
    expect((users.body.items as { email: string; roles: string[] }[]).find((u) => u.email === 'bob@acme.test')?.roles).toEqual(['admin']);
    expect(errors, JSON.stringify(errors)).toEqual([]);
  }, 120_000);

  it('shows no single sign-on section for a tenant without providers', async () => {
    const page = await (await browser.newContext()).newPage();
    const other = (await c.call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Other' })).body.id as string;
    await page.goto(`${c.origin}/admin?tenant=${other}`);
    await page.waitForSelector('#api-key');
    expect(await page.locator('text=Single sign-on').count()).toBe(0);
  }, 60_000);
});
