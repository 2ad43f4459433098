import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';
import { openapiPlugin } from '../../plugins/openapi/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';

/** Routes that exercise `docs` and awkward schemas; their handlers are never called. */
const docsTestPlugin = definePlugin({
  name: 'docs-test',
  setup: () => ({
    routes: [
      defineRoute({
        method: 'PUT', path: '/docs-test/items/:id', auth: 'user', summary: 'Replace an item',
        params: z.object({ id: z.string().describe('Item id') }),
        body: z.object({ name: z.string(), at: z.coerce.date().optional() }),
        response: z.object({ id: z.string(), updated_at: z.date(), size: z.string().transform(Number) }),
        docs: {
          headers: { 'If-Match': { description: 'ETag of the revision being replaced', required: true } },
          responseHeaders: { ETag: 'Revision of the stored item' },
          errors: [404, 412, 428],
        },
        handler: () => ({}),
      }),
      defineRoute({
        method: 'GET', path: '/docs-test/search', auth: 'public',
        query: z.looseObject({ q: z.string().min(1).describe('Search text'), limit: z.coerce.number().int().default(10) }),
        handler: () => ({}),
      }),
    ],
  }),
});

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { name: string; version: string };

let t: TestApp;
let doc: any;

/** Follows a local `$ref` (one level is all the generator writes for responses). */
const resolve = (x: any): any => {
  if (!x?.$ref) return x;
  const parts = (x.$ref as string).replace(/^#\//, '').split('/');
  return resolve(parts.reduce((o, k) => o?.[k], doc));
};
const op = (method: string, path: string) => {
  const o = doc.paths[path]?.[method.toLowerCase()];
  if (!o) throw new Error(`${method} ${path} is not documented`);
  return o;
};
const param = (o: any, where: string, name: string) => (o.parameters ?? []).map(resolve).find((p: any) => p.in === where && p.name === name);

beforeAll(async () => {
  t = await buildTestApp({ plugins: [openapiPlugin, examplePlugin, docsTestPlugin] });
  const res = await t.http('GET', '/openapi.json', { key: null });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = res.body;
});
afterAll(() => t?.close());

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3.1.0 document titled from package.json', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: pkg.name, version: pkg.version });
  });

  it('passes the OpenAPI 3.1 schema validator, and every $ref resolves', async () => {
    const validator = new Validator();
    const res = await validator.validate(structuredClone(doc));
    expect(res.errors).toBeUndefined();
    expect(res.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(() => validator.resolveRefs()).not.toThrow();
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]*"/g) ?? [];
    for (const r of refs) expect(resolve({ $ref: JSON.parse(`{${r}}`).$ref }), r).toBeDefined();
  });

  it('documents every route of every plugin with its method, and POST /graphql', () => {
    const routes = t.app.kernel.routes();
    expect(routes.length).toBeGreaterThan(15);
    for (const r of routes) {
      const path = r.path.replace(/:(\w+)/g, '{$1}');
      expect(doc.paths[path]?.[r.method.toLowerCase()], `${r.method} ${r.path}`).toBeDefined();
      expect(doc.paths[path][r.method.toLowerCase()]['x-plugin']).toBe(r.plugin);
    }
    expect(op('POST', '/graphql').requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/GraphQLRequest' });
    expect(op('GET', '/openapi.json').tags).toEqual(['docs']);
  });

  it('has unique, stable operationIds and declares every templated path parameter', () => {
    const ids: string[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const o of Object.values<any>(item)) {
        ids.push(o.operationId);
        const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
        const declared = (o.parameters ?? []).map(resolve).filter((p: any) => p.in === 'path');
        expect(declared.map((p: any) => p.name).sort(), path).toEqual(templated.sort());
        for (const p of declared) expect(p.required).toBe(true);
      }
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(op('DELETE', '/admin/api-keys/{id}').operationId).toBe('deleteAdminApiKeysById');
    expect(op('GET', '/admin/users').operationId).toBe('getAdminUsers');
  });

  it('converts :params to {params} with the schema of the params object', () => {
    expect(doc.paths['/admin/api-keys/:id']).toBeUndefined();
    const id = param(op('DELETE', '/admin/api-keys/{id}'), 'path', 'id');
    expect(id).toMatchObject({ required: true, schema: { type: 'string', pattern: '^[0-9a-fA-F]{24}$' } });
    expect(param(op('PUT', '/docs-test/items/{id}'), 'path', 'id')).toMatchObject({ description: 'Item id', schema: { type: 'string' } });
    expect(param(op('GET', '/docs/assets/{file}'), 'path', 'file')).toBeDefined();
  });

  it('documents the request body of POST /admin/users with email required', () => {
    const body = op('POST', '/admin/users').requestBody;
    expect(body.required).toBe(true);
    const schema = body.content['application/json'].schema;
    expect(schema.required).toContain('email');
    expect(schema.required).not.toContain('tenant_id');
    expect(schema.properties.email).toMatchObject({ type: 'string', format: 'email' });
    expect(schema.additionalProperties).toBe(false);
  });

  it('documents page/per_page of GET /admin/users as optional query parameters with defaults', () => {
    const o = op('GET', '/admin/users');
    expect(param(o, 'query', 'page')).toMatchObject({ required: false, schema: { type: 'integer', minimum: 1, default: 1 } });
    expect(param(o, 'query', 'per_page')).toMatchObject({ required: false, schema: { type: 'integer', maximum: 500, default: 50 } });
    expect(param(o, 'query', 'tenant_id')).toMatchObject({ required: false });
    const hello = op('GET', '/example/hello');
    expect(param(hello, 'query', 'name')).toMatchObject({ required: false, schema: { default: 'world' } });
  });

  it('gives non-public routes 401/403 envelopes and both security schemes; public routes neither', () => {
    expect(doc.components.securitySchemes.ApiKeyAuth).toEqual(expect.objectContaining({ type: 'apiKey', in: 'header', name: 'X-API-Key' }));
    expect(doc.components.securitySchemes.BearerAuth).toEqual(expect.objectContaining({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' }));
    const secret = op('GET', '/example/secret');
    expect(secret.security).toEqual([{ ApiKeyAuth: [] }, { BearerAuth: [] }]);
    for (const s of ['401', '403']) {
      expect(resolve(secret.responses[s]).content['application/json'].schema).toEqual({ $ref: '#/components/schemas/ErrorEnvelope' });
    }
    expect(resolve(secret.responses['401']).description).toContain('AUTH_REQUIRED');
    expect(resolve(secret.responses['403']).description).toMatch(/ACCESS_DENIED.*secret-feature/s);
    expect(secret['x-features']).toEqual(['secret-feature']);

    const admin = op('GET', '/admin/users');
    expect(admin.security).toHaveLength(2);
    expect(admin.description).toContain('admin');

    const hello = op('GET', '/example/hello');
    expect(hello.security).toBeUndefined();
    expect(hello.responses['401']).toBeUndefined();
    expect(hello.responses['403']).toBeUndefined();
  });

  it('gives every route the envelope for 400, 422 and 500, and 429 with Retry-After unless rate-limit exempt', () => {
    expect(doc.components.schemas.ErrorEnvelope).toMatchObject({
      required: ['error', 'request_id'],
      properties: { error: { required: ['code', 'message', 'details'] }, request_id: { type: 'string' } },
    });
    for (const item of Object.values<any>(doc.paths)) {
      for (const o of Object.values<any>(item)) {
        for (const s of ['400', '500']) expect(o.responses[s], `${o.operationId} ${s}`).toBeDefined();
        if (o.operationId !== 'postGraphql') expect(resolve(o.responses['422']).content['application/json'].schema.$ref).toBe('#/components/schemas/ErrorEnvelope');
      }
    }
    const tooMany = resolve(op('GET', '/example/hello').responses['429']);
    expect(tooMany.description).toContain('RATE_LIMITED');
    expect(resolve(tooMany.headers['Retry-After'])).toMatchObject({ required: true, schema: { type: 'integer' } });
    expect(resolve(op('GET', '/admin/users').responses['500']).description).toContain('INTERNAL_ERROR');
    expect(resolve(op('POST', '/admin/users').responses['422']).description).toContain('VALIDATION_ERROR');
    expect(op('GET', '/health').responses['429']).toBeUndefined();
  });

  it('documents the success status and response schema of a route', () => {
    expect(op('POST', '/admin/users').responses['201']).toBeDefined();
    expect(op('POST', '/admin/users').responses['200']).toBeUndefined();
    const ok = op('PUT', '/docs-test/items/{id}').responses['200'];
    const schema = ok.content['application/json'].schema;
    expect(schema.properties.updated_at).toEqual({ type: 'string', format: 'date-time' });
    expect(schema.properties.size).toEqual({});
    expect(resolve(ok.headers['X-Request-Id']).schema).toEqual({ type: 'string' });
    expect(op('GET', '/docs').responses['200'].content).toHaveProperty('text/html');
  });

  it('renders docs.headers, docs.responseHeaders and docs.errors', () => {
    const o = op('PUT', '/docs-test/items/{id}');
    expect(param(o, 'header', 'If-Match')).toEqual({
      name: 'If-Match', in: 'header', required: true, description: 'ETag of the revision being replaced', schema: { type: 'string' },
    });
    expect(o.responses['200'].headers.ETag).toEqual({ description: 'Revision of the stored item', schema: { type: 'string' } });
    expect(resolve(o.responses['404']).description).toContain('NOT_FOUND');
    expect(resolve(o.responses['412']).description).toContain('ETAG_MISMATCH');
    expect(resolve(o.responses['428']).description).toContain('ETAG_REQUIRED');
    expect(Object.keys(o.responses)).toEqual(['200', '400', '401', '403', '404', '412', '413', '422', '428', '429', '500']);
  });

  it('documents a free-form query (loose object) as an exploded object parameter beside the named ones', () => {
    const o = op('GET', '/docs-test/search');
    expect(param(o, 'query', 'q')).toMatchObject({ required: true, description: 'Search text', schema: { type: 'string', minLength: 1 } });
    expect(param(o, 'query', 'limit')).toMatchObject({ required: false });
    expect(param(o, 'query', 'filters')).toMatchObject({ style: 'form', explode: true, schema: { type: 'object' } });
  });

  it('answers 304 to a matching If-None-Match', async () => {
    const first = await t.http('GET', '/openapi.json', { key: null });
    const etag = first.headers.get('etag');
    expect(etag).toBeTruthy();
    expect(first.headers.get('cache-control')).toBe('no-cache');
    const again = await t.http('GET', '/openapi.json', { key: null, headers: { 'If-None-Match': etag! } });
    expect(again.status).toBe(304);
    expect(again.body).toBe('');
  });
});

describe('GET /docs', () => {
  it('serves an HTML page that loads only local assets, each a JS or CSS file', async () => {
    const res = await t.http('GET', '/docs', { key: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const html = res.body as string;
    expect(html).not.toMatch(/(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i); // no inline script
    const urls = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/gi)].map((m) => m[1]!.replace(/&amp;/g, '&'));
    expect(urls.length).toBeGreaterThanOrEqual(3);
    for (const url of urls) {
      expect(url, url).toMatch(/^\/docs\/assets\/[\w.-]+\?v=/);
      const asset = await fetch(t.url + url);
      expect(asset.status, url).toBe(200);
      expect(asset.headers.get('content-type'), url).toMatch(/^text\/(javascript|css); charset=utf-8$/);
      expect(asset.headers.get('cache-control'), url).toBe('public, max-age=31536000, immutable');
      expect((await asset.text()).length, url).toBeGreaterThan(100);
    }
    const init = await (await fetch(`${t.url}/docs/assets/init.js`)).text();
    expect(init).toContain("url: \"/openapi.json\"");
    expect(init).toContain('validatorUrl: null');
  });

  it('compresses large assets for clients that accept gzip and revalidates by ETag', async () => {
    const raw = await fetch(`${t.url}/docs/assets/swagger-ui-bundle.js`, { headers: { 'Accept-Encoding': 'identity' } });
    expect(raw.headers.get('content-encoding')).toBeNull();
    expect(raw.headers.get('cache-control')).toBe('public, max-age=300');
    const plain = await raw.text();
    const zipped = await fetch(`${t.url}/docs/assets/swagger-ui-bundle.js`, { headers: { 'Accept-Encoding': 'gzip' } });
    expect(zipped.headers.get('content-encoding')).toBe('gzip');
    expect(zipped.headers.get('vary')).toMatch(/Accept-Encoding/i);
    expect(await zipped.text()).toBe(plain);
    const etag = zipped.headers.get('etag')!;
    expect(etag).not.toBe(raw.headers.get('etag'));
    const again = await fetch(`${t.url}/docs/assets/swagger-ui-bundle.js`, { headers: { 'Accept-Encoding': 'gzip', 'If-None-Match': etag } });
    expect(again.status).toBe(304);
  });

  it('compresses with brotli when preferred, weakens the ETag of a compressed answer, and revalidates either form', async () => {
    const br = await fetch(`${t.url}/openapi.json`, { headers: { 'Accept-Encoding': 'br' } });
    expect(br.headers.get('content-encoding')).toBe('br');
    const weak = br.headers.get('etag')!;
    expect(weak).toMatch(/^W\/"/);
    expect(JSON.parse(await br.text()).openapi).toBe('3.1.0');
    const plain = await fetch(`${t.url}/openapi.json`, { headers: { 'Accept-Encoding': 'identity' } });
    expect(plain.headers.get('etag')).toBe(weak.slice(2));
    await plain.text();
    for (const tag of [weak, weak.slice(2)]) {
      const again = await fetch(`${t.url}/openapi.json`, { headers: { 'Accept-Encoding': 'br', 'If-None-Match': tag } });
      expect(again.status, tag).toBe(304);
    }
    const small = await fetch(`${t.url}/docs/assets/init.js`, { headers: { 'Accept-Encoding': 'gzip' } });
    expect(small.headers.get('content-encoding')).toBeNull(); // below the 1 KiB threshold
    expect(small.headers.get('etag')).toMatch(/^"/);
  });

  it('answers 404 with the error envelope for a file outside the allow-list', async () => {
    for (const name of ['package.json', 'index.html', '..%2Fpackage.json', 'swagger-ui.js']) {
      const res = await t.http('GET', `/docs/assets/${name}`, { key: null });
      expect(res.status, name).toBe(404);
      expect(envelope(res).code).toBe('NOT_FOUND');
    }
  });
});
