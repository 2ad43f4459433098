/** Edge cases of the erasure flow: soft-deleted documents and users, other people's audit entries, apps without the audit plugin, OpenAPI. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { openapiPlugin } from '../../plugins/openapi/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { auditEntries, collectionsHolding, createSubject, seedSubject } from './helpers.ts';

describe('with resources and audit', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof createTenantUser>>;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin, openapiPlugin] });
    admin = await createTenantUser(t, { roles: ['admin'] });
  });
  afterAll(() => t?.close());

  it('soft-deleted documents are still held: exported and depersonalized', async () => {
    const s = await createSubject(t, admin.tenantId);
    const p = await t.http('POST', '/projects', { key: s.key, json: { name: 'Old', owner_email: s.email } });
    expect((await t.http('DELETE', `/projects/${p.body._id}`, { key: s.key, headers: { 'If-Match': p.headers.get('etag')! } })).status).toBe(204);
    const ex = await t.http('GET', `/privacy/users/${s.userId}/export`, { key: admin.key });
    expect(ex.body.collections.projects).toEqual([expect.objectContaining({ _id: p.body._id, owner_email: s.email, is_deleted: true })]);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(r.body.preview.collections[0]).toEqual({ name: 'projects', action: 'depersonalize', count: 1, fields: ['owner_email'] });
    expect((await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key })).body.status).toBe('completed');
    expect(await collectionsHolding(t, [s.email, s.name])).toEqual([]);
  });

  it('a soft-deleted user can be erased: nothing to disable, the rest as usual', async () => {
    const s = await createSubject(t, admin.tenantId);
    await t.http('POST', '/projects', { key: s.key, json: { name: 'P', owner_email: s.email } });
    expect((await t.http('DELETE', `/admin/users/${s.userId}`, { key: admin.key })).status).toBe(204);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(r.status).toBe(201);
    expect(r.body.preview).toMatchObject({ account: false, api_keys: 0 });
    const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(ex.body).toMatchObject({ status: 'completed', result: { documents_depersonalized: 2, account_disabled: true } });
    expect(await collectionsHolding(t, [s.email, s.name])).toEqual([]);
  });

  it('other people’s audit entries keep their names and values', async () => {
    const s = await createSubject(t, admin.tenantId);
    const other = await createSubject(t, admin.tenantId);
    await t.http('POST', '/projects', { key: s.key, json: { name: 'Mine', owner_email: s.email } });
    const theirs = await t.http('POST', '/projects', { key: other.key, json: { name: 'Theirs', owner_email: other.email } });
    await t.http('PATCH', `/projects/${theirs.body._id}`, { key: other.key, json: { owner_email: `x.${other.email}` }, headers: { 'If-Match': theirs.headers.get('etag')! } });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    const entries = await auditEntries(t, { user_id: other.userId });
    expect(entries.map((e) => e.user_name)).toEqual([other.name, other.name]);
    expect(entries.find((e) => e.operation === 'update').changes.owner_email).toEqual({ old: other.email, new: `x.${other.email}` });
    expect((await t.http('GET', `/projects/${theirs.body._id}`, { key: other.key })).body.owner_email).toBe(`x.${other.email}`);
  });

  it('a delete entry whose snapshot held the subject’s email is kept after erasure, the email replaced by deleted-user', async () => {
    const s = await createSubject(t, admin.tenantId);
    const p = await t.http('POST', '/projects', { key: s.key, json: { name: 'Gone', owner_email: s.email } });
    // Deleted by an administrator, not the subject: the entry is found as one about the subject's document.
    expect((await t.http('DELETE', `/projects/${p.body._id}`, { key: admin.key, headers: { 'If-Match': p.headers.get('etag')! } })).status).toBe(204);
    const query = { resource: 'projects', resource_id: p.body._id as string, operation: 'delete' };
    const before = await auditEntries(t, query);
    expect(before).toHaveLength(1);
    expect(before[0]).toMatchObject({ user_id: admin.userId, snapshot: { _id: p.body._id, name: 'Gone', owner_email: s.email } });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect((await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key })).body.status).toBe('completed');
    const after = await auditEntries(t, query);
    expect(after).toHaveLength(1);
    expect(after[0]).toMatchObject({
      id: before[0].id, operation: 'delete', user_id: admin.userId, created_at: before[0].created_at,
      snapshot: { _id: p.body._id, name: 'Gone', owner_email: 'deleted-user', created_by: s.userId },
    });
    expect(JSON.stringify(after[0]).toLowerCase()).not.toContain(s.email.toLowerCase());
  });

  it('attributes given to an erased account afterwards: a new request previews the account and clears them', async () => {
    const s = await createSubject(t, admin.tenantId);
    const first = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect((await t.http('POST', `/privacy/erasure-requests/${first.body.id}/execute`, { key: admin.key })).body.status).toBe('completed');
    const phone = `+46 70 999 ${s.userId.slice(-6)}`;
    expect((await t.http('PATCH', `/admin/users/${s.userId}`, { key: admin.key, json: { attributes: { phone } } })).status).toBe(200);
    const again = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(again.body.preview.collections).toContainEqual({ name: 'users', action: 'depersonalize', count: 1, fields: ['email', 'name', 'attributes'] });
    const ex = await t.http('POST', `/privacy/erasure-requests/${again.body.id}/execute`, { key: admin.key });
    expect(ex.body).toMatchObject({ status: 'completed', result: { documents_depersonalized: 1 } });
    expect(await collectionsHolding(t, [phone])).toEqual([]);
  });

  it('OpenAPI documents every privacy route', async () => {
    const doc = await t.http('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    const paths = Object.keys(doc.body.paths).filter((p) => p.startsWith('/privacy'));
    expect(paths.sort()).toEqual([
      '/privacy/consents', '/privacy/consents/{id}', '/privacy/erasure-requests', '/privacy/erasure-requests/{id}',
      '/privacy/erasure-requests/{id}/execute', '/privacy/users/{user_id}/export',
    ]);
    expect(Object.keys(doc.body.paths['/privacy/consents']).sort()).toEqual(['get', 'post']);
  });
});

describe('without the audit plugin', () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it('erasure still completes; nothing is audited', async () => {
    t = await buildTestApp({ plugins: [resourcesPlugin, privacyPlugin, privacyDataPlugin] });
    const admin = await createTenantUser(t, { roles: ['admin'] });
    const s = await createSubject(t, admin.tenantId);
    const seeded = await seedSubject(t, s);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(ex.body).toMatchObject({ status: 'completed', result: { documents_depersonalized: 5, documents_deleted: 1, consents_revoked: 2, audit_entries_scrubbed: 0 } });
    expect(await collectionsHolding(t, [s.email, s.name, seeded.oldName])).toEqual([]);
    expect(await t.app.db.conn.db!.listCollections({ name: 'audit_log' }).toArray()).toEqual([]);
  });
});
