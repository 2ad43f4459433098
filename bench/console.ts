/**
 * `npm run bench:console`: the admin console's JavaScript size (gzip) and the time from navigation
 * to the first rendered list, in Chromium (/usr/bin/chromium).
 * - size: every .js file of admin-console/dist/assets, gzip level 9; aim < 250 KB
 * - time: a signed-in session opens /admin#/resources/projects (a fresh page load, so the script is
 *   fetched, parsed and run, and the token exchanged), median of BENCH_ROUNDS (default 5) from
 *   navigation start until the list's rows are in the DOM, with 200 projects stored; aim < 1 s
 * The server runs in this process on an embedded MongoDB (or MONGODB_URI). Prints one line each.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { buildConsole, DIST_DIR } from '../scripts/build-console.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const KEY = 'bench-console-admin-key-0123456789abcdef';
const log = (s: string) => process.stdout.write(`${s}\n`);

await buildConsole({ quiet: true });
const assets = join(DIST_DIR, 'assets');
const js = readdirSync(assets).filter((f) => f.endsWith('.js'));
const raw = js.reduce((n, f) => n + readFileSync(join(assets, f)).length, 0);
const gz = js.reduce((n, f) => n + gzipSync(readFileSync(join(assets, f)), { level: 9 }).length, 0);
const css = readdirSync(assets).filter((f) => f.endsWith('.css')).reduce((n, f) => n + gzipSync(readFileSync(join(assets, f)), { level: 9 }).length, 0);
const entry = js.filter((f) => f.startsWith('index-')).reduce((n, f) => n + gzipSync(readFileSync(join(assets, f)), { level: 9 }).length, 0);
log(`first load (entry chunk, the plugin screens are loaded when opened): ${(entry / 1024).toFixed(1)} KB gzip`);
log(`console JavaScript: ${(gz / 1024).toFixed(1)} KB gzip (${(raw / 1024).toFixed(1)} KB raw, ${js.length} file(s)); CSS ${(css / 1024).toFixed(1)} KB gzip; aim < 250 KB: ${gz < 250 * 1024 ? 'met' : 'MISSED'}`);

const mongo = process.env.MONGODB_URI ? null : await MongoMemoryServer.create();
const config = loadConfig({
  NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: KEY, METRICS_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false',
  MONGODB_URI: process.env.MONGODB_URI ?? mongo!.getUri('bench_console'),
  TOKEN_SECRET: 'bench-console-token-secret-0123456789abcdef', CURSOR_HMAC_SECRET: 'bench-console-cursor-secret-0123456789abcdef',
});
const app = await createApp({ corePlugins: corePlugins(), config, plugins: builtinPlugins() });
const port = await app.listen(0, '127.0.0.1');
const origin = `http://localhost:${port}`;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], headless: true });
try {
  for (let i = 0; i < 200; i += 25) {
    const docs = Array.from({ length: 25 }, (_, j) => `c${j}: createProject(input: {name: "Bench ${i + j}", budget: ${i + j}}) { _id }`).join(' ');
    const res = await fetch(`${origin}/graphql`, { method: 'POST', headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ query: `mutation { ${docs} }` }) });
    const body = (await res.json()) as { errors?: unknown[] };
    if (body.errors) throw new Error(`seeding failed: ${JSON.stringify(body.errors[0])}`);
  }
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    // Sign in first (the token lives in the page's memory), then time a navigation of the signed-in page to the list.
    await page.goto(`${origin}/admin#/overview`);
    await page.fill('#api-key', KEY);
    await page.click('button:has-text("Sign in")');
    await page.waitForSelector('[data-testid=who]');
    const started = Date.now();
    await page.evaluate(() => { location.hash = '#/resources/projects'; });
    await page.waitForSelector('[data-testid=resource-list] tbody tr');
    const inPage = Date.now() - started;
    // And a cold load: navigation start → first list row, including the script and the sign-in round trips.
    const cold = await context.newPage();
    const t0 = Date.now();
    await cold.goto(`${origin}/admin#/resources/projects`);
    await cold.fill('#api-key', KEY);
    await cold.click('button:has-text("Sign in")');
    await cold.waitForSelector('[data-testid=resource-list] tbody tr');
    times.push(Date.now() - t0);
    if (r === 0) log(`  (signed in, switching to the list: ${inPage} ms)`);
    await context.close();
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)]!;
  log(`navigation → first rendered list (cold page load + API-key sign-in + list query): median ${median} ms of ${ROUNDS} (${times.join(', ')}); aim < 1000 ms: ${median < 1000 ? 'met' : 'MISSED'}`);
} finally {
  await browser.close();
  await app.close();
  await mongo?.stop();
}
