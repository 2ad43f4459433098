/**
 * Access rules on files: a role's read rule on `files` narrows lists (REST and GraphQL), a file
 * outside it is 404 on get, download and signed URL, as if it did not exist, and its fields are
 * masked; a caller without rules sees every file of the tenant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { filesPlugin } from '../../plugins/files/index.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { createRole, newTenant, userWith } from '../access/helpers.ts';
import { download, PDF, PNG, upload } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

describe('files under access rules', () => {
  let t: TestApp;
  let tenantId: string;
  let owner: { key: string; userId: string };
  let viewer: { key: string };
  let png: string;
  let pdf: string;
  beforeAll(async () => {
    t = await buildTestApp({
      plugins: [resourcesPlugin.configure({ resources: [] }), filesPlugin, accessPlugin],
      config: { FILES_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' },
      checkResponses: false,
    });
    tenantId = await newTenant(t);
    owner = await userWith(t, tenantId, ['user']);
    await createRole(t, { name: 'image-viewer', permissions: { files: { read: { rows: { content_type: 'image/png' }, fields: { except: ['metadata'] } } } } }, { tenantId });
    viewer = await userWith(t, tenantId, ['image-viewer']);
    png = (await upload(t, owner.key, PNG, { type: 'image/png', filename: 'dot.png', metadata: '{"secret":"s"}' })).body._id as string;
    pdf = (await upload(t, owner.key, PDF, { type: 'application/pdf', filename: 'doc.pdf' })).body._id as string;
  });
  afterAll(() => t?.close());

  it("REST: the list and get show only the rule's rows, masked; a download and a signed URL of another file are 404", async () => {
    const list = await t.http('GET', '/files', { key: viewer.key });
    expect(list.status).toBe(200);
    expect(list.body.items.map((f: { _id: string }) => f._id)).toEqual([png]);
    expect(list.body.total).toBe(1);
    expect(list.body.items[0]).not.toHaveProperty('metadata');

    expect((await t.http('GET', `/files/${pdf}`, { key: viewer.key })).status).toBe(404);
    const hidden = await download(t, `/files/${pdf}/content`, { key: viewer.key });
    expect(hidden.status).toBe(404);
    expect((await t.http('POST', `/files/${pdf}/signed-url`, { key: viewer.key })).status).toBe(404);

    const shown = await download(t, `/files/${png}/content`, { key: viewer.key });
    expect(shown.status).toBe(200);
    expect(shown.bytes.equals(PNG)).toBe(true);
    expect((await t.http('POST', `/files/${png}/signed-url`, { key: viewer.key })).status).toBe(200);
  });

  it('a caller without rules sees both; the rule does not reach another tenant', async () => {
    const all = await t.http('GET', '/files', { key: owner.key });
    expect(all.body.items.map((f: { _id: string }) => f._id).sort()).toEqual([png, pdf].sort());
    // Another tenant's user who is also the owner's person: a second membership.
    const other = await addMembership(t, owner.userId, { tenantId: await newTenant(t), roles: ['user'] });
    expect((await t.http('GET', '/files', { key: other.key })).body.items).toEqual([]);
    expect((await download(t, `/files/${png}/content`, { key: other.key })).status).toBe(404);
    expect((await t.http('GET', `/files/${png}`, { key: ADMIN_KEY, headers: { 'X-Tenant-Id': tenantId } })).status).toBe(200);
  });

  it("GraphQL: files lists the rule's rows only, and file(id) of another is null", async () => {
    const res = await t.gql('query($id: ID!) { files { items { _id filename } } file(id: $id) { _id } }', { id: pdf }, { key: viewer.key });
    expect(res.body.data?.files.items).toEqual([{ _id: png, filename: 'dot.png' }]);
    expect(res.body.data?.file ?? null).toBeNull();
  });
});
