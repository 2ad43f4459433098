import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, envelope, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { Types } from 'mongoose';

const apps: TestApp[] = [];
afterAll(async () => {
  for (const a of apps) await a.close();
});
const build = async (config: Record<string, string>) => {
  const t = await buildTestApp({ config });
  apps.push(t);
  return t;
};

async function userWithTwoKeys(t: TestApp) {
  const identity = t.app.services.get('identity');
  const admin = await identity.authenticateApiKey(ADMIN_KEY);
  const tenant = await identity.createTenant(admin, { name: 'rl' });
  const user = await identity.createUser(admin, { email: `two-keys-${tenant.id}@example.com`, name: 'Two', tenant_id: tenant.id });
  const a = (await identity.createApiKey(admin, { user_id: user.id, name: 'a' })).key;
  const b = (await identity.createApiKey(admin, { user_id: user.id, name: 'b' })).key;
  return { a, b };
}

describe('rate limit per credential', () => {
  it('two API keys of the same user have separate budgets', async () => {
    const t = await build({ RATE_LIMIT_MAX: '2' });
    const { a, b } = await userWithTwoKeys(t);
    expect((await t.http('GET', '/auth/me', { key: a })).status).toBe(200);
    expect((await t.http('GET', '/auth/me', { key: a })).status).toBe(200);
    const third = await t.http('GET', '/auth/me', { key: a });
    expect(third.status).toBe(429);
    expect(envelope(third).code).toBe('RATE_LIMITED');
    expect((await t.http('GET', '/auth/me', { key: b })).status).toBe(200);
  });

  it('bearer tokens of one user share one budget, however many are minted', async () => {
    const t = await build({ RATE_LIMIT_MAX: '3' });
    const { a, b } = await userWithTwoKeys(t);
    const tok1 = (await t.http('POST', '/auth/token', { key: a })).body.token as string;
    const tok2 = (await t.http('POST', '/auth/token', { key: b })).body.token as string;
    expect((await t.http('GET', '/auth/me', { token: tok1 })).status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: tok2 })).status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: tok1 })).status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: tok2 })).status).toBe(429);
  });
});

describe('failed authentications per ip', () => {
  it('past AUTH_FAILURE_LIMIT, further failures from that ip are 429, while valid keys still pass', async () => {
    const t = await build({ AUTH_FAILURE_LIMIT: '3' });
    for (let i = 0; i < 3; i++) {
      const res = await t.http('GET', '/auth/me', { key: `ak_guess_${i}` });
      expect(res.status).toBe(401);
    }
    const blocked = await t.http('GET', '/auth/me', { key: 'ak_guess_next' });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Only failures are refused: the system administrator's valid key from that ip passes.
    expect((await t.http('GET', '/auth/me', { key: ADMIN_KEY })).status).toBe(200);
    // Anonymous public traffic is not a credential and still passes.
    expect((await t.http('GET', '/health', { key: null })).status).toBe(200);
  });
});

describe('bootstrap', () => {
  it('a revoked ADMIN_API_KEY stays revoked across restarts', async () => {
    const uri = uniqueDbUri();
    const first = await build({ MONGODB_URI: uri });
    const keys = await first.app.db.conn.collection('api_keys').find({}).toArray();
    const adminKeyId = String(keys[0]!._id);
    // Revoke it with a second system key, so the bootstrap key is not needed to do it.
    const identity = first.app.services.get('identity');
    const admin = await identity.authenticateApiKey(ADMIN_KEY);
    const other = (await identity.createApiKey(admin, { user_id: admin.id, name: 'ops' })).key;
    expect((await first.http('DELETE', `/admin/api-keys/${adminKeyId}`, { key: other })).status).toBe(200);
    await first.close();
    const second = await build({ MONGODB_URI: uri });
    const res = await second.http('GET', '/auth/me', { key: ADMIN_KEY });
    expect(res.status).toBe(401);
    expect((await second.http('GET', '/auth/me', { key: other })).status).toBe(200);
  });

  it('ADMIN_EMAIL of a user of another tenant: starts, and never promotes that user (emails are per tenant)', async () => {
    const uri = uniqueDbUri();
    const first = await build({ MONGODB_URI: uri });
    const tenant = await first.http('POST', '/admin/tenants', { json: { name: 'acme' } });
    const user = await first.http('POST', '/admin/users', { json: { email: 'boss@acme.test', name: 'Boss', tenant_id: tenant.body.id } });
    expect(user.status).toBe(201);
    await first.close();
    const second = await buildTestApp({ config: { MONGODB_URI: uri, ADMIN_EMAIL: 'boss@acme.test' } });
    try {
      const boss = await second.app.db.conn.collection('users').findOne({ _id: new Types.ObjectId(user.body.id as string) });
      expect(boss).toMatchObject({ scope: null, is_system_user: false, roles: ['user'] });
      expect(await second.app.db.conn.collection('users').countDocuments({ email: 'boss@acme.test', scope: 'system' })).toBe(1);
    } finally {
      await second.close();
    }
  });
});
