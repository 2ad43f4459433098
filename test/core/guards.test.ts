import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type HttpResult, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

function expectDenied(res: HttpResult<any>, details: Record<string, unknown>) {
  expect(res.status).toBe(403);
  const err = envelope(res);
  expect(err.code).toBe('ACCESS_DENIED');
  expect(err.details).toEqual(details);
  return err;
}

/** Tenant A: users in regions eu, us, both, none; tenant B: a user in eu. Each eu/us user writes one note. */
async function seed(t: TestApp) {
  const eu = await createTenantUser(t, { tenant: 'A', attributes: { region: 'eu' } });
  const a = eu.tenantId;
  const us = await createTenantUser(t, { tenantId: a, attributes: { region: 'us' } });
  const both = await createTenantUser(t, { tenantId: a, attributes: { region: ['eu', 'us'] } });
  const none = await createTenantUser(t, { tenantId: a });
  const euB = await createTenantUser(t, { tenant: 'B', attributes: { region: 'eu' } });
  for (const [u, text, region] of [[eu, 'a-eu', 'eu'], [us, 'a-us', 'us'], [euB, 'b-eu', 'eu']] as const) {
    const res = await t.http('POST', '/example/notes', { key: u.key, json: { text, region } });
    expect(res.status).toBe(201);
  }
  return { eu, us, both, none, euB };
}

const notes = async (t: TestApp, key: string, headers: Record<string, string> = {}) => {
  const res = await t.http('GET', '/example/notes', { key, headers });
  expect(res.status).toBe(200);
  return (res.body.items as { text: string }[]).map((n) => n.text);
};

let t: TestApp;
let flat: TestApp;
let u: Awaited<ReturnType<typeof seed>>;
let uFlat: Awaited<ReturnType<typeof seed>>;
beforeAll(async () => {
  [t, flat] = await Promise.all([
    buildTestApp({ plugins: [examplePlugin] }),
    buildTestApp({ plugins: [examplePlugin], config: { MULTI_TENANT_ENABLED: 'false' } }),
  ]);
  [u, uFlat] = await Promise.all([seed(t), seed(flat)]);
});
afterAll(() => Promise.all([t?.close(), flat?.close()]));

describe('feature guard (/example/secret)', () => {
  it('403 with details.feature for a user without the feature', async () => {
    const err = expectDenied(await t.http('GET', '/example/secret', { key: u.eu.key }), { feature: 'secret-feature' });
    expect(err.message).toBe('Feature "secret-feature" required');
  });

  it('a tenant admin without the feature is refused too', async () => {
    const admin = await createTenantUser(t, { tenantId: u.eu.tenantId, roles: ['admin'] });
    expectDenied(await t.http('GET', '/example/secret', { key: admin.key }), { feature: 'secret-feature' });
  });

  it('200 with the feature', async () => {
    const withFeature = await createTenantUser(t, { tenantId: u.eu.tenantId, features: ['other', 'secret-feature'] });
    const res = await t.http('GET', '/example/secret', { key: withFeature.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ secret: 42 });
  });

  it('the system administrator passes', async () => {
    expect((await t.http('GET', '/example/secret')).body).toEqual({ secret: 42 });
  });

  it('anonymous callers get 401, not 403', async () => {
    const res = await t.http('GET', '/example/secret', { key: null });
    expect(res.status).toBe(401);
    expect(envelope(res).code).toBe('AUTH_REQUIRED');
  });
});

describe('attribute guard (/example/finance: department must equal finance)', () => {
  it('403 without the attribute or with another value', async () => {
    expectDenied(await t.http('GET', '/example/finance', { key: u.none.key }), { attribute: 'department' });
    const sales = await createTenantUser(t, { tenantId: u.eu.tenantId, attributes: { department: 'sales' } });
    expectDenied(await t.http('GET', '/example/finance', { key: sales.key }), { attribute: 'department' });
    const arr = await createTenantUser(t, { tenantId: u.eu.tenantId, attributes: { department: ['finance'] } });
    expectDenied(await t.http('GET', '/example/finance', { key: arr.key }), { attribute: 'department' });
  });

  it('200 for department finance, and for the system administrator', async () => {
    const fin = await createTenantUser(t, { tenantId: u.eu.tenantId, attributes: { department: 'finance' } });
    expect((await t.http('GET', '/example/finance', { key: fin.key })).body).toEqual({ ok: true });
    expect((await t.http('GET', '/example/finance')).body).toEqual({ ok: true });
  });
});

describe('attribute filter (/example/notes: region field = caller region)', () => {
  it('a user in eu lists only eu notes of its tenant', async () => {
    expect(await notes(t, u.eu.key)).toEqual(['a-eu']);
  });

  it('a user in us lists only us notes', async () => {
    expect(await notes(t, u.us.key)).toEqual(['a-us']);
  });

  it('an array attribute matches any of its values', async () => {
    expect(await notes(t, u.both.key)).toEqual(['a-eu', 'a-us']);
  });

  it('a user without the attribute gets 403 naming it', async () => {
    const err = expectDenied(await t.http('GET', '/example/notes', { key: u.none.key }), { attribute: 'region' });
    expect(err.message).toBe('Attribute "region" required');
  });
});

describe('tenant isolation', () => {
  it("a user of tenant B sees none of tenant A's notes", async () => {
    expect(await notes(t, u.euB.key)).toEqual(['b-eu']);
  });

  it('X-Tenant-Id from a non-system caller is ignored', async () => {
    expect(await notes(t, u.euB.key, { 'X-Tenant-Id': u.eu.tenantId })).toEqual(['b-eu']);
  });

  it('the system administrator sees every tenant, or one tenant with X-Tenant-Id', async () => {
    const admin = (await t.http('GET', '/example/notes')).body.items as { text: string }[];
    expect(admin.map((n) => n.text)).toEqual(['a-eu', 'a-us', 'b-eu']);
    const onlyA = await t.http('GET', '/example/notes', { headers: { 'X-Tenant-Id': u.eu.tenantId } });
    expect((onlyA.body.items as { text: string }[]).map((n) => n.text)).toEqual(['a-eu', 'a-us']);
  });

  it('with MULTI_TENANT_ENABLED=false tenant filtering is off (attribute rules still apply)', async () => {
    expect(await notes(flat, uFlat.euB.key)).toEqual(['a-eu', 'b-eu']);
    expect(await notes(flat, uFlat.us.key)).toEqual(['a-us']);
    expectDenied(await flat.http('GET', '/example/notes', { key: uFlat.none.key }), { attribute: 'region' });
  });
});
