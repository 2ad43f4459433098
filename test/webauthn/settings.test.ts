/** WEBAUTHN_* settings and the demo page switch. */
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../config/index.ts';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { SoftAuthenticator } from './authenticator.ts';
import { loginWith, registerPasskey } from './helpers.ts';

describe('settings', () => {
  it('WEBAUTHN_ORIGIN takes a comma-separated list of origins', () => {
    const c = loadConfig({ WEBAUTHN_ORIGIN: 'https://app.example.com, https://admin.example.com:8443' });
    expect(c.WEBAUTHN_ORIGIN).toEqual(['https://app.example.com', 'https://admin.example.com:8443']);
    expect(loadConfig({}).WEBAUTHN_ORIGIN).toEqual(['http://localhost:3000']);
  });

  it.each(['https://app.example.com/', 'https://app.example.com/login', 'app.example.com', 'https://a.example.com,not a url'])('refuses %s as an origin', (v) => {
    expect(() => loadConfig({ WEBAUTHN_ORIGIN: v })).toThrow(/WEBAUTHN_ORIGIN/);
    expect(() => loadConfig({ WEBAUTHN_ORIGIN: v })).toThrow(ConfigError);
  });

  it('WEBAUTHN_RP_ID is a host name', () => {
    expect(() => loadConfig({ WEBAUTHN_RP_ID: 'https://example.com' })).toThrow(/WEBAUTHN_RP_ID/);
    expect(loadConfig({ WEBAUTHN_RP_ID: 'example.com' }).WEBAUTHN_RP_ID).toBe('example.com');
  });

  it('the demo page defaults to development only', () => {
    expect(loadConfig({}).WEBAUTHN_DEMO_ENABLED).toBeUndefined();
    expect(loadConfig({ WEBAUTHN_DEMO_ENABLED: 'false' }).WEBAUTHN_DEMO_ENABLED).toBe(false);
  });
});

describe('demo page', () => {
  const apps: TestApp[] = [];
  afterAll(() => Promise.all(apps.map((a) => a.close())));

  it('is served with a strict CSP when enabled, and absent otherwise (test mode default)', async () => {
    const on = await buildTestApp({ plugins: [webauthnPlugin], config: { WEBAUTHN_DEMO_ENABLED: 'true' } });
    apps.push(on);
    const r = await on.http('GET', '/auth/webauthn/demo', { key: null });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/text\/html/);
    expect(r.headers.get('content-security-policy')).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(r.body).toContain('navigator.credentials.create');
    expect(r.body).toContain('/auth/webauthn/authenticate/options');
    const off = await buildTestApp({ plugins: [webauthnPlugin] });
    apps.push(off);
    expectError(await off.http('GET', '/auth/webauthn/demo', { key: null }), 404, 'NOT_FOUND');
  });
});

describe('demo page default', () => {
  const apps: TestApp[] = [];
  afterAll(() => Promise.all(apps.map((a) => a.close())));

  it('with WEBAUTHN_DEMO_ENABLED unset: served in development, 404 in production and test; an explicit false wins in development', async () => {
    for (const [config, status] of [
      [{ NODE_ENV: 'development' }, 200],
      [{ NODE_ENV: 'production', METRICS_ENABLED: 'false' }, 404],
      [{ NODE_ENV: 'test' }, 404],
      [{ NODE_ENV: 'development', WEBAUTHN_DEMO_ENABLED: 'false' }, 404],
    ] as const) {
      const app = await buildTestApp({ plugins: [webauthnPlugin], config });
      apps.push(app);
      expect(app.config.NODE_ENV).toBe(config.NODE_ENV);
      const r = await app.http('GET', '/auth/webauthn/demo', { key: null });
      if (status === 200) {
        expect(r.status).toBe(200);
        expect(r.body).toContain('navigator.credentials.create');
      } else expectError(r, 404, 'NOT_FOUND');
    }
  });
});

describe('WEBAUTHN_RP_ID', () => {
  let app: TestApp;
  afterAll(() => app?.close());

  it('a non-default rp id is sent in both options and is the rp id hash registrations and logins must carry', async () => {
    app = await buildTestApp({ plugins: [webauthnPlugin], config: { WEBAUTHN_RP_ID: 'example.test', WEBAUTHN_ORIGIN: 'https://example.test,https://app.example.test' } });
    const email = `rp-${Date.now()}@example.com`;
    const u = await createTenantUser(app, { email });
    const creds = () => app.app.db.conn.collection('webauthn_credentials');
    const opts = await app.http('POST', '/auth/webauthn/register/options', { key: u.key });
    expect(opts.status).toBe(200);
    expect(opts.body.rp.id).toBe('example.test');

    // Authenticator data hashed for localhost (the default rp id) is refused, nothing stored.
    const localhost = new SoftAuthenticator('ES256', 'localhost', 'https://example.test');
    const refused = await app.http('POST', '/auth/webauthn/register', { key: u.key, json: localhost.makeCredential(opts.body.challenge) });
    expect(expectError(refused, 422, 'VALIDATION_ERROR').details.reason).toBe('attestation_invalid');
    expect(await creds().countDocuments({ user_id: new Types.ObjectId(u.userId) })).toBe(0);

    // For example.test it is accepted.
    const a = new SoftAuthenticator('ES256', 'example.test', 'https://app.example.test');
    expect((await registerPasskey(app, u.key, a)).status).toBe(201);
    expect(await creds().countDocuments({ user_id: new Types.ObjectId(u.userId) })).toBe(1);

    const login = await app.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email } });
    expect(login.body.rpId).toBe('example.test');
    expect(login.body.allowCredentials.map((c: { id: string }) => c.id)).toEqual([a.id]);
    expect((await loginWith(app, email, a)).status).toBe(200);
    // An assertion hashed for localhost is refused.
    expectError(await loginWith(app, email, a, { rpId: 'localhost' }), 401, 'AUTH_REQUIRED');
  });
});
