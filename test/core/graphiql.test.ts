/**
 * GraphiQL (the graphiql plugin): a small page whose script, style sheet, editor workers and icon
 * are separate files, each cached for good under a content-hashed name, served from this process.
 */
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts';
import { graphiqlPlugin } from '../../plugins/graphiql/index.ts';
import { builtinPlugins, loadPlugins } from '../../builtin-plugins.ts';
import { loadConfig } from '../../config/index.ts';

let t: TestApp;
let html: string;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [graphiqlPlugin] });
  const res = await fetch(`${t.url}/graphql`, { headers: { Accept: 'text/html' } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  html = await res.text();
});
afterAll(() => t?.close());

const assetUrls = () => [...html.matchAll(/\/graphql\/assets\/[\w.-]+/g)].map((m) => m[0]);

describe('GET /graphql (text/html)', () => {
  it('is a page under 20 KB that links its parts instead of inlining them', () => {
    expect(Buffer.byteLength(html)).toBeLessThan(20 * 1024);
    expect(html).not.toContain('base64,');
    expect(html).toMatch(/<link rel="stylesheet" href="\/graphql\/assets\/graphiql\.[\w-]{16}\.css">/);
    expect(html).toMatch(/<link rel="icon" href="\/graphql\/assets\/favicon\.[\w-]{16}\.ico">/);
    expect(html).toMatch(/<script src="\/graphql\/assets\/graphiql\.[\w-]{16}\.js"><\/script>/);
    for (const worker of ['editor.worker', 'json.worker', 'graphql.worker']) expect(html).toMatch(new RegExp(`/graphql/assets/${worker.replace('.', '\\.')}\\.[\\w-]{16}\\.js`));
    // GraphiQL still renders into #root, with Yoga's options.
    expect(html).toContain('<div id="root"></div>');
    expect(html).toContain("YogaGraphiQL.renderYogaGraphiQL(document.querySelector('#root'), {");
    expect(html).toContain('getWorkerUrl');
  });
});

describe('GET /graphql/assets/:file', () => {
  it('serves each part with its type, a year-long immutable Cache-Control and an ETag; the parts are the package\'s (MBs, not a stub)', async () => {
    const urls = assetUrls();
    expect(new Set(urls).size).toBe(6);
    let total = 0;
    for (const url of new Set(urls)) {
      const res = await fetch(`${t.url}${url}`, { headers: { 'Accept-Encoding': 'identity' } });
      expect(res.status, url).toBe(200);
      const type = url.endsWith('.css') ? /^text\/css/ : url.endsWith('.ico') ? /^image\// : /^text\/javascript/;
      expect(res.headers.get('content-type'), url).toMatch(type);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(res.headers.get('etag')).toMatch(/^"[\w-]{16}"$/);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      total += (await res.arrayBuffer()).byteLength;
    }
    expect(total).toBeGreaterThan(8_000_000);
  });

  it('304 to a matching If-None-Match; brotli or gzip when accepted, the same bytes once decoded', async () => {
    const js = assetUrls().find((u) => /graphiql\.[\w-]+\.js$/.test(u))!;
    const plain = await fetch(`${t.url}${js}`, { headers: { 'Accept-Encoding': 'identity' } });
    const body = Buffer.from(await plain.arrayBuffer());
    const again = await fetch(`${t.url}${js}`, { headers: { 'If-None-Match': plain.headers.get('etag')!, 'Accept-Encoding': 'identity' } });
    expect(again.status).toBe(304);
    // Node's fetch decodes on its own: read the raw bytes through a plain HTTP request instead.
    const { request } = await import('node:http');
    const raw = (encoding: string) =>
      new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        request(`${t.url}${js}`, { headers: { 'Accept-Encoding': encoding } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
        }).on('error', reject).end();
      });
    const br = await raw('br, gzip');
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.body.length).toBeLessThan(body.length / 3);
    expect(brotliDecompressSync(br.body).equals(body)).toBe(true);
    const gz = await raw('gzip');
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).equals(body)).toBe(true);
    expect(gz.headers.etag).not.toBe(plain.headers.get('etag'));
    const cached = await fetch(`${t.url}${js}`, { headers: { 'If-None-Match': String(gz.headers.etag), 'Accept-Encoding': 'identity' } });
    expect(cached.status).toBe(304);
  });

  it('404 NOT_FOUND for any other name, an older hash included', async () => {
    expectError(await t.http('GET', '/graphql/assets/graphiql.0000000000000000.js'), 404, 'NOT_FOUND');
    expectError(await t.http('GET', '/graphql/assets/..%2Fpackage.json'), 404, 'NOT_FOUND');
  });

  it('is not served in production (GraphiQL is off there)', async () => {
    const prod = await buildTestApp({ plugins: [graphiqlPlugin], config: { NODE_ENV: 'production', METRICS_ENABLED: 'false' } });
    try {
      expectError(await prod.http('GET', new URL(`${t.url}${assetUrls()[0]!}`).pathname), 404, 'NOT_FOUND');
      expect(await (await fetch(`${prod.url}/graphql`, { headers: { Accept: 'text/html' } })).text()).not.toContain('YogaGraphiQL');
    } finally {
      await prod.close();
    }
  });
});

describe('the graphiql plugin', () => {
  it('is a built-in plugin; DISABLED_PLUGINS=graphiql leaves it out', async () => {
    expect(builtinPlugins().map((p) => p.name)).toContain('graphiql');
    expect((await loadPlugins(loadConfig({ DISABLED_PLUGINS: 'graphiql' }))).map((p) => p.name)).not.toContain('graphiql');
  });

  it('off (not loaded), a browser\'s GET /graphql renders no GraphiQL and /graphql/assets/* is 404', async () => {
    const off = await buildTestApp({ plugins: builtinPlugins().filter((p) => p.name !== 'graphiql') });
    try {
      const res = await fetch(`${off.url}/graphql`, { headers: { Accept: 'text/html' } });
      const body = await res.text();
      expect(res.headers.get('content-type') ?? '').not.toMatch(/^text\/html/);
      expect(body).not.toContain('YogaGraphiQL');
      expect(body).not.toContain('graphiql');
      expectError(await off.http('GET', new URL(`${t.url}${assetUrls()[0]!}`).pathname), 404, 'NOT_FOUND');
      // GraphQL itself still answers.
      expect((await off.http('POST', '/graphql', { json: { query: '{ __typename }' } })).body).toEqual({ data: { __typename: 'Query' } });
    } finally {
      await off.close();
    }
  });
});

