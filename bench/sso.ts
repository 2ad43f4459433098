/**
 * SSO sign-in end to end against a local OpenID provider (oidc-provider, in this process): the
 * server time of `GET …/login` plus `GET …/callback`, excluding the time the provider spends
 * answering the server (token exchange, userinfo, keys), p50 and p95 over N sign-ins.
 * `npm run bench:sso` (SSO_SIGN_INS, default 200). The browser's part at the provider (its login
 * form) is not counted: it is the provider's and the person's time.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { loadavg } from 'node:os';
import type { AddressInfo } from 'node:net';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { createLogger } from '../core/logger.ts';
import { configure, signInAtProvider, type Account } from '../test/sso/provider.ts';

const N = Number(process.env.SSO_SIGN_INS ?? 200);
const log = (s: string) => process.stdout.write(`${s}\n`);
const ADMIN_KEY = 'bench-admin-key-0123456789abcdef';
const SECRETS = { TOKEN_SECRET: randomBytes(32).toString('hex'), CURSOR_HMAC_SECRET: randomBytes(32).toString('hex') };

const mem = process.env.MONGODB_URI ? undefined : await MongoMemoryServer.create();
const uri = new URL(process.env.MONGODB_URI ?? mem!.getUri());
uri.pathname = '/bench_sso';
const config = loadConfig({ NODE_ENV: 'development', LOG_LEVEL: 'silent', MONGODB_URI: uri.toString(), ADMIN_API_KEY: ADMIN_KEY, ...SECRETS, RATE_LIMIT_ENABLED: 'false', EVENTS_RELAY_INTERVAL_MS: '50' });
const app = await createApp({ corePlugins: corePlugins(), config, plugins: builtinPlugins(), logger: createLogger('silent') });
const port = await app.listen(0, '127.0.0.1');
const base = `http://127.0.0.1:${port}`;
const identity = app.services.get('identity');
const admin = await identity.authenticateApiKey(ADMIN_KEY);
const tenant = await identity.createTenant(admin, { name: `bench-sso-${randomBytes(3).toString('hex')}` });

// The provider, with its own time per request recorded while the server waits on it.
const accounts = new Map<string, Account>();
for (let i = 0; i < N; i++) accounts.set(`p${i}`, { sub: `p${i}`, email: `p${i}@acme.test`, email_verified: true, groups: ['staff'] });
let providerMs = 0;
const opServer = createServer();
await new Promise<void>((r) => opServer.listen(0, '127.0.0.1', r));
const issuer = `http://127.0.0.1:${(opServer.address() as AddressInfo).port}`;
const callback = `${base}/auth/sso/${tenant.id}/bench/callback`;
const op = configure(issuer, [{ client_id: 'app', client_secret: 'bench-secret-0123456789', redirect_uris: [callback] }], (id) => accounts.get(id));
const handle = op.callback();
opServer.on('request', (req, res) => {
  const t0 = performance.now();
  res.on('finish', () => {
    if (req.url?.startsWith('/token') || req.url?.startsWith('/me') || req.url?.startsWith('/jwks')) providerMs += performance.now() - t0;
  });
  handle(req, res);
});

const created = await fetch(`${base}/admin/sso/providers`, {
  method: 'POST', headers: { 'X-API-Key': ADMIN_KEY, 'X-Tenant-Id': tenant.id, 'Content-Type': 'application/json' },
  body: JSON.stringify({ name: 'bench', issuer, client_id: 'app', client_secret: 'bench-secret-0123456789', scopes: ['email', 'profile', 'groups'], role_mapping: { staff: ['user'] }, jit: true }),
});
if (created.status !== 201) throw new Error(`provider: ${created.status} ${await created.text()}`);

const samples: number[] = [];
const load = loadavg()[0]!.toFixed(1);
for (let i = 0; i < N; i++) {
  let t0 = performance.now();
  const login = await fetch(`${base}/auth/sso/${tenant.id}/bench/login`, { redirect: 'manual' });
  const loginMs = performance.now() - t0;
  const back = await signInAtProvider(login.headers.get('location')!, `p${i}`);
  providerMs = 0;
  t0 = performance.now();
  const res = await fetch(back);
  const body = (await res.json()) as { token?: string };
  const callbackMs = performance.now() - t0 - providerMs;
  if (res.status !== 200 || !body.token) throw new Error(`sign-in ${i}: ${res.status} ${JSON.stringify(body)}`);
  // The first sign-ins read the discovery document and create accounts: all are counted.
  samples.push(loginMs + callbackMs);
}
samples.sort((x, y) => x - y);
const q = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))]!.toFixed(1);
log(`SSO sign-in, server time excluding the provider, ${N} sign-ins (each a new person: jit account, role mapping), load ${load}→${loadavg()[0]!.toFixed(1)}`);
log(`  p50 ${q(0.5)} ms, p95 ${q(0.95)} ms, max ${q(1)} ms (aim: p95 under 200 ms)`);
await app.close();
opServer.close();
await mem?.stop();
