/**
 * Drafts in the console, in Chromium: an administrator saves a new project as a draft (the badge
 * says Draft, a plain user of the tenant gets 404 for it), publishes it (Published, the user reads
 * it), saves a change as a draft (the console shows the draft; the user still reads the published
 * value), publishes again, and unpublishes (the user gets 404 again). Each action says what it did.
 * The edit form keeps an empty list field an empty list (it sent null, which the server refuses).
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { axeViolations, CHROMIUM, signIn, watchErrors } from './helpers.ts';

describe.skipIf(!existsSync(CHROMIUM))('console drafts and publishing in Chromium', () => {
  let c: ConsoleApp;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  let admin: string;
  let reader: string;

  const badge = () => page.textContent('[data-testid=status-badge]');
  const asReader = (id: string) => c.call('GET', `/projects/${id}`, reader);
  const idFromUrl = () => /#\/resources\/projects\/([0-9a-f]{24})/.exec(page.url())![1]!;
  async function clickAndWait(button: string, toast: RegExp) {
    await page.click(`[data-testid=doc-actions] button:text-is("${button}")`);
    await page.waitForFunction((re) => new RegExp(re).test(document.body.innerText), toast.source);
  }

  beforeAll(async () => {
    c = await startConsoleApp();
    const acme = (await c.call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    admin = (await c.mkUser(acme, 'ada@acme.test', ['user', 'admin'])).key;
    reader = (await c.mkUser(acme, 'rob@acme.test', ['user'])).key;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await c?.app.close();
  });

  it('saves a draft nobody else sees, publishes it, drafts a change over it, and unpublishes', async () => {
    await signIn(page, c.origin, admin);
    await page.evaluate(() => { location.hash = '#/resources/projects/new'; });
    await page.fill('#fld-name', 'Gemini');
    await page.click('button:text-is("Save draft")');
    await page.waitForSelector('[data-testid=status-badge]');
    expect(await badge()).toBe('Draft');
    const id = idFromUrl();
    expect((await asReader(id)).status).toBe(404);
    expect(await axeViolations(page)).toEqual([]);

    await clickAndWait('Publish', /Published: readers now see/);
    await page.waitForFunction(() => document.querySelector('[data-testid=status-badge]')?.textContent === 'Published');
    expect((await asReader(id)).body.name).toBe('Gemini');

    await page.evaluate((doc) => { location.hash = `#/resources/projects/${doc}/edit`; }, id);
    await page.waitForSelector('#fld-name');
    await page.fill('#fld-name', 'Gemini II');
    await page.click('button:text-is("Save draft")');
    await page.waitForFunction(() => document.querySelector('[data-testid=status-badge]')?.textContent === 'Draft');
    expect(await page.textContent('dl.detail')).toContain('Gemini II');
    expect((await asReader(id)).body.name).toBe('Gemini');

    await clickAndWait('Publish', /Published: readers now see/);
    await page.waitForFunction(() => document.querySelector('[data-testid=status-badge]')?.textContent === 'Published');
    expect((await asReader(id)).body.name).toBe('Gemini II');

    await clickAndWait('Unpublish', /Unpublished: only people who may read drafts/);
    await page.waitForFunction(() => document.querySelector('[data-testid=status-badge]')?.textContent === 'Draft');
    expect((await asReader(id)).status).toBe(404);
    expect(errors).toEqual([]);
  }, 180_000);
});
