import { createHash } from 'node:crypto';
import { SignJWT, decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, envelope, uniqueDbUri, type HttpResult, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

function expectAuthRequired(res: HttpResult<any>, message?: string) {
  expect(res.status).toBe(401);
  const err = envelope(res);
  expect(err.code).toBe('AUTH_REQUIRED');
  if (message) expect(err.message).toBe(message);
}

// Bound to the test user's key, as issued tokens are (test/core/tokens.test.ts covers the binding).
const sign = (t: TestApp, sub: string, exp: number | string, secret = t.config.TOKEN_SECRET) =>
  new SignJWT({ tid: user.tenantId, cid: `api_key:${user.keyId}` }).setProtectedHeader({ alg: 'HS256' }).setSubject(sub).setIssuedAt(Math.floor(Date.now() / 1000) - 7200).setExpirationTime(exp).sign(new TextEncoder().encode(secret));

let t: TestApp;
let user: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  // A long cache TTL: revocation must not depend on the cache expiring.
  t = await buildTestApp({ plugins: [examplePlugin], config: { AUTH_CACHE_TTL_MS: '600000' } });
  user = await createTenantUser(t, { features: ['reports'], attributes: { region: 'eu' }, email: 'ann@example.com' });
});
afterAll(() => t?.close());

describe('X-API-Key', () => {
  it('a valid key → /auth/me with tenant, roles and features', async () => {
    const res = await t.http('GET', '/auth/me', { key: user.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: user.userId,
      email: 'ann@example.com',
      name: 'Test User',
      tenant_id: user.tenantId,
      roles: ['user'],
      scope: null,
      is_system_user: false,
      features: ['reports'],
      attributes: { region: 'eu' },
      memberships: [{ user_id: user.userId, tenant_id: user.tenantId, tenant_name: expect.any(String), roles: ['user'], features: ['reports'] }],
    });
  });

  it('an unknown key → 401 AUTH_REQUIRED', async () => {
    expectAuthRequired(await t.http('GET', '/auth/me', { key: 'ak_not-a-real-key' }), 'Invalid API key');
  });

  it('a revoked key is refused at once, although it is cached', async () => {
    const k = await createTenantUser(t, { tenantId: user.tenantId });
    expect((await t.http('GET', '/auth/me', { key: k.key })).status).toBe(200); // now cached
    const del = await t.http('DELETE', `/admin/api-keys/${k.keyId}`);
    expect(del.status).toBe(200);
    expect(del.body.id).toBe(k.keyId);
    expect(del.body.revoked_at).toEqual(expect.any(String));
    expect(del.body).not.toHaveProperty('key');
    expect(del.body).not.toHaveProperty('key_hash');
    expectAuthRequired(await t.http('GET', '/auth/me', { key: k.key }), 'Invalid API key');
    // Revoking twice: nothing left to revoke.
    const again = await t.http('DELETE', `/admin/api-keys/${k.keyId}`);
    expect(again.status).toBe(404);
    expect(envelope(again).code).toBe('NOT_FOUND');
  });

  it('requests that miss the credential cache together share one lookup (no stampede when an entry expires under load)', async () => {
    const k = await createTenantUser(t, { tenantId: user.tenantId });
    const token = (await t.http('POST', '/auth/token', { key: k.key })).body.token as string;
    t.app.services.get('identity').invalidateUser(k.userId);
    const finds: string[] = [];
    const client = t.app.db.conn.getClient();
    const onCommand = (e: { commandName: string; command: Record<string, unknown> }) => {
      // The outbox sweep reads these collections too (their outboxes, every second): not a credential lookup.
      const sweep = JSON.stringify(e.command.filter ?? {}).includes('_outbox');
      // Nor is GET /auth/me's list of the person's memberships (its queries say so in their comment).
      const memberships = e.command.comment === 'memberships';
      if (e.commandName === 'find' && (e.command.find === 'api_keys' || e.command.find === 'users') && !sweep && !memberships) finds.push(String(e.command.find));
    };
    client.on('commandStarted', onCommand);
    try {
      const keyAnswers = await Promise.all(Array.from({ length: 20 }, () => t.http('GET', '/auth/me', { key: k.key })));
      expect(keyAnswers.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect(finds).toEqual(['api_keys', 'users']);
      finds.length = 0;
      t.app.services.get('identity').invalidateUser(k.userId);
      const tokenAnswers = await Promise.all(Array.from({ length: 20 }, () => t.http('GET', '/auth/me', { token })));
      expect(tokenAnswers.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect(tokenAnswers.every((r) => r.body.id === k.userId)).toBe(true);
      expect(finds).toEqual(['api_keys', 'users']);
      // A failed lookup is not remembered: the next request looks again.
      finds.length = 0;
      const bad = await Promise.all(Array.from({ length: 5 }, () => t.http('GET', '/auth/me', { key: 'ak_not-a-real-key-either' })));
      for (const r of bad) expectAuthRequired(r, 'Invalid API key');
      const looked = finds.length;
      expect(looked).toBeGreaterThanOrEqual(1);
      expectAuthRequired(await t.http('GET', '/auth/me', { key: 'ak_not-a-real-key-either' }), 'Invalid API key');
      expect(finds).toHaveLength(looked + 1);
    } finally {
      client.off('commandStarted', onCommand);
    }
  });

  it('the key of a deactivated user is refused', async () => {
    const k = await createTenantUser(t, { tenantId: user.tenantId });
    const { Types } = await import('mongoose');
    await t.app.db.conn.collection('users').updateOne({ _id: new Types.ObjectId(k.userId) }, { $set: { is_active: false } });
    expectAuthRequired(await t.http('GET', '/auth/me', { key: k.key }));
  });

  it('only a hash of the key is stored', async () => {
    const doc = await t.app.db.conn.collection('api_keys').findOne({ key_hash: createHash('sha256').update(user.key).digest('hex') });
    expect(doc).not.toBeNull();
    expect(JSON.stringify(doc)).not.toContain(user.key);
  });
});

describe('Bearer tokens', () => {
  it('POST /auth/token issues a token for the caller', async () => {
    const res = await t.http('POST', '/auth/token', { key: user.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), token_type: 'Bearer', expires_in: 3600 });
    const claims = decodeJwt(res.body.token);
    expect(claims.sub).toBe(user.userId);
    expect(claims.tid).toBe(user.tenantId);
    expect(claims.exp! - claims.iat!).toBe(3600);

    const me = await t.http('GET', '/auth/me', { token: res.body.token });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(user.userId);
    expect(me.body.tenant_id).toBe(user.tenantId);
  });

  it('GraphQL issueToken gives a working token', async () => {
    const res = await t.gql('mutation { issueToken { token token_type expires_in } }', undefined, { key: user.key });
    const tok = res.body.data.issueToken;
    expect(tok.token_type).toBe('Bearer');
    const me = await t.gql('{ me { id email } }', undefined, { key: null, token: tok.token });
    expect(me.body).toEqual({ data: { me: { id: user.userId, email: 'ann@example.com' } } });
  });

  it('POST /auth/token needs a credential', async () => {
    expectAuthRequired(await t.http('POST', '/auth/token', { key: null }));
  });

  it('a tampered token → 401', async () => {
    const { token } = (await t.http('POST', '/auth/token', { key: user.key })).body as { token: string };
    const [h, p, s] = token.split('.') as [string, string, string];
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...payload, sub: '000000000000000000000001' })).toString('base64url');
    expectAuthRequired(await t.http('GET', '/auth/me', { token: `${h}.${forged}.${s}` }), 'Invalid token');
    const flipped = s.slice(0, -2) + (s.slice(-2) === 'AA' ? 'BB' : 'AA');
    expectAuthRequired(await t.http('GET', '/auth/me', { token: `${h}.${p}.${flipped}` }), 'Invalid token');
  });

  it('an unsigned (alg none) token → 401', async () => {
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const none = `${enc({ alg: 'none', typ: 'JWT' })}.${enc({ sub: user.userId, exp: Math.floor(Date.now() / 1000) + 600 })}.`;
    expectAuthRequired(await t.http('GET', '/auth/me', { token: none }));
  });

  it('a token signed with another secret → 401', async () => {
    const token = await sign(t, user.userId, '10m', 'another-secret-another-secret-000000');
    expectAuthRequired(await t.http('GET', '/auth/me', { token }), 'Invalid token');
  });

  it('an expired token → 401', async () => {
    const valid = await sign(t, user.userId, '10m');
    expect((await t.http('GET', '/auth/me', { token: valid })).status).toBe(200);
    const expired = await sign(t, user.userId, Math.floor(Date.now() / 1000) - 60);
    expectAuthRequired(await t.http('GET', '/auth/me', { token: expired }), 'Token expired');
  });

  it('a valid signature for an unknown user → 401', async () => {
    expectAuthRequired(await t.http('GET', '/auth/me', { token: await sign(t, 'aaaaaaaaaaaaaaaaaaaaaaaa', '10m') }), 'Invalid token');
    expectAuthRequired(await t.http('GET', '/auth/me', { token: await sign(t, 'not-an-object-id', '10m') }), 'Invalid token');
  });

  it.each(['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer ', 'Bearer a b', 'Token abc', 'bearer-abc'])('malformed Authorization %j → 401', async (value) => {
    expectAuthRequired(await t.http('GET', '/auth/me', { key: null, headers: { Authorization: value } }));
  });
});

describe('no or bad credential', () => {
  it('anonymous → 401 on /auth/me', async () => {
    expectAuthRequired(await t.http('GET', '/auth/me', { key: null }), 'Authentication required');
  });

  it('GraphQL me without a credential → AUTH_REQUIRED in extensions', async () => {
    const res = await t.gql('{ me { id } }', undefined, { key: null });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ me: null });
    expect(res.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    expect(res.body.errors?.[0]?.path).toEqual(['me']);
  });

  it('GraphQL with a rejected credential → 401 envelope', async () => {
    expectAuthRequired(await t.gql('{ me { id } }', undefined, { key: 'ak_wrong' }), 'Invalid API key');
  });

  it('a public route with a bad credential is still 200', async () => {
    for (const opts of [{ key: 'ak_wrong' }, { key: null, headers: { Authorization: 'Basic xyz' } }, { key: null, token: 'not.a.jwt' }]) {
      const res = await t.http('GET', '/example/hello?name=x', opts);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ greeting: 'Hello, x' });
    }
  });
});

describe('bootstrap', () => {
  const hash = createHash('sha256').update(ADMIN_KEY).digest('hex');

  it('is idempotent across restarts on the same database', async () => {
    const uri = uniqueDbUri();
    for (let run = 0; run < 2; run++) {
      const app = await buildTestApp({ config: { MONGODB_URI: uri } });
      try {
        const conn = app.app.db.conn;
        expect(await conn.collection('tenants').countDocuments({})).toBe(1);
        expect(await conn.collection('tenants').countDocuments({ is_system: true, name: 'system' })).toBe(1);
        expect(await conn.collection('users').countDocuments({})).toBe(1);
        expect(await conn.collection('users').countDocuments({ email: 'admin@system.local', scope: 'system', roles: ['admin'] })).toBe(1);
        expect(await conn.collection('api_keys').countDocuments({})).toBe(1);
        expect(await conn.collection('api_keys').countDocuments({ key_hash: hash, revoked_at: null })).toBe(1);
        const me = await app.http('GET', '/auth/me');
        expect(me.status).toBe(200);
        expect(me.body).toMatchObject({ email: 'admin@system.local', scope: 'system', is_system_user: true, roles: ['admin'] });
      } finally {
        await app.close();
      }
    }
  });

  it('a restart with another key adds it beside the first, for the same administrator', async () => {
    const uri = uniqueDbUri();
    const other = 'second-admin-key-0123456789';
    await (await buildTestApp({ config: { MONGODB_URI: uri } })).close();
    const app = await buildTestApp({ config: { MONGODB_URI: uri, ADMIN_API_KEY: other } });
    try {
      expect(await app.app.db.conn.collection('users').countDocuments({})).toBe(1);
      expect(await app.app.db.conn.collection('api_keys').countDocuments({})).toBe(2);
      const a = await app.http('GET', '/auth/me', { key: ADMIN_KEY });
      const b = await app.http('GET', '/auth/me', { key: other });
      expect(a.status).toBe(200);
      expect(b.status).toBe(200);
      expect(a.body.id).toBe(b.body.id);
    } finally {
      await app.close();
    }
  });

  it('without ADMIN_API_KEY and no users, start-up still works', async () => {
    const app = await buildTestApp({ config: { ADMIN_API_KEY: '' } });
    try {
      expect(app.config.ADMIN_API_KEY).toBeUndefined();
      expect((await app.http('GET', '/health')).status).toBe(200);
      expect((await app.http('GET', '/ready')).status).toBe(200);
      expect(await app.app.db.conn.collection('users').countDocuments({})).toBe(0);
      expectAuthRequired(await app.http('GET', '/auth/me', { key: ADMIN_KEY }), 'Invalid API key');
    } finally {
      await app.close();
    }
  });
});
