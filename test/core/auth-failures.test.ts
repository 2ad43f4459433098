import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';

const LIMIT = 5;
let ipCounter = 0;
const newIp = () => `10.9.0.${++ipCounter}`;
const guess = (prefix = 'ak_') => prefix + randomBytes(24).toString('base64url');

let t: TestApp;
let memory: TestApp;
beforeAll(async () => {
  const config = { TRUST_PROXY: 'true', AUTH_FAILURE_LIMIT: String(LIMIT), RATE_LIMIT_MAX: '10000' };
  [t, memory] = await Promise.all([buildTestApp({ config }), buildTestApp({ config: { ...config, RATE_LIMIT_STORE: 'memory' } })]);
});
afterAll(() => Promise.all([t?.close(), memory?.close()]));

const me = (app: TestApp, key: string, ip: string) => app.http('GET', '/auth/me', { key, headers: { 'X-Forwarded-For': ip } });

describe('failed-authentication limiter (AUTH_FAILURE_LIMIT=5)', () => {
  it('after the limit, failures from the ip are 429 but valid keys from the same ip still pass (no lock-out of valid users)', async () => {
    const ip = newIp();
    const user = await createTenantUser(t);
    for (let i = 0; i < LIMIT; i++) expect((await me(t, guess(), ip)).status).toBe(401);
    const blocked = await me(t, guess(), ip);
    expect(blocked.status).toBe(429);
    expect(envelope(blocked).code).toBe('RATE_LIMITED');
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await me(t, user.key, ip)).status).toBe(200);
    expect((await me(t, ADMIN_KEY, ip)).status).toBe(200);
    // ... and a guess after the valid calls is still refused.
    expect((await me(t, guess(), ip)).status).toBe(429);
  });

  it('bad bearer tokens count against the ip too', async () => {
    const ip = newIp();
    const bad = (n: number) => t.http('GET', '/auth/me', { token: `not.a.token${n}`, headers: { 'X-Forwarded-For': ip } });
    for (let i = 0; i < LIMIT; i++) expect((await bad(i)).status).toBe(401);
    expect((await bad(99)).status).toBe(429);
  });

  it('failures against one key prefix are limited across ips (per targeted identity)', async () => {
    const prefix = `ak_${randomBytes(6).toString('hex').slice(0, 6)}`;
    for (let i = 0; i < LIMIT; i++) expect((await me(t, guess(prefix), newIp())).status).toBe(401);
    expect((await me(t, guess(prefix), newIp())).status).toBe(429);
    // Another prefix from a fresh ip is unaffected.
    expect((await me(t, guess(), newIp())).status).toBe(401);
  });

  it('is a service other plugins use (e.g. a passkey login by email)', async () => {
    const failures = t.app.services.get('authFailures');
    const email = `x-${randomBytes(3).toString('hex')}@example.com`;
    expect(await failures.lockedOut('10.9.9.1', `email:${email}`)).toBeNull();
    for (let i = 0; i < LIMIT; i++) expect(await failures.fail(`10.9.9.${i + 2}`, `email:${email}`)).toBeNull();
    expect(await failures.fail('10.9.9.50', `email:${email.toUpperCase()}`)).toBeGreaterThanOrEqual(1);
    expect(await failures.lockedOut('10.9.9.51', `email:${email}`)).toBeGreaterThanOrEqual(1);
    expect(await failures.lockedOut('10.9.9.51', 'email:someone-else@example.com')).toBeNull();
  });

  it('RATE_LIMIT_STORE=mongo keeps counters in the database; memory keeps none there', async () => {
    const ip = newIp();
    expect((await me(t, guess(), ip)).status).toBe(401);
    expect((await me(memory, guess(), ip)).status).toBe(401);
    expect(await t.app.db.conn.collection('auth_failures').countDocuments({ key: `auth_failures:ip:${ip}` })).toBe(1);
    expect(await t.app.db.conn.collection('rate_limits').countDocuments()).toBeGreaterThan(0);
    expect(await memory.app.db.conn.collection('auth_failures').countDocuments()).toBe(0);
    expect(await memory.app.db.conn.collection('rate_limits').countDocuments()).toBe(0);
  });
});
