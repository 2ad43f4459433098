/** WEBAUTHN_* settings and the demo page switch. */
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../config/index.ts';
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';

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
