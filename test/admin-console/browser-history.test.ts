/**
 * A document's History panel in Chromium: a project created and updated twice over HTTP shows three
 * versions (newest first, with what changed and who); the diff between versions 1 and 3 shows the
 * changed fields before and after; restoring version 1 (confirmed in a dialog, by keyboard) makes a
 * 4th version with the old value; a restore after someone else changed the document is refused
 * (412), says so and offers a reload; one whose unique value another document now holds (409)
 * names the field and writes nothing; older versions come a page at a time; another tenant's user
 * sees no such document. axe is clean on each step, in light and dark mode.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { Schema } from 'mongoose';
import { builtinPlugins } from '../../builtin-plugins.ts';
import type { App } from '../../core/kernel.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../../plugins/resources/sample-resources.ts';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { CHROMIUM, focused, screen, signIn, signOut, watchErrors } from './helpers.ts';

const haveBrowser = existsSync(CHROMIUM);

/** A versioned resource with a unique field, for the 409 of a restore. */
const codes = defineResource({
  name: 'codes',
  schema: new Schema({ code: { type: String, required: true, unique: true }, note: { type: String, default: null } }),
  versions: true,
});
const plugins = () => builtinPlugins().map((p) => (p.name === resourcesPlugin.name ? resourcesPlugin.configure({ resources: [projectsResource, tasksResource, codes] }) : p));

describe.skipIf(!haveBrowser)('console document history in Chromium', () => {
  let app: App;
  let origin: string;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  const ids: Record<string, string> = {};

  let started: ConsoleApp;
  const call: ConsoleApp['call'] = (...args) => started.call(...args);
  const patch = (version: number, json: Record<string, unknown>) => call('PATCH', `/projects/${ids.p}`, ids.adaKey!, json, { 'If-Match': `"${version}"` });
  const rows = () => page.locator('[data-testid=versions] tbody tr');
  const cells = (i: number) => rows().nth(i).locator('td').allTextContents();

  beforeAll(async () => {
    started = await startConsoleApp({}, plugins());
    ({ app, origin } = started);
    const acme = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    const other = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Other' })).body.id as string;
    ids.adaKey = (await started.mkUser(acme, 'ada@acme.test', ['user', 'admin'])).key;
    ids.olaKey = (await started.mkUser(other, 'ola@other.test', ['user', 'admin'])).key;
    const created = await call('POST', '/projects', ids.adaKey, { name: 'Apollo', budget: 100, tags: ['moon'] });
    expect(created.status).toBe(201);
    ids.p = created.body._id as string;
    expect((await patch(1, { budget: 200 })).status).toBe(200);
    expect((await patch(2, { budget: 300, status: 'archived' })).status).toBe(200);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('lists three versions, shows one as it was, and the diff between versions 1 and 3', async () => {
    await signIn(page, origin, ids.adaKey!);
    await page.evaluate((id) => { location.hash = `#/resources/projects/${id}`; }, ids.p!);
    await page.waitForSelector('h3:text-is("History")');
    await expect.poll(() => rows().count(), { timeout: 15_000 }).toBe(3);
    const newest = await cells(0);
    expect(newest[0]).toContain('3');
    expect(newest[0]).toContain('current');
    expect(newest[1]).toBe('Edited');
    expect(newest[3]).toBe('You');
    expect(newest[4]).toBe('Budget, Status');
    expect((await cells(2))[1]).toBe('Created');
    expect(await rows().nth(0).locator('time').getAttribute('title')).toMatch(/UTC$/);
    await screen(page, 'history-list');

    await page.click('button:has-text("View version 1")');
    await page.waitForSelector('[data-testid=version-document] dd:text-is("100")');
    expect(await page.locator('[data-testid=version-document]').textContent()).toContain('moon');

    await page.click('button:has-text("View version 3")');
    await page.waitForSelector('h4:has-text("Version 3")');
    // Against the version before by default: only the budget and status changed from 2 to 3.
    await page.waitForSelector('[data-testid=diff] caption:text-is("From version 2 to version 3")', { state: 'attached' });
    await page.selectOption('#diff-against', '1');
    await page.waitForSelector('[data-testid=diff] caption:text-is("From version 1 to version 3")', { state: 'attached' });
    const diff = await page.locator('[data-testid=diff] tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)));
    expect(diff).toEqual([['Budget', '100', '300'], ['Status', 'active', 'archived']]);
    await screen(page, 'history-diff');
    // Dark, at a phone's width: nothing wider than the window (wide tables scroll in their own box).
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await screen(page, 'history-diff-dark-narrow');
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.emulateMedia({ colorScheme: 'light' });
  }, 90_000);

  it('restores version 1 after a confirmation, by keyboard: a 4th version with the old values', async () => {
    await page.click('button:has-text("View version 1")');
    await page.click('button:text-is("Restore version 1…")');
    await page.waitForSelector('[data-testid=restore-dialog] h2:text-is("Restore version 1?")');
    expect((await focused(page))?.text).toBe('Cancel');
    await page.keyboard.press('Tab');
    expect((await focused(page))?.text).toBe('Restore version 1');
    await screen(page, 'history-restore-confirm');
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-testid=toasts] :text("Version 1 restored: it is now version 4.")');
    await expect.poll(() => rows().count()).toBe(4);
    const top = await cells(0);
    expect(top[0]).toContain('4');
    expect(top[1]).toBe('Restored version 1');
    expect(top[4]).toBe('Budget, Status');
    await page.waitForSelector('.detail dd:text-is("100")');
    const doc = await call('GET', `/projects/${ids.p}`, ids.adaKey!);
    expect(doc.body).toMatchObject({ budget: 100, status: 'active', version: 4 });
    await screen(page, 'history-restored');
  }, 90_000);

  it('a restore after someone else changed the document: refused, said in words, with a reload', async () => {
    expect((await patch(4, { budget: 555 })).status).toBe(200);
    await page.click('button:has-text("View version 2")');
    await page.click('button:text-is("Restore version 2…")');
    await page.click('[data-testid=restore-dialog] button:text-is("Restore version 2")');
    await page.waitForSelector('[data-testid=stale]:has-text("Someone else changed this document")');
    expect(await page.locator('[data-testid=restore-dialog]').count()).toBe(0);
    expect((await call('GET', `/projects/${ids.p}`, ids.adaKey!)).body).toMatchObject({ budget: 555, version: 5 });
    await screen(page, 'history-stale');
    await page.click('[data-testid=stale] button:text-is("Reload the current version")');
    await page.waitForSelector('.detail dd:text-is("555")');
    await expect.poll(() => rows().count()).toBe(5);
    expect(await page.locator('[data-testid=stale]').count()).toBe(0);
  }, 90_000);

  it('a restore whose unique value another document now holds: the dialog names the field, nothing written', async () => {
    const first = await call('POST', '/codes', ids.adaKey!, { code: 'A-1' });
    expect((await call('PATCH', `/codes/${first.body._id}`, ids.adaKey!, { code: 'B-2' }, { 'If-Match': '"1"' })).status).toBe(200);
    expect((await call('POST', '/codes', ids.adaKey!, { code: 'A-1' })).status).toBe(201);
    await page.evaluate((id) => { location.hash = `#/resources/codes/${id}`; }, first.body._id as string);
    await expect.poll(() => rows().count(), { timeout: 15_000 }).toBe(2);
    await page.click('button:has-text("View version 1")');
    // The first version's changes are its client fields as set, not the server's own fields.
    await page.waitForSelector('[data-testid=diff] caption:text-is("Version 1: every field as set")', { state: 'attached' });
    expect(await page.locator('[data-testid=diff] tbody th').allTextContents()).toEqual(['Code']);
    await page.click('button:text-is("Restore version 1…")');
    await page.click('[data-testid=restore-dialog] button:text-is("Restore version 1")');
    const alert = page.locator('[data-testid=restore-dialog] [role=alert]');
    await expect.poll(() => alert.textContent()).toContain('Version 1 cannot be restored: its code "A-1" is now used by another document.');
    await screen(page, 'history-conflict');
    await page.keyboard.press('Escape');
    await expect.poll(() => page.locator('[data-testid=restore-dialog]').count()).toBe(0);
    expect((await call('GET', `/codes/${first.body._id}`, ids.adaKey!)).body).toMatchObject({ code: 'B-2', version: 2 });
  }, 90_000);

  it('older versions come a page at a time; another tenant sees no such document', async () => {
    for (let v = 5; v < 12; v++) expect((await patch(v, { budget: v * 10 })).status).toBe(200);
    await page.reload();
    await signIn(page, origin, ids.adaKey!);
    await page.evaluate((id) => { location.hash = `#/resources/projects/${id}`; }, ids.p!);
    await expect.poll(() => rows().count(), { timeout: 15_000 }).toBe(10);
    expect((await cells(0))[0]).toContain('12');
    await page.click('button:text-is("Show older versions")');
    await expect.poll(() => rows().count()).toBe(12);
    expect((await cells(11))[1]).toBe('Created');
    expect(await page.locator('button:text-is("Show older versions")').count()).toBe(0);
    await signOut(page);

    await signIn(page, origin, ids.olaKey!);
    await page.evaluate((id) => { location.hash = `#/resources/projects/${id}`; }, ids.p!);
    await page.waitForSelector('[data-testid=empty]:has-text("does not exist, or you may not see it")');
    expect(await page.locator('[data-testid=history]').count()).toBe(0);
    await screen(page, 'history-other-tenant');
    expect(errors).toEqual([]);
  }, 90_000);
});
