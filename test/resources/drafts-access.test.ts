/**
 * Drafts under access rules (docs/access.md): `read_drafts` lets a role see documents not
 * published and pending drafts (`?draft=true`), within its rows; `publish` lets it publish and
 * unpublish. A role with rules for the resource and without those actions sees only published
 * documents, its own drafts included, and is refused publishing (403); other tenants get 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { createRole, newTenant, userWith } from '../access/helpers.ts';
import { expectNoWrite, ifMatch } from './write-helpers.ts';

type User = { userId: string; key: string };
let t: TestApp;
let tenant: string;
let editor: User; // read, create, update: no read_drafts, no publish
let reviewer: User; // read + read_drafts
let archivist: User; // read + read_drafts of archived projects only
let publisher: User; // read + read_drafts + publish
let elsewhere: User; // a publisher of another tenant
let namer: User; // reads names only, and drafts

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource] }), accessPlugin], checkResponses: false });
  tenant = await newTenant(t);
  const other = await newTenant(t);
  const roles = {
    editor: { read: true, create: true, update: true },
    reviewer: { read: true, read_drafts: true },
    archivist: { read: true, read_drafts: { rows: { status: 'archived' } } },
    publisher: { read: true, read_drafts: true, publish: true },
    namer: { read: { fields: ['name'] }, read_drafts: true },
  };
  for (const [name, projects] of Object.entries(roles)) await createRole(t, { name, permissions: { projects } }, { tenantId: tenant });
  await createRole(t, { name: 'publisher', permissions: { projects: roles.publisher } }, { tenantId: other });
  editor = await userWith(t, tenant, ['editor']);
  reviewer = await userWith(t, tenant, ['reviewer']);
  archivist = await userWith(t, tenant, ['archivist']);
  publisher = await userWith(t, tenant, ['publisher']);
  elsewhere = await userWith(t, other, ['publisher']);
  namer = await userWith(t, tenant, ['namer']);
});
afterAll(() => t?.close());

async function ok(method: string, path: string, key: string, json?: unknown, etag?: string) {
  const res = await t.http(method, path, { key, ...(json !== undefined ? { json } : {}), ...(etag ? { headers: ifMatch(etag) } : {}) });
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
  return res;
}
const names = async (key: string, q: string) => ((await ok('GET', `/projects?q=${q}`, key)).body.items as { name: string }[]).map((p) => p.name).sort();

describe('read_drafts', () => {
  it('shows documents not published to the roles that hold it, within its rows; not even their author sees them without it', async () => {
    const active = (await ok('POST', '/projects?draft=true', editor.key, { name: 'ruleddraft one' })).body._id as string;
    const archived = (await ok('POST', '/projects?draft=true', editor.key, { name: 'ruleddraft two', status: 'archived' })).body._id as string;

    expect(await names(editor.key, 'ruleddraft')).toEqual([]);
    expectError(await t.http('GET', `/projects/${active}`, { key: editor.key }), 404, 'NOT_FOUND');
    expect(await names(reviewer.key, 'ruleddraft')).toEqual(['ruleddraft one', 'ruleddraft two']);
    expect(await names(archivist.key, 'ruleddraft')).toEqual(['ruleddraft two']);
    expectError(await t.http('GET', `/projects/${active}`, { key: archivist.key }), 404, 'NOT_FOUND');
    expect((await ok('GET', `/projects/${archived}`, archivist.key)).body._status).toBe('draft');
    // A field rule keeps the state: it is readable wherever the document is.
    expect((await ok('GET', `/projects/${archived}`, namer.key)).body).toMatchObject({ name: 'ruleddraft two', _status: 'draft' });
    expect((await ok('GET', `/projects/${archived}`, namer.key)).body).not.toHaveProperty('status');
    expect(await names(elsewhere.key, 'ruleddraft')).toEqual([]);
  });

  it('?draft=true shows a pending draft to a role with read_drafts only', async () => {
    const id = (await ok('POST', '/projects', editor.key, { name: 'ruledpub' })).body._id as string;
    await ok('PATCH', `/projects/${id}?draft=true`, editor.key, { name: 'ruledpub changed' }, '"1"');
    expect((await ok('GET', `/projects/${id}?draft=true`, editor.key)).body).toMatchObject({ name: 'ruledpub', _status: 'published' });
    expect((await ok('GET', `/projects/${id}?draft=true`, reviewer.key)).body).toMatchObject({ name: 'ruledpub changed', _status: 'draft' });
    expect((await ok('GET', `/projects/${id}`, reviewer.key)).body).toMatchObject({ name: 'ruledpub', _status: 'published' });
  });
});

describe('publish', () => {
  it('is refused (403) to roles without it, the draft\'s author included, and nothing is written', async () => {
    const id = (await ok('POST', '/projects', editor.key, { name: 'topublish' })).body._id as string;
    await ok('PATCH', `/projects/${id}?draft=true`, editor.key, { name: 'topublish v2' }, '"1"');
    await expectNoWrite(t, ['projects'], async () => {
      for (const u of [editor, reviewer]) {
        expectError(await t.http('POST', `/projects/${id}/publish`, { key: u.key, headers: ifMatch('"2"') }), 403, 'ACCESS_DENIED');
        expectError(await t.http('POST', `/projects/${id}/unpublish`, { key: u.key, headers: ifMatch('"2"') }), 403, 'ACCESS_DENIED');
      }
      expectError(await t.http('POST', `/projects/${id}/publish`, { key: elsewhere.key, headers: ifMatch('"2"') }), 404, 'NOT_FOUND');
    });
    const res = await ok('POST', `/projects/${id}/publish`, publisher.key, undefined, '"2"');
    expect(res.body).toMatchObject({ name: 'topublish v2', _status: 'published' });
    await ok('POST', `/projects/${id}/unpublish`, publisher.key, undefined, '"3"');
    expectError(await t.http('GET', `/projects/${id}`, { key: editor.key }), 404, 'NOT_FOUND');
  });

  it('roles accept the two actions and refuse an unknown one (422)', async () => {
    const res = await t.http('POST', '/admin/roles', { json: { name: 'bad', permissions: { projects: { approve: true } } }, headers: { 'X-Tenant-Id': tenant } });
    expectError(res, 422, 'VALIDATION_ERROR');
  });
});
