/**
 * The visual check (visual-check.ts): each screen, for each role that has it, screenshotted at a
 * fixed viewport with what changes from run to run masked, and compared with its committed
 * reference under __screenshots__/.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins, corePlugins } from '../../builtin-plugins.ts';
import { createApp, type App } from '../../core/kernel.ts';
import { ADMIN_KEY, TEST_SECRETS, uniqueDbUri } from '../helpers/app.ts';
import { CHROMIUM, freePort, signIn, signOut } from './helpers.ts';
import { VISUAL_ARGS, visualChecker, visualPage } from './visual-check.ts';

const haveBrowser = existsSync(CHROMIUM);

describe.skipIf(!haveBrowser)('console screens against their reference screenshots', () => {
  let app: App;
  let origin: string;
  let api: string;
  let browser: Browser;
  let page: Page;
  let compare: Page;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://localhost:${port}`;
    api = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY, MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS,
      AUTH_CACHE_TTL_MS: '0', METRICS_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', WEBHOOKS_ENABLED: 'true',
    });
    app = await createApp({ corePlugins: corePlugins(), config, plugins: builtinPlugins() });
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

  /**
   * A document's History panel with version 1 open (its diff against version 3, its Restore),
   * scrolled to the list of versions; and a pending draft with its buttons. Ids (which change from run to run) read as zeros.
   */
  const history = async (name: string) => {
    await open(`#/resources/projects/${docs.apollo}`, '[data-testid=versions] tbody tr:nth-child(3)');
    await page.click('button:has-text("View version 1")');
    await page.selectOption('#diff-against', '3');
    await page.waitForSelector('[data-testid=diff] caption:text-is("From version 3 to version 1")', { state: 'attached' });
    await page.waitForSelector('button:text-is("Restore version 1…")');
    await steady();
    await page.evaluate(() => document.querySelector('[data-testid=versions]')?.scrollIntoView({ block: 'start' }));
    await check(name);
  };
  const draft = async (name: string, doc: string) => {
    await open(`#/resources/projects/${doc}`, '[data-testid=doc-actions] button:text-is("Publish")');
    // The History panel below, loaded (its chunk, then its versions), not on its way.
    await page.waitForSelector('[data-testid=versions] tbody tr');
    await steady();
    await check(name);
  };
  const steady = async () => {
    await page.mouse.move(0, 0);
    await page.evaluate(() => {
      (document.activeElement as HTMLElement | null)?.blur();
      document.querySelectorAll('dl.detail dd, .crumbs [aria-current=page]').forEach((el) => {
        if (/[0-9a-f]{6}/.test(el.textContent ?? '') && !el.children.length) el.textContent = (el.textContent ?? '').replace(/[0-9a-f]{24}|…[0-9a-f]{6}$/g, (id) => id.replace(/[0-9a-f]/g, '0'));
      });
    });
  };
  const docs: Record<string, string> = {};

  it('history and drafts: a system administrator, a tenant administrator and a user', async () => {
    const send = async (method: string, path: string, key: string, json: unknown, version?: number) =>
      (await (await fetch(api + path, { method, headers: { 'X-API-Key': key, 'Content-Type': 'application/json', ...(version ? { 'If-Match': `"${version}"` } : {}) }, body: JSON.stringify(json) })).json()) as any;
    const [ada, pat] = [keys['ada@acme.test']!, keys['pat@acme.test']!];
    docs.apollo = (await send('POST', '/projects', ada, { name: 'Apollo', budget: 100, tags: ['moon'] }))._id;
    await send('PATCH', `/projects/${docs.apollo}`, ada, { budget: 200 }, 1);
    await send('PATCH', `/projects/${docs.apollo}`, ada, { budget: 300, status: 'archived' }, 2);
    docs.gemini = (await send('POST', '/projects', ada, { name: 'Gemini', budget: 50 }))._id;
    await send('PATCH', `/projects/${docs.gemini}?draft=true`, ada, { name: 'Gemini II', budget: 80 }, 1);
    docs.mercury = (await send('POST', '/projects?draft=true', pat, { name: 'Mercury', budget: 10 }))._id;

    await signIn(page, origin, ADMIN_KEY);
    await history('system-admin-history');
    await signOut(page);
    await signIn(page, origin, ada);
    await history('tenant-admin-history');
    await draft('tenant-admin-draft', docs.gemini!);
    await signOut(page);
    await signIn(page, origin, pat);
    await history('user-history');
    await draft('user-draft', docs.mercury!);
    await signOut(page);
  });

  it('the invitation page an invitation\'s link opens, signed out', async () => {
    await page.goto('about:blank');
    await page.goto(`${origin}/admin/#/invitation?token=visual-check-token`);
    await page.waitForSelector('h2:text-is("You are invited")');
    await page.mouse.move(0, 0);
    await check('invitation');
  });
});
