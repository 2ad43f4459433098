/**
 * The visual check (visual-check.ts): each screen, for each role that has it, screenshotted at a
 * fixed viewport with what changes from run to run masked, and compared with its committed
 * reference under __screenshots__/.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins } from '../../config/plugins.ts';
import { createApp, type App } from '../../core/kernel.ts';
import { ADMIN_KEY, TEST_SECRETS, uniqueDbUri } from '../helpers/app.ts';
import { CHROMIUM, freePort, signIn, signOut } from './helpers.ts';
import { VISUAL_ARGS, visualChecker, visualPage } from './visual-check.ts';

const haveBrowser = existsSync(CHROMIUM);

describe.skipIf(!haveBrowser)('console screens against their reference screenshots', () => {
  let app: App;
  let origin: string;
  let browser: Browser;
  let page: Page;
  let compare: Page;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://localhost:${port}`;
    const api = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY, MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS,
      AUTH_CACHE_TTL_MS: '0', METRICS_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', WEBHOOKS_ENABLED: 'true',
    });
    app = await createApp({ config, plugins: builtinPlugins() });
    await app.listen(port, '127.0.0.1');
    const call = async (path: string, key: string, json: unknown) =>
      (await (await fetch(api + path, { method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: JSON.stringify(json) })).json()) as any;
    const tenant = (await call('/admin/tenants', ADMIN_KEY, { name: 'Acme' })).id as string;
    for (const [email, roles] of [['ada@acme.test', ['user', 'admin']], ['pat@acme.test', ['user']]] as const) {
      const u = await call('/admin/users', ADMIN_KEY, { email, name: email.split('@')[0], tenant_id: tenant, roles, features: [] });
      keys[email] = (await call('/admin/api-keys', ADMIN_KEY, { user_id: u.id, name: 'laptop' })).key;
    }
    for (let i = 1; i <= 6; i++) await call('/projects', keys['ada@acme.test']!, { name: `Project ${i}`, tags: ['demo'], budget: i * 100 });
    await call('/admin/roles', keys['ada@acme.test']!, { name: 'reader', description: 'Reads active projects', permissions: { projects: { read: { rows: { status: 'active' } } } } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: VISUAL_ARGS, headless: true });
    page = await visualPage(browser);
    compare = await (await browser.newContext()).newPage();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  const check = (name: string) => visualChecker(page, compare)(name);
  const open = async (hash: string, ready: string) => {
    await page.evaluate((h) => { location.hash = h; }, hash);
    await page.waitForSelector(ready);
    await page.mouse.move(0, 0);
  };

  it('a system administrator: overview, resources, identity, webhooks, roles', async () => {
    await signIn(page, origin, ADMIN_KEY);
    await page.waitForSelector('[data-testid=charts] canvas');
    await check('system-admin-overview');
    await open('#/resources/projects', '[data-testid=resource-list] tbody tr');
    await check('system-admin-resources');
    await open('#/identity', '[data-testid=users] tbody tr');
    await page.waitForSelector('[data-testid=keys] tbody tr');
    await check('system-admin-identity');
    await open('#/webhooks', '[data-testid=empty]');
    await check('system-admin-webhooks');
    await open('#/roles', '[data-testid=roles] tbody tr');
    await check('system-admin-roles');
    await signOut(page);
  });

  it('a tenant administrator: overview, identity, events, roles', async () => {
    await signIn(page, origin, keys['ada@acme.test']!);
    await page.waitForSelector('[data-testid=charts] canvas');
    await check('tenant-admin-overview');
    await open('#/identity', '[data-testid=keys] tbody tr');
    await check('tenant-admin-identity');
    await open('#/events', '[data-testid=event-list] tbody tr');
    await check('tenant-admin-events');
    await open('#/roles', '[data-testid=roles] tbody tr');
    await check('tenant-admin-roles');
    await signOut(page);
  });

  it('a user: overview, resources, account', async () => {
    await signIn(page, origin, keys['pat@acme.test']!);
    await page.waitForSelector('[data-testid=counts]');
    await check('user-overview');
    await open('#/resources/projects', '[data-testid=resource-list] tbody tr');
    await check('user-resources');
    await open('#/account', 'h1:text-is("My account")');
    await check('user-account');
    await signOut(page);
  });
});
