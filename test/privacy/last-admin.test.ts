/**
 * Erasure and a tenant's last administrator: an erasure disables the account, and a tenant keeps
 * one active administrator, so erasing its last one is refused before anything is written, when
 * the request is made and again when it executes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin] });
});
afterAll(() => t?.close());

describe('erasure of the last administrator', () => {
  it('is refused when requested (409 last_admin), and no request is stored', async () => {
    const a = await createTenantUser(t, { roles: ['admin'] });
    const res = await t.http('POST', '/privacy/erasure-requests', { json: { user_id: a.userId } });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'CONFLICT', details: { reason: 'last_admin' } });
    const list = await t.http('GET', '/privacy/erasure-requests', { key: ADMIN_KEY, headers: { 'X-Tenant-Id': a.tenantId } });
    expect(list.body.items).toEqual([]);
  });

  it('is refused when it executes after the other administrator left: the account and its key stay as they were', async () => {
    const a = await createTenantUser(t, { roles: ['admin'] });
    const b = await createTenantUser(t, { tenantId: a.tenantId, roles: ['admin'] });
    const created = await t.http('POST', '/privacy/erasure-requests', { key: b.key, json: { user_id: a.userId } });
    expect(created.status).toBe(201);
    expect((await t.http('PATCH', `/admin/users/${b.userId}`, { json: { is_active: false } })).status).toBe(200);

    const run = await t.http('POST', `/privacy/erasure-requests/${created.body.id}/execute`, { key: ADMIN_KEY });
    expect(run.status).toBe(409);
    expect(run.body.error).toMatchObject({ code: 'CONFLICT', details: { reason: 'last_admin' } });
    const me = await t.http('GET', '/auth/me', { key: a.key });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: a.userId, name: 'Test User', roles: ['admin'] });
    const request = await t.http('GET', `/privacy/erasure-requests/${created.body.id}`, { key: ADMIN_KEY });
    expect(request.body).toMatchObject({ status: 'failed' });
  });
});
