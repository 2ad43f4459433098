/**
 * Passkeys across server processes on one database: challenges live in MongoDB, so options from
 * one replica verify on another; a challenge is consumed once even when two replicas race on it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';
import { SoftAuthenticator } from './authenticator.ts';
import { ORIGIN } from './helpers.ts';

let procs: ServerProcess[] = [];

beforeAll(async () => {
  procs = await startReplicas(2, {
    MONGODB_URI: uniqueDbUri(), WEBAUTHN_RP_ID: 'localhost', WEBAUTHN_ORIGIN: ORIGIN, RATE_LIMIT_ENABLED: 'false',
    // No credential cache: a deletion on one replica ends tokens on the other at once.
    AUTH_CACHE_TTL_MS: '0',
  });
}, 90_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

async function call(p: ServerProcess, method: string, path: string, o: { key?: string; token?: string; json?: unknown } = {}) {
  const headers: Record<string, string> = {};
  if (o.key) headers['X-API-Key'] = o.key;
  if (o.token) headers.Authorization = `Bearer ${o.token}`;
  if (o.json !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(p.url + path, { method, headers, ...(o.json !== undefined ? { body: JSON.stringify(o.json) } : {}) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

describe('two replicas', () => {
  it('options from one process verify on the other (registration and login); a deletion ends tokens everywhere', async () => {
    const [a, b] = procs as [ServerProcess, ServerProcess];
    const email = 'replica@example.com';
    const tenant = await call(a, 'POST', '/admin/tenants', { key: ADMIN_KEY, json: { name: 'replicas' } });
    const user = await call(a, 'POST', '/admin/users', { key: ADMIN_KEY, json: { email, name: 'R', tenant_id: tenant.body.id } });
    const key = (await call(a, 'POST', '/admin/api-keys', { key: ADMIN_KEY, json: { user_id: user.body.id, name: 'k' } })).body.key as string;

    const auth = new SoftAuthenticator();
    const regOpts = await call(a, 'POST', '/auth/webauthn/register/options', { key });
    expect(regOpts.status).toBe(200);
    const reg = await call(b, 'POST', '/auth/webauthn/register', { key, json: auth.makeCredential(regOpts.body.challenge) });
    expect(reg.status).toBe(201);

    const loginOpts = await call(b, 'POST', '/auth/webauthn/authenticate/options', { json: { email } });
    const login = await call(a, 'POST', '/auth/webauthn/authenticate', { json: { email, ...auth.getAssertion(loginOpts.body.challenge) } });
    expect(login.status).toBe(200);
    expect((await call(b, 'GET', '/auth/me', { token: login.body.token })).body.id).toBe(user.body.id);

    // The same assertion sent to both replicas at once: the challenge is consumed exactly once.
    const opts = await call(a, 'POST', '/auth/webauthn/authenticate/options', { json: { email } });
    const body = { email, ...auth.getAssertion(opts.body.challenge) };
    const raced = await Promise.all([a, b].map((p) => call(p, 'POST', '/auth/webauthn/authenticate', { json: body })));
    expect(raced.map((r) => r.status).sort()).toEqual([200, 401]);

    expect((await call(b, 'DELETE', `/auth/webauthn/credentials/${auth.id}`, { key })).status).toBe(204);
    expect((await call(a, 'GET', '/auth/me', { token: login.body.token })).status).toBe(401);
    const after = await call(a, 'POST', '/auth/webauthn/authenticate/options', { json: { email } });
    expect((await call(b, 'POST', '/auth/webauthn/authenticate', { json: { email, ...auth.getAssertion(after.body.challenge) } })).status).toBe(401);
  });
});
