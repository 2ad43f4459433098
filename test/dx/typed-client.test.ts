/**
 * A typed client generated from the served /openapi.json, end to end: openapi-typescript writes the
 * types, a small openapi-fetch client lists, creates and patches a project with If-Match, the
 * repository's tsc type-checks both (and rejects a misspelt field), then the client runs against
 * the live app.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { openapiPlugin } from '../../plugins/openapi/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

/** The client a reader of docs/clients.md would write. */
const CLIENT = `import createClient from 'openapi-fetch';
import type { paths, components } from './api.ts';

type Project = components['schemas']['Project'];

// Type-level checks: a full document types its always-present fields without undefined, optional ones keep it.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
export const nameIsString: Equal<Project['name'], string> = true;
export const versionIsNumber: Equal<Project['version'], number> = true;
export const createdAtIsString: Equal<Project['created_at'], string> = true;
export const budgetStaysOptional: Equal<Project['budget'], number | null | undefined> = true;

export async function projectRoundTrip(baseUrl: string, apiKey: string) {
  // Field filters travel in the free-form \`filters\` object, sent as plain name=value pairs.
  const api = createClient<paths>({ baseUrl, headers: { 'X-API-Key': apiKey }, querySerializer: { object: { style: 'form', explode: true } } });

  const created = await api.POST('/projects', { body: { name: 'Typed', budget: 10, tags: ['dx'] } });
  if (!created.data) throw new Error(\`create failed: \${created.response.status}\`);
  const project: Project = created.data;
  const etag = created.response.headers.get('ETag') ?? '';

  const patched = await api.PATCH('/projects/{id}', {
    params: { path: { id: project._id }, header: { 'If-Match': etag } },
    body: { budget: 20 },
  });
  const stale = await api.PATCH('/projects/{id}', {
    params: { path: { id: project._id }, header: { 'If-Match': etag } },
    body: { budget: 30 },
  });

  const list = await api.GET('/projects', { params: { query: { per_page: 10, sort: 'name' } } });
  if (!list.data) throw new Error('list failed');
  const names: string[] = list.data.items.map((p) => p.name);
  // \`mode\` tells the two page types apart: no \`in\` checks, no casts.
  const total: number | undefined = list.data.mode === 'offset' ? list.data.total : undefined;
  const cursorList = await api.GET('/projects', { params: { query: { limit: 1 } } });
  if (!cursorList.data) throw new Error('cursor list failed');
  const cursorPage = cursorList.data;
  const hasNext: boolean | undefined = cursorPage.mode === 'offset' ? undefined : cursorPage.cursors.has_next;
  const filtered = await api.GET('/projects', { params: { query: { filters: { budget__gte: '15', name: 'Typed' } } } });
  const none = await api.GET('/projects', { params: { query: { filters: { budget__gte: '25' } } } });

  return {
    id: project._id,
    budget: patched.data?.budget,
    version: patched.data?.version,
    staleStatus: stale.response.status,
    staleCode: stale.error?.error.code,
    names,
    total,
    hasNext,
    filtered: filtered.data?.items.length,
    none: none.data?.items.length,
  };
}
`;

/** One misspelt field: tsc must reject it. */
const WRONG = `import createClient from 'openapi-fetch';
import type { paths } from './api.ts';

export async function wrong(baseUrl: string) {
  const api = createClient<paths>({ baseUrl });
  const res = await api.GET('/projects/{id}', { params: { path: { id: 'x' } } });
  return res.data?.nmae;
}
`;

/** A page read without telling the two types apart: tsc must reject \`total\` (a cursor page has none). */
const UNNARROWED = `import createClient from 'openapi-fetch';
import type { paths } from './api.ts';

export async function unnarrowed(baseUrl: string) {
  const api = createClient<paths>({ baseUrl });
  const res = await api.GET('/projects');
  return res.data?.total;
}
`;

let t: TestApp;
let dir: string;
let key: string;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, openapiPlugin] });
  ({ key } = await createTenantUser(t));
  await mkdir(join(root, '.tmp'), { recursive: true });
  dir = await mkdtemp(join(root, '.tmp', 'typed-client-'));
});
afterAll(async () => {
  await t?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a client generated from /openapi.json', () => {
  it('type-checks, rejects a wrong field, and round-trips a project against the live app', async () => {
    const res = await t.http('GET', '/openapi.json', { key: null });
    expect(res.status).toBe(200);
    const types = astToString(await openapiTS(res.body as never));
    expect(types).toContain('Project: {');
    await writeFile(join(dir, 'api.ts'), types);
    await writeFile(join(dir, 'client.ts'), CLIENT);
    await writeFile(join(dir, 'wrong.ts'), WRONG);
    await writeFile(join(dir, 'unnarrowed.ts'), UNNARROWED);
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ extends: relative(dir, join(root, 'tsconfig.json')), include: ['*.ts'] }));

    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const out = await run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { cwd: root }).then(
      (r) => r.stdout,
      (err: { stdout?: string }) => err.stdout ?? String(err),
    );
    const errors = out.split('\n').filter((l) => /error TS\d+/.test(l));
    // Exactly two errors: the misspelt field, and \`total\` of a page not narrowed by \`mode\`; client.ts and the types are clean.
    expect(errors, out).toHaveLength(2);
    expect(errors.find((e) => e.includes('wrong.ts'))).toMatch(/Property 'nmae' does not exist/);
    expect(errors.find((e) => e.includes('unnarrowed.ts'))).toMatch(/Property 'total' does not exist on type .*ProjectCursorPage|Property 'total' does not exist/);

    const client = (await import(join(dir, 'client.ts'))) as { projectRoundTrip(url: string, key: string): Promise<Record<string, unknown>> };
    const result = await client.projectRoundTrip(t.url, key);
    expect(result).toMatchObject({ budget: 20, version: 2, staleStatus: 412, staleCode: 'ETAG_MISMATCH', names: ['Typed'], total: 1, hasNext: false, filtered: 1, none: 0 });
  }, 120_000);
});
