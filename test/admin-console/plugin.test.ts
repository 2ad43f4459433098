/**
 * The admin-console plugin over HTTP: the page and its files with a strict CSP, caching, paths that
 * shadow no API route, and ADMIN_CONSOLE_ENABLED=false.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { CONSOLE_CSP } from '../../plugins/admin-console/service.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

describe('admin console served at /admin', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: builtinPlugins() });
  });
  afterAll(() => t?.close());

  it('serves the page with a strict Content-Security-Policy and no inline script or style', async () => {
    const res = await fetch(`${t.url}/admin`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toBe(CONSOLE_CSP);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const html = await res.text();
    expect(html).toMatch(/<script type="module" crossorigin src="\/admin-console\/assets\/index-[\w-]+\.js"><\/script>/);
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=/);
  });

  it('serves its hashed files under /admin-console/assets with the same CSP, cached for a year, 304 when unchanged', async () => {
    const html = await (await fetch(`${t.url}/admin`)).text();
    const files = [...html.matchAll(/(?:src|href)="(\/admin-console\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(files.some((f) => f.endsWith('.js'))).toBe(true);
    expect(files.some((f) => f.endsWith('.css'))).toBe(true);
    for (const f of files) {
      const res = await fetch(t.url + f, { headers: { 'Accept-Encoding': 'gzip' } });
      expect(res.status, f).toBe(200);
      expect(res.headers.get('content-type')).toMatch(f.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
      expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      const again = await fetch(t.url + f, { headers: { 'If-None-Match': res.headers.get('etag')! } });
      expect(again.status).toBe(304);
    }
  });

  it('answers 404 in the JSON envelope for an unknown or path-like asset name', async () => {
    const res = await t.http('GET', '/admin-console/assets/nope.js', { key: null });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
    const traversal = await t.http('GET', '/admin-console/assets/..%2Fpackage.json', { key: null });
    expect([404, 422]).toContain(traversal.status);
  });

  it('shadows no API route: only GET /admin and /admin-console/*, and the /admin/* API answers as before', async () => {
    const routes = t.app.kernel.routes();
    const mine = routes.filter((r) => r.plugin === 'admin-console').map((r) => `${r.method} ${r.path}`);
    expect(mine.sort()).toEqual(['GET /admin', 'GET /admin-console/assets/:file']);
    const others = routes.filter((r) => r.plugin !== 'admin-console');
    expect(others.filter((r) => r.path === '/admin' || r.path.startsWith('/admin-console'))).toEqual([]);
    const users = await t.http('GET', '/admin/users');
    expect(users.status).toBe(200);
    expect(users.headers.get('content-type')).toMatch(/json/);
  });
});

describe('ADMIN_CONSOLE_ENABLED=false', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: builtinPlugins(), config: { ADMIN_CONSOLE_ENABLED: 'false' } });
  });
  afterAll(() => t?.close());

  it('mounts nothing: /admin and its files are 404', async () => {
    expect(t.app.kernel.routes().filter((r) => r.plugin === 'admin-console')).toEqual([]);
    expect((await t.http('GET', '/admin', { key: null })).status).toBe(404);
    expect((await t.http('GET', '/admin-console/assets/index.js', { key: null })).status).toBe(404);
  });
});
