/**
 * The visual check: each screen, for each role that has it, is screenshotted at a fixed viewport
 * with what changes from run to run masked (times, ids, the plots, health durations, toasts), and
 * compared with its committed reference under __screenshots__/: more than 0.3% of pixels
 * differing (a channel off by more than 40 of 255) fails; times and ids are replaced by fixed text
 * first, so layout regressions are seen. The
 * comparison decodes both PNGs in Chromium (canvas), since no pixel-diff library is installed.
 * A missing reference is written (commit it); UPDATE_SCREENSHOTS=1 rewrites them all.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins } from '../../config/plugins.ts';
import { createApp, type App } from '../../core/kernel.ts';
import { ADMIN_KEY, TEST_SECRETS, uniqueDbUri } from '../helpers/app.ts';
import { axeViolations, CHROMIUM, freePort, SHOTS, signIn, signOut } from './helpers.ts';

const haveBrowser = existsSync(CHROMIUM);
const REFS = resolve(import.meta.dirname, '__screenshots__');
const UPDATE = process.env.UPDATE_SCREENSHOTS === '1';
const MAX_DIFF = 0.003;
const CHANNEL = 40;

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
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--font-render-hinting=none'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1000, height: 640 }, deviceScaleFactor: 1, colorScheme: 'light', reducedMotion: 'reduce' })).newPage();
    compare = await (await browser.newContext()).newPage();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  /** Share of pixels differing between two PNGs, decoded and compared in a canvas; 1 when the sizes differ. */
  const diff = (a: Buffer, b: Buffer) =>
    compare.evaluate(async ({ a, b, channel }) => {
      const load = async (b64: string) => {
        const img = new Image();
        img.src = `data:image/png;base64,${b64}`;
        await img.decode();
        const c = document.createElement('canvas');
        c.width = img.width;
        c.height = img.height;
        const ctx = c.getContext('2d')!;
        ctx.drawImage(img, 0, 0);
        return ctx.getImageData(0, 0, img.width, img.height);
      };
      const [x, y] = [await load(a), await load(b)];
      if (x.width !== y.width || x.height !== y.height) return 1;
      let off = 0;
      for (let i = 0; i < x.data.length; i += 4) {
        if (Math.max(Math.abs(x.data[i]! - y.data[i]!), Math.abs(x.data[i + 1]! - y.data[i + 1]!), Math.abs(x.data[i + 2]! - y.data[i + 2]!)) > channel) off++;
      }
      return off / (x.width * y.height);
    }, { a: a.toString('base64'), b: b.toString('base64'), channel: CHANNEL });

  /** Screenshot of the viewport, masked; axe; compared with (or written as) its reference. */
  const check = async (name: string) => {
    await page.evaluate(() => document.fonts.ready);
    await page.waitForFunction(() => !document.querySelector('[data-testid=busy]')?.textContent);
    expect(await axeViolations(page), `axe on ${name}`).toEqual([]);
    // Times and ids change from run to run, and so would the widths of their columns: fixed text instead (ids keep their length).
    await page.evaluate(() => document.querySelectorAll('time, code, [data-testid=users] small').forEach((el) => { el.textContent = el.tagName === 'CODE' ? '0'.repeat(Math.min(24, el.textContent?.length ?? 0)) : '000000000000'; }));
    const mask = ['time', '.short-id', 'code', '[data-testid=charts]', '[data-testid=users] small', '[data-testid=counts]', 'section[aria-labelledby=h-audit] ul', 'section[aria-labelledby=h-health] table'].map((s) => page.locator(s));
    const shot = await page.screenshot({ animations: 'disabled', caret: 'hide', mask, maskColor: '#ff00ff', style: '.toasts { display: none !important; }' });
    mkdirSync(SHOTS, { recursive: true });
    writeFileSync(resolve(SHOTS, `visual-${name}.png`), shot);
    const ref = resolve(REFS, `${name}.png`);
    if (UPDATE || !existsSync(ref)) {
      mkdirSync(REFS, { recursive: true });
      writeFileSync(ref, shot);
      return;
    }
    const share = await diff(shot, readFileSync(ref));
    expect(share, `${name}: ${(share * 100).toFixed(2)}% of pixels differ from __screenshots__/${name}.png (see test-results/console/visual-${name}.png)`).toBeLessThanOrEqual(MAX_DIFF);
  };
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
