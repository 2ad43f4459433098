/**
 * Every screen of the side navigation as a new user sees it, in Chromium: a tenant administrator
 * of an empty tenant and one of a tenant with sample data, in the light and the dark theme, at a
 * laptop width and a phone width. On each screen: no developer wording (`undefined`, `null`,
 * `[object Object]`, `NaN`), no error, no table or list without rows (an empty list says what goes
 * there instead), nothing wider than the window, and no serious or critical axe violation.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { App } from '../../core/kernel.ts';
import { ALL_ON } from '../../scripts/console-schema.ts';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { CHROMIUM, axeViolations, signIn, watchErrors } from './helpers.ts';

const haveBrowser = existsSync(CHROMIUM);
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

/** Words a person should never read: a value the code failed to turn into words. */
const DEV_WORDING = /\bundefined\b|\bnull\b|\[object Object\]|\bNaN\b|Invalid Date/;

/** What a screen shows that breaks the rules above, in words (empty: nothing). */
async function findings(page: Page): Promise<string[]> {
  const found = await page.evaluate((pattern) => {
    const out: string[] = [];
    const main = document.getElementById('main')!;
    const text = main.innerText;
    const m = new RegExp(pattern).exec(text);
    if (m) out.push(`developer wording "${m[0]}" in: ${text.slice(Math.max(0, m.index - 60), m.index + 40).replace(/\s+/g, ' ')}`);
    for (const table of main.querySelectorAll('table')) {
      if (table.tBodies[0] && !table.tBodies[0].rows.length) out.push(`a table without rows: ${table.closest('section')?.querySelector('h2, h3')?.textContent ?? table.outerHTML.slice(0, 80)}`);
    }
    for (const list of main.querySelectorAll('ul, ol')) {
      if (!list.children.length && (list as HTMLElement).offsetParent) out.push(`an empty list: ${list.outerHTML.slice(0, 80)}`);
    }
    for (const alert of main.querySelectorAll<HTMLElement>('.error, [role=alert]')) {
      if (alert.offsetParent && alert.innerText.trim()) out.push(`an error on a fresh screen: ${alert.innerText.trim().slice(0, 160)}`);
    }
    const wide = document.scrollingElement!.scrollWidth - innerWidth;
    if (wide > 1) {
      const over = [...document.querySelectorAll<HTMLElement>('body *')].find((e) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.scroll'));
      out.push(`the page is ${wide}px wider than the window (${over ? `${over.tagName.toLowerCase()}.${over.className}: ${over.innerText.slice(0, 40)}` : 'no element found'})`);
    }
    return out;
  }, DEV_WORDING.source);
  return found;
}

describe.skipIf(!haveBrowser)('every screen of the console as a new user, in Chromium', () => {
  let app: App;
  let started: ConsoleApp;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  const keys: Record<string, string> = {};
  /** A project of Acme whose second version has a file in its `attachment`, and that file. */
  let website = '';
  let fileId = '';

  beforeAll(async () => {
    started = await startConsoleApp(ALL_ON);
    app = started.app;
    const call = started.call;
    const empty = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Empty Co' })).body.id as string;
    const acme = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    keys.empty = (await started.mkUser(empty, 'eve@empty.test', ['user', 'admin'])).key;
    // Ada may use tasks (a feature-gated resource), so the sample data has some.
    const ada = await call('POST', '/admin/users', ADMIN_KEY, { email: 'ada@acme.test', name: 'Ada', tenant_id: acme, roles: ['user', 'admin'], features: ['tasks'] });
    keys.acme = (await call('POST', '/admin/api-keys', ADMIN_KEY, { user_id: ada.body.id, name: 'laptop' })).body.key as string;
    await started.mkUser(acme, 'pat@acme.test', ['user']);
    // The sample data: projects (one edited, so it has history) and tasks of theirs.
    for (const name of ['Website', 'Mobile app', 'Data warehouse']) {
      const p = await call('POST', '/projects', keys.acme, { name, description: `The ${name.toLowerCase()} project` });
      expect(p.status).toBe(201);
      expect((await call('POST', '/tasks', keys.acme, { title: `Plan ${name}`, project_id: p.body._id, priority: 2 })).status).toBe(201);
      if (name === 'Website') website = p.body._id as string;
    }
    const form = new FormData();
    form.append('file', new Blob(['brief'], { type: 'text/plain' }), 'brief.txt');
    const upload = await fetch(`${started.api}/files`, { method: 'POST', body: form, headers: { 'X-API-Key': keys.acme } });
    expect(upload.status).toBe(201);
    fileId = ((await upload.json()) as { _id: string })._id;
    expect((await call('PATCH', `/projects/${website}`, keys.acme, { attachment: fileId }, { 'If-Match': '"1"' })).status).toBe(200);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  const passes = [
    { who: 'empty', scheme: 'light', viewport: LAPTOP },
    { who: 'empty', scheme: 'dark', viewport: PHONE },
    { who: 'acme', scheme: 'dark', viewport: LAPTOP },
    { who: 'acme', scheme: 'light', viewport: PHONE },
  ] as const;

  it.each(passes)('a new administrator of $who, $scheme theme, $viewport.width px wide', async ({ who, scheme, viewport }) => {
    const context = await browser.newContext({ viewport, colorScheme: scheme });
    page = await context.newPage();
    errors = watchErrors(page);
    await signIn(page, started.origin, keys[who]!);
    // The plugin screens join once the schema's root fields have arrived.
    await page.waitForSelector('nav[aria-label=Main] a[href="#/files"]', { timeout: 15_000 });
    const screens = await page.locator('nav[aria-label=Main] a').evaluateAll((as) => as.map((a) => a.getAttribute('href')!));
    expect(screens).toEqual(expect.arrayContaining(['#/overview', '#/resources', '#/audit', '#/identity', '#/roles', '#/webhooks', '#/jobs', '#/payments', '#/privacy', '#/files', '#/account']));
    const report: Record<string, string[]> = {};
    const documents = who === 'acme' ? [`#/resources/projects/${website}`] : [];
    for (const href of [...screens, '#/resources/projects', '#/resources/tasks', ...documents]) {
      await page.goto(`${started.origin}/admin${href}`);
      await page.waitForSelector('#main h1, #main h2');
      // Settled: no request pending and no "Loading…" left.
      await expect.poll(() => page.evaluate(() => !document.querySelector('#main[aria-busy=true], #main .loading')), { timeout: 20_000 }).toBe(true);
      await page.waitForTimeout(300);
      let found = await findings(page);
      for (let i = 0; i < 20 && found.length; i++) {
        await page.waitForTimeout(500);
        found = await findings(page);
      }
      found.push(...(await axeViolations(page)).map((v) => `axe: ${v}`));
      if (who === 'empty' && /resources\/|files|webhooks|payments/.test(href) && !(await page.locator('#main [data-testid=empty]').count())) found.push('no empty-state message');
      if (found.length) report[href] = found;
      await page.screenshot({ path: `test-results/console/walkthrough-${who}-${scheme}-${viewport.width}-${href.replace(/\W+/g, '-')}.png`, fullPage: true });
    }
    expect(report).toEqual({});
    if (who === 'acme') {
      // A file field reads as the file's id, in the document and in its versions (not the file as an object).
      await page.goto(`${started.origin}/admin#/resources/projects/${website}`);
      await page.waitForSelector('[data-testid=history] [data-testid=versions]');
      expect(await page.locator('dl.detail div:has(dt:text-is("Attachment")) dd').textContent()).toBe(fileId);
      await page.click('[data-testid=versions] button:has-text("View version 2")');
      await page.waitForSelector('[data-testid=version-document]');
      expect(await page.locator('[data-testid=version-document] div:has(dt:text-is("Attachment")) dd').textContent()).toBe(fileId);
      expect(await findings(page)).toEqual([]);
    }
    expect(errors).toEqual([]);
    await context.close();
  }, 300_000);
});
