/**
 * The visual check of the console's screens: a viewport screenshot with what changes from run to
 * run masked (times, ids, request ids, the plots, health durations, toasts), checked with axe and
 * compared with its committed reference under __screenshots__/: more than 0.3% of pixels differing
 * (a channel off by more than 40 of 255) fails; times and ids are replaced by fixed text first, so
 * layout regressions are seen. Both PNGs are decoded and compared in Chromium (canvas), since no
 * pixel-diff library is installed. A missing reference is written (commit it);
 * UPDATE_SCREENSHOTS=1 rewrites them all.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { axeViolations, SHOTS } from './helpers.ts';

const REFS = resolve(import.meta.dirname, '__screenshots__');
const UPDATE = process.env.UPDATE_SCREENSHOTS === '1';
const MAX_DIFF = 0.003;
const CHANNEL = 40;

/** The page the visual check drives: a fixed viewport and rendering, so the same build gives the same pixels. */
export const visualPage = async (browser: Browser): Promise<Page> =>
  (await browser.newContext({ viewport: { width: 1000, height: 640 }, deviceScaleFactor: 1, colorScheme: 'light', reducedMotion: 'reduce' })).newPage();

/** Chromium's flags for the visual check (font hinting varies between machines otherwise). */
export const VISUAL_ARGS = ['--no-sandbox', '--font-render-hinting=none'];

/** `check(name)` for screens of `page`; `compare` is a page of its own where the PNGs are decoded. */
export function visualChecker(page: Page, compare: Page): (name: string) => Promise<void> {
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

  return async (name: string) => {
    await page.evaluate(() => document.fonts.ready);
    await page.waitForFunction(() => !document.querySelector('[data-testid=busy]')?.textContent);
    expect(await axeViolations(page), `axe on ${name}`).toEqual([]);
    // Times and ids change from run to run, and so would the widths of their columns: fixed text instead (ids keep their length).
    await page.evaluate(() => document.querySelectorAll('time, code, [data-testid=users] small').forEach((el) => { el.textContent = el.tagName === 'CODE' ? '0'.repeat(Math.min(24, el.textContent?.length ?? 0)) : '000000000000'; }));
    const mask = ['time', '.short-id', 'code', '[data-testid=charts]', '[data-testid=users] small', '[data-testid=counts]', 'section[aria-labelledby=h-audit] ul', 'section[aria-labelledby=h-health] table', '.error small'].map((s) => page.locator(s));
    // Toasts hidden through the CSSOM: a style sheet (the screenshot's `style` option) is refused by the console's CSP.
    await page.evaluate(() => document.querySelector<HTMLElement>('.toasts')?.style.setProperty('display', 'none'));
    const shot = await page.screenshot({ animations: 'disabled', caret: 'hide', mask, maskColor: '#ff00ff' });
    await page.evaluate(() => document.querySelector<HTMLElement>('.toasts')?.style.removeProperty('display'));
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
}
