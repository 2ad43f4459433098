/**
 * The roles screen in Chromium: a tenant administrator creates a role in the structured editor (the
 * server's 422 shown next to the part it is about, in words), gives it to a user on the Identity
 * screen, the explain panel shows the user's effective rule, deleting the held role is refused
 * with a clear message, and the user then sees only what the rule allows; a system administrator
 * works on a tenant's roles through the tenant switcher; a plain user has no roles screen. Each
 * step is screenshotted and checked with axe.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { App } from '../../core/kernel.ts';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { CHROMIUM, screen, signIn, signOut, watchErrors } from './helpers.ts';

const haveBrowser = existsSync(CHROMIUM);

describe.skipIf(!haveBrowser)('console roles screen in Chromium', () => {
  let app: App;
  let origin: string;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  const ids: Record<string, string> = {};

  let started: ConsoleApp;
  const call: ConsoleApp['call'] = (...args) => started.call(...args);
  const nav = (label: string) => page.click(`nav[aria-label=Main] a:text-is("${label}")`);
  const navLabels = () => page.locator('nav[aria-label=Main] a').allTextContents();

  beforeAll(async () => {
    started = await startConsoleApp();
    ({ app, origin } = started);
    const acme = (await call('POST', '/admin/tenants', ADMIN_KEY, { name: 'Acme' })).body.id as string;
    const mkUser = (email: string, roles: string[]) => started.mkUser(acme, email, roles);
    const ada = await mkUser('ada@acme.test', ['user', 'admin']);
    const pat = await mkUser('pat@acme.test', ['user']);
    Object.assign(ids, { adaKey: ada.key, patKey: pat.key, patId: pat.id });
    await call('POST', '/projects', ada.key, { name: 'Open one', status: 'active', budget: 100 });
    await call('POST', '/projects', ada.key, { name: 'Old one', status: 'archived', budget: 200 });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    errors = watchErrors(page);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('a tenant administrator creates a role in the editor, with the server\'s 422 in words next to the rule', async () => {
    await signIn(page, origin, ids.adaKey!);
    await expect.poll(navLabels, { timeout: 15_000 }).toContain('Roles');
    await nav('Roles');
    await page.waitForSelector('h1:text-is("Roles")');
    await page.waitForSelector('[data-testid=empty]');
    await screen(page, 'roles-tenant-admin-empty');

    await page.click('button:text-is("New role")');
    await page.fill('#role-name', 'reader');
    await page.fill('#role-desc', 'Reads active projects, not their budget');
    await page.selectOption('#role-add-resource', 'projects');
    await page.click('button:text-is("Add")');
    await page.selectOption('#rule-projects-read-mode', 'rule');
    await page.fill('#rule-projects-read-rows', '{"status": "active"}');
    await page.fill('#rule-projects-read-fields', 'ghost');
    await page.check('[data-testid=rules-projects] .rule:first-of-type input[type=checkbox]');
    await page.click('button:text-is("Create role")');
    // The server's 422 next to the rule it is about, in words; nothing saved.
    await expect.poll(() => page.locator('[data-testid=rule-error]').textContent()).toContain('Unknown field "ghost"');
    expect(await page.locator('[data-testid=role-issues]').textContent()).toContain('permissions › projects › read › fields: Unknown field "ghost"');
    await screen(page, 'roles-validation-error');
    expect((await call('GET', '/admin/roles', ids.adaKey!)).body.total).toBe(0);
    // Broken JSON is caught in the form, without a request.
    await page.fill('#rule-projects-read-rows', '{status: active}');
    await page.click('button:text-is("Create role")');
    await expect.poll(() => page.locator('[data-testid=role-form] [role=alert]').textContent()).toContain('projects › read › rows is not valid JSON');

    await page.fill('#rule-projects-read-rows', '{"status": "active"}');
    await page.fill('#rule-projects-read-fields', 'budget');
    await page.click('button:text-is("Create role")');
    await page.waitForSelector('[data-testid=roles] td:has-text("reader")');
    const saved = (await call('GET', '/admin/roles', ids.adaKey!)).body.items[0];
    expect(saved.permissions).toEqual({ projects: { read: { rows: { status: 'active' }, fields: { except: ['budget'] } } } });

    // Editing shows the rule again in the form, and the JSON fallback holds the same permissions.
    await page.click('button:has-text("Edit"):has-text("reader")');
    expect(await page.inputValue('#rule-projects-read-rows')).toBe('{"status":"active"}');
    await page.click('button:text-is("Edit as JSON")');
    expect(JSON.parse(await page.inputValue('#role-json'))).toEqual(saved.permissions);
    await screen(page, 'roles-edit-json');
    await page.click('[data-testid=role-form] button:text-is("Cancel")');
  }, 90_000);

  it('the role is given to a user on the Identity screen, explain shows its rule, and deleting it while held is refused', async () => {
    // Identity: the custom role is a choice in the user's roles; pat gets only it.
    await nav('Identity');
    await page.click('button:has-text("Roles and features"):has-text("pat@acme.test")');
    await page.waitForSelector('[data-testid=access-dialog] label:has-text("reader")');
    await page.check('[data-testid=access-dialog] label:has-text("reader") input');
    await page.uncheck('[data-testid=access-dialog] label:has-text("user") input');
    await page.click('[data-testid=access-dialog] button:text-is("Save")');
    await page.waitForSelector('[data-testid=users] td:text-is("reader")');

    // Explain: pat, projects, read.
    await nav('Roles');
    await page.waitForSelector('#ex-user option:has-text("pat@acme.test (reader)")', { state: 'attached' });
    await page.selectOption('#ex-user', { label: 'pat@acme.test (reader)' });
    await page.selectOption('#ex-resource', 'projects');
    await page.selectOption('#ex-action', 'read');
    await page.click('button:text-is("Explain")');
    const explained = page.locator('[data-testid=explain]');
    await expect.poll(() => explained.textContent()).toContain('Allowed');
    const text = (await explained.textContent())!;
    expect(text).toContain('reader');
    expect(text).toContain('{"status":"active"}');
    expect(text).not.toMatch(/Fields.*budget/);
    await screen(page, 'roles-explain');

    // Deleting a held role: refused, and the dialog says what to do.
    await page.click('button:has-text("Delete"):has-text("reader")');
    await page.click('[data-testid=confirm] button:text-is("Delete role")');
    await expect.poll(() => page.locator('[data-testid=confirm] [role=alert]').textContent()).toContain('still held by users');
    expect(await page.locator('[data-testid=confirm] [role=alert]').textContent()).toContain('Take it away from those users');
    await screen(page, 'roles-delete-refused');
    await page.click('[data-testid=confirm] button:text-is("Cancel")');
    await signOut(page);
  }, 90_000);

  it('the user then sees what the rule allows, and has no roles screen', async () => {
    await signIn(page, origin, ids.patKey!);
    await page.waitForSelector('[data-testid=counts]');
    expect(await navLabels()).not.toContain('Roles');
    expect((await call('GET', '/admin/roles', ids.patKey!)).status).toBe(403);
    await page.evaluate(() => { location.hash = '#/resources/projects'; });
    await page.waitForSelector('[data-testid=resource-list] td:has-text("Open one")');
    expect(await page.locator('[data-testid=resource-list]').textContent()).not.toContain('Old one');
    const listed = await call('GET', '/projects', ids.patKey!);
    expect(listed.body.items.map((p: { name: string }) => p.name)).toEqual(['Open one']);
    expect(listed.body.items[0]).not.toHaveProperty('budget');
    await screen(page, 'roles-user-projects');
    await signOut(page);
  }, 90_000);

  it("a system administrator works on a tenant's roles through the tenant switcher", async () => {
    await signIn(page, origin, ADMIN_KEY);
    await expect.poll(navLabels, { timeout: 15_000 }).toContain('Roles');
    await nav('Roles');
    await page.waitForSelector('[data-testid=roles] td:has-text("reader")');
    expect(await page.locator('main .notice').textContent()).toContain('choose one with the Tenant switcher');
    expect(await page.locator('button:text-is("New role")').count()).toBe(0);
    await screen(page, 'roles-system-admin-all');
    await page.selectOption('#acting-tenant', { label: 'Acme' });
    await page.waitForSelector('h2:text-is("Custom roles of Acme")');
    await page.waitForSelector('[data-testid=roles] td:has-text("reader")');
    await page.click('button:text-is("New role")');
    await page.fill('#role-name', 'auditor');
    await page.click('button:text-is("Create role")');
    await page.waitForSelector('[data-testid=roles] td:has-text("auditor")');
    const acme = (await call('GET', '/admin/roles', ids.adaKey!)).body.items.map((r: { name: string }) => r.name);
    expect(acme).toEqual(['reader', 'auditor']);
    await screen(page, 'roles-system-admin-acme');
    // Roles come a page at a time (20): 22 roles are two pages.
    for (let i = 1; i <= 20; i++) expect((await call('POST', '/admin/roles', ids.adaKey!, { name: `extra-${String(i).padStart(2, '0')}`, permissions: {} })).status).toBe(201);
    await page.selectOption('#acting-tenant', { label: 'All tenants' });
    await page.selectOption('#acting-tenant', { label: 'Acme' });
    await page.waitForSelector('nav[aria-label="Pages of roles"] :text("Page 1 of 2")');
    expect(await page.locator('[data-testid=roles] tbody tr').count()).toBe(20);
    await page.click('nav[aria-label="Pages of roles"] button:text-is("Next page")');
    await page.waitForSelector('nav[aria-label="Pages of roles"] :text("Page 2 of 2")');
    expect(await page.locator('[data-testid=roles] tbody tr td:first-child').allTextContents()).toEqual(['extra-19', 'extra-20']);
    await page.selectOption('#acting-tenant', { label: 'All tenants' });
    await signOut(page);
    expect(errors).toEqual([]);
  }, 90_000);
});
