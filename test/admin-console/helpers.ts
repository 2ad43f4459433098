/** Chromium helpers of the console's browser tests: sign-in, axe, screenshots, console errors. */
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { createRequire } from 'node:module';
import { expect } from 'vitest';
import type { Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const SHOTS = resolve(import.meta.dirname, '../../test-results/console');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** A free port, so the origin (http://localhost:<port>) is known before the app starts (WebAuthn needs it). */
export const freePort = () =>
  new Promise<number>((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });

/** Collects console errors, page errors and CSP violations of a page. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return errors;
}

/** Runs axe-core in the page (evaluated through CDP, so the page's CSP stays on) and returns serious and critical violations. */
export async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(`${AXE}\n;0`);
  const result = await page.evaluate(async () => {
    const w = window as unknown as { axe: { run(ctx: Document, o: object): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } };
    const r = await w.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 3) }));
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.targets.join(', ')}`);
}

/** Screenshot under test-results/console/<name>.png, and no serious or critical axe violation on it. */
export async function screen(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  await page.waitForTimeout(50);
  await page.screenshot({ path: resolve(SHOTS, `${name}.png`), fullPage: true });
  expect(await axeViolations(page), `axe on ${name}`).toEqual([]);
}

/** Signs in with an API key through the form. */
export async function signIn(page: Page, origin: string, key: string): Promise<void> {
  await page.goto('about:blank');
  await page.goto(`${origin}/admin#/overview`);
  await page.fill('#api-key', key);
  await page.click('button:has-text("Sign in")');
  await signedIn(page);
}

/**
 * Waits until a sign-in submitted on the form has landed (the header shows who is signed in). If the
 * form shows an error instead, or nothing happens within `timeout`, fails with what the page shows
 * (its alert, the focused element, the form's values) and keeps a screenshot, so a failure that
 * happens only under load says why.
 */
export async function signedIn(page: Page, timeout = 30_000): Promise<void> {
  const outcome = await page
    .waitForSelector('[data-testid=who], main.signin [role=alert]:not(#signin-reason)', { timeout })
    .then(async (el) => ((await el.getAttribute('data-testid')) === 'who' ? null : `the form shows: ${(await el.textContent()) ?? ''}`))
    .catch((err: unknown) => `nothing within ${timeout} ms (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`);
  if (outcome === null) return;
  mkdirSync(SHOTS, { recursive: true });
  const shot = resolve(SHOTS, `failed-sign-in-${Date.now()}.png`);
  await page.screenshot({ path: shot, fullPage: true }).catch(() => undefined);
  const state = await page
    .evaluate(() => ({
      focused: document.activeElement ? `${document.activeElement.tagName}#${document.activeElement.id}` : null,
      hasFocus: document.hasFocus(),
      email: (document.querySelector('#pk-email') as HTMLInputElement | null)?.value ?? null,
      busy: document.querySelector('[data-testid=busy]')?.textContent ?? null,
    }))
    .catch(() => null);
  throw new Error(`sign-in did not land: ${outcome}; page ${JSON.stringify(state)}; screenshot ${shot}`);
}

/** Signs out through the header button. */
export async function signOut(page: Page): Promise<void> {
  await page.click('button:has-text("Sign out")');
  await page.waitForSelector('#api-key');
}

/** What has the keyboard focus: its tag, id, text (or label), whether a focus outline shows, and whether it is in an open dialog. */
export interface Focused {
  tag: string;
  id: string;
  text: string;
  outline: boolean;
  inDialog: boolean;
  checked: boolean | null;
  /** The `data-testid` of the closest marked container (a table, a dialog). */
  within: string | null;
}

/**
 * Waits (up to 5 s) until the element with `id` has focus, and fails the test if it never does:
 * screens focus their first control in an effect, just after they render, so the element exists a
 * moment before it is focused.
 */
export async function expectFocusOn(page: Page, id: string): Promise<void> {
  const ok = await page.waitForFunction((want) => document.activeElement?.id === want, id, { timeout: 5000 }).then(() => true, () => false);
  if (!ok) throw new Error(`focus is on ${JSON.stringify(await focused(page))}, not on #${id}`);
}

export const focused = (page: Page): Promise<Focused | null> =>
  page.evaluate(() => {
    const el = document.activeElement as HTMLElement | null;
    if (!el || el === document.body) return null;
    const cs = getComputedStyle(el);
    const input = el instanceof HTMLInputElement ? el : null;
    const text = input ? (input.labels?.[0]?.textContent ?? input.getAttribute('aria-label') ?? '') : (el.textContent ?? '');
    return {
      tag: el.tagName.toLowerCase(),
      id: el.id,
      text: text.replace(/\s+/g, ' ').trim(),
      outline: cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0,
      inDialog: !!el.closest('dialog[open]'),
      checked: input && input.type === 'checkbox' ? input.checked : null,
      within: el.closest<HTMLElement>('[data-testid]')?.dataset.testid ?? null,
    };
  });

/**
 * Presses Tab (Shift+Tab with `back`) until the focused element matches `match`, at most `max`
 * times; every element the focus stops on must show a focus outline.
 */
export async function tabTo(page: Page, what: string, match: (f: Focused) => boolean, { back = false, max = 80 } = {}): Promise<Focused> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press(back ? 'Shift+Tab' : 'Tab');
    const f = await focused(page);
    if (f) expect(f.outline, `a visible focus on <${f.tag}${f.id ? `#${f.id}` : ''}> "${f.text}"`).toBe(true);
    if (f && match(f)) return f;
  }
  throw new Error(`${what}: not reached with ${back ? 'Shift+Tab' : 'Tab'} in ${max} presses`);
}

/** Waits until the focus is on a heading reading `text` (where the console puts it after a navigation). */
export async function focusOnHeading(page: Page, tag: 'h1' | 'h2', text: string | RegExp): Promise<void> {
  await page.waitForFunction(
    ({ tag, src, flags }) => {
      const el = document.activeElement;
      return !!el && el.tagName.toLowerCase() === tag && new RegExp(src, flags).test(el.textContent ?? '');
    },
    { tag, src: typeof text === 'string' ? `^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$` : text.source, flags: typeof text === 'string' ? '' : text.flags },
  );
}

/**
 * Elements that look clickable (pointer cursor) but that the keyboard cannot reach: anything but a
 * link, button, form control or label (and what is inside one).
 */
export const clickOnly = (page: Page): Promise<string[]> =>
  page.evaluate(() =>
    [...document.querySelectorAll<HTMLElement>('body *')]
      .filter((el) => getComputedStyle(el).cursor === 'pointer' && !el.closest('a[href], button, input, select, textarea, label, summary'))
      .map((el) => `<${el.tagName.toLowerCase()} class="${el.className}">${(el.textContent ?? '').slice(0, 40)}`),
  );
