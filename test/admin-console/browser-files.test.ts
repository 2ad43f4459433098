/**
 * The console's file browser in Chromium, with the files plugin on, for the three roles: a tenant
 * administrator (empty state, uploads with their progress, thumbnails and a preview through the
 * transform URL, download, delete with confirmation), a plain user (the tenant's files, a 415 and an
 * upload, in another tenant a 413 over the quota, and no file of another tenant) and a system
 * administrator (no upload in the all-tenants view; acting for a tenant: its files a page at a
 * time, an upload that is that tenant's). Each step is screenshotted and checked with axe; the
 * file screens are compared with their visual references (visual-check.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { App } from '../../core/kernel.ts';
import { ADMIN_KEY } from '../helpers/app.ts';
import { startConsoleApp, type ConsoleApp } from './console-app.ts';
import { CHROMIUM, screen, signIn, signOut, watchErrors } from './helpers.ts';
import { VISUAL_ARGS, visualChecker, visualPage } from './visual-check.ts';

const haveBrowser = existsSync(CHROMIUM);
const QUOTA = 100_000;
const PDF = Buffer.from('%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n');

describe.skipIf(!haveBrowser)('the console file browser in Chromium', () => {
  let app: App;
  let origin: string;
  let api: string;
  let browser: Browser;
  let page: Page;
  let compare: Page;
  let errors: string[];
  let png: Buffer;
  const ids: Record<string, string> = {};

  let started: ConsoleApp;
  const call: ConsoleApp['call'] = (...args) => started.call(...args);
  const uploadApi = async (key: string, name: string, bytes: Buffer, type = 'text/plain') => {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(bytes)], { type }), name);
    const res = await fetch(`${api}/files`, { method: 'POST', body: form, headers: { 'X-API-Key': key } });
    expect(res.status).toBe(201);
    return (await res.json()) as { _id: string };
  };
  const check = (name: string) => visualChecker(page, compare)(name);
  const nav = (label: string) => page.click(`nav[aria-label=Main] a:text-is("${label}")`);
  const rows = () => page.locator('[data-testid=file-list] tbody tr');
  const choose = (name: string, mimeType: string, buffer: Buffer) => page.setInputFiles('#file-input', { name, mimeType, buffer });

  beforeAll(async () => {
    started = await startConsoleApp({ FILES_ENABLED: 'true', FILES_TRANSFORM_ALLOWED: '96x96,800x0', FILES_TENANT_QUOTA_BYTES: String(QUOTA) });
    ({ app, origin, api } = started);
    const mkUser = async (tenant: string, email: string, roles: string[]) => (await started.mkUser(tenant, email, roles)).key;
    for (const name of ['Acme', 'Full Co', 'Many Inc']) ids[name] = (await call('POST', '/admin/tenants', ADMIN_KEY, { name })).body.id;
    ids.admin = await mkUser(ids.Acme!, 'ada@acme.test', ['user', 'admin']);
    ids.plain = await mkUser(ids.Acme!, 'pat@acme.test', ['user']);
    ids.full = await mkUser(ids['Full Co']!, 'fay@full.test', ['user']);
    ids.many = await mkUser(ids['Many Inc']!, 'mo@many.test', ['user', 'admin']);
    await uploadApi(ids.full, 'archive.txt', Buffer.alloc(QUOTA - 1000, 'a'));
    for (let i = 1; i <= 22; i++) await uploadApi(ids.many, `note-${String(i).padStart(2, '0')}.txt`, Buffer.from(`note ${i}\n`));
    // A 320×200 picture in two colours, so a thumbnail shows something.
    png = await sharp({ create: { width: 320, height: 200, channels: 3, background: '#2d6cdf' } })
      .composite([{ input: await sharp({ create: { width: 160, height: 200, channels: 3, background: '#f2b134' } }).png().toBuffer(), left: 160, top: 0 }])
      .png().toBuffer();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: VISUAL_ARGS, headless: true });
    page = await visualPage(browser);
    compare = await (await browser.newContext()).newPage();
    errors = watchErrors(page);
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('a tenant administrator: empty state, uploads with progress, previews, download, delete', async () => {
    errors.length = 0;
    await signIn(page, origin, ids.admin!);
    await page.waitForSelector('nav[aria-label=Main] a:text-is("Files")');
    expect(await page.locator('nav[aria-label=Main] ul[aria-label=Content] a').allTextContents()).toEqual(['Overview', 'Resources', 'Files']);
    await nav('Files');
    await page.waitForSelector('[data-testid=empty]');
    expect(await page.textContent('[data-testid=empty]')).toContain('No files yet. Choose files above and press Upload');
    await check('tenant-admin-files-empty');

    // Progress: every value the bar shows is recorded, from the first to 100%.
    await page.evaluate(() => {
      const seen: string[] = ((window as unknown as { seen: string[] }).seen = []);
      new MutationObserver(() => document.querySelectorAll('[data-testid=progress-text]').forEach((el) => seen.push(el.textContent ?? ''))).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    await choose('chart.png', 'image/png', png);
    await page.click('button:text-is("Upload")');
    await page.waitForSelector('[data-testid=file-list] tbody tr:has-text("chart.png")');
    expect(await page.textContent('[data-testid=progress-text]')).toBe('100%');
    expect(await page.evaluate(() => (window as unknown as { seen: string[] }).seen)).toContain('100%');
    await page.waitForSelector('[data-testid=toasts] :text("Uploaded chart.png")');
    await choose('report.pdf', 'application/pdf', PDF);
    await page.click('button:text-is("Upload")');
    await page.waitForSelector('[data-testid=file-list] tbody tr:has-text("report.pdf")');
    expect(await rows().count()).toBe(2);
    expect(await page.textContent('#h-files')).toBe('Files (2)');
    const pdfRow = rows().filter({ hasText: 'report.pdf' });
    expect(await pdfRow.locator('td').nth(1).textContent()).toBe('application/pdf');
    expect(await pdfRow.locator('td').nth(2).textContent()).toBe(`${PDF.length} B`);
    expect(await pdfRow.locator('td').nth(3).textContent()).toBe('ready');
    expect(await pdfRow.locator('[data-testid=preview]').count()).toBe(0);

    // The thumbnail: the 96×96 transform through the signed URL, as a path of this origin.
    const thumb = rows().filter({ hasText: 'chart.png' }).locator('img[data-testid=preview]');
    await page.waitForFunction(() => { const i = document.querySelector<HTMLImageElement>('[data-testid=file-list] img'); return !!i && i.complete && i.naturalWidth > 0; });
    const src = (await thumb.getAttribute('src'))!;
    expect(src).toMatch(/^\/files\/[0-9a-f]{24}\/content\?expires=\d+&signature=[\w-]+&w=96&h=96&fit=cover$/);
    expect(await thumb.evaluate((i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight])).toEqual([96, 96]);
    await screen(page, 'files-tenant-admin-list');
    await check('tenant-admin-files');

    // A transform the server does not allow (422): the original, small enough, instead.
    await page.route(/\/content\?.*&w=96&/, (route) => route.fulfill({ status: 422, contentType: 'application/json', body: '{"error":{"code":"VALIDATION_ERROR"}}' }));
    await nav('Overview');
    await nav('Files');
    await page.waitForFunction(() => { const i = document.querySelector<HTMLImageElement>('[data-testid=file-list] img'); return !!i && i.complete && i.naturalWidth > 0; });
    expect(await thumb.getAttribute('src')).toMatch(/^\/files\/[0-9a-f]{24}\/content\?expires=\d+&signature=[\w-]+$/);
    expect(await thumb.evaluate((i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight])).toEqual([320, 200]);
    await page.unroute(/\/content\?.*&w=96&/);

    // The preview in the detail panel: 800×0 is not enlarged, so the picture's own 320×200.
    await page.click('[data-testid=file-list] button:text-is("chart.png")');
    await page.waitForSelector('[data-testid=file-detail] h2:text-is("File chart.png")');
    await page.waitForFunction(() => { const i = document.querySelector<HTMLImageElement>('[data-testid=file-detail] img'); return !!i && i.complete && i.naturalWidth > 0; });
    const big = page.locator('[data-testid=file-detail] img');
    expect(await big.getAttribute('src')).toContain('&w=800&h=0&fit=inside');
    expect(await big.evaluate((i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight])).toEqual([320, 200]);
    await screen(page, 'files-tenant-admin-preview');
    await page.keyboard.press('Escape');
    await page.waitForSelector('[data-testid=file-detail]', { state: 'detached' });

    // Download: the same bytes.
    const [dl] = await Promise.all([page.waitForEvent('download'), pdfRow.locator('button:has-text("Download")').click()]);
    expect(dl.suggestedFilename()).toBe('report.pdf');
    expect(readFileSync((await dl.path())!)).toEqual(PDF);

    // Delete, confirmed in a dialog: the toast, the row gone, and the API agrees.
    const pdfId = (await pdfRow.locator('.short-id code').getAttribute('title'))!;
    await pdfRow.locator('button:has-text("Delete")').click();
    await page.waitForSelector('[data-testid=confirm] h2:text-is("Delete report.pdf?")');
    await screen(page, 'files-tenant-admin-delete');
    await page.click('[data-testid=confirm] button:text-is("Delete")');
    await page.waitForSelector('[data-testid=toasts] :text("Deleted report.pdf")');
    await page.waitForFunction(() => !document.querySelector('[data-testid=file-list]')?.textContent?.includes('report.pdf'));
    expect(await rows().count()).toBe(1);
    expect((await call('GET', `/files/${pdfId}`, ids.admin!)).status).toBe(404);
    await signOut(page);
    // Chromium logs the refused transform by itself; nothing else.
    expect(errors.filter((e) => !/status of 422/.test(e))).toEqual([]);
  });

  it('a plain user: the tenant\'s files, a refused type in plain words, an upload; in a full tenant the quota', async () => {
    errors.length = 0;
    await signIn(page, origin, ids.plain!);
    await nav('Files');
    await page.waitForSelector('[data-testid=file-list] tbody tr:has-text("chart.png")');
    // The bytes are a PDF, the browser says PNG: 415.
    await choose('scan.png', 'image/png', PDF);
    await page.click('button:text-is("Upload")');
    const refused = page.locator('[data-testid=uploads] [role=alert]');
    await refused.waitFor();
    expect(await refused.textContent()).toContain('scan.png was not stored: its contents (application/pdf) are not the type it claims to be (image/png).');
    expect(await refused.textContent()).toContain('UNSUPPORTED_MEDIA_TYPE');
    await choose('notes.txt', 'text/plain', Buffer.from('milk, eggs\n'));
    await page.click('button:text-is("Upload")');
    await page.waitForSelector('[data-testid=file-list] tbody tr:has-text("notes.txt")');
    await screen(page, 'files-user-refused-type');
    // What the console lists is what the API gives this user.
    const listed = (await call('GET', '/files?sort=-created_at', ids.plain!)).body;
    expect(listed.items.map((f: { filename: string }) => f.filename)).toEqual(['notes.txt', 'chart.png']);
    expect(await rows().locator('td:first-child').allTextContents()).toEqual(['notes.txt', 'chart.png']);
    await check('user-files');
    await signOut(page);

    // Another tenant, its quota nearly used: 413 in words, and none of Acme's files.
    await signIn(page, origin, ids.full!);
    await nav('Files');
    await page.waitForSelector('[data-testid=file-list] tbody tr:has-text("archive.txt")');
    expect(await rows().count()).toBe(1);
    await choose('big.txt', 'text/plain', Buffer.alloc(5000, 'b'));
    await page.click('button:text-is("Upload")');
    await refused.waitFor();
    expect(await refused.textContent()).toContain('big.txt was not stored: your tenant\'s storage is full (97 KB of 98 KB used). Delete files you no longer need, or ask for a larger quota.');
    expect(await refused.textContent()).toContain('PAYLOAD_TOO_LARGE');
    await screen(page, 'files-user-quota');
    expect(await rows().count()).toBe(1);
    await signOut(page);
    // Chromium logs each refused request by itself; nothing else.
    expect(errors.filter((e) => !/status of 41[35]/.test(e))).toEqual([]);
  });

  it('a system administrator: no upload for every tenant; acting for one, its pages and an upload of its own', async () => {
    errors.length = 0;
    await signIn(page, origin, ADMIN_KEY);
    await nav('Files');
    await page.waitForSelector('[data-testid=choose-tenant]');
    expect(await page.locator('#file-input').count()).toBe(0);
    await page.selectOption('#acting-tenant', { label: 'Many Inc' });
    await page.waitForSelector('#file-input');
    await page.waitForSelector('[data-testid=file-list] tbody tr');
    expect(await page.textContent('#h-files')).toBe('Files (22)');
    expect(await rows().count()).toBe(20);
    expect(await rows().first().locator('td').first().textContent()).toBe('note-22.txt');
    expect(await page.textContent('nav[aria-label="Pages of files"]')).toContain('Page 1 of 2');
    await page.click('nav[aria-label="Pages of files"] button:text-is("Next page")');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=file-list] tbody tr').length === 2);
    expect(await rows().locator('td:first-child').allTextContents()).toEqual(['note-02.txt', 'note-01.txt']);
    await screen(page, 'files-system-admin-page-2');
    await choose('handbook.txt', 'text/plain', Buffer.from('welcome\n'));
    await page.click('button:text-is("Upload")');
    await page.waitForSelector('[data-testid=file-list] tbody tr:has-text("handbook.txt")');
    // The upload is Many Inc's, and Acme's users do not see it.
    const mine = (await call('GET', '/files?filename=handbook.txt', ids.many!)).body.items;
    expect(mine).toHaveLength(1);
    expect(mine[0].tenant_id).toBe(ids['Many Inc']);
    expect((await call('GET', '/files?filename=handbook.txt', ids.admin!)).body.items).toHaveLength(0);
    await signOut(page);
    expect(errors).toEqual([]);
  });
});
