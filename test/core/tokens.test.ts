import { SignJWT, decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type HttpResult, type TestApp } from '../helpers/app.ts';

type Account = Awaited<ReturnType<typeof createTenantUser>>;

let t: TestApp;
let ann: Account;
let bob: Account;
beforeAll(async () => {
  // A long cache TTL: revocation in this process must not wait for the cache to expire.
  t = await buildTestApp({ config: { AUTH_CACHE_TTL_MS: '600000' } });
  ann = await createTenantUser(t);
  bob = await createTenantUser(t, { tenantId: ann.tenantId });
});
afterAll(() => t?.close());

const refused = (res: HttpResult<any>) => {
  expect(res.status).toBe(401);
  expect(envelope(res).code).toBe('AUTH_REQUIRED');
};
const mint = async (cred: { key: string } | { token: string }) => {
  const res = await t.http('POST', '/auth/token', 'key' in cred ? { key: cred.key } : { token: cred.token });
  expect(res.status).toBe(200);
  return res.body as { token: string; expires_in: number };
};
const newKey = async (userId: string) => {
  const k = await t.http('POST', '/admin/api-keys', { json: { user_id: userId, name: 'chain' } });
  expect(k.status).toBe(201);
  return { key: k.body.key as string, id: k.body.id as string };
};
const sign = (claims: Record<string, unknown>, sub: string, exp?: number) => {
  let jwt = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setSubject(sub).setIssuedAt();
  if (exp !== undefined) jwt = jwt.setExpirationTime(exp);
  return jwt.sign(new TextEncoder().encode(t.config.TOKEN_SECRET));
};
const inMinutes = (m: number) => Math.floor(Date.now() / 1000) + m * 60;

describe('a token is bound to the key that minted it', () => {
  it('carries the key id in its cid claim', async () => {
    const { token } = await mint({ key: ann.key });
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ sub: ann.userId, tid: ann.tenantId, cid: `api_key:${ann.keyId}` });
    expect(claims.exp! - claims.iat!).toBe(3600);
  });

  it('a token minted from a token keeps the root key and never outlives its parent', async () => {
    const parent = await mint({ key: ann.key });
    await new Promise((r) => setTimeout(r, 1100)); // the child is minted a second later: its own TTL would reach further
    const child = await mint({ token: parent.token });
    const p = decodeJwt(parent.token);
    const c = decodeJwt(child.token);
    expect(c.cid).toBe(`api_key:${ann.keyId}`);
    expect(c.exp).toBe(p.exp);
    expect(child.expires_in).toBeLessThan(3600);
    expect(child.expires_in).toBe(c.exp! - c.iat!);
    // And so on down the chain, also through GraphQL.
    const g = await t.gql('mutation { issueToken { token expires_in } }', undefined, { key: null, token: child.token });
    expect(decodeJwt(g.body.data.issueToken.token).exp).toBe(p.exp);
  });

  it('revoking the key ends every token of its chain at once, and the chain cannot be renewed', async () => {
    const k = await newKey(ann.userId);
    const first = await mint({ key: k.key });
    const second = await mint({ token: first.token });
    for (const token of [first.token, second.token]) expect((await t.http('GET', '/auth/me', { token })).status).toBe(200); // cached now
    expect((await t.http('DELETE', `/admin/api-keys/${k.id}`)).status).toBe(200);
    for (const token of [first.token, second.token]) {
      refused(await t.http('GET', '/auth/me', { token }));
      refused(await t.http('POST', '/auth/token', { token }));
      const g = await t.gql('mutation { issueToken { token } }', undefined, { key: null, token });
      expect(g.status).toBe(401);
    }
    // Other keys of the same user and their tokens are untouched.
    expect((await t.http('GET', '/auth/me', { token: (await mint({ key: ann.key })).token })).status).toBe(200);
  });

  it('another process sees the revocation within AUTH_CACHE_TTL_MS', async () => {
    const other = await buildTestApp({ config: { MONGODB_URI: t.app.db.uri, AUTH_CACHE_TTL_MS: '300' } });
    try {
      const k = await newKey(ann.userId);
      const { token } = await mint({ key: k.key });
      expect((await other.http('GET', '/auth/me', { token })).status).toBe(200);
      expect((await t.http('DELETE', `/admin/api-keys/${k.id}`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 400));
      const res = await other.http('GET', '/auth/me', { token });
      expect(res.status).toBe(401);
    } finally {
      await other.close();
    }
  });
});

describe('tokens that are not properly bound are refused', () => {
  it('a correctly signed token without cid (the old format) → 401', async () => {
    refused(await t.http('GET', '/auth/me', { token: await sign({ tid: ann.tenantId }, ann.userId, inMinutes(10)) }));
  });

  it('a token without exp → 401', async () => {
    refused(await t.http('GET', '/auth/me', { token: await sign({ cid: `api_key:${ann.keyId}` }, ann.userId) }));
  });

  it("a token naming another user's key → 401", async () => {
    refused(await t.http('GET', '/auth/me', { token: await sign({ cid: `api_key:${bob.keyId}` }, ann.userId, inMinutes(10)) }));
    // Also once bob's key is in the cache.
    expect((await t.http('GET', '/auth/me', { token: (await mint({ key: bob.key })).token })).status).toBe(200);
    refused(await t.http('GET', '/auth/me', { token: await sign({ cid: `api_key:${bob.keyId}` }, ann.userId, inMinutes(10)) }));
  });

  it.each(['session:abc', 'api_key:', 'api_key:not-an-id', 'nonsense', 42])('cid %j → 401', async (cid) => {
    refused(await t.http('GET', '/auth/me', { token: await sign({ cid }, ann.userId, inMinutes(10)) }));
  });
});

describe('/auth/me does not show the credential reference', () => {
  it('neither for keys nor tokens', async () => {
    for (const opts of [{ key: ann.key }, { token: (await mint({ key: ann.key })).token }]) {
      const me = await t.http('GET', '/auth/me', opts);
      expect(me.status).toBe(200);
      expect(me.body).not.toHaveProperty('credential');
    }
  });
});
