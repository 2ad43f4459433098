/**
 * End to end in real Chromium (playwright-core, Debian's /usr/bin/chromium) with a CDP virtual
 * authenticator (ctap2, internal, resident key, user verification): the demo page registers a
 * passkey, logs in twice (the sign count rises), deletes the passkey, and login fails.
 *
 * Without a browser the test is skipped locally (install one with `apt-get install -y chromium`);
 * with `CI` set it fails instead, so CI never passes without running it.
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type CDPSession, type Page } from 'playwright-core';
import { loadConfig } from '../../config/index.ts';
import { createApp, type App } from '../../core/kernel.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { ADMIN_KEY, TEST_SECRETS, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { corePlugins } from '../../builtin-plugins.ts';

const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
const inCI = !!process.env.CI;
const INSTALL = 'apt-get install -y chromium';

if (!haveBrowser && !inCI) process.stderr.write(`browser.test.ts skipped: no Chromium at ${CHROMIUM}; install it with \`${INSTALL}\`\n`);

// Always runs (so CI reports no skipped test): in CI a missing browser is a failure, not a skip.
it('Chromium is installed when CI is set (CI must run the browser test)', () => {
  if (inCI && !haveBrowser) throw new Error(`No Chromium at ${CHROMIUM}: CI must run the browser test; install it with \`${INSTALL}\` (.ci/run does when root)`);
  expect(haveBrowser || !inCI).toBe(true);
});

/** A free port, so the app's origin (http://localhost:<port>) is known before it starts. */
const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

declare global {
  interface Window {
    passkeyDemo: {
      register(key: string, device: string): Promise<{ status: number; body: any }>;
      login(email: string): Promise<{ status: number; body: any; error?: string }>;
      list(key: string): Promise<{ status: number; body: any }>;
      remove(key: string, id: string): Promise<{ status: number; body: any }>;
      me(token: string): Promise<{ status: number; body: any }>;
    };
  }
}

describe.skipIf(!haveBrowser)(`passkeys in Chromium (skipped without a browser: ${INSTALL})`, () => {
  let app: App;
  let origin: string;
  let browser: Browser;
  let page: Page;
  let cdp: CDPSession;
  let authenticatorId: string;

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://localhost:${port}`;
    const config = loadConfig({
      NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY, MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS,
      WEBAUTHN_RP_ID: 'localhost', WEBAUTHN_ORIGIN: origin, WEBAUTHN_DEMO_ENABLED: 'true',
    });
    app = await createApp({ corePlugins: corePlugins(), config, plugins: [webauthnPlugin] });
    await app.listen(port, '127.0.0.1');
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    const context = await browser.newContext();
    page = await context.newPage();
    cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    ({ authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
    }));
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  const signCount = async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials[0]?.signCount ?? null;

  it('registers, logs in twice with a rising sign count, deletes the passkey, and login then fails', async () => {
    const t = { http: httpOf(`http://127.0.0.1:${new URL(origin).port}`) } as unknown as TestApp;
    const email = 'browser@example.com';
    const { key } = await createTenantUser(t, { email });

    await page.goto(`${origin}/auth/webauthn/demo`);
    expect(await page.title()).toBe('Passkey demo');

    // Through the page's own button: the client side integrators copy.
    await page.fill('#key', key);
    await page.fill('#device', 'Chromium virtual authenticator');
    await page.click('#register');
    await expect.poll(() => page.textContent('#result'), { timeout: 15_000 }).toMatch(/^register/);
    const registered = JSON.parse((await page.textContent('#result'))!.split('\n').slice(1).join('\n'));
    expect(registered.status).toBe(201);
    expect(registered.body.device_name).toBe('Chromium virtual authenticator');
    const credentialId = registered.body.credential_id as string;

    const first = await page.evaluate((e) => window.passkeyDemo.login(e), email);
    expect(first.status).toBe(200);
    expect(first.body.token_type).toBe('Bearer');
    const count1 = await signCount();
    const me = await page.evaluate((tok) => window.passkeyDemo.me(tok), first.body.token);
    expect(me.body.email).toBe(email);

    const second = await page.evaluate((e) => window.passkeyDemo.login(e), email);
    expect(second.status).toBe(200);
    const count2 = await signCount();
    expect(count2).toBeGreaterThan(count1!);
    const stored = await app.db.conn.collection('webauthn_credentials').findOne({ credential_id: credentialId });
    expect(stored!.sign_count).toBe(count2);

    const listed = await page.evaluate((k) => window.passkeyDemo.list(k), key);
    expect(listed.body.map((c: { credential_id: string }) => c.credential_id)).toEqual([credentialId]);
    const removed = await page.evaluate(([k, id]) => window.passkeyDemo.remove(k!, id!), [key, credentialId]);
    expect(removed.status).toBe(204);

    // The authenticator still holds the key, but the server no longer knows it: no token.
    const after = await page.evaluate((e) => window.passkeyDemo.login(e), email);
    expect(after.status).not.toBe(200);
    expect(after.body?.token).toBeUndefined();
    expect((await page.evaluate((tok) => window.passkeyDemo.me(tok), first.body.token)).status).toBe(401);
    // Even when the browser is asked for the deleted credential and signs, the server refuses it.
    const forced = await page.evaluate(
      async ([e, id]) => {
        const b64 = (b: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
        const unb64 = (s: string) => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4)), (c) => c.charCodeAt(0));
        const post = (path: string, json: unknown) => fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(json) });
        const o = await (await post('/auth/webauthn/authenticate/options', { email: e })).json();
        const a = (await navigator.credentials.get({ publicKey: { challenge: unb64(o.challenge), rpId: o.rpId, allowCredentials: [{ id: unb64(id!), type: 'public-key' }] } })) as PublicKeyCredential;
        const r = a.response as AuthenticatorAssertionResponse;
        const res = await post('/auth/webauthn/authenticate', {
          email: e, credential_id: a.id, client_data_json: b64(r.clientDataJSON), authenticator_data: b64(r.authenticatorData), signature: b64(r.signature),
        });
        return { status: res.status, body: await res.json() };
      },
      [email, credentialId],
    );
    expect(forced.status).toBe(401);
    expect(forced.body.error.code).toBe('AUTH_REQUIRED');
  }, 60_000);
});

/** Minimal `TestApp.http` for `createTenantUser` against an app built here (JSON in and out). */
function httpOf(url: string) {
  return async (method: string, path: string, opts: { json?: unknown; key?: string | null } = {}) => {
    const headers: Record<string, string> = { 'X-API-Key': opts.key ?? ADMIN_KEY };
    if (opts.json !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(url + path, { method, headers, ...(opts.json !== undefined ? { body: JSON.stringify(opts.json) } : {}) });
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  };
}
