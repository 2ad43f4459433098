/** Erasure across plugins: a subject's passkeys are exported (without key material), deleted, and no longer log in. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { SoftAuthenticator } from '../webauthn/authenticator.ts';
import { loginWith, PASSKEY_CONFIG, registerPasskey } from '../webauthn/helpers.ts';
import type { declaredData} from './helpers.ts';
import { collectionsHolding, createSubject, expectExportCovers, exportThenErase, type Subject } from './helpers.ts';

let t: TestApp;
let admin: { key: string; tenantId: string; userId: string };
let s: Subject;
let other: Subject;
const auth = new SoftAuthenticator('ES256');
const otherAuth = new SoftAuthenticator('ES256');
let exported: any;
let preview: any;
let raw: Awaited<ReturnType<typeof declaredData>>;
let passkeyToken: string;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, webauthnPlugin, privacyPlugin], config: PASSKEY_CONFIG });
  admin = await createTenantUser(t, { roles: ['admin'] });
  s = await createSubject(t, admin.tenantId);
  other = await createSubject(t, admin.tenantId);
  expect((await registerPasskey(t, s.key, auth, { device_name: `Zelda's phone ${s.name}` })).status).toBe(201);
  expect((await registerPasskey(t, other.key, otherAuth)).status).toBe(201);
  const login = await loginWith(t, s.email, auth);
  expect(login.status).toBe(200);
  passkeyToken = login.body.token;

  ({ exported, raw, preview } = await exportThenErase(t, s, admin.key));
});
afterAll(() => t?.close());

describe("a subject's passkeys", () => {
  it('the export lists them with their metadata and without key material', () => {
    const text = JSON.stringify(exported);
    expect(text).toContain(`Zelda's phone ${s.name}`);
    expect(text).not.toContain('public_key');
    expect(text).not.toContain('attestation_object');
  });

  it('the preview counts one passkey to delete', () => {
    expect(preview.collections).toContainEqual({ name: 'passkeys', action: 'delete', count: 1, fields: ['device_name'] });
  });

  it('the export holds the subject’s value of every field, in every collection, the erasure preview lists', () => {
    expectExportCovers(exported, preview, raw);
  });

  it('after erasure: the passkey no longer logs in, the token it issued is refused, nothing holds the name', async () => {
    expect((await loginWith(t, s.email, auth)).status).toBe(401);
    expect((await t.http('GET', '/auth/me', { token: passkeyToken })).status).toBe(401);
    expect(await collectionsHolding(t, [s.name, s.email])).toEqual([]);
  });

  it("another user's passkey still logs in", async () => {
    expect((await loginWith(t, other.email, otherAuth)).status).toBe(200);
  });
});
