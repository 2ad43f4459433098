/**
 * The console's session ends with its token (docs/console.md, "Session"), in Chromium with a
 * 60-second token lifetime (TOKEN_TTL_SECONDS, its minimum):
 * - by the console itself: it knows `expires_in` from the token exchange and shows the sign-in
 *   form ("Your session expired") once it has passed, without waiting for a refused request;
 * - by the API: a console told the token lasts an hour (the exchange's answer rewritten, as a
 *   wrong clock would) acts after the real expiry, gets 401 AUTH_REQUIRED "Token expired", drops
 *   the token and asks to sign in again; signing in again continues on the same screen.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { CHROMIUM, expectFocusOn, screen, watchErrors } from './helpers.ts';

const EXPIRED = 'Your session expired. Sign in again to continue.';

/**
 * Resolves once the console has reached a new frame, so its effects have run: Preact runs them in a
 * timeout after the next animation frame, and these are queued after that frame's.
 */
const settled = (page: Page) => page.evaluate(() => new Promise<void>((res) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(res)))));

/**
 * In the page: focuses the element `id` as soon as it exists (before any effect of the render that
 * made it), as someone quicker than the console, or a test driving it, would.
 */
const focusWhenItAppears = (id: string) => {
  new MutationObserver((_, observer) => {
    const el = document.getElementById(id);
    if (!el) return;
    el.focus();
    observer.disconnect();
  }).observe(document, { childList: true, subtree: true });
};

describe.skipIf(!existsSync(CHROMIUM))('admin console session expiry in Chromium', () => {
  let t: TestApp;
  let browser: Browser;
  let key: string;

  beforeAll(async () => {
    t = await buildTestApp({ plugins: builtinPlugins(), config: { TOKEN_TTL_SECONDS: '60', AUTH_CACHE_TTL_MS: '0', METRICS_ENABLED: 'false' } });
    const admin = await createTenantUser(t, { roles: ['user', 'admin'] });
    key = admin.key;
    for (let i = 1; i <= 3; i++) expect((await t.http('POST', '/projects', { key, json: { name: `Project ${i}` } })).status).toBe(201);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /**
   * A fresh page signed in through the form, with the bearer token it got; `tokenLifetime`
   * rewrites the exchange's `expires_in` the console sees. `auth` collects each /graphql request's
   * Authorization header, `refused` each 401.
   */
  async function signedIn(tokenLifetime?: number) {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    const errors = watchErrors(page);
    const refused: string[] = [];
    const auth: (string | undefined)[] = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/graphql')) auth.push(r.headers().authorization);
    });
    page.on('response', (r) => {
      if (r.url().endsWith('/graphql') && r.status() === 401) refused.push(r.url());
    });
    let token = '';
    let issuedAt = 0;
    let lifetime = 0;
    await page.route('**/graphql', async (route) => {
      if (!route.request().postData()?.includes('issueToken')) return route.continue();
      issuedAt = Date.now();
      const res = await route.fetch();
      const body = (await res.json()) as { data: { issueToken: { token: string; expires_in: number } } };
      ({ token, expires_in: lifetime } = body.data.issueToken);
      if (tokenLifetime) body.data.issueToken.expires_in = tokenLifetime;
      await route.fulfill({ response: res, json: body });
    });
    await page.goto(`${t.url}/admin#/overview`);
    await page.fill('#api-key', key);
    await page.click('button:text-is("Sign in")');
    await page.waitForSelector('[data-testid=counts] a');
    await page.unroute('**/graphql');
    expect(token).not.toBe('');
    expect(lifetime).toBeGreaterThan(55);
    expect(lifetime).toBeLessThanOrEqual(60);
    return { page, errors, refused, auth, token, issuedAt };
  }

  it('ends the session when exp has passed, by the console\'s own clock and by the API\'s 401; signing in again continues', async () => {
    const start = Date.now();
    const [own, told] = await Promise.all([signedIn(), signedIn(3600)]);

    // The console's own clock: the sign-in form comes by itself (a few seconds before the server's exp), no request refused.
    await own.page.waitForSelector(`[data-testid=signin-reason]:text-is("${EXPIRED}")`, { timeout: 75_000 });
    expect((Date.now() - start) / 1000).toBeGreaterThan(45);
    expect(own.refused).toEqual([]);
    await expectFocusOn(own.page, 'api-key');
    expect(await own.page.locator('[data-testid=who]').count()).toBe(0);
    await screen(own.page, 'session-expired');

    // The API's answer: past the real exp, the console (told an hour) acts, gets 401 "Token expired" and asks to sign in.
    await told.page.waitForTimeout(Math.max(0, told.issuedAt + 62_000 - Date.now()));
    const direct = await t.gql('{ me { id } }', {}, { key: null, token: told.token });
    expect(direct.status).toBe(401);
    expect(JSON.stringify(direct.body)).toContain('Token expired');
    expect(await told.page.textContent('[data-testid=who]')).toContain('@');
    await told.page.click('nav[aria-label=Main] a:text-is("Resources")');
    await told.page.waitForSelector(`[data-testid=signin-reason]:text-is("${EXPIRED}")`);
    expect(told.refused.length).toBeGreaterThan(0);
    expect(await told.page.evaluate(() => location.hash)).toBe('#/resources');

    // Signing in again continues on the same screen, and the dropped token is never sent again.
    const sent = told.auth.length;
    await told.page.fill('#api-key', key);
    await told.page.click('button:text-is("Sign in")');
    await told.page.waitForSelector('[data-testid=resource-list] tbody tr');
    expect(await told.page.locator('[data-testid=resource-list] tbody tr').count()).toBe(3);
    expect(told.auth.slice(sent).length).toBeGreaterThan(0);
    expect(told.auth.slice(sent)).not.toContain(`Bearer ${told.token}`);

    // Chromium logs each refused fetch (401) by itself; nothing else.
    expect(own.errors).toEqual([]);
    expect(told.errors.every((e) => e.includes('status of 401'))).toBe(true);
  }, 150_000);

  it('the sign-in form gives the key field the focus, but not away from a field chosen before its effect ran', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });

    const alone = await context.newPage();
    await alone.goto(`${t.url}/admin#/overview`);
    await alone.waitForSelector('#pk-email');
    await settled(alone);
    await expectFocusOn(alone, 'api-key');

    // The e-mail field takes the focus as soon as it exists, as someone quicker than the form's effect
    // (or a test driving the page) would: the focus, and what is typed, stay there.
    const quick = await context.newPage();
    await quick.addInitScript(focusWhenItAppears, 'pk-email');
    await quick.goto(`${t.url}/admin#/overview`);
    await quick.waitForSelector('#pk-email');
    await settled(quick);
    expect(await quick.evaluate(() => document.activeElement?.id)).toBe('pk-email');
    await quick.keyboard.type('ada@acme.test');
    expect(await quick.inputValue('#pk-email')).toBe('ada@acme.test');
    expect(await quick.inputValue('#api-key')).toBe('');
    await context.close();
  }, 60_000);

  it('after a navigation the focus goes to the new screen\'s heading, but not away from a field of it chosen first', async () => {
    const { page } = await signedIn();
    // Alone: the heading of the new screen.
    await page.click('nav[aria-label=Main] a:text-is("Resources")');
    await page.waitForSelector('h1:text-is("Resources")');
    await settled(page);
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H1');

    // The passkey's device field takes the focus as soon as it exists, before the navigation's effect runs.
    await page.evaluate(focusWhenItAppears, 'pk-device');
    await page.click('nav[aria-label=Main] a:text-is("My account")');
    await page.waitForSelector('#pk-device');
    await settled(page);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('pk-device');
    await page.keyboard.type('Work laptop');
    expect(await page.inputValue('#pk-device')).toBe('Work laptop');
    await page.context().close();
  }, 60_000);
});
