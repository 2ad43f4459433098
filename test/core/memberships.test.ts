/**
 * One person in several tenants: each users document is a membership with its own keys; a
 * credential acts in exactly its membership's tenant (API key, bearer token, passkey), REST,
 * GraphQL and an SSE stream alike; a passkey login of a person with several memberships names the
 * tenant with X-Tenant-Id (409 TENANT_REQUIRED otherwise, 401 for a tenant the person is no member
 * of); removing a membership ends its keys, tokens and open streams within AUTH_CACHE_TTL_MS on
 * another replica; GET /auth/me lists the memberships; the start-up migration gives every existing
 * user a person of its own, idempotently and from two processes at once.
 */
import { SignJWT } from 'jose';
import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, TEST_SECRETS, buildTestApp, createTenantUser, expectError, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { addMembership } from '../helpers/memberships.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';
import { SoftAuthenticator } from '../webauthn/authenticator.ts';
import { PASSKEY_CONFIG, loginWith, registerPasskey } from '../webauthn/helpers.ts';
import { eventStream, until } from '../realtime/helpers.ts';
import { migratePeople } from '../../plugins/identity/memberships.ts';
import { identityModels } from '../../plugins/identity/model.ts';

const TTL = 500;
const config = { ...PASSKEY_CONFIG, SAMPLE_RESOURCES_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', AUTH_CACHE_TTL_MS: String(TTL), EVENTS_POLL_INTERVAL_MS: '100' };
const plugins = [resourcesPlugin, resourceEventsPlugin, webauthnPlugin];
const uri = uniqueDbUri();
let a: TestApp;
let b: TestApp;
type Member = { tenantId: string; userId: string; key: string; keyId: string };
let inA: Member & { email: string };
let inB: Member;
let stranger: Member;
const passkey = new SoftAuthenticator();

beforeAll(async () => {
  a = await buildTestApp({ plugins, config: { ...config, MONGODB_URI: uri } });
  b = await buildTestApp({ plugins, config: { ...config, MONGODB_URI: uri } });
  const email = `person-${Date.now()}@example.com`;
  inA = { ...(await createTenantUser(a, { email, features: ['memos'] })), email };
  inB = await addMembership(a, inA.userId, { features: ['memos'], roles: ['admin'] });
  // Another administrator of B, so removing this person's membership there is allowed.
  await createTenantUser(a, { tenantId: inB.tenantId, roles: ['admin'] });
  stranger = await createTenantUser(a, { features: ['memos'] });
  expect((await registerPasskey(a, inA.key, passkey)).status).toBe(201);
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const memoTitles = async (opts: { key?: string; token?: string; headers?: Record<string, string> }) => {
  const res = await a.http('GET', '/memos?per_page=100', { key: opts.key ?? null, ...(opts.token ? { token: opts.token } : {}), headers: opts.headers ?? {} });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body.items as { title: string; tenant_id: string }[]).map((m) => m.title).sort();
};
const gqlTitles = async (opts: { key?: string; token?: string }) => {
  const res = await a.gql('{ memos(per_page: 100) { items { title } } }', {}, { key: opts.key ?? null, ...(opts.token ? { token: opts.token } : {}) });
  expect(res.body.errors).toBeUndefined();
  return (res.body.data!.memos.items as { title: string }[]).map((m) => m.title).sort();
};
const tokenOf = async (res: { status: number; body: any }) => {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.token as string;
};

describe('a person with two memberships', () => {
  beforeAll(async () => {
    for (const [key, title] of [[inA.key, 'memo-A'], [inB.key, 'memo-B'], [stranger.key, 'memo-stranger']] as const)
      expect((await a.http('POST', '/memos', { key, json: { title } })).status).toBe(201);
  });

  it('GET /auth/me and GraphQL myMemberships list both memberships, only the own person\'s', async () => {
    const me = await a.http('GET', '/auth/me', { key: inB.key });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: inB.userId, tenant_id: inB.tenantId, roles: ['admin'] });
    const listed = (me.body.memberships as { user_id: string; tenant_id: string; roles: string[] }[]).map((m) => [m.user_id, m.tenant_id, m.roles]);
    expect(listed).toEqual([[inA.userId, inA.tenantId, ['user']], [inB.userId, inB.tenantId, ['admin']]]);
    expect(me.body.memberships[0].tenant_name).toEqual(expect.any(String));
    const g = await a.gql('{ myMemberships { user_id tenant_id tenant_name roles features } }', {}, { key: inA.key });
    expect(g.body.data!.myMemberships.map((m: { tenant_id: string }) => m.tenant_id)).toEqual([inA.tenantId, inB.tenantId]);
    const other = await a.http('GET', '/auth/me', { key: stranger.key });
    expect(other.body.memberships).toEqual([expect.objectContaining({ user_id: stranger.userId, tenant_id: stranger.tenantId })]);
  });

  it('each API key acts only in its membership\'s tenant (REST, GraphQL), X-Tenant-Id of the other membership included', async () => {
    expect(await memoTitles({ key: inA.key })).toEqual(['memo-A']);
    expect(await memoTitles({ key: inB.key })).toEqual(['memo-B']);
    expect(await memoTitles({ key: inA.key, headers: { 'X-Tenant-Id': inB.tenantId } })).toEqual(['memo-A']);
    expect(await gqlTitles({ key: inA.key })).toEqual(['memo-A']);
    expect(await gqlTitles({ key: inB.key })).toEqual(['memo-B']);
    // Tenant B's administrator (this person) administers nothing of tenant A.
    expect((await a.http('PATCH', `/admin/users/${inA.userId}`, { key: inB.key, json: { name: 'x' } })).status).toBe(404);
  });

  it('a bearer token acts in the tenant it names; one naming another tenant than its user\'s is refused', async () => {
    const tokenB = await tokenOf(await a.http('POST', '/auth/token', { key: inB.key }));
    expect(await memoTitles({ token: tokenB })).toEqual(['memo-B']);
    expect(await gqlTitles({ token: tokenB })).toEqual(['memo-B']);
    const secret = new TextEncoder().encode(TEST_SECRETS.TOKEN_SECRET);
    const forge = (claims: { sub: string; tid: string; cid: string }) =>
      new SignJWT({ tid: claims.tid, cid: claims.cid }).setProtectedHeader({ alg: 'HS256' }).setSubject(claims.sub).setIssuedAt().setExpirationTime('5m').sign(secret);
    // Correctly signed, but the tenant is not the membership's: never widened or switched.
    const wrongTenant = await forge({ sub: inA.userId, tid: inB.tenantId, cid: `api_key:${inA.keyId}` });
    expectError(await a.http('GET', '/auth/me', { key: null, token: wrongTenant }), 401, 'AUTH_REQUIRED');
    // A passkey's token may name any membership of the passkey's person, never another person's user.
    const pk = await a.app.db.conn.collection('webauthn_credentials').findOne({ credential_id: passkey.id });
    const otherPerson = await forge({ sub: stranger.userId, tid: stranger.tenantId, cid: `passkey:${String(pk!._id)}` });
    expectError(await a.http('GET', '/auth/me', { key: null, token: otherPerson }), 401, 'AUTH_REQUIRED');
    const sibling = await forge({ sub: inB.userId, tid: inB.tenantId, cid: `passkey:${String(pk!._id)}` });
    expect((await a.http('GET', '/auth/me', { key: null, token: sibling })).body.tenant_id).toBe(inB.tenantId);
  });

  it('a passkey login asks which tenant (409 TENANT_REQUIRED after a verified assertion), takes X-Tenant-Id among the memberships, refuses any other', async () => {
    const ask = expectError(await loginWith(a, inA.email, passkey), 409, 'TENANT_REQUIRED');
    expect((ask.details.tenants as { id: string }[]).map((x) => x.id).sort()).toEqual([inA.tenantId, inB.tenantId].sort());
    // A wrong passkey learns nothing about the person's tenants.
    expectError(await loginWith(a, inA.email, new SoftAuthenticator()), 401, 'AUTH_REQUIRED');

    const tokenB = await tokenOf(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': inB.tenantId }));
    const me = await a.http('GET', '/auth/me', { key: null, token: tokenB });
    expect(me.body).toMatchObject({ id: inB.userId, tenant_id: inB.tenantId });
    expect(await memoTitles({ token: tokenB })).toEqual(['memo-B']);
    expect(await gqlTitles({ token: tokenB })).toEqual(['memo-B']);
    const tokenA = await tokenOf(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': inA.tenantId }));
    expect(await memoTitles({ token: tokenA })).toEqual(['memo-A']);

    // A tenant the person is no member of: refused like an unknown passkey (no tenant enumeration).
    expectError(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': stranger.tenantId }), 401, 'AUTH_REQUIRED');
    expectError(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': new Types.ObjectId().toHexString() }), 401, 'AUTH_REQUIRED');
    const opts = await a.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email: inA.email } });
    expectError(await a.http('POST', '/auth/webauthn/authenticate', { key: null, headers: { 'X-Tenant-Id': 'nope' }, json: { email: inA.email, ...passkey.getAssertion(opts.body.challenge) } }), 400, 'BAD_REQUEST');
    // GraphQL passkeyLogin: the same refusal with its tenants, and tenant_id naming one.
    const gqlLogin = async (tenant?: string) => {
      const o = await a.gql('mutation($e: String!) { passkeyLoginOptions(email: $e) }', { e: inA.email }, { key: null });
      return a.gql('mutation($i: JSON!, $t: String) { passkeyLogin(input: $i, tenant_id: $t) { token } }', { i: { email: inA.email, ...passkey.getAssertion(o.body.data!.passkeyLoginOptions.challenge) }, t: tenant ?? null }, { key: null });
    };
    const gAsk = await gqlLogin();
    expect(gAsk.body.errors?.[0]?.extensions).toMatchObject({ code: 'TENANT_REQUIRED', details: { tenants: expect.arrayContaining([expect.objectContaining({ id: inB.tenantId })]) } });
    const gB = await gqlLogin(inB.tenantId);
    expect((await a.http('GET', '/auth/me', { key: null, token: gB.body.data!.passkeyLogin.token })).body.tenant_id).toBe(inB.tenantId);
    // The passkey is the person's: listed from either membership.
    const listed = await a.http('GET', '/auth/webauthn/credentials', { key: inB.key });
    expect(listed.body.map((c: { credential_id: string }) => c.credential_id)).toEqual([passkey.id]);
  });

  it('an SSE stream of a membership carries only its tenant\'s events', async () => {
    const tokenB = await tokenOf(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': inB.tenantId }));
    const s = await eventStream(a.url, { token: tokenB, query: 'types=memos.created' });
    expect(s.status).toBe(200);
    try {
      await a.http('POST', '/memos', { key: inA.key, json: { title: 'stream-A' } });
      await a.http('POST', '/memos', { key: inB.key, json: { title: 'stream-B' } });
      await until(() => s.data('memos.created').some((e) => e.data.title === 'stream-B'), 20_000, 'the B event');
      expect(s.data('memos.created').map((e) => e.tenant_id)).toEqual(s.data('memos.created').map(() => inB.tenantId));
      expect(JSON.stringify(s.events)).not.toContain('stream-A');
    } finally {
      s.close();
    }
  });

  it('removing membership B on another replica ends its key, its tokens and its open stream within AUTH_CACHE_TTL_MS; membership A stays', async () => {
    const passkeyB = await tokenOf(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': inB.tenantId }));
    const keyToken = await tokenOf(await a.http('POST', '/auth/token', { key: inB.key }));
    const passkeyA = await tokenOf(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': inA.tenantId }));
    // Warm replica a's credential cache, so only the TTL (not this process's own invalidation) ends them.
    for (const auth of [{ key: inB.key }, { key: null, token: passkeyB }, { key: null, token: keyToken }]) expect((await a.http('GET', '/auth/me', auth)).status).toBe(200);
    const s = await eventStream(a.url, { token: passkeyB, query: 'types=memos.created' });
    expect(s.status).toBe(200);

    expect((await b.http('DELETE', `/admin/users/${inB.userId}`, { key: ADMIN_KEY })).status).toBe(204);
    // Bound: the TTL plus generous room for a busy machine; the point is that they end at all.
    await until(async () => (await a.http('GET', '/auth/me', { key: inB.key })).status === 401, 20 * TTL, 'the key refused');
    await until(async () => (await a.http('GET', '/auth/me', { key: null, token: passkeyB })).status === 401, 20 * TTL, 'the passkey token refused');
    await until(async () => (await a.http('GET', '/auth/me', { key: null, token: keyToken })).status === 401, 20 * TTL, 'the key token refused');
    await until(() => s.ended, 20 * TTL, 'the stream ended');
    expect(JSON.parse(s.events.filter((e) => e.event === 'error').at(-1)!.data).error.code).toBe('AUTH_REQUIRED');

    expect(await memoTitles({ key: inA.key })).toEqual(['memo-A', 'stream-A']);
    expect(await memoTitles({ token: passkeyA })).toEqual(['memo-A', 'stream-A']);
    // One membership left: the passkey logs in to it without naming a tenant; B's tenant is refused.
    const only = await tokenOf(await loginWith(a, inA.email, passkey));
    expect((await a.http('GET', '/auth/me', { key: null, token: only })).body).toMatchObject({ id: inA.userId, memberships: [expect.objectContaining({ tenant_id: inA.tenantId })] });
    expectError(await loginWith(a, inA.email, passkey, {}, { 'X-Tenant-Id': inB.tenantId }), 401, 'AUTH_REQUIRED');
  });
});

describe("a passkey outlives the membership it was registered from", () => {
  it('removing that membership passes the passkey to the person\'s other membership, which it then logs in to', async () => {
    const email = `rehome-${Date.now()}@example.com`;
    const first = await createTenantUser(a, { email });
    const second = await addMembership(a, first.userId);
    const device = new SoftAuthenticator();
    expect((await registerPasskey(a, first.key, device)).status).toBe(201);
    expect((await b.http('DELETE', `/admin/users/${first.userId}`, { key: ADMIN_KEY })).status).toBe(204);
    const creds = a.app.db.conn.collection('webauthn_credentials');
    // The durable consumer of user.deleted moves it (within the event poll interval; generous bound).
    await until(async () => String((await creds.findOne({ credential_id: device.id }))?.user_id) === second.userId, 20_000, 'the passkey moved');
    const token = await tokenOf(await loginWith(a, email, device));
    expect((await a.http('GET', '/auth/me', { key: null, token })).body).toMatchObject({ id: second.userId, tenant_id: second.tenantId });
    const listed = await a.http('GET', '/auth/webauthn/credentials', { key: second.key });
    expect(listed.body.map((c: { credential_id: string }) => c.credential_id)).toEqual([device.id]);
  });
});

describe('start-up migration: every existing user becomes the membership of a person of its own', () => {
  it('idempotent, from two processes starting at once, never merging by e-mail', async () => {
    const db = uniqueDbUri();
    const first = await buildTestApp({ config: { MONGODB_URI: db, RATE_LIMIT_ENABLED: 'false' } });
    const users = first.app.db.conn.collection('users');
    const tenant = new Types.ObjectId();
    // Users as an earlier version wrote them (no person_id), two of them with one e-mail in two tenants.
    const legacy = Array.from({ length: 30 }, (_, i) => ({
      _id: new Types.ObjectId(), email: i < 2 ? 'same@example.com' : `legacy-${i}@example.com`, name: `L${i}`,
      tenant_id: i === 1 ? new Types.ObjectId() : tenant, roles: ['user'], features: [], attributes: {}, is_active: true, is_deleted: false,
    }));
    await users.insertMany(legacy);
    await first.close();

    const [p1, p2] = await Promise.all([0, 1].map(() => buildTestApp({ config: { MONGODB_URI: db, RATE_LIMIT_ENABLED: 'false' } })));
    try {
      const after = await p1!.app.db.conn.collection('users').find({ _id: { $in: legacy.map((u) => u._id) } }).toArray();
      expect(after.map((u) => String(u.person_id))).toEqual(legacy.map((u) => String(u._id)));
      const people = p1!.app.db.conn.collection('people');
      expect(await people.countDocuments({ _id: { $in: legacy.map((u) => u._id) } })).toBe(30);
      // The person holds no copy of the e-mail or name: those stay the membership's.
      expect(Object.keys((await people.findOne({ _id: legacy[5]!._id }))!).sort()).toEqual(['_id', 'created_at', 'updated_at']);
      // Once more, in both processes together: nothing left to do, nothing changed.
      const models = identityModels(p2!.app.db.conn);
      expect(await Promise.all([migratePeople(models, p2!.app.log), migratePeople(identityModels(p1!.app.db.conn), p1!.app.log)])).toEqual([0, 0]);
      expect(await people.countDocuments()).toBe(await p1!.app.db.conn.collection('users').countDocuments());
      // The same e-mail in two tenants stays two people.
      const same = await p1!.http('GET', '/auth/me', { key: ADMIN_KEY });
      expect(same.status).toBe(200);
      expect(new Set(after.filter((u) => u.email === 'same@example.com').map((u) => String(u.person_id))).size).toBe(2);
    } finally {
      await Promise.all([p1?.close(), p2?.close()]);
    }
  });
});
