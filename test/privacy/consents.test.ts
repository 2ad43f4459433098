/** Consents: own grant, read, revoke; administrators read their tenant's; audited; validated; isolated. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { CONSENT_COLLECTION } from '../../plugins/privacy/model.ts';
import { auditEntries } from './helpers.ts';

let t: TestApp;
let alice: Awaited<ReturnType<typeof createTenantUser>>;
let bob: Awaited<ReturnType<typeof createTenantUser>>;
let adminA: Awaited<ReturnType<typeof createTenantUser>>;
let adminB: Awaited<ReturnType<typeof createTenantUser>>;
let carol: Awaited<ReturnType<typeof createTenantUser>>;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, privacyPlugin], config: { PRIVACY_CONSENT_PURPOSES: 'marketing,analytics,newsletter' } });
  alice = await createTenantUser(t);
  bob = await createTenantUser(t, { tenantId: alice.tenantId });
  adminA = await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'] });
  adminB = await createTenantUser(t, { roles: ['admin'] });
  carol = await createTenantUser(t, { tenantId: adminB.tenantId });
});
afterAll(() => t?.close());

const count = () => t.app.db.conn.db!.collection(CONSENT_COLLECTION).countDocuments();

describe('grant', () => {
  it('201 with the record; again while active: 200 with the same record, nothing written', async () => {
    const r = await t.http('POST', '/privacy/consents', { key: alice.key, json: { purpose: 'marketing', source: 'signup-form' } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ user_id: alice.userId, tenant_id: alice.tenantId, purpose: 'marketing', source: 'signup-form', revoked_at: null, active: true });
    expect(Date.parse(r.body.granted_at)).not.toBeNaN();
    const n = await count();
    const again = await t.http('POST', '/privacy/consents', { key: alice.key, json: { purpose: 'marketing' } });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(r.body.id);
    expect(await count()).toBe(n);
  });

  it('source defaults to api', async () => {
    const r = await t.http('POST', '/privacy/consents', { key: alice.key, json: { purpose: 'analytics' } });
    expect(r.body.source).toBe('api');
  });

  it.each([
    ['an unknown purpose (PRIVACY_CONSENT_PURPOSES)', { purpose: 'telemetry' }, ['body', 'purpose']],
    ['a malformed purpose', { purpose: 'Not A Purpose' }, ['body', 'purpose']],
    ['a missing purpose', {}, ['body', 'purpose']],
    ['an unknown field', { purpose: 'marketing', user_id: '0123456789abcdef01234567' }, ['body', 'user_id']],
  ])('%s: 422, nothing written', async (_l, json, loc) => {
    const n = await count();
    const err = expectError(await t.http('POST', '/privacy/consents', { key: bob.key, json }), 422, 'VALIDATION_ERROR');
    expect((err.details.errors as any[]).map((e) => e.loc)).toContainEqual(loc);
    expect(await count()).toBe(n);
  });

  it('no credential: 401', async () => {
    expectError(await t.http('POST', '/privacy/consents', { key: null, json: { purpose: 'marketing' } }), 401, 'AUTH_REQUIRED');
  });

  it('is audited as an insert by the user', async () => {
    const entries = await auditEntries(t, { resource: CONSENT_COLLECTION, user_id: alice.userId, operation: 'insert' });
    expect(entries).toHaveLength(2);
    expect(entries[0]).toMatchObject({ tenant_id: alice.tenantId, user_name: 'Test User' });
    // From the event log: each grant's `consent.granted` event, whose id the entry shares.
    const events = await t.app.db.conn.collection('events').find({ _id: { $in: entries.map((e) => `evt_${e.id}`) } as never }).toArray();
    expect(events.map((e) => [e.type, e.actor, (e.data as { id: string }).id]).sort()).toEqual(entries.map((e) => ['consent.granted', alice.userId, e.item_id]).sort());
  });
});

describe('read', () => {
  it('a user reads their own, filtered by purpose and active', async () => {
    const r = await t.http('GET', '/privacy/consents', { key: alice.key });
    expect(r.body).toMatchObject({ total: 2, page: 1, per_page: 50 });
    expect(r.body.items.map((c: any) => c.purpose).sort()).toEqual(['analytics', 'marketing']);
    const m = await t.http('GET', '/privacy/consents?purpose=marketing&active=true', { key: alice.key });
    expect(m.body.items.map((c: any) => c.purpose)).toEqual(['marketing']);
    expect((await t.http('GET', '/privacy/consents', { key: bob.key })).body.total).toBe(0);
  });

  it('a user naming someone else: 403', async () => {
    expectError(await t.http('GET', `/privacy/consents?user_id=${alice.userId}`, { key: bob.key }), 403, 'ACCESS_DENIED');
  });

  it('an admin reads a user of their tenant; an admin of another tenant sees nothing (no count either)', async () => {
    expect((await t.http('GET', `/privacy/consents?user_id=${alice.userId}`, { key: adminA.key })).body.total).toBe(2);
    const other = await t.http('GET', `/privacy/consents?user_id=${alice.userId}`, { key: adminB.key });
    expect(other.status).toBe(200);
    expect(other.body).toMatchObject({ items: [], total: 0 });
  });

  it('bad query values: 422', async () => {
    expectError(await t.http('GET', '/privacy/consents?active=maybe', { key: alice.key }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', '/privacy/consents?user_id=nope', { key: alice.key }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', '/privacy/consents?per_page=501', { key: alice.key }), 422, 'VALIDATION_ERROR');
  });
});

describe('revoke', () => {
  it('only one’s own: someone else (same tenant, other tenant, even an admin) gets 404 and nothing changes', async () => {
    const c = (await t.http('GET', '/privacy/consents?purpose=marketing', { key: alice.key })).body.items[0];
    for (const key of [bob.key, adminA.key, adminB.key]) expectError(await t.http('DELETE', `/privacy/consents/${c.id}`, { key }), 404, 'NOT_FOUND');
    expect((await t.http('GET', '/privacy/consents?purpose=marketing', { key: alice.key })).body.items[0].active).toBe(true);
  });

  it('sets revoked_at, keeps the record; revoking again is a no-op; granting again makes a new record', async () => {
    const c = (await t.http('GET', '/privacy/consents?purpose=marketing', { key: alice.key })).body.items[0];
    const r = await t.http('DELETE', `/privacy/consents/${c.id}`, { key: alice.key });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: c.id, active: false, revoked_at: expect.any(String), granted_at: c.granted_at });
    const again = await t.http('DELETE', `/privacy/consents/${c.id}`, { key: alice.key });
    expect(again.body).toEqual(r.body);
    const regrant = await t.http('POST', '/privacy/consents', { key: alice.key, json: { purpose: 'marketing' } });
    expect(regrant.status).toBe(201);
    expect(regrant.body.id).not.toBe(c.id);
    const history = await t.http('GET', '/privacy/consents?purpose=marketing', { key: alice.key });
    expect(history.body.items.map((x: any) => x.active)).toEqual([true, false]);
  });

  it('is audited once, as an update by the user', async () => {
    const c = (await t.http('GET', '/privacy/consents?purpose=marketing&active=false', { key: alice.key })).body.items[0];
    const entries = await auditEntries(t, { resource: CONSENT_COLLECTION, resource_id: c.id, operation: 'update' });
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ user_id: alice.userId, changes: { revoked_at: { old: null, new: expect.any(String) } } });
    const event = await t.app.db.conn.collection('events').findOne({ _id: `evt_${entries[0].id}` as never });
    expect(event).toMatchObject({ type: 'consent.revoked', actor: alice.userId, data: { id: c.id, active: false }, previous: { id: c.id, active: true } });
  });

  it('an unknown or malformed id: 404 / 422', async () => {
    expectError(await t.http('DELETE', '/privacy/consents/0123456789abcdef01234567', { key: alice.key }), 404, 'NOT_FOUND');
    expectError(await t.http('DELETE', '/privacy/consents/nope', { key: alice.key }), 422, 'VALIDATION_ERROR');
  });
});

describe('GraphQL', () => {
  it('grant, list and revoke through the same service and rules', async () => {
    const g = await t.gql('mutation { grantConsent(purpose: "newsletter") { id purpose source active } }', undefined, { key: bob.key });
    expect(g.body.data.grantConsent).toMatchObject({ purpose: 'newsletter', source: 'graphql', active: true });
    const list = await t.gql('{ consents { total items { id purpose } } }', undefined, { key: bob.key });
    expect(list.body.data.consents).toEqual({ total: 1, items: [{ id: g.body.data.grantConsent.id, purpose: 'newsletter' }] });
    const other = await t.gql('mutation($id: String!) { revokeConsent(id: $id) { id } }', { id: g.body.data.grantConsent.id }, { key: alice.key });
    expect(other.body.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    const rv = await t.gql('mutation($id: String!) { revokeConsent(id: $id) { active revoked_at } }', { id: g.body.data.grantConsent.id }, { key: bob.key });
    expect(rv.body.data.revokeConsent).toMatchObject({ active: false, revoked_at: expect.any(String) });
    const byState = async (active: boolean) => (await t.gql('query($a: Boolean) { consents(active: $a) { total } }', { a: active }, { key: bob.key })).body.data.consents.total;
    expect([await byState(true), await byState(false)]).toEqual([0, 1]);
  });

  it('revokeConsent of someone else’s consent: NOT_FOUND for a user of another tenant and for administrators of either tenant; nothing changes', async () => {
    const c = (await t.http('GET', '/privacy/consents?purpose=analytics&active=true', { key: alice.key })).body.items[0];
    expect(c).toMatchObject({ active: true, revoked_at: null });
    const entries = async () => (await auditEntries(t, { resource: CONSENT_COLLECTION, resource_id: c.id })).length;
    const before = await entries();
    for (const key of [carol.key, adminA.key, adminB.key]) {
      const res = await t.gql('mutation($id: String!) { revokeConsent(id: $id) { id active } }', { id: c.id }, { key });
      expect(res.body.data).toBeNull();
      expect(res.body.errors![0]!.extensions).toMatchObject({ code: 'NOT_FOUND', details: { resource: 'consent', item_id: c.id } });
    }
    const after = (await t.http('GET', '/privacy/consents?purpose=analytics', { key: alice.key })).body.items;
    expect(after).toEqual([c]);
    expect(await entries()).toBe(before);
  });

  it('an administrator reads the consents of a user of their tenant, as REST answers them', async () => {
    const rest = await t.http('GET', `/privacy/consents?user_id=${alice.userId}`, { key: adminA.key });
    expect(rest.body.total).toBeGreaterThan(0);
    const g = await t.gql(
      'query($u: String) { consents(user_id: $u) { total page per_page total_pages items { id user_id tenant_id purpose granted_at revoked_at source active } } }',
      { u: alice.userId },
      { key: adminA.key },
    );
    expect(g.body.errors).toBeUndefined();
    expect(g.body.data.consents).toEqual(rest.body);
    expect(new Set(g.body.data.consents.items.map((x: any) => x.user_id))).toEqual(new Set([alice.userId]));
  });

  it('validation and access errors carry the same codes', async () => {
    const bad = await t.gql('mutation { grantConsent(purpose: "telemetry") { id } }', undefined, { key: bob.key });
    expect(bad.body.errors![0]!.extensions).toMatchObject({ code: 'VALIDATION_ERROR' });
    expect((bad.body.errors![0]!.extensions!.details as any).errors[0].loc).toEqual(['args', 'purpose']);
    const denied = await t.gql('query($u: String) { consents(user_id: $u) { total } }', { u: alice.userId }, { key: bob.key });
    expect(denied.body.errors![0]!.extensions!.code).toBe('ACCESS_DENIED');
    const cross = await t.gql('query($u: String) { consents(user_id: $u) { total } }', { u: alice.userId }, { key: adminB.key });
    expect(cross.body.data.consents.total).toBe(0);
    const anon = await t.gql('{ consents { total } }', undefined, { key: null });
    expect(anon.body.errors![0]!.extensions!.code).toBe('AUTH_REQUIRED');
  });
});
