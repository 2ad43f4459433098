/** Who may request, read, execute erasures and export data: tenant isolation (REST and GraphQL), roles, validation, one open request per user. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { ERASURE_COLLECTION } from '../../plugins/privacy/model.ts';
import { privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { createSubject, seedSubject, type Subject } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
let adminA: Awaited<ReturnType<typeof createTenantUser>>;
let adminB: Awaited<ReturnType<typeof createTenantUser>>;
let userA: Awaited<ReturnType<typeof createTenantUser>>;
let subjectA: Subject;
let subjectB: Subject;
let requestA: any;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin, privacyDataPlugin] });
  adminA = await createTenantUser(t, { roles: ['admin'] });
  // B's administrator is A's administrator's second membership: one person, two tenants.
  adminB = await addMembership(t, adminA.userId, { roles: ['admin'] });
  userA = await createTenantUser(t, { tenantId: adminA.tenantId });
  subjectA = await createSubject(t, adminA.tenantId);
  subjectB = await createSubject(t, adminB.tenantId);
  await seedSubject(t, subjectA);
  await seedSubject(t, subjectB);
  const r = await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json: { user_id: subjectA.userId } });
  expect(r.status).toBe(201);
  requestA = r.body;
});
afterAll(() => t?.close());

const requests = () => t.app.db.conn.db!.collection(ERASURE_COLLECTION).countDocuments();

describe('creating a request', () => {
  it('another tenant’s subject: 404 with no preview, no count, nothing written', async () => {
    const n = await requests();
    const res = await t.http('POST', '/privacy/erasure-requests', { key: adminB.key, json: { user_id: subjectA.userId } });
    const err = expectError(res, 404, 'NOT_FOUND');
    expect(err.details).toEqual({ resource: 'user', item_id: subjectA.userId });
    expect(JSON.stringify(res.body)).not.toMatch(/preview|count|projects|pd_notes/);
    // Same answer as for an id that exists nowhere.
    const ghost = await t.http('POST', '/privacy/erasure-requests', { key: adminB.key, json: { user_id: '0123456789abcdef01234567' } });
    expect(expectError(ghost, 404, 'NOT_FOUND').message).toBe('user 0123456789abcdef01234567 not found');
    expect(await requests()).toBe(n);
  });

  it('a plain user: 403; no credential: 401', async () => {
    expectError(await t.http('POST', '/privacy/erasure-requests', { key: userA.key, json: { user_id: subjectA.userId } }), 403, 'ACCESS_DENIED');
    expectError(await t.http('POST', '/privacy/erasure-requests', { key: null, json: { user_id: subjectA.userId } }), 401, 'AUTH_REQUIRED');
  });

  it('one’s own account: 403 (reason self)', async () => {
    const err = expectError(await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json: { user_id: adminA.userId } }), 403, 'ACCESS_DENIED');
    expect(err.details).toEqual({ reason: 'self' });
  });

  it('a tenant admin cannot erase a system administrator (the system tenant is not theirs: 404)', async () => {
    const me = await t.http('GET', '/auth/me', { key: ADMIN_KEY });
    expectError(await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json: { user_id: me.body.id } }), 404, 'NOT_FOUND');
  });

  it('a tenant admin of the system tenant (same tenant, no 404) cannot erase the system administrator: 403, nothing written', async () => {
    const me = await t.http('GET', '/auth/me', { key: ADMIN_KEY });
    const sysTenantAdmin = await createTenantUser(t, { tenantId: me.body.tenant_id, roles: ['admin'] });
    const actor = await t.http('GET', '/auth/me', { key: sysTenantAdmin.key });
    expect(actor.body).toMatchObject({ tenant_id: me.body.tenant_id, roles: ['admin'], scope: null, is_system_user: false });
    const n = await requests();
    const err = expectError(await t.http('POST', '/privacy/erasure-requests', { key: sysTenantAdmin.key, json: { user_id: me.body.id } }), 403, 'ACCESS_DENIED');
    expect(err.message).toBe('Only system administrators erase system administrators');
    const g = await t.gql('mutation($u: String!) { requestErasure(user_id: $u) { id } }', { u: me.body.id }, { key: sysTenantAdmin.key });
    expect(g.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    expect(await requests()).toBe(n);
  });

  it('a second open request for the same user: 409 naming the open one', async () => {
    const err = expectError(await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json: { user_id: subjectA.userId } }), 409, 'CONFLICT');
    expect(err.details).toEqual({ request_id: requestA.id, status: 'pending' });
  });

  it.each([
    ['a malformed user_id', { user_id: 'nope' }, ['body', 'user_id']],
    ['no user_id', {}, ['body', 'user_id']],
    ['an unknown field', { user_id: '0123456789abcdef01234567', force: true }, ['body', 'force']],
  ])('%s: 422, nothing written', async (_l, json, loc) => {
    const n = await requests();
    const err = expectError(await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json }), 422, 'VALIDATION_ERROR');
    expect((err.details.errors as any[]).map((e) => e.loc)).toContainEqual(loc);
    expect(await requests()).toBe(n);
  });
});

describe('reading and executing requests', () => {
  it('list: own tenant only (total included); the system admin sees every tenant or the one it acts in', async () => {
    const b = await t.http('POST', '/privacy/erasure-requests', { key: adminB.key, json: { user_id: subjectB.userId } });
    expect(b.status).toBe(201);
    const listA = await t.http('GET', '/privacy/erasure-requests', { key: adminA.key });
    expect(listA.body).toMatchObject({ total: 1, items: [{ id: requestA.id }] });
    const listB = await t.http('GET', '/privacy/erasure-requests', { key: adminB.key });
    expect(listB.body).toMatchObject({ total: 1, items: [{ id: b.body.id }] });
    expect((await t.http('GET', `/privacy/erasure-requests?user_id=${subjectA.userId}`, { key: adminB.key })).body.total).toBe(0);
    expect((await t.http('GET', '/privacy/erasure-requests')).body.total).toBe(2);
    expect((await t.http('GET', '/privacy/erasure-requests', { headers: { 'X-Tenant-Id': adminB.tenantId } })).body.items.map((r: any) => r.id)).toEqual([b.body.id]);
    expect((await t.http('GET', '/privacy/erasure-requests?status=completed', { key: adminA.key })).body.total).toBe(0);
    expectError(await t.http('GET', '/privacy/erasure-requests?status=done', { key: adminA.key }), 422, 'VALIDATION_ERROR');
  });

  it('read and execute another tenant’s request: 404, nothing runs', async () => {
    expectError(await t.http('GET', `/privacy/erasure-requests/${requestA.id}`, { key: adminB.key }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', `/privacy/erasure-requests/${requestA.id}/execute`, { key: adminB.key }), 404, 'NOT_FOUND');
    const r = await t.http('GET', `/privacy/erasure-requests/${requestA.id}`, { key: adminA.key });
    expect(r.body).toMatchObject({ status: 'pending', attempts: 0 });
    expect((await t.http('GET', '/auth/me', { key: subjectA.key })).status).toBe(200);
  });

  it.each([
    ['GET', ''],
    ['POST', '/execute'],
  ])('%s an unknown id: 404, a malformed id: 422, in the envelope', async (method, suffix) => {
    const unknown = expectError(await t.http(method, `/privacy/erasure-requests/0123456789abcdef01234567${suffix}`, { key: adminA.key }), 404, 'NOT_FOUND');
    expect(unknown.details).toEqual({ resource: 'erasure_request', item_id: '0123456789abcdef01234567' });
    const malformed = expectError(await t.http(method, `/privacy/erasure-requests/nope${suffix}`, { key: adminA.key }), 422, 'VALIDATION_ERROR');
    expect((malformed.details.errors as any[]).map((e) => e.loc)).toEqual([['params', 'id']]);
  });

  it('a plain user can neither list, read nor execute: 403', async () => {
    expectError(await t.http('GET', '/privacy/erasure-requests', { key: userA.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('GET', `/privacy/erasure-requests/${requestA.id}`, { key: userA.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('POST', `/privacy/erasure-requests/${requestA.id}/execute`, { key: userA.key }), 403, 'ACCESS_DENIED');
  });
});

describe('export', () => {
  it('the user themself and an admin of their tenant: 200, a JSON download', async () => {
    for (const key of [subjectA.key, adminA.key, ADMIN_KEY]) {
      const res = await t.http('GET', `/privacy/users/${subjectA.userId}/export`, { key });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(res.headers.get('content-disposition')).toMatch(new RegExp(`^attachment; filename="personal-data-${subjectA.userId}-.+\\.json"$`));
      expect(res.body.user.id).toBe(subjectA.userId);
    }
  });

  it('another user of the tenant: 403; an admin of another tenant: 404; neither sees any of it', async () => {
    const u = await t.http('GET', `/privacy/users/${subjectA.userId}/export`, { key: userA.key });
    expectError(u, 403, 'ACCESS_DENIED');
    const b = await t.http('GET', `/privacy/users/${subjectA.userId}/export`, { key: adminB.key });
    expectError(b, 404, 'NOT_FOUND');
    for (const res of [u, b]) expect(JSON.stringify(res.body)).not.toContain(subjectA.email);
  });

  it('a malformed id: 422', async () => {
    expectError(await t.http('GET', '/privacy/users/nope/export', { key: adminA.key }), 422, 'VALIDATION_ERROR');
  });
});

describe('GraphQL', () => {
  const code = (res: any) => res.body.errors?.[0]?.extensions?.code;

  it('requestErasure: another tenant’s subject is NOT_FOUND without data; a plain user ACCESS_DENIED', async () => {
    const res = await t.gql('mutation($u: String!) { requestErasure(user_id: $u) { id preview { consents } } }', { u: subjectA.userId }, { key: adminB.key });
    expect(code(res)).toBe('NOT_FOUND');
    expect(res.body.data).toBeNull();
    expect(code(await t.gql('mutation($u: String!) { requestErasure(user_id: $u) { id } }', { u: subjectA.userId }, { key: userA.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql('mutation { requestErasure(user_id: "nope") { id } }', undefined, { key: adminA.key }))).toBe('VALIDATION_ERROR');
  });

  it('the administrators\' fields declare their permission: anonymous AUTH_REQUIRED, a plain user ACCESS_DENIED, nothing written', async () => {
    const n = await requests();
    for (const [key, expected] of [[null, 'AUTH_REQUIRED'], [userA.key, 'ACCESS_DENIED']] as const) {
      expect(code(await t.gql('mutation($u: String!) { requestErasure(user_id: $u) { id } }', { u: subjectA.userId }, { key }))).toBe(expected);
      expect(code(await t.gql('{ erasureRequests { total } }', undefined, { key }))).toBe(expected);
      expect(code(await t.gql('query($id: String!) { erasureRequest(id: $id) { id } }', { id: requestA.id }, { key }))).toBe(expected);
      expect(code(await t.gql('mutation($id: String!) { executeErasure(id: $id) { queued } }', { id: requestA.id }, { key }))).toBe(expected);
    }
    const denied = await t.gql('{ erasureRequests { total } }', undefined, { key: userA.key });
    expect(denied.body.errors?.[0]?.message).toBe('Administrator role required');
    expect(await requests()).toBe(n);
    const ok = await t.gql('query($id: String!) { erasureRequest(id: $id) { id status } }', { id: requestA.id }, { key: adminA.key });
    expect(ok.body.data.erasureRequest).toEqual({ id: requestA.id, status: 'pending' });
  });

  it('erasureRequests / erasureRequest / executeErasure are confined to the tenant', async () => {
    const listB = await t.gql('{ erasureRequests { total items { id user_id } } }', undefined, { key: adminB.key });
    expect(listB.body.data.erasureRequests.items.map((r: any) => r.user_id)).toEqual([subjectB.userId]);
    const listA = await t.gql('{ erasureRequests { total items { id preview { collections { name count fields } consents } } } }', undefined, { key: adminA.key });
    expect(listA.body.data.erasureRequests).toMatchObject({ total: 1, items: [{ id: requestA.id, preview: { consents: 2 } }] });
    expect(code(await t.gql('query($id: String!) { erasureRequest(id: $id) { id } }', { id: requestA.id }, { key: adminB.key }))).toBe('NOT_FOUND');
    expect(code(await t.gql('mutation($id: String!) { executeErasure(id: $id) { queued } }', { id: requestA.id }, { key: adminB.key }))).toBe('NOT_FOUND');
    expect(code(await t.gql('{ erasureRequests { total } }', undefined, { key: userA.key }))).toBe('ACCESS_DENIED');
    expect((await t.http('GET', `/privacy/erasure-requests/${requestA.id}`, { key: adminA.key })).body.status).toBe('pending');
  });

  it('requestErasure by the tenant admin creates the request and answers it with its preview, as REST does', async () => {
    const s2 = await createSubject(t, adminA.tenantId);
    await seedSubject(t, s2);
    const n = await requests();
    const fields = 'id status user_id tenant_id requested_by preview { collections { name action count fields } consents api_keys account } result { consents_revoked } error attempts job_run_id created_at started_at completed_at';
    const res = await t.gql(`mutation($u: String!) { requestErasure(user_id: $u) { ${fields} } }`, { u: s2.userId }, { key: adminA.key });
    expect(res.body.errors).toBeUndefined();
    const created = res.body.data.requestErasure;
    expect(await requests()).toBe(n + 1);
    expect(created).toMatchObject({ status: 'pending', user_id: s2.userId, tenant_id: adminA.tenantId, requested_by: adminA.userId, result: null, attempts: 0, started_at: null });
    expect(created.preview).toEqual({
      collections: [
        { name: 'projects', action: 'depersonalize', count: 2, fields: ['owner_email'] },
        { name: 'pd_notes', action: 'depersonalize', count: 2, fields: ['author_name', 'author_email'] },
        { name: 'pd_credentials', action: 'delete', count: 1, fields: ['device_name'] },
        { name: 'users', action: 'depersonalize', count: 1, fields: ['email', 'name', 'attributes'] },
      ],
      consents: 2, api_keys: 1, account: true,
    });
    const rest = await t.http('GET', `/privacy/erasure-requests/${created.id}`, { key: adminA.key });
    expect(rest.body).toEqual(created);
    // The same one-open-request rule: a second is CONFLICT naming the first.
    const again = await t.gql('mutation($u: String!) { requestErasure(user_id: $u) { id } }', { u: s2.userId }, { key: adminA.key });
    expect(again.body.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', details: { request_id: created.id, status: 'pending' } });
    expect(await requests()).toBe(n + 1);
  });

  it('the tenant admin executes through GraphQL: inline, completed', async () => {
    const res = await t.gql('mutation($id: String!) { executeErasure(id: $id) { queued request { status result { consents_revoked account_disabled } } } }', { id: requestA.id }, { key: adminA.key });
    expect(res.body.data.executeErasure).toEqual({ queued: false, request: { status: 'completed', result: { consents_revoked: 2, account_disabled: true } } });
    const one = await t.gql('query($id: String!) { erasureRequest(id: $id) { status completed_at } }', { id: requestA.id }, { key: adminA.key });
    expect(one.body.data.erasureRequest.status).toBe('completed');
  });
});

describe('a tenant administrator sending another tenant’s X-Tenant-Id', () => {
  /** The header is read for system actors only: on every privacy endpoint adminA still sees tenant A only. */
  const spoof = { 'X-Tenant-Id': '' };
  let requestB: any;
  let consentB: any;

  beforeAll(async () => {
    spoof['X-Tenant-Id'] = adminB.tenantId;
    const open = await t.http('GET', `/privacy/erasure-requests?user_id=${subjectB.userId}`);
    requestB = open.body.items[0] ?? (await t.http('POST', '/privacy/erasure-requests', { key: adminB.key, json: { user_id: subjectB.userId } })).body;
    expect(requestB).toMatchObject({ status: 'pending', tenant_id: adminB.tenantId });
    consentB = (await t.http('GET', '/privacy/consents?active=true', { key: subjectB.key })).body.items[0];
    expect(consentB).toMatchObject({ active: true, tenant_id: adminB.tenantId });
  });

  it('consents of B’s user: an empty page, as without the header', async () => {
    const res = await t.http('GET', `/privacy/consents?user_id=${subjectB.userId}`, { key: adminA.key, headers: spoof });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ items: [], total: 0 });
  });

  it('revoking B’s user’s consent: 404, still active', async () => {
    expectError(await t.http('DELETE', `/privacy/consents/${consentB.id}`, { key: adminA.key, headers: spoof }), 404, 'NOT_FOUND');
    const after = (await t.http('GET', `/privacy/consents?user_id=${subjectB.userId}`, { key: adminB.key })).body.items.find((c: any) => c.id === consentB.id);
    expect(after).toMatchObject({ active: true, revoked_at: null });
  });

  it('export of B’s user: 404, none of its data', async () => {
    const res = await t.http('GET', `/privacy/users/${subjectB.userId}/export`, { key: adminA.key, headers: spoof });
    expectError(res, 404, 'NOT_FOUND');
    expect(JSON.stringify(res.body)).not.toContain(subjectB.email);
  });

  it('erasure request list: tenant A’s only, the same page as without the header', async () => {
    const spoofed = await t.http('GET', '/privacy/erasure-requests?per_page=500', { key: adminA.key, headers: spoof });
    const plain = await t.http('GET', '/privacy/erasure-requests?per_page=500', { key: adminA.key });
    expect(spoofed.status).toBe(200);
    expect(spoofed.body).toEqual(plain.body);
    expect(spoofed.body.items.length).toBeGreaterThan(0);
    expect(new Set(spoofed.body.items.map((r: any) => r.tenant_id))).toEqual(new Set([adminA.tenantId]));
    const byUser = await t.http('GET', `/privacy/erasure-requests?user_id=${subjectB.userId}`, { key: adminA.key, headers: spoof });
    expect(byUser.body).toMatchObject({ items: [], total: 0 });
  });

  it('get, execute B’s request and create one for B’s user: 404, nothing written or run', async () => {
    const n = await requests();
    expectError(await t.http('GET', `/privacy/erasure-requests/${requestB.id}`, { key: adminA.key, headers: spoof }), 404, 'NOT_FOUND');
    expectError(await t.http('POST', `/privacy/erasure-requests/${requestB.id}/execute`, { key: adminA.key, headers: spoof }), 404, 'NOT_FOUND');
    const created = await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, headers: spoof, json: { user_id: subjectB.userId } });
    expectError(created, 404, 'NOT_FOUND');
    expect(await requests()).toBe(n);
    expect((await t.http('GET', `/privacy/erasure-requests/${requestB.id}`, { key: adminB.key })).body).toMatchObject({ status: 'pending', attempts: 0 });
    expect((await t.http('GET', '/auth/me', { key: subjectB.key })).status).toBe(200);
  });

  it('GraphQL with the header: the same answers', async () => {
    const code = (res: any) => res.body.errors?.[0]?.extensions?.code;
    const opts = { key: adminA.key, headers: spoof };
    const consents = await t.gql('query($u: String) { consents(user_id: $u) { total } }', { u: subjectB.userId }, opts);
    expect(consents.body.data.consents.total).toBe(0);
    const list = await t.gql('{ erasureRequests(per_page: 500) { items { tenant_id } } }', undefined, opts);
    expect(new Set(list.body.data.erasureRequests.items.map((r: any) => r.tenant_id))).toEqual(new Set([adminA.tenantId]));
    expect(code(await t.gql('query($id: String!) { erasureRequest(id: $id) { id } }', { id: requestB.id }, opts))).toBe('NOT_FOUND');
    expect(code(await t.gql('mutation($id: String!) { executeErasure(id: $id) { queued } }', { id: requestB.id }, opts))).toBe('NOT_FOUND');
    expect(code(await t.gql('mutation($u: String!) { requestErasure(user_id: $u) { id } }', { u: subjectB.userId }, opts))).toBe('NOT_FOUND');
    expect(code(await t.gql('mutation($id: String!) { revokeConsent(id: $id) { id } }', { id: consentB.id }, opts))).toBe('NOT_FOUND');
    expect((await t.http('GET', `/privacy/erasure-requests/${requestB.id}`, { key: adminB.key })).body.status).toBe('pending');
  });
});
