import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';

/**
 * Routes whose JSON success body is documented as a bare object on purpose: `/openapi.json` is the
 * document itself (its schema is the OpenAPI 3.1 meta-schema), and the JSON files among the
 * reference page's and the admin console's assets are source maps. Every other route documents
 * what it answers.
 */
const BARE_OBJECT_ALLOWED = new Set(['GET /openapi.json', 'GET /docs/assets/{file}', 'GET /admin-console/assets/{file}']);

let t: TestApp;
let doc: any;

beforeAll(async () => {
  t = await buildTestApp({
    plugins: builtinPlugins(),
    // Every optional route on: ledger, payouts, jobs, outbound webhook endpoints, the passkey demo page.
    config: { WEBHOOKS_ENABLED: 'true', JOBS_ENABLED: 'true', PAYMENTS_ENABLED: 'true', PAYMENTS_LEDGER_ENABLED: 'true', WEBAUTHN_DEMO_ENABLED: 'true' },
  });
  doc = (await t.http('GET', '/openapi.json', { key: null })).body;
});
afterAll(() => t?.close());

const successSchemas = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => {
      const [status, res] = Object.entries(op.responses as Record<string, any>)[0]!;
      const json = res.content?.['application/json'];
      return { route: `${method.toUpperCase()} ${path}`, status, schema: json?.schema as Record<string, unknown> | undefined, hasJson: !!json };
    }),
  );

describe('every route documents its success body', () => {
  it('no JSON success body is a bare {"type":"object"} (so a generated client gets types)', () => {
    const bare = successSchemas()
      .filter((r) => r.hasJson && JSON.stringify(r.schema) === '{"type":"object"}')
      .map((r) => r.route)
      .filter((r) => !BARE_OBJECT_ALLOWED.has(r));
    expect(bare).toEqual([]);
  });

  it('a resource is one named schema built from its fields, with its offset and cursor pages', () => {
    const project = doc.components.schemas.Project;
    // Always present in a full document: `_id`, the required fields, the base fields; optional fields stay optional.
    expect(project.required).toEqual(['_id', 'name', 'tenant_id', 'created_at', 'updated_at', 'created_by', 'updated_by', 'is_deleted', 'deleted_at', 'deleted_by', 'version']);
    expect(project.additionalProperties).toBe(false);
    expect(project.properties).toMatchObject({
      _id: { type: 'string' },
      name: { type: 'string' },
      status: { anyOf: [{ type: 'string', enum: ['active', 'archived'] }, { type: 'null' }] },
      tags: { type: 'array', items: { type: 'string' } },
      budget: { type: ['number', 'null'] },
      created_at: { type: 'string', format: 'date-time' },
      version: { type: 'integer' },
    });
    const task = doc.components.schemas.Task;
    // A relation: its id, or with `populate` the referenced document, or null.
    expect(task.properties.project_id).toEqual({ anyOf: [{ anyOf: [{ type: 'string' }, expect.objectContaining({ type: 'object' })] }, { type: 'null' }] });
    expect(doc.components.schemas.ProjectPage).toMatchObject({
      required: ['items', 'total', 'page', 'per_page', 'total_pages', 'mode'],
      properties: { items: { type: 'array', items: { $ref: '#/components/schemas/Project' } } },
    });
    expect(doc.components.schemas.ProjectPage.properties.mode).toMatchObject({ const: 'offset' });
    // The cursor page's body is exactly items and cursors: `mode` is declared (for narrowing) but optional and never sent.
    expect(doc.components.schemas.ProjectCursorPage.required).toEqual(['items', 'cursors']);
    expect(doc.components.schemas.ProjectCursorPage.properties.mode).toMatchObject({ const: 'cursor' });
    const list = doc.paths['/projects'].get.responses['200'].content['application/json'].schema;
    expect(list.anyOf).toEqual([{ $ref: '#/components/schemas/ProjectPage' }, { $ref: '#/components/schemas/ProjectCursorPage' }]);
    expect(doc.paths['/projects/{id}'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Project' });
  });

  it('a non-JSON success body says so, and an error status with a body of its own documents it beside the envelope', () => {
    expect(Object.keys(doc.paths['/jobs/runs/{run_id}/logs'].get.responses['200'].content)).toEqual(['text/event-stream']);
    const failed = doc.paths['/webhooks/{provider}'].post.responses['500'];
    expect(failed.content['application/json'].schema.anyOf).toEqual([
      expect.objectContaining({ properties: expect.objectContaining({ status: expect.objectContaining({ enum: expect.arrayContaining(['failed']) }) }) }),
      { $ref: '#/components/schemas/ErrorEnvelope' },
    ]);
  });

  it('list parameters are typed by kind (integers and booleans, not strings)', () => {
    const params = Object.fromEntries((doc.paths['/projects'].get.parameters as any[]).filter((p) => p.in === 'query').map((p) => [p.name, p.schema]));
    expect(params.per_page).toMatchObject({ type: 'integer', minimum: 1 });
    expect(params.include_deleted).toMatchObject({ type: 'boolean' });
    expect(params.sort).toMatchObject({ type: 'string' });
  });

  it('summaries name the resource properly', () => {
    expect(doc.paths['/projects'].post.summary).toBe('Create a document in projects');
    expect(doc.paths['/projects/{id}'].patch.summary).toBe('Partially update a document of projects');
    expect(doc.paths['/tasks/{id}'].get.summary).toBe('Get one document of tasks');
  });
});

describe('responses are checked against the document in tests', () => {
  const drifting = definePlugin({
    name: 'drifting',
    setup: () => ({
      routes: [
        defineRoute({
          method: 'GET', path: '/drift', auth: 'public', response: z.object({ count: z.number().int() }),
          handler: ({ ctx }) => ({ count: ctx.query.bad ? 'three' : 3 }),
        }),
      ],
    }),
  });

  it('a body that does not match its documented schema fails the request that received it', async () => {
    const app = await buildTestApp({ plugins: [drifting] });
    try {
      expect((await app.http('GET', '/drift')).body).toEqual({ count: 3 });
      await expect(app.http('GET', '/drift?bad=1')).rejects.toThrow(/GET \/drift\?bad=1 answered 200 with a body its OpenAPI schema \(getDrift\) rejects: data\/count must be integer/);
    } finally {
      await app.close();
    }
  });

  it('error envelopes are checked too, including undocumented statuses', async () => {
    const { key } = await createTenantUser(t);
    const res = await t.http('GET', '/projects?per_page=100000', { key });
    expect(res.status).toBe(422);
  });
});

describe('GraphiQL works offline', () => {
  it('GET /graphql (text/html) loads no script or style from another host, and its assets answer 200', async () => {
    const res = await fetch(`${t.url}/graphql`, { headers: { Accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).not.toContain('__TITLE__');
    expect(html).toContain('YogaGraphiQL.renderYogaGraphiQL');
    const urls = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*["']([^"']+)["']/gi)].map((m) => m[1]!);
    const remote = urls.filter((u) => /^(https?:)?\/\//i.test(u) && new URL(u, t.url).origin !== t.url);
    expect(remote).toEqual([]);
    for (const u of urls.filter((x) => !x.startsWith('data:'))) expect((await fetch(new URL(u, t.url))).status, u).toBe(200);
    const csp = res.headers.get('content-security-policy');
    if (csp) expect(csp).not.toMatch(/script-src[^;]*'none'/);
  });

  it('is off in production, with the graphiql plugin loaded', async () => {
    const prod = await buildTestApp({ plugins: builtinPlugins().filter((p) => p.name === 'graphiql'), config: { NODE_ENV: 'production', METRICS_ENABLED: 'false' } });
    expect(prod.app.kernel.plugins()).toContain('graphiql');
    try {
      const res = await fetch(`${prod.url}/graphql`, { headers: { Accept: 'text/html' } });
      expect(await res.text()).not.toContain('YogaGraphiQL');
    } finally {
      await prod.close();
    }
  });
});
