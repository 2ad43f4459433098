/**
 * A document's History panel and its draft state in Chromium, for the three roles. A plain user of
 * the tenant sees the published document under an administrator's pending draft, with no Publish
 * and no Unpublish (the server refuses both: 404), publishes the draft they saved themselves,
 * unpublishes only what they created, reads the history and may restore a version (an ordinary
 * edit); a soft-deleted document does not exist for them. A tenant administrator sees the pending
 * draft and the user's draft with Publish, and restores a deleted document. A system administrator
 * sees the same, publishes the draft (the user then reads it), and restores a version. Under
 * access rules, an editor without the publish grant is offered no Unpublish (nor Delete, without the delete grant), a reader without the
 * update grant no Restore (the server refuses both). The buttons follow the document's `_actions`;
 * the list's New and "Delete selected" follow the resource's `actions` (an editor creates but is
 * offered no selection to delete; a reader neither).
 * Every step is checked with axe and kept as a screenshot under test-results/console/.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { CHROMIUM, screen, signIn, signOut, watchErrors } from './helpers.ts';

describe.skipIf(!existsSync(CHROMIUM))('console history and drafts for the three roles in Chromium', () => {
  let c: ConsoleApp;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  const ids: Record<string, string> = {};
  const keys: Record<string, string> = {};

  const rows = () => page.locator('[data-testid=versions] tbody tr');
  const actions = () => page.locator('[data-testid=doc-actions] button').allTextContents();
  const badge = () => page.textContent('[data-testid=status-badge]');
  const open = async (doc: string) => {
    await page.evaluate((id) => { location.hash = `#/resources/projects/${id}`; }, ids[doc]!);
    await page.waitForSelector('[data-testid=doc-actions]');
  };
  /** Opens the history of `doc`, waits for `count` versions and shows the diff of version `n` against version 1. */
  const openDiff = async (doc: string, count: number, n: number) => {
    await open(doc);
    await expect.poll(() => rows().count(), { timeout: 15_000 }).toBe(count);
    await page.click(`button:has-text("View version ${n}")`);
    await page.selectOption('#diff-against', '1');
    await page.waitForSelector(`[data-testid=diff] caption:text-is("From version 1 to version ${n}")`, { state: 'attached' });
  };
  /** What the projects list offers the signed-in user: New, Delete selected, and a checkbox per row. */
  const listOffers = async () => {
    await page.evaluate(() => { location.hash = '#/resources/projects'; });
    await page.waitForSelector('[data-testid=resource-list] tbody tr');
    return {
      create: await page.locator('a.button:text-is("New project")').count(),
      bulk: await page.locator('button:has-text("Delete selected")').count(),
      checkboxes: await page.locator('[data-testid=resource-list] input[type=checkbox]').count(),
    };
  };
  const ifMatch = async (doc: string, key: string) => ({ 'If-Match': `"${(await c.call('GET', `/projects/${ids[doc]}`, key)).body.version}"` });

  beforeAll(async () => {
    c = await startConsoleApp();
    const acme = (await c.call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    keys.ada = (await c.mkUser(acme, 'ada@acme.test', ['user', 'admin'])).key;
    keys.pat = (await c.mkUser(acme, 'pat@acme.test', ['user'])).key;
    const post = async (key: string, body: object, query = '') => {
      const r = await c.call('POST', `/projects${query}`, key, body);
      expect(r.status).toBe(201);
      return r.body._id as string;
    };
    const patch = async (doc: string, key: string, body: object, version: number, query = '') =>
      expect((await c.call('PATCH', `/projects/${ids[doc]}${query}`, key, body, { 'If-Match': `"${version}"` })).status).toBe(200);
    // Apollo: three versions. Gemini: published, with the administrator's pending draft over it.
    ids.apollo = await post(keys.ada, { name: 'Apollo', budget: 100 });
    await patch('apollo', keys.ada, { budget: 200 }, 1);
    await patch('apollo', keys.ada, { budget: 300, status: 'archived' }, 2);
    ids.gemini = await post(keys.ada, { name: 'Gemini' });
    await patch('gemini', keys.ada, { name: 'Gemini II' }, 1, '?draft=true');
    // Mercury: the user's own draft; Vostok: published, created by the user; Soyuz: deleted.
    ids.mercury = await post(keys.pat, { name: 'Mercury' }, '?draft=true');
    ids.vostok = await post(keys.pat, { name: 'Vostok' });
    ids.soyuz = await post(keys.ada, { name: 'Soyuz' });
    expect((await c.call('DELETE', `/projects/${ids.soyuz}`, keys.ada, undefined, { 'If-Match': '"1"' })).status).toBe(204);
    // Users whose roles have rules: an editor (no publish) and a reader (no update).
    for (const [name, projects] of [['editor', { read: true, create: true, update: true }], ['reader', { read: true }]] as const) {
      expect((await c.call('POST', '/admin/roles', keys.ada, { name, permissions: { projects } })).status).toBe(201);
    }
    keys.eve = (await c.mkUser(acme, 'eve@acme.test', ['editor'])).key;
    keys.rita = (await c.mkUser(acme, 'rita@acme.test', ['reader'])).key;
    ids.voskhod = await post(keys.eve, { name: 'Voskhod' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await c?.app.close();
  });

  it('a user: the published document under another\'s draft, no Publish or Unpublish the server refuses; their own draft; the history', async () => {
    await signIn(page, c.origin, keys.pat!);
    await open('gemini');
    expect(await badge()).toBe('Published');
    expect(await page.textContent('dl.detail')).toContain('Gemini');
    expect(await page.textContent('dl.detail')).not.toContain('Gemini II');
    expect(await actions()).toEqual(['Delete']);
    // What the console no longer offers, the server refuses.
    for (const op of ['publish', 'unpublish']) {
      const r = await c.call('POST', `/projects/${ids.gemini}/${op}`, keys.pat!, undefined, await ifMatch('gemini', keys.pat!));
      // Outside the caller's publish rows, as a row outside its read rules: not found.
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe('NOT_FOUND');
    }
    expect((await c.call('GET', `/projects/${ids.gemini}?draft=true`, keys.ada!)).body).toMatchObject({ name: 'Gemini II', _status: 'draft', version: 2 });
    await screen(page, 'roles-user-draft-of-another');

    await open('mercury');
    expect(await badge()).toBe('Draft');
    expect(await actions()).toEqual(['Delete', 'Publish']);
    await screen(page, 'roles-user-own-draft');
    await open('vostok');
    expect(await actions()).toEqual(['Delete', 'Unpublish']);

    await openDiff('apollo', 3, 3);
    expect(await rows().nth(0).locator('td').nth(3).textContent()).toMatch(/^…[0-9a-f]{6}Copy/);
    expect(await page.locator('button:text-is("Restore version 3…")').count()).toBe(0);
    await page.click('button:has-text("View version 1")');
    await page.waitForSelector('button:text-is("Restore version 1…")');
    await screen(page, 'roles-user-history');

    await page.evaluate((id) => { location.hash = `#/resources/projects/${id}`; }, ids.soyuz!);
    await page.waitForSelector('[data-testid=empty]:has-text("does not exist, or you may not see it")');
    expect(await page.locator('[data-testid=doc-actions]').count()).toBe(0);
    await screen(page, 'roles-user-deleted');
    await signOut(page);
  }, 120_000);

  it('users whose roles have rules: no Unpublish without the publish grant, no Restore without the update grant', async () => {
    await signIn(page, c.origin, keys.eve!);
    await open('voskhod');
    // Edit and Delete follow the document's rules as the server answers them: an editor edits, never deletes.
    expect(await actions()).toEqual([]);
    expect(await page.locator('[data-testid=doc-actions] a:text-is("Edit")').count()).toBe(1);
    const del = await c.call('DELETE', `/projects/${ids.voskhod}`, keys.eve!, undefined, await ifMatch('voskhod', keys.eve!));
    expect(del.status).toBe(403);
    const r = await c.call('POST', `/projects/${ids.voskhod}/unpublish`, keys.eve!, undefined, await ifMatch('voskhod', keys.eve!));
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('ACCESS_DENIED');
    await openDiff('apollo', 3, 3);
    await page.click('button:has-text("View version 1")');
    await page.waitForSelector('button:text-is("Restore version 1…")');
    await screen(page, 'roles-editor-history');
    // The list offers what the roles allow of the resource: an editor creates, never deletes in bulk.
    expect(await listOffers()).toEqual({ create: 1, bulk: 0, checkboxes: 0 });
    await signOut(page);

    await signIn(page, c.origin, keys.rita!);
    await openDiff('apollo', 3, 3);
    await page.click('button:has-text("View version 1")');
    await page.waitForSelector('h4:has-text("Version 1")');
    await page.waitForSelector('[data-testid=diff]', { state: 'attached' });
    expect(await page.locator('[data-testid=version] button:has-text("Restore")').count()).toBe(0);
    // A reader is offered neither Edit nor Delete, and the server refuses both.
    expect(await actions()).toEqual([]);
    expect(await page.locator('[data-testid=doc-actions] a:text-is("Edit")').count()).toBe(0);
    for (const method of ['PATCH', 'DELETE'] as const) {
      const w = await c.call(method, `/projects/${ids.apollo}`, keys.rita!, method === 'PATCH' ? { name: 'x' } : undefined, await ifMatch('apollo', keys.rita!));
      expect(w.status, method).toBe(403);
    }
    const restore = await c.call('POST', `/projects/${ids.apollo}/versions/1/restore`, keys.rita!, undefined, await ifMatch('apollo', keys.rita!));
    expect(restore.status).toBe(403);
    await screen(page, 'roles-reader-history');
    // A reader's list offers neither New nor a selection to delete; the server refuses a create.
    expect(await listOffers()).toEqual({ create: 0, bulk: 0, checkboxes: 0 });
    expect((await c.call('POST', '/projects', keys.rita!, { name: 'not mine to make' })).status).toBe(403);
    await signOut(page);
  }, 120_000);

  it('a tenant administrator: the pending draft and the user\'s draft with Publish, the history, Restore of a deleted document', async () => {
    await signIn(page, c.origin, keys.ada!);
    await open('gemini');
    expect(await badge()).toBe('Draft');
    expect(await page.textContent('dl.detail')).toContain('Gemini II');
    // The published version is live under the draft: it may be withdrawn too.
    expect(await actions()).toEqual(['Delete', 'Publish', 'Unpublish']);
    await screen(page, 'roles-tenant-admin-draft');
    await open('mercury');
    expect(await actions()).toEqual(['Delete', 'Publish']);
    await open('vostok');
    expect(await actions()).toEqual(['Delete', 'Unpublish']);

    await openDiff('apollo', 3, 3);
    expect(await rows().nth(0).locator('td').nth(3).textContent()).toBe('You');
    expect(await page.locator('[data-testid=diff] tbody th').allTextContents()).toEqual(['Budget', 'Status']);
    await screen(page, 'roles-tenant-admin-history');

    await open('soyuz');
    expect(await actions()).toEqual(['Restore']);
    await screen(page, 'roles-tenant-admin-deleted');
    await signOut(page);
  }, 120_000);

  it('a system administrator: publishes the pending draft (the user then reads it) and restores a version', async () => {
    await signIn(page, c.origin, ADMIN_KEY);
    await open('gemini');
    expect(await badge()).toBe('Draft');
    expect(await actions()).toEqual(['Delete', 'Publish', 'Unpublish']);
    await screen(page, 'roles-system-admin-draft');
    await page.click('[data-testid=doc-actions] button:text-is("Publish")');
    await page.waitForFunction(() => document.querySelector('[data-testid=status-badge]')?.textContent === 'Published');
    expect((await c.call('GET', `/projects/${ids.gemini}`, keys.pat!)).body.name).toBe('Gemini II');

    await openDiff('apollo', 3, 3);
    await page.click('button:has-text("View version 1")');
    await page.click('button:text-is("Restore version 1…")');
    await page.click('[data-testid=restore-dialog] button:text-is("Restore version 1")');
    await expect.poll(() => rows().count(), { timeout: 15_000 }).toBe(4);
    expect((await c.call('GET', `/projects/${ids.apollo}`, keys.ada!)).body).toMatchObject({ budget: 100, status: 'active', version: 4 });
    await screen(page, 'roles-system-admin-history');
    await signOut(page);
    expect(errors).toEqual([]);
  }, 120_000);
});
