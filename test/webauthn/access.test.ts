/**
 * Who sees and removes which passkeys (REST and GraphQL, across users and tenants), logins with
 * one email in two tenants, the failed-auth limiter, personal-data declaration, GraphQL schema.
 */
import { printType, type GraphQLObjectType } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { SoftAuthenticator } from './authenticator.ts';
import { PASSKEY_CONFIG, loginWith, registerPasskey } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';
import { OUTBOX_FIELD } from '../../plugins/events/public/outbox.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [webauthnPlugin], config: PASSKEY_CONFIG });
});
afterAll(() => t?.close());

const creds = () => t.app.db.conn.collection('webauthn_credentials');
const PASSKEYS = 'credential_id device_name registered_at last_used_at';

async function userWithPasskey(opts: { tenantId?: string; email?: string; roles?: ('user' | 'admin')[] } = {}) {
  const email = opts.email ?? `acc-${Math.random().toString(36).slice(2)}@example.com`;
  const u = await createTenantUser(t, { ...opts, email });
  const a = new SoftAuthenticator();
  expect((await registerPasskey(t, u.key, a)).status).toBe(201);
  return { ...u, email, a };
}

describe('isolation', () => {
  let alice: Awaited<ReturnType<typeof userWithPasskey>>;
  let bob: Awaited<ReturnType<typeof userWithPasskey>>;
  let adminT1: Awaited<ReturnType<typeof createTenantUser>>;
  let carol: Awaited<ReturnType<typeof userWithPasskey>>;
  let adminT2: Awaited<ReturnType<typeof createTenantUser>>;

  beforeAll(async () => {
    alice = await userWithPasskey();
    bob = await userWithPasskey({ tenantId: alice.tenantId });
    adminT1 = await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'] });
    carol = await userWithPasskey();
    // T2's administrator is T1's administrator's second membership: one person, two tenants.
    adminT2 = await addMembership(t, adminT1.userId, { tenantId: carol.tenantId, roles: ['admin'] });
  });

  it('REST list shows only the caller’s own passkeys (same tenant, other tenant, tenant admin)', async () => {
    for (const [u, own] of [[alice, [alice.a.id]], [bob, [bob.a.id]], [carol, [carol.a.id]], [adminT1, []]] as const) {
      const r = await t.http('GET', '/auth/webauthn/credentials', { key: u.key });
      expect(r.status).toBe(200);
      expect(r.body.map((c: { credential_id: string }) => c.credential_id)).toEqual(own);
      expect(Object.keys(r.body[0] ?? { credential_id: 1, device_name: 1, registered_at: 1, last_used_at: 1 }).sort()).toEqual(['credential_id', 'device_name', 'last_used_at', 'registered_at']);
    }
  });

  it('REST delete of anyone else’s passkey is 404 and deletes nothing (same tenant, other tenant, admins)', async () => {
    for (const key of [bob.key, carol.key, adminT1.key, adminT2.key, ADMIN_KEY]) {
      expectError(await t.http('DELETE', `/auth/webauthn/credentials/${alice.a.id}`, { key }), 404, 'NOT_FOUND');
    }
    expect(await creds().countDocuments({ credential_id: alice.a.id })).toBe(1);
    expectError(await t.http('DELETE', `/auth/webauthn/credentials/${alice.a.id}`, { key: null }), 401, 'AUTH_REQUIRED');
    expectError(await t.http('GET', '/auth/webauthn/credentials', { key: null }), 401, 'AUTH_REQUIRED');
  });

  it('GraphQL me.passkeys is the caller’s own', async () => {
    for (const u of [alice, carol]) {
      const r = await t.gql(`{ me { id passkeys { ${PASSKEYS} } } }`, {}, { key: u.key });
      expect(r.body.errors).toBeUndefined();
      expect(r.body.data.me.passkeys).toEqual([{ credential_id: u.a.id, device_name: 'soft ES256', registered_at: expect.any(String), last_used_at: null }]);
    }
  });

  it('GraphQL deletePasskey of anyone else’s is NOT_FOUND; one’s own is removed', async () => {
    const q = 'mutation($id: String!) { deletePasskey(credential_id: $id) }';
    // Same tenant, other tenant, tenant admin, other tenant's admin, system administrator.
    for (const key of [bob.key, carol.key, adminT1.key, adminT2.key, ADMIN_KEY]) {
      const r = await t.gql(q, { id: alice.a.id }, { key });
      expect(r.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      expect(r.body.data ?? null).toBeNull();
    }
    expect(await creds().countDocuments({ credential_id: alice.a.id })).toBe(1);
    const bad = await t.gql(q, { id: 'not base64url!' }, { key: alice.key });
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const extra = await userWithPasskey({ tenantId: alice.tenantId });
    const r = await t.gql(q, { id: extra.a.id }, { key: extra.key });
    expect(r.body).toEqual({ data: { deletePasskey: true } });
    expect(await creds().countDocuments({ credential_id: extra.a.id })).toBe(0);
  });

  it('register/options excludeCredentials lists exactly the caller’s own passkeys (not same-tenant or other-tenant users’)', async () => {
    const email = `excl-${Math.random().toString(36).slice(2)}@example.com`;
    const a = await userWithPasskey({ email });
    const second = new SoftAuthenticator('RS256');
    expect((await registerPasskey(t, a.key, second)).status).toBe(201);
    // A colleague in the same tenant, and a user with the same email in another tenant.
    const colleague = await userWithPasskey({ tenantId: a.tenantId });
    const namesake = await userWithPasskey({ email });
    const ids = (r: { body: { excludeCredentials: { id: string }[] } }) => r.body.excludeCredentials.map((c) => c.id).sort();
    const mine = await t.http('POST', '/auth/webauthn/register/options', { key: a.key });
    expect(mine.status).toBe(200);
    expect(ids(mine)).toEqual([a.a.id, second.id].sort());
    expect(ids(await t.http('POST', '/auth/webauthn/register/options', { key: colleague.key }))).toEqual([colleague.a.id]);
    expect(ids(await t.http('POST', '/auth/webauthn/register/options', { key: namesake.key }))).toEqual([namesake.a.id]);
  });

  it('an admin lists a user’s passkeys in their own tenant only; users cannot', async () => {
    const q = `query($u: String!) { userPasskeys(user_id: $u) { ${PASSKEYS} } }`;
    const own = await t.gql(q, { u: alice.userId }, { key: adminT1.key });
    expect(own.body.data.userPasskeys.map((c: { credential_id: string }) => c.credential_id)).toEqual([alice.a.id]);
    const other = await t.gql(q, { u: alice.userId }, { key: adminT2.key });
    expect(other.body.data.userPasskeys).toEqual([]);
    const sys = await t.gql(q, { u: carol.userId }, { key: ADMIN_KEY });
    expect(sys.body.data.userPasskeys).toHaveLength(1);
    const user = await t.gql(q, { u: alice.userId }, { key: bob.key });
    expect(user.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    const bad = await t.gql(q, { u: 'nope' }, { key: adminT1.key });
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
  });

  it('over GraphQL: an anonymous caller gets AUTH_REQUIRED on userPasskeys and on passkey registration; the login fields stay public', async () => {
    const q = `query($u: String!) { userPasskeys(user_id: $u) { ${PASSKEYS} } }`;
    const anon = await t.gql(q, { u: alice.userId }, { key: null });
    expect(anon.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    expect(anon.body.data).toBeNull();
    const denied = await t.gql(q, { u: alice.userId }, { key: bob.key });
    expect(denied.body.errors?.[0]).toMatchObject({ message: 'Administrator role required', extensions: { code: 'ACCESS_DENIED' } });
    expect((await t.gql('mutation { deletePasskey(credential_id: "x") }', {}, { key: null })).body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    const options = await t.gql('mutation($e: String!) { passkeyLoginOptions(email: $e) }', { e: 'nobody@example.com' }, { key: null });
    expect(options.body.errors).toBeUndefined();
    expect(typeof options.body.data.passkeyLoginOptions.challenge).toBe('string');
  });

  it('users { passkeys }: a tenant admin sees their tenant’s users’ passkeys; nothing crosses tenants', async () => {
    const r = await t.gql(`{ users(per_page: 500) { id tenant_id passkeys { credential_id } } }`, {}, { key: adminT2.key });
    expect(r.body.errors).toBeUndefined();
    const users = r.body.data.users as { id: string; tenant_id: string; passkeys: { credential_id: string }[] }[];
    expect(users.every((u) => u.tenant_id === carol.tenantId)).toBe(true);
    expect(users.flatMap((u) => u.passkeys.map((p) => p.credential_id))).toEqual([carol.a.id]);
  });
});

describe('one email in two tenants', () => {
  it('options offer both users’ passkeys; the login is settled by the credential presented', async () => {
    const email = `shared-${Date.now()}@example.com`;
    const t1 = await userWithPasskey({ email });
    const t2 = await userWithPasskey({ email });
    const opts = await t.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email } });
    expect(opts.body.allowCredentials.map((c: { id: string }) => c.id).sort()).toEqual([t1.a.id, t2.a.id].sort());
    for (const u of [t1, t2]) {
      const r = await loginWith(t, email, u.a);
      expect(r.status).toBe(200);
      const me = await t.http('GET', '/auth/me', { token: r.body.token });
      expect({ id: me.body.id, tenant_id: me.body.tenant_id }).toEqual({ id: u.userId, tenant_id: u.tenantId });
    }
  });
});

describe('one email in two tenants: the credential names the account', () => {
  it('the sign-in reads the user by the credential’s id, then its person\'s memberships, never by the email across tenants', async () => {
    const email = `by-cred-${Date.now()}@example.com`;
    const t1 = await userWithPasskey({ email });
    const t2 = await userWithPasskey({ email });
    const seen: { filter: Record<string, unknown> }[] = [];
    // The event log's outbox sweep also reads users (by `_outbox`, every second, outside any request):
    // on a loaded machine one of its reads can fall inside the sign-in's window. It is not the sign-in's.
    const onCommand = (e: { commandName: string; command: Record<string, any> }) => {
      if (e.commandName === 'find' && e.command.find === 'users' && !(OUTBOX_FIELD in (e.command.filter ?? {}))) seen.push({ filter: e.command.filter ?? {} });
    };
    const client = t.app.db.conn.getClient();
    const opts = await t.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email } });
    expect(opts.status).toBe(200);
    client.on('commandStarted', onCommand);
    let r;
    try {
      r = await t.http('POST', '/auth/webauthn/authenticate', { key: null, json: { email, ...t2.a.getAssertion(opts.body.challenge) } });
    } finally {
      client.off('commandStarted', onCommand);
    }
    expect(r.status).toBe(200);
    const me = await t.http('GET', '/auth/me', { token: r.body.token });
    expect({ id: me.body.id, tenant_id: me.body.tenant_id }).toEqual({ id: t2.userId, tenant_id: t2.tenantId });
    expect(seen.length).toBeGreaterThan(0);
    // By the credential's user id, then by that user's person (its memberships): never by the email alone.
    for (const { filter } of seen) expect(Object.keys(filter).some((k) => k === '_id' || k === '$or')).toBe(true);
    for (const { filter } of seen) if (filter.$or) expect(JSON.stringify(filter.$or)).toContain('person_id');
    expect(t1.userId).not.toBe(t2.userId);
  });

  it('a credential presented with an email that is not its account’s is refused like a wrong signature', async () => {
    const email = `mismatch-${Date.now()}@example.com`;
    const owner = await userWithPasskey();
    await createTenantUser(t, { email });
    const opts = await t.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email } });
    const r = await t.http('POST', '/auth/webauthn/authenticate', { key: null, json: { email, ...owner.a.getAssertion(opts.body.challenge) } });
    expectError(r, 401, 'AUTH_REQUIRED');
    expect(r.body.error).toEqual({ code: 'AUTH_REQUIRED', message: 'Passkey login failed', details: {} });
  });

  it('an unknown email gets the answers a known one gets: options of the same shape, then the same 401', async () => {
    const known = await userWithPasskey();
    const unknown = `nobody-${Date.now()}@example.com`;
    const [k, u] = await Promise.all([known.email, unknown].map((email) => t.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email } })));
    expect(u!.status).toBe(k!.status);
    expect(Object.keys(u!.body).sort()).toEqual(Object.keys(k!.body).sort());
    const shape = (o: any) => ({
      rpId: o.rpId, userVerification: o.userVerification, timeout: o.timeout, challenge: /^[A-Za-z0-9_-]{43}$/.test(o.challenge),
      allow: o.allowCredentials.map((c: any) => ({ keys: Object.keys(c).sort(), type: c.type, transports: c.transports, id: /^[A-Za-z0-9_-]{43}$/.test(c.id) })),
    });
    expect(shape(u!.body)).toEqual(shape(k!.body));
    // The login that follows: an unknown email, and a known one with a credential that is not its own.
    const stranger = new SoftAuthenticator();
    const fail = async (email: string, challenge: string) =>
      t.http('POST', '/auth/webauthn/authenticate', { key: null, json: { email, ...stranger.getAssertion(challenge) } });
    const ru = await fail(unknown, u!.body.challenge);
    const rk = await fail(known.email, k!.body.challenge);
    expect(ru.status).toBe(rk.status);
    expect(ru.body.error).toEqual(rk.body.error);
    expect(Object.keys(ru.body).sort()).toEqual(Object.keys(rk.body).sort());
  });
});

describe('personal data and schema', () => {
  it('declares the credentials as personal data: linked by user_id, deleted on erasure, keys not exported', () => {
    const decl = t.app.kernel.personalData().find((d) => d.name === 'passkeys');
    expect(decl).toEqual({
      name: 'passkeys', plugin: 'webauthn', model: 'WebAuthnCredential', subject_field: 'user_id', gdpr_fields: ['device_name'],
      on_erasure: 'delete', export_exclude: ['public_key', 'attestation_object'],
    });
    expect(t.app.db.conn.models[decl!.model]).toBeDefined();
  });

  it('the GraphQL schema pieces', () => {
    const s = t.app.schema;
    expect(printType(s.getType('Passkey')!)).toMatchSnapshot();
    const user = (s.getType('User') as GraphQLObjectType).getFields().passkeys!;
    expect(String(user.type)).toBe('[Passkey!]!');
    const q = s.getQueryType()!.getFields().userPasskeys!;
    expect(q.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['user_id: String!']);
    expect(String(q.type)).toBe('[Passkey!]!');
    const m = s.getMutationType()!.getFields().deletePasskey!;
    expect(m.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['credential_id: String!']);
    expect(String(m.type)).toBe('Boolean!');
  });
});

describe('failed-auth limiter', () => {
  let r: TestApp;
  beforeAll(async () => {
    r = await buildTestApp({ plugins: [webauthnPlugin], config: { ...PASSKEY_CONFIG, AUTH_FAILURE_LIMIT: '2', TRUST_PROXY: 'true' } });
  });
  afterAll(() => r?.close());

  const fail = (email: string, ip: string) =>
    loginWith(r, email, new SoftAuthenticator(), {}, { 'X-Forwarded-For': ip });

  it('counts failures by email: from any ip, the third failure answers 429 with Retry-After', async () => {
    const email = 'victim@example.com';
    expect((await fail(email, '10.0.0.1')).status).toBe(401);
    expect((await fail(email, '10.0.0.2')).status).toBe(401);
    const third = await fail(email, '10.0.0.3');
    expectError(third, 429, 'RATE_LIMITED');
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('counts failures by ip: across emails, the third failure answers 429', async () => {
    expect((await fail('a1@example.com', '10.0.1.1')).status).toBe(401);
    expect((await fail('a2@example.com', '10.0.1.1')).status).toBe(401);
    expectError(await fail('a3@example.com', '10.0.1.1'), 429, 'RATE_LIMITED');
  });

  it('a valid passkey still logs in (only failures are refused)', async () => {
    const email = 'locked@example.com';
    const u = await createTenantUser(r, { email });
    const a = new SoftAuthenticator();
    expect((await registerPasskey(r, u.key, a)).status).toBe(201);
    for (let i = 0; i < 3; i++) await fail(email, '10.0.2.1');
    expectError(await fail(email, '10.0.2.1'), 429, 'RATE_LIMITED');
    expect((await loginWith(r, email, a, {}, { 'X-Forwarded-For': '10.0.2.1' })).status).toBe(200);
  });
});
