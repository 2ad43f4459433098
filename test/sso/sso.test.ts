/**
 * OIDC sign-in per tenant, against a real OpenID provider started here (oidc-provider): the
 * redirect with PKCE, state and nonce; the callback verifying the ID token with openid-client;
 * just-in-time accounts, role mapping and its loss; every refusal with its reason and nothing
 * written but the attempt's record; the console's hand-over; providers' secrets never shown, and
 * providers kept per tenant on REST and GraphQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { ssoPlugin } from '../../plugins/sso/index.ts';
import { signInAtProvider, startProvider, startProviderProcess, type Account, type TestProvider } from './provider.ts';
import { addMembership } from '../helpers/memberships.ts';

type Doc = Record<string, any>;
let t: TestApp;
let op: TestProvider;
let a: { tenantId: string; key: string; userId: string };
let b: { tenantId: string; key: string };
const SECRET = 'client-secret-0123456789abcdef';
const accounts: Record<string, Account> = {
  alice: { sub: 'alice', email: 'alice@acme.test', email_verified: true, name: 'Alice Acme', groups: ['eng'] },
  bob: { sub: 'bob', email: 'bob@acme.test', email_verified: false, groups: ['eng'] },
  carol: { sub: 'carol', email: 'carol@other.test', email_verified: true, groups: ['eng'] },
  dave: { sub: 'dave', email: 'dave@acme.test', email_verified: true, groups: ['ops'] },
  erin: { sub: 'erin', email: 'erin@acme.test', email_verified: true, groups: [] },
};
const callback = (tenant: string, slug: string) => `${t.url}/auth/sso/${tenant}/${slug}/callback`;
const as = (tenant: { key: string }) => ({ key: tenant.key });

/** Starts a sign-in at our server and answers the provider's authorization URL. */
async function start(tenant: string, slug: string, query = ''): Promise<URL> {
  const res = await fetch(`${t.url}/auth/sso/${tenant}/${slug}/login${query}`, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location')!);
}
/** A whole sign-in: our redirect, the provider's form, our callback. */
async function signIn(tenant: string, slug: string, login: string): Promise<{ status: number; body: Doc; callbackUrl: URL }> {
  const back = await signInAtProvider((await start(tenant, slug)).href, login);
  const res = await t.http('GET', back.pathname + back.search, { key: null });
  return { status: res.status, body: res.body as Doc, callbackUrl: back };
}
const users = async (tenant: { key: string }) => ((await t.http('GET', '/admin/users?per_page=100', as(tenant))).body.items as Doc[]);
const provider = (tenant: { key: string }, json: Doc) => t.http('POST', '/admin/sso/providers', { ...as(tenant), json });

beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, ssoPlugin], config: { NODE_ENV: 'development', AUTH_CACHE_TTL_MS: '0' } });
  a = await createTenantUser(t, { roles: ['admin'] });
  // B's administrator is A's administrator's second membership: one person, two tenants.
  b = await addMembership(t, a.userId, { roles: ['admin'] });
  op = await startProvider({
    accounts: Object.values(accounts),
    clients: [
      { client_id: 'app', client_secret: SECRET, redirect_uris: ['acme', 'nojit', 'open', 'mapped'].flatMap((s) => [callback(a.tenantId, s), callback(b.tenantId, s)]) },
      { client_id: 'other', client_secret: SECRET, redirect_uris: [callback(a.tenantId, 'acme')] },
    ],
  });
  const base = { issuer: op.issuer, client_id: 'app', client_secret: SECRET, scopes: ['email', 'profile', 'groups'] };
  for (const [json, tenant] of [
    [{ ...base, name: 'acme', allowed_domains: ['acme.test'], role_mapping: { eng: ['user'], admins: ['admin'] }, jit: true }, a],
    [{ ...base, name: 'nojit', jit: false }, a],
    [{ ...base, name: 'open', jit: true }, a],
  ] as const) expect((await provider(tenant, json)).status).toBe(201);
});
afterAll(async () => {
  await op?.close();
  await t?.close();
});

describe('providers', () => {
  it('never returns the client secret, on REST or GraphQL, and stores it encrypted', async () => {
    const list = await t.http('GET', '/admin/sso/providers', as(a));
    expect(list.status).toBe(200);
    expect(list.body.items.map((p: Doc) => p.name)).toEqual(['acme', 'nojit', 'open']);
    expect(JSON.stringify(list.body)).not.toContain(SECRET);
    expect(list.body.items[0]).toMatchObject({ issuer: op.issuer, client_id: 'app', jit: true, login_url: `/auth/sso/${a.tenantId}/acme/login`, role_mapping: { eng: ['user'] } });
    const g = await t.gql('{ ssoProviders { items { name issuer scopes } } }', {}, as(a));
    expect(g.body.data.ssoProviders.items).toHaveLength(3);
    expect(JSON.stringify(g.body)).not.toContain(SECRET);
    const stored = await t.app.db.conn.collection('sso_providers').findOne({ name: 'acme' });
    expect(JSON.stringify(stored)).not.toContain(SECRET);
    expect(stored!.client_secret_enc).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
  });

  it('keeps providers per tenant: another tenant\'s administrator cannot list, read, change or remove them (REST and GraphQL)', async () => {
    const mine = (await t.http('GET', '/admin/sso/providers', as(a))).body.items[0] as Doc;
    expect((await t.http('GET', '/admin/sso/providers', as(b))).body.items).toEqual([]);
    expectError(await t.http('GET', `/admin/sso/providers/${mine.id}`, as(b)), 404, 'NOT_FOUND');
    expectError(await t.http('PATCH', `/admin/sso/providers/${mine.id}`, { ...as(b), json: { jit: false } }), 404, 'NOT_FOUND');
    expectError(await t.http('DELETE', `/admin/sso/providers/${mine.id}`, as(b)), 404, 'NOT_FOUND');
    const g = await t.gql('query($id: ID!) { ssoProvider(id: $id) { name } }', { id: mine.id }, as(b));
    expect(g.body.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    const gd = await t.gql('mutation($id: ID!) { deleteSsoProvider(id: $id) }', { id: mine.id }, as(b));
    expect(gd.body.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    expect((await t.gql('{ ssoProviders { total } }', {}, as(b))).body.data.ssoProviders.total).toBe(0);
    // The sign-in URL of tenant A's provider under tenant B's id does not exist.
    expect((await fetch(`${t.url}/auth/sso/${b.tenantId}/acme/login`, { redirect: 'manual' })).status).toBe(404);
    expect((await t.http('GET', '/admin/sso/providers/', { key: (await createTenantUser(t, { tenantId: a.tenantId })).key })).status).toBe(403);
  });

  it('refuses bad input with the envelope and writes nothing', async () => {
    const before = await t.app.db.conn.collection('sso_providers').countDocuments();
    const bad = expectError(await provider(a, { issuer: 'not a url', client_id: '', client_secret: 'x' }), 422, 'VALIDATION_ERROR');
    expect((bad.details.errors as Doc[]).map((e) => e.loc.join('.'))).toEqual(expect.arrayContaining(['body.issuer', 'body.client_id', 'body.jit']));
    expectError(await provider(a, { issuer: op.issuer, client_id: 'app', client_secret: SECRET, jit: true, role_mapping: { eng: ['nope'] } }), 422, 'VALIDATION_ERROR');
    expectError(await provider(a, { issuer: op.issuer, client_id: 'app', client_secret: SECRET, jit: true, name: 'acme' }), 409, 'CONFLICT');
    expectError(await provider(a, { issuer: 'http://example.com', client_id: 'app', client_secret: SECRET, jit: true }), 422, 'VALIDATION_ERROR');
    const g = await t.gql('mutation { createSsoProvider(issuer: "ftp://x", client_id: "a", client_secret: "b", jit: true) { id } }', {}, as(a));
    expect(g.body.errors![0]!.extensions!.code).toBe('VALIDATION_ERROR');
    expect(await t.app.db.conn.collection('sso_providers').countDocuments()).toBe(before);
  });

  it('over GraphQL: anonymous callers get AUTH_REQUIRED, plain users ACCESS_DENIED, administrators are served; the sign-in screen is public', async () => {
    const plain = await createTenantUser(t, { tenantId: a.tenantId });
    const before = await t.app.db.conn.collection('sso_providers').countDocuments();
    const list = '{ ssoProviders { total items { name } } }';
    const create = 'mutation { createSsoProvider(issuer: "https://idp.example.com", client_id: "a", client_secret: "b", jit: true) { id } }';
    expect((await t.gql(list, {}, { key: null })).body.errors![0]!.extensions!.code).toBe('AUTH_REQUIRED');
    expect((await t.gql(create, {}, { key: null })).body.errors![0]!.extensions!.code).toBe('AUTH_REQUIRED');
    expect((await t.gql(list, {}, { key: plain.key })).body.errors![0]).toMatchObject({ message: 'Administrator role required', extensions: { code: 'ACCESS_DENIED' } });
    expect((await t.gql(create, {}, { key: plain.key })).body.errors![0]!.extensions!.code).toBe('ACCESS_DENIED');
    expect(await t.app.db.conn.collection('sso_providers').countDocuments()).toBe(before);
    const ok = await t.gql(list, {}, as(a));
    expect(ok.body.errors).toBeUndefined();
    expect(ok.body.data.ssoProviders.items.map((p: Doc) => p.name)).toContain('acme');
    const open = await t.gql('query($t: ID!) { ssoSignInOptions(tenant_id: $t) { name } }', { t: a.tenantId }, { key: null });
    expect(open.body.errors).toBeUndefined();
    expect(open.body.data.ssoSignInOptions.map((p: Doc) => p.name)).toContain('acme');
  });

  it('outside development, issuers must be https: a local http issuer is refused', async () => {
    const prod = await buildTestApp({ plugins: [ssoPlugin] });
    try {
      const res = await prod.http('POST', '/admin/sso/providers', { json: { issuer: op.issuer, client_id: 'app', client_secret: SECRET, jit: true } });
      const err = expectError(res, 422, 'VALIDATION_ERROR');
      expect((err.details.errors as Doc[])[0]).toMatchObject({ loc: ['body', 'issuer'], type: 'https_required' });
    } finally {
      await prod.close();
    }
  });
});

describe('signing in', () => {
  it('redirects with PKCE (S256), state and nonce, and signs a new person in just in time with the mapped roles', async () => {
    const auth = await start(a.tenantId, 'acme');
    expect(auth.origin).toBe(op.issuer);
    for (const p of ['state', 'nonce', 'code_challenge']) expect(auth.searchParams.get(p)).toMatch(/^[\w-]{32,}$/);
    expect(auth.searchParams.get('code_challenge_method')).toBe('S256');
    expect(auth.searchParams.get('redirect_uri')).toBe(callback(a.tenantId, 'acme'));
    const back = await signInAtProvider(auth.href, 'alice');
    const res = await t.http('GET', back.pathname + back.search, { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'Bearer', expires_in: expect.any(Number) });
    const me = await t.http('GET', '/auth/me', { token: res.body.token });
    expect(me.body).toMatchObject({ email: 'alice@acme.test', name: 'Alice Acme', tenant_id: a.tenantId, roles: ['user'] });
    expect((await users(a)).filter((u) => u.email === 'alice@acme.test')).toHaveLength(1);
    // The same person again: the same account, no second one.
    expect((await signIn(a.tenantId, 'acme', 'alice')).status).toBe(200);
    expect((await users(a)).filter((u) => u.email === 'alice@acme.test')).toHaveLength(1);
  });

  it('refuses a replayed state, on the second use of a callback', async () => {
    const first = await signIn(a.tenantId, 'open', 'alice');
    expect(first.status).toBe(200);
    const again = await t.http('GET', first.callbackUrl.pathname + first.callbackUrl.search, { key: null });
    expect(expectError(again, 401, 'AUTH_REQUIRED').details).toEqual({ reason: 'state_unknown' });
  });

  it('refuses an ID token whose nonce is not the sign-in\'s', async () => {
    const auth = await start(a.tenantId, 'open');
    auth.searchParams.set('nonce', 'a-nonce-of-another-sign-in-0123456789abcdef');
    const back = await signInAtProvider(auth.href, 'alice');
    expect(expectError(await t.http('GET', back.pathname + back.search, { key: null }), 401, 'AUTH_REQUIRED').details).toEqual({ reason: 'nonce_mismatch' });
  });

  it('refuses a code issued to another client (a foreign token) and writes no account', async () => {
    const auth = await start(a.tenantId, 'acme');
    auth.searchParams.set('client_id', 'other');
    const back = await signInAtProvider(auth.href, 'dave');
    const res = await t.http('GET', back.pathname + back.search, { key: null });
    expect(res.status).toBe(401);
    expect(['provider_error', 'id_token_invalid', 'audience_mismatch']).toContain(res.body.error.details.reason);
    expect((await users(a)).some((u) => u.email === 'dave@acme.test')).toBe(false);
  });

  it('refuses an unverified e-mail, a domain not allowed, and an unknown person without jit, creating nobody', async () => {
    const before = (await users(a)).length;
    expect((await signIn(a.tenantId, 'acme', 'bob')).body.error).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'email_unverified' } });
    expect((await signIn(a.tenantId, 'acme', 'carol')).body.error).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'domain_not_allowed' } });
    expect((await signIn(a.tenantId, 'nojit', 'dave')).body.error).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'no_account' } });
    expect((await users(a)).length).toBe(before);
  });

  it('takes Entra\'s xms_edov (domain owner verified) for a verified e-mail when email_verified is absent, never against email_verified: false', async () => {
    op.setAccount({ sub: 'fran', email: 'fran@acme.test', xms_edov: true, groups: ['eng'] });
    op.setAccount({ sub: 'gus', email: 'gus@acme.test', groups: ['eng'] });
    op.setAccount({ sub: 'hal', email: 'hal@acme.test', email_verified: false, xms_edov: true, groups: ['eng'] });
    const fran = await signIn(a.tenantId, 'acme', 'fran');
    expect(fran.status, JSON.stringify(fran.body)).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: fran.body.token as string })).body).toMatchObject({ email: 'fran@acme.test', tenant_id: a.tenantId });
    for (const who of ['gus', 'hal']) {
      expect((await signIn(a.tenantId, 'acme', who)).body.error, who).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'email_unverified' } });
      expect((await users(a)).some((u) => u.email === `${who}@acme.test`)).toBe(false);
    }
  });

  it('disables a person at their next sign-in once the mapping no longer grants them, and enables them when it does again', async () => {
    op.setAccount({ ...accounts.dave!, groups: ['eng'] });
    const first = await signIn(a.tenantId, 'acme', 'dave');
    expect(first.status).toBe(200);
    const token = first.body.token as string;
    expect((await t.http('GET', '/auth/me', { token })).status).toBe(200);

    op.setAccount({ ...accounts.dave!, groups: ['ops'] });
    expect((await signIn(a.tenantId, 'acme', 'dave')).body.error).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'not_granted' } });
    const dave = (await users(a)).find((u) => u.email === 'dave@acme.test')!;
    expect(dave.is_active).toBe(false);
    expect((await t.http('GET', '/auth/me', { token })).status).toBe(401);

    op.setAccount({ ...accounts.dave!, groups: ['admins'] });
    const back = await signIn(a.tenantId, 'acme', 'dave');
    expect(back.status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: back.body.token })).body).toMatchObject({ roles: ['admin'] });
  });

  it('refuses an ID token that has expired (a provider whose clock runs two hours behind)', async () => {
    const late = await startProviderProcess({
      accounts: Object.values(accounts), clockOffsetMs: -2 * 3_600_000,
      clients: [{ client_id: 'app', client_secret: SECRET, redirect_uris: [callback(b.tenantId, 'late')] }],
    });
    try {
      expect((await provider(b, { name: 'late', issuer: late.issuer, client_id: 'app', client_secret: SECRET, jit: true })).status).toBe(201);
      const res = await signIn(b.tenantId, 'late', 'alice');
      expect(res.status).toBe(401);
      expect(res.body.error.details.reason).toBe('token_expired');
      expect((await users(b)).some((u) => u.email === 'alice@acme.test')).toBe(false);
    } finally {
      await late.close();
    }
  });

  it('hands a console sign-in over with a one-time code in the fragment, exchanged once for a token', async () => {
    const auth = await start(a.tenantId, 'open', '?return_to=console');
    const back = await signInAtProvider(auth.href, 'alice');
    const res = await fetch(`${t.url}${back.pathname}${back.search}`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    const to = res.headers.get('location')!;
    expect(to).toMatch(/^\/admin#sso_code=[\w-]{43}$/);
    const code = to.slice(to.indexOf('=') + 1);
    const token = await t.http('POST', '/auth/sso/exchange', { key: null, json: { code } });
    expect(token.status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: token.body.token })).body.email).toBe('alice@acme.test');
    expect(expectError(await t.http('POST', '/auth/sso/exchange', { key: null, json: { code } }), 401, 'AUTH_REQUIRED').details).toEqual({ reason: 'state_unknown' });
  });

  it('audits sign-ins, refusals and provider changes, each an event on the log', async () => {
    const events = async (type: string) => ((await t.http('GET', `/events?type=${type}&limit=100`, as(a))).body.items as Doc[]);
    const signedIn = await events('sso.signed_in');
    expect(signedIn.length).toBeGreaterThan(0);
    expect(signedIn[0]!.data).toMatchObject({ outcome: 'succeeded', provider: expect.any(String), user_id: expect.any(String) });
    const refused = await events('sso.sign_in_refused');
    expect(refused.map((e) => e.data.reason)).toEqual(expect.arrayContaining(['state_unknown', 'email_unverified', 'domain_not_allowed', 'no_account', 'not_granted']));
    expect((await events('sso_provider.created')).map((e) => e.data.name)).toEqual(expect.arrayContaining(['acme', 'nojit', 'open']));
    expect(JSON.stringify(await events('sso_provider.created'))).not.toContain(SECRET);
    // Tenant B sees none of tenant A's.
    expect(((await t.http('GET', '/events?type=sso.signed_in', as(b))).body.items as Doc[]).every((e) => e.tenant_id !== a.tenantId)).toBe(true);
    const audit = await t.http('GET', '/admin/audit-log?resource=sso_sign_ins&per_page=200', as(a));
    expect(audit.body.items.length).toBe(signedIn.length + refused.length);
    const providerAudit = await t.http('GET', '/admin/audit-log?resource=sso_providers', as(a));
    expect(providerAudit.body.items.map((e: Doc) => e.operation)).toEqual(expect.arrayContaining(['insert']));
  });

  it('removing a provider ends its sign-in and the tokens its sign-ins issued', async () => {
    const res = await signIn(a.tenantId, 'open', 'alice');
    const token = res.body.token as string;
    expect((await t.http('GET', '/auth/me', { token })).status).toBe(200);
    const open = ((await t.http('GET', '/admin/sso/providers', as(a))).body.items as Doc[]).find((p) => p.name === 'open')!;
    expect((await t.http('DELETE', `/admin/sso/providers/${open.id}`, as(a))).status).toBe(204);
    expect((await t.http('GET', '/auth/me', { token })).status).toBe(401);
    expect((await fetch(`${t.url}/auth/sso/${a.tenantId}/open/login`, { redirect: 'manual' })).status).toBe(404);
    expect((await t.http('GET', '/events?type=sso_provider.deleted', as(a))).body.items).toHaveLength(1);
  });
});

