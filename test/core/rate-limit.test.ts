import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, envelope, type HttpResult, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

const LIMITED = { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_SECONDS: '60' };

/** A user with an API key, created through the identity service so that no request spends a budget. */
async function newKey(t: TestApp): Promise<string> {
  const identity = t.app.services.get('identity');
  const admin = await identity.authenticateApiKey(ADMIN_KEY);
  const tenant = await identity.createTenant(admin, { name: `rl-${randomBytes(3).toString('hex')}` });
  const user = await identity.createUser(admin, { email: `rl-${randomBytes(4).toString('hex')}@example.com`, name: 'RL', tenant_id: tenant.id });
  return (await identity.createApiKey(admin, { user_id: user.id, name: 'rl' })).key;
}

let ipCounter = 0;
/** A fresh client address (TRUST_PROXY is on in the main app). */
const newIp = () => `10.1.0.${++ipCounter}`;

function expectLimited(res: HttpResult<any>) {
  expect(res.status).toBe(429);
  const err = envelope(res);
  expect(err.code).toBe('RATE_LIMITED');
  const retryAfter = res.headers.get('retry-after');
  expect(retryAfter).toMatch(/^\d+$/);
  expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
  expect(Number(retryAfter)).toBeLessThanOrEqual(60);
  expect(err.details).toEqual({ retry_after: Number(retryAfter) });
}

let t: TestApp;
let spoofable: TestApp;
let off: TestApp;
beforeAll(async () => {
  [t, spoofable, off] = await Promise.all([
    buildTestApp({ plugins: [examplePlugin], config: { ...LIMITED, TRUST_PROXY: 'true' } }),
    buildTestApp({ plugins: [examplePlugin], config: LIMITED }),
    buildTestApp({ plugins: [examplePlugin], config: { ...LIMITED, RATE_LIMIT_ENABLED: 'false' } }),
  ]);
});
afterAll(() => Promise.all([t?.close(), spoofable?.close(), off?.close()]));

describe('RATE_LIMIT_MAX=3', () => {
  it('the 4th request in the window is 429 RATE_LIMITED with Retry-After', async () => {
    const key = await newKey(t);
    const remaining: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.http('GET', '/auth/me', { key });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBe('3');
      remaining.push(res.headers.get('ratelimit-remaining'));
    }
    expect(remaining).toEqual(['2', '1', '0']);
    const res = await t.http('GET', '/auth/me', { key });
    expectLimited(res);
    expect(res.headers.get('ratelimit-remaining')).toBe('0');
    // Still limited on any route, even one that would fail otherwise.
    expectLimited(await t.http('GET', '/no/such/route', { key }));
  });

  it('each credential has its own budget', async () => {
    const [k1, k2] = await Promise.all([newKey(t), newKey(t)]);
    for (let i = 0; i < 3; i++) expect((await t.http('GET', '/auth/me', { key: k1 })).status).toBe(200);
    expectLimited(await t.http('GET', '/auth/me', { key: k1 }));
    for (let i = 0; i < 3; i++) expect((await t.http('GET', '/auth/me', { key: k2 })).status).toBe(200);
    expectLimited(await t.http('GET', '/auth/me', { key: k2 }));
  });

  it('anonymous callers are limited per client ip', async () => {
    const [a, b] = [newIp(), newIp()];
    const hello = (ip: string) => t.http('GET', '/example/hello', { key: null, headers: { 'X-Forwarded-For': ip } });
    for (let i = 0; i < 3; i++) expect((await hello(a)).status).toBe(200);
    expectLimited(await hello(a));
    expect((await hello(b)).status).toBe(200);
    // An authenticated caller on the exhausted address has its own budget.
    const key = await newKey(t);
    const res = await t.http('GET', '/example/hello', { key, headers: { 'X-Forwarded-For': a } });
    expect(res.status).toBe(200);
  });

  it('rejected credentials count against the client ip (no free guessing)', async () => {
    const ip = newIp();
    for (let i = 0; i < 3; i++) {
      const res = await t.http('GET', '/auth/me', { key: `ak_guess_${i}`, headers: { 'X-Forwarded-For': ip } });
      expect(res.status).toBe(401);
    }
    expectLimited(await t.http('GET', '/auth/me', { key: 'ak_guess_4', headers: { 'X-Forwarded-For': ip } }));
  });

  it('/health and /ready are exempt and spend nothing', async () => {
    const ip = newIp();
    for (let i = 0; i < 6; i++) {
      expect((await t.http('GET', '/health', { key: null, headers: { 'X-Forwarded-For': ip } })).status).toBe(200);
      expect((await t.http('GET', '/ready', { key: null, headers: { 'X-Forwarded-For': ip } })).status).toBe(200);
    }
    for (let i = 0; i < 3; i++) expect((await t.http('GET', '/example/hello', { key: null, headers: { 'X-Forwarded-For': ip } })).status).toBe(200);
    expectLimited(await t.http('GET', '/example/hello', { key: null, headers: { 'X-Forwarded-For': ip } }));
    const health = await t.http('GET', '/health', { key: null, headers: { 'X-Forwarded-For': ip } });
    expect(health.status).toBe(200);
    expect(health.headers.get('ratelimit-limit')).toBeNull();
  });

  it('GraphQL requests count too', async () => {
    const key = await newKey(t);
    expect((await t.http('GET', '/auth/me', { key })).status).toBe(200);
    expect((await t.gql('{ me { email } }', undefined, { key })).body.data.me.email).toMatch(/@example\.com$/);
    expect((await t.gql('{ me { email } }', undefined, { key })).status).toBe(200);
    expectLimited(await t.gql('{ me { email } }', undefined, { key }));
    expectLimited(await t.http('GET', '/auth/me', { key }));
  });

  it('without TRUST_PROXY a forged X-Forwarded-For does not buy a new budget', async () => {
    const hello = (ip: string) => spoofable.http('GET', '/example/hello', { key: null, headers: { 'X-Forwarded-For': ip } });
    for (let i = 0; i < 3; i++) expect((await hello(`192.0.2.${i}`)).status).toBe(200);
    expectLimited(await hello('192.0.2.99'));
  });
});

describe('RATE_LIMIT_ENABLED=false', () => {
  it('disables the limiter', async () => {
    for (let i = 0; i < 8; i++) {
      const res = await off.http('GET', '/example/hello', { key: null });
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
    }
  });
});
