/**
 * Passkey registration and login through HTTP with a software authenticator: the happy paths,
 * the fields each answer carries, and one failing test per verification rule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, expectError, type HttpResult, type TestApp } from '../helpers/app.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { emailKey } from '../../plugins/webauthn/service.ts';
import { FLAGS, SoftAuthenticator } from './authenticator.ts';
import { PASSKEY_CONFIG, captureLogger, loginWith, registerPasskey } from './helpers.ts';

let t: TestApp;
const { lines, logger } = captureLogger('info');

beforeAll(async () => {
  t = await buildTestApp({ plugins: [webauthnPlugin], config: PASSKEY_CONFIG, logger });
});
afterAll(() => t?.close());

const creds = () => t.app.db.conn.collection('webauthn_credentials');
const challenges = () => t.app.db.conn.collection('webauthn_challenges');
let n = 0;
const newUser = async () => {
  const email = `pk-${++n}-${Date.now()}@example.com`;
  return { email, ...(await createTenantUser(t, { email })) };
};
const regOptions = (key: string) => t.http('POST', '/auth/webauthn/register/options', { key });
const loginOptions = (email: string) => t.http('POST', '/auth/webauthn/authenticate/options', { key: null, json: { email } });
const authenticate = (json: Record<string, unknown>) => t.http('POST', '/auth/webauthn/authenticate', { key: null, json });

/** Registers a passkey and returns the user and the authenticator. */
async function enrolled(alg: 'ES256' | 'RS256' = 'ES256') {
  const u = await newUser();
  const a = new SoftAuthenticator(alg);
  const r = await registerPasskey(t, u.key, a);
  expect(r.status).toBe(201);
  return { u, a };
}

/** A failed registration: 422 VALIDATION_ERROR with `reason`, and no credential written. */
async function expectRegistrationRefused(res: HttpResult<any>, reason: string, userId: string) {
  const err = expectError(res, 422, 'VALIDATION_ERROR');
  expect(err.details.reason).toBe(reason);
  expect(await creds().countDocuments({ user_id: new Types.ObjectId(userId) })).toBe(0);
}

describe('registration', () => {
  it('register/options answers its documented fields with a fresh challenge per request', async () => {
    const u = await newUser();
    const a = await regOptions(u.key);
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({
      rp: { id: 'localhost', name: 'Test RP' },
      user: { name: u.email, displayName: 'Test User' },
      pubKeyCredParams: [{ alg: -7, type: 'public-key' }, { alg: -257, type: 'public-key' }],
      authenticatorSelection: { authenticatorAttachment: 'platform', userVerification: 'preferred', residentKey: 'preferred' },
      timeout: 60000,
      attestation: 'none',
      excludeCredentials: [],
    });
    expect(a.body.challenge).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    expect(Buffer.from(a.body.user.id, 'base64url').toString('hex')).toBe(u.userId);
    const b = await regOptions(u.key);
    expect(b.body.challenge).not.toBe(a.body.challenge);
    // A newer options call replaces the older challenge: one stored per user.
    const stored = await challenges().find({ subject: `user:${u.userId}` }).toArray();
    expect(stored.map((c) => c.challenge)).toEqual([b.body.challenge]);
    // ...and it expires after the option timeout.
    expect(Math.abs(stored[0]!.expires_at.getTime() - (Date.now() + 60_000))).toBeLessThan(5_000);
  });

  it('requires an authenticated caller', async () => {
    expectError(await t.http('POST', '/auth/webauthn/register/options', { key: null }), 401, 'AUTH_REQUIRED');
    expectError(await t.http('POST', '/auth/webauthn/register', { key: null, json: {} }), 401, 'AUTH_REQUIRED');
  });

  it('stores a verified ES256 credential with every spec field; excludeCredentials then lists it', async () => {
    const u = await newUser();
    const a = new SoftAuthenticator('ES256');
    const opts = await regOptions(u.key);
    const body = a.makeCredential(opts.body.challenge, { device_name: 'Laptop', transports: ['internal', 'hybrid'] });
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: body });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ credential_id: a.id, device_name: 'Laptop', registered_at: expect.any(String), last_used_at: null });
    const doc = (await creds().findOne({ credential_id: a.id }))!;
    expect(doc).toMatchObject({ sign_count: 0, transports: ['internal', 'hybrid'], device_name: 'Laptop', alg: -7, last_used_at: null });
    expect(String(doc.user_id)).toBe(u.userId);
    expect(String(doc.tenant_id)).toBe(u.tenantId);
    expect(doc.registered_at).toBeInstanceOf(Date);
    // Stored as received; the public key is the COSE key of the authenticator.
    expect(Buffer.from(doc.attestation_object.buffer).toString('base64url')).toBe(body.attestation_object);
    expect(Buffer.from(doc.public_key.buffer).equals(a.coseKey())).toBe(true);
    const again = await regOptions(u.key);
    expect(again.body.excludeCredentials).toEqual([{ id: a.id, type: 'public-key', transports: ['internal', 'hybrid'] }]);
    // The challenge was consumed by the successful registration.
    expect(await challenges().countDocuments({ subject: `user:${u.userId}`, challenge: opts.body.challenge })).toBe(0);
  });

  it('stores an RS256 credential', async () => {
    const { a } = await enrolled('RS256');
    expect((await creds().findOne({ credential_id: a.id }))!.alg).toBe(-257);
  });

  it('wrong type: webauthn.get is refused', async () => {
    const u = await newUser();
    const o = await regOptions(u.key);
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: new SoftAuthenticator().makeCredential(o.body.challenge, { type: 'webauthn.get' }) });
    await expectRegistrationRefused(r, 'type_mismatch', u.userId);
  });

  it('wrong challenge is refused', async () => {
    const u = await newUser();
    await regOptions(u.key);
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: new SoftAuthenticator().makeCredential('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA') });
    await expectRegistrationRefused(r, 'challenge_mismatch', u.userId);
  });

  it('wrong origin is refused; a second configured origin is accepted', async () => {
    const u = await newUser();
    let o = await regOptions(u.key);
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: new SoftAuthenticator().makeCredential(o.body.challenge, { origin: 'https://evil.example' }) });
    await expectRegistrationRefused(r, 'origin_mismatch', u.userId);
    o = await regOptions(u.key);
    const ok = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: new SoftAuthenticator('ES256', 'localhost', 'https://admin.example.test').makeCredential(o.body.challenge) });
    expect(ok.status).toBe(201);
  });

  it('an expired challenge is refused', async () => {
    const u = await newUser();
    const o = await regOptions(u.key);
    await challenges().updateOne({ subject: `user:${u.userId}` }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: new SoftAuthenticator().makeCredential(o.body.challenge) });
    await expectRegistrationRefused(r, 'challenge_not_found', u.userId);
  });

  it('a replayed registration is refused (the challenge is single-use)', async () => {
    const u = await newUser();
    const a = new SoftAuthenticator();
    const o = await regOptions(u.key);
    const body = a.makeCredential(o.body.challenge);
    expect((await t.http('POST', '/auth/webauthn/register', { key: u.key, json: body })).status).toBe(201);
    const again = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: body });
    expect(expectError(again, 422, 'VALIDATION_ERROR').details.reason).toBe('challenge_not_found');
    expect(await creds().countDocuments({ credential_id: a.id })).toBe(1);
  });

  it("another user's challenge is refused", async () => {
    const alice = await newUser();
    const bob = await newUser();
    const bobs = await regOptions(bob.key);
    // Alice has no pending challenge of her own: the first check (a stored challenge) fails.
    const r = await t.http('POST', '/auth/webauthn/register', { key: alice.key, json: new SoftAuthenticator().makeCredential(bobs.body.challenge) });
    await expectRegistrationRefused(r, 'challenge_not_found', alice.userId);
    // With one of her own pending, Bob's challenge still does not match it.
    await regOptions(alice.key);
    const r2 = await t.http('POST', '/auth/webauthn/register', { key: alice.key, json: new SoftAuthenticator().makeCredential(bobs.body.challenge) });
    await expectRegistrationRefused(r2, 'challenge_mismatch', alice.userId);
    // Bob's challenge was not consumed by Alice's attempts.
    expect((await t.http('POST', '/auth/webauthn/register', { key: bob.key, json: new SoftAuthenticator().makeCredential(bobs.body.challenge) })).status).toBe(201);
  });

  it('an RP id hash mismatch is refused by attestation verification', async () => {
    const u = await newUser();
    const o = await regOptions(u.key);
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: new SoftAuthenticator('ES256', 'evil.example').makeCredential(o.body.challenge) });
    const err = expectError(r, 422, 'VALIDATION_ERROR');
    expect(String((err.details.errors as { msg: string }[])[0]!.msg)).toMatch(/RP ID/i);
    // Nothing written: the user still has no credential.
    await expectRegistrationRefused(r, 'attestation_invalid', u.userId);
  });

  it('a credential_id that differs from the attested one is refused', async () => {
    const u = await newUser();
    const o = await regOptions(u.key);
    const body = { ...new SoftAuthenticator().makeCredential(o.body.challenge), credential_id: new SoftAuthenticator().id };
    await expectRegistrationRefused(await t.http('POST', '/auth/webauthn/register', { key: u.key, json: body }), 'credential_id_mismatch', u.userId);
  });

  it('a garbled attestation object is refused', async () => {
    const u = await newUser();
    const o = await regOptions(u.key);
    const body = { ...new SoftAuthenticator().makeCredential(o.body.challenge), attestation_object: 'AAAA' };
    await expectRegistrationRefused(await t.http('POST', '/auth/webauthn/register', { key: u.key, json: body }), 'attestation_invalid', u.userId);
  });

  it('malformed base64url or a missing field is 422 and consumes nothing', async () => {
    const u = await newUser();
    const o = await regOptions(u.key);
    const good = new SoftAuthenticator().makeCredential(o.body.challenge);
    for (const bad of [
      { ...good, client_data_json: 'not base64url!' },
      { ...good, attestation_object: 'abc=' },
      { ...good, credential_id: undefined },
      { ...good, device_name: undefined },
      { ...good, transports: 'internal' },
    ]) {
      const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: bad });
      const err = expectError(r, 422, 'VALIDATION_ERROR');
      expect((err.details.errors as { loc: string[] }[])[0]!.loc[0]).toBe('body');
    }
    expect(await creds().countDocuments({ user_id: new Types.ObjectId(u.userId) })).toBe(0);
    // Input validation runs before the challenge is taken: the good body still registers.
    expect((await t.http('POST', '/auth/webauthn/register', { key: u.key, json: good })).status).toBe(201);
  });

  it('the same credential cannot be registered twice', async () => {
    const { u, a } = await enrolled();
    const before = await creds().findOne({ credential_id: a.id });
    const o = await regOptions(u.key);
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: a.makeCredential(o.body.challenge, { device_name: 'Second try' }) });
    expect(expectError(r, 422, 'VALIDATION_ERROR').details.reason).toBe('credential_exists');
    // Nothing written: still one credential, the stored one untouched.
    expect(await creds().countDocuments({ user_id: new Types.ObjectId(u.userId) })).toBe(1);
    expect(await creds().countDocuments({ credential_id: a.id })).toBe(1);
    expect(await creds().findOne({ credential_id: a.id })).toEqual(before);
  });

  it('checks run in a fixed order (challenge stored, type, challenge, origin): with two faults the first is reported', async () => {
    const u = await newUser();
    const wrongChallenge = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const evil = 'https://evil.example';
    for (const [faults, reason] of [
      [{ type: 'webauthn.get', origin: evil }, 'type_mismatch'],
      [{ challenge: wrongChallenge, origin: evil }, 'challenge_mismatch'],
      [{ type: 'webauthn.get', challenge: wrongChallenge }, 'type_mismatch'],
    ] as const) {
      const o = await regOptions(u.key);
      const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: new SoftAuthenticator().makeCredential(o.body.challenge, faults) });
      await expectRegistrationRefused(r, reason, u.userId);
    }
    // No challenge pending (the last attempt consumed it) comes before everything else.
    const r = await t.http('POST', '/auth/webauthn/register', {
      key: u.key,
      json: new SoftAuthenticator().makeCredential(wrongChallenge, { type: 'webauthn.get', origin: evil }),
    });
    await expectRegistrationRefused(r, 'challenge_not_found', u.userId);
  });

  it('transports may be empty or omitted: the credential is stored with []', async () => {
    const u = await newUser();
    const empty = new SoftAuthenticator();
    const omitted = new SoftAuthenticator();
    expect((await registerPasskey(t, u.key, empty, { transports: [] })).status).toBe(201);
    const o = await regOptions(u.key);
    const { transports, ...body } = omitted.makeCredential(o.body.challenge);
    expect(transports).toBeDefined();
    expect(Object.keys(body)).not.toContain('transports');
    const r = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: body });
    expect(r.status).toBe(201);
    for (const a of [empty, omitted]) expect((await creds().findOne({ credential_id: a.id }))!.transports).toEqual([]);
    // Both log in.
    expect((await loginWith(t, u.email, empty)).status).toBe(200);
    expect((await loginWith(t, u.email, omitted)).status).toBe(200);
  });
});

describe('login', () => {
  it('authenticate/options answers its documented fields for a user with passkeys', async () => {
    const { u, a } = await enrolled();
    const r = await loginOptions(u.email.toUpperCase());
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      challenge: expect.stringMatching(/^[A-Za-z0-9_-]{32,}$/),
      rpId: 'localhost',
      allowCredentials: [{ id: a.id, type: 'public-key', transports: ['internal'] }],
      userVerification: 'preferred',
      timeout: 60000,
    });
  });

  it('no account enumeration: unknown emails and users without passkeys get the same shape, stable decoys and a challenge', async () => {
    const plain = await newUser();
    for (const email of ['nobody-here@example.com', plain.email]) {
      const a = await loginOptions(email);
      const b = await loginOptions(email);
      expect(a.status).toBe(200);
      expect(Object.keys(a.body).sort()).toEqual(['allowCredentials', 'challenge', 'rpId', 'timeout', 'userVerification']);
      expect(a.body.allowCredentials).toHaveLength(1);
      expect(a.body.allowCredentials[0]).toEqual({ id: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), type: 'public-key', transports: ['internal'] });
      expect(b.body.allowCredentials).toEqual(a.body.allowCredentials);
      expect(b.body.challenge).not.toBe(a.body.challenge);
      expect(await challenges().countDocuments({ subject: emailKey(email) })).toBe(1);
    }
    // The login that follows fails exactly like a wrong signature.
    const stranger = new SoftAuthenticator();
    const o = await loginOptions('nobody-here@example.com');
    const r = await authenticate({ email: 'nobody-here@example.com', ...stranger.getAssertion(o.body.challenge) });
    const err = expectError(r, 401, 'AUTH_REQUIRED');
    const { u, a } = await enrolled();
    const o2 = await loginOptions(u.email);
    const badSig = { ...a.getAssertion(o2.body.challenge), signature: stranger.getAssertion(o2.body.challenge).signature };
    const err2 = expectError(await authenticate({ email: u.email, ...badSig }), 401, 'AUTH_REQUIRED');
    expect(err2).toEqual(err);
  });

  it('returns the same bearer token response as POST /auth/token; the counter and last_used_at are updated', async () => {
    const { u, a } = await enrolled();
    const r = await loginWith(t, u.email, a);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ token: expect.any(String), token_type: 'Bearer', expires_in: 3600 });
    const me = await t.http('GET', '/auth/me', { token: r.body.token });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(u.userId);
    const ref = await t.http('POST', '/auth/token', { key: u.key });
    expect(Object.keys(ref.body).sort()).toEqual(Object.keys(r.body).sort());
    let doc = (await creds().findOne({ credential_id: a.id }))!;
    expect(doc.sign_count).toBe(1);
    expect(doc.last_used_at).toBeInstanceOf(Date);
    expect((await loginWith(t, u.email, a)).status).toBe(200);
    doc = (await creds().findOne({ credential_id: a.id }))!;
    expect(doc.sign_count).toBe(2);
    const list = await t.http('GET', '/auth/webauthn/credentials', { key: u.key });
    expect(list.body).toEqual([{ credential_id: a.id, device_name: 'soft ES256', registered_at: expect.any(String), last_used_at: doc.last_used_at.toISOString() }]);
  });

  it('RS256 logins verify too', async () => {
    const { u, a } = await enrolled('RS256');
    expect((await loginWith(t, u.email, a)).status).toBe(200);
  });

  it('authenticators without a counter (always 0) log in repeatedly', async () => {
    const { u, a } = await enrolled();
    expect((await loginWith(t, u.email, a, { counter: 0 })).status).toBe(200);
    expect((await loginWith(t, u.email, a, { counter: 0 })).status).toBe(200);
  });

  /**
   * One refused login: 401 AUTH_REQUIRED and nothing written to the credential: sign count and last
   * use as they were (`before`; default: as registered) and not disabled.
   */
  async function expectLoginRefused(res: HttpResult<any>, credentialId: string, before: { sign_count: number; last_used_at: Date | null } = { sign_count: 0, last_used_at: null }) {
    expectError(res, 401, 'AUTH_REQUIRED');
    expect(res.body.token).toBeUndefined();
    const doc = await creds().findOne({ credential_id: credentialId });
    expect(doc).not.toBeNull();
    expect({ sign_count: doc!.sign_count, last_used_at: doc!.last_used_at, disabled_at: doc!.disabled_at }).toEqual({ ...before, disabled_at: null });
  }

  it('a login from the second configured origin succeeds', async () => {
    const { u, a } = await enrolled();
    const r = await loginWith(t, u.email, a, { origin: 'https://admin.example.test' });
    expect(r.status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: r.body.token })).body.id).toBe(u.userId);
    expect((await creds().findOne({ credential_id: a.id }))!.sign_count).toBe(1);
  });

  it('authenticate/options without an email is 422 VALIDATION_ERROR', async () => {
    for (const json of [{}, { email: null }, { e_mail: 'x@example.com' }]) {
      const err = expectError(await t.http('POST', '/auth/webauthn/authenticate/options', { key: null, json }), 422, 'VALIDATION_ERROR');
      expect((err.details.errors as { loc: string[] }[]).some((e) => e.loc.join('.') === 'body.email')).toBe(true);
    }
    expectError(await t.http('POST', '/auth/webauthn/authenticate/options', { key: null }), 422, 'VALIDATION_ERROR');
  });

  it("an unknown credential id under the email of a user with passkeys fails exactly like a wrong signature", async () => {
    const { u, a } = await enrolled();
    const stranger = new SoftAuthenticator();
    // A random credential id (the stranger's own) with a valid signature by its own key.
    let o = await loginOptions(u.email);
    const unknown = await authenticate({ email: u.email, ...stranger.getAssertion(o.body.challenge) });
    const errUnknown = expectError(unknown, 401, 'AUTH_REQUIRED');
    // The real credential with a signature by another key.
    o = await loginOptions(u.email);
    const badSig = await authenticate({ email: u.email, ...a.getAssertion(o.body.challenge), signature: stranger.getAssertion(o.body.challenge).signature });
    const errSig = expectError(badSig, 401, 'AUTH_REQUIRED');
    expect(errUnknown).toEqual(errSig);
    expect(errUnknown.details).toEqual({});
    expect(await creds().countDocuments({ credential_id: stranger.id })).toBe(0);
    await expectLoginRefused(unknown, a.id);
  });

  it('wrong type is refused', async () => {
    const { u, a } = await enrolled();
    await expectLoginRefused(await loginWith(t, u.email, a, { type: 'webauthn.create' }), a.id);
  });

  it('wrong challenge is refused', async () => {
    const { u, a } = await enrolled();
    await expectLoginRefused(await loginWith(t, u.email, a, { challenge: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }), a.id);
  });

  it('wrong origin is refused', async () => {
    const { u, a } = await enrolled();
    await expectLoginRefused(await loginWith(t, u.email, a, { origin: 'https://evil.example' }), a.id);
  });

  it('an expired challenge is refused', async () => {
    const { u, a } = await enrolled();
    const o = await loginOptions(u.email);
    await challenges().updateOne({ subject: emailKey(u.email) }, { $set: { expires_at: new Date(Date.now() - 1) } });
    await expectLoginRefused(await authenticate({ email: u.email, ...a.getAssertion(o.body.challenge) }), a.id);
  });

  it('a replayed assertion is refused (the challenge is consumed)', async () => {
    const { u, a } = await enrolled();
    const o = await loginOptions(u.email);
    const body = { email: u.email, ...a.getAssertion(o.body.challenge) };
    expect((await authenticate(body)).status).toBe(200);
    expectError(await authenticate(body), 401, 'AUTH_REQUIRED');
    expect((await creds().findOne({ credential_id: a.id }))!.sign_count).toBe(1);
  });

  it('only the newest challenge counts: an older options answer no longer verifies', async () => {
    const { u, a } = await enrolled();
    const older = await loginOptions(u.email);
    await loginOptions(u.email);
    await expectLoginRefused(await authenticate({ email: u.email, ...a.getAssertion(older.body.challenge) }), a.id);
  });

  it("another user's challenge is refused", async () => {
    const alice = await enrolled();
    const bob = await enrolled();
    const bobs = await loginOptions(bob.u.email);
    // Alice's assertion over Bob's challenge, sent as Alice (no challenge of hers pending)...
    await expectLoginRefused(await authenticate({ email: alice.u.email, ...alice.a.getAssertion(bobs.body.challenge) }), alice.a.id);
    // ...and with one of hers pending.
    await loginOptions(alice.u.email);
    await expectLoginRefused(await authenticate({ email: alice.u.email, ...alice.a.getAssertion(bobs.body.challenge) }), alice.a.id);
  });

  it('a bad signature is refused', async () => {
    const { u, a } = await enrolled();
    const o = await loginOptions(u.email);
    const body = a.getAssertion(o.body.challenge);
    const sig = Buffer.from(body.signature, 'base64url');
    sig[sig.length - 5]! ^= 0xff;
    await expectLoginRefused(await authenticate({ email: u.email, ...body, signature: sig.toString('base64url') }), a.id);
  });

  it('a signature by another key (same credential id) is refused', async () => {
    const { u, a } = await enrolled();
    const o = await loginOptions(u.email);
    const impostor = new SoftAuthenticator();
    await expectLoginRefused(await authenticate({ email: u.email, ...impostor.getAssertion(o.body.challenge), credential_id: a.id }), a.id);
  });

  it('tampered authenticator data is refused (counter raised after signing)', async () => {
    const { u, a } = await enrolled();
    const o = await loginOptions(u.email);
    const body = a.getAssertion(o.body.challenge);
    const data = Buffer.from(body.authenticator_data, 'base64url');
    data.writeUInt32BE(999, 33);
    await expectLoginRefused(await authenticate({ email: u.email, ...body, authenticator_data: data.toString('base64url') }), a.id);
  });

  it('an RP id hash mismatch is refused', async () => {
    const { u, a } = await enrolled();
    await expectLoginRefused(await loginWith(t, u.email, a, { rpId: 'evil.example' }), a.id);
  });

  it('an assertion without user presence is refused', async () => {
    const { u, a } = await enrolled();
    await expectLoginRefused(await loginWith(t, u.email, a, { flags: FLAGS.UV }), a.id);
  });

  it('counter regression: 401 PASSKEY_CLONE_DETECTED, the credential is disabled and its tokens die, a security warning is logged', async () => {
    const { u, a } = await enrolled();
    const first = await loginWith(t, u.email, a, { counter: 5 });
    expect(first.status).toBe(200);
    expect((await t.http('GET', '/auth/me', { token: first.body.token })).status).toBe(200);
    const clone = await loginWith(t, u.email, a, { counter: 5 });
    const err = expectError(clone, 401, 'PASSKEY_CLONE_DETECTED');
    expect(err.message).toMatch(/register/i);
    const doc = (await creds().findOne({ credential_id: a.id }))!;
    expect(doc.disabled_at).toBeInstanceOf(Date);
    expect(doc.disabled_reason).toBe('clone_detected');
    expect(doc.sign_count).toBe(5);
    // Even the genuine authenticator cannot log in again until the user re-enrols.
    expectError(await loginWith(t, u.email, a, { counter: 50 }), 401, 'AUTH_REQUIRED');
    expectError(await t.http('GET', '/auth/me', { token: first.body.token }), 401, 'AUTH_REQUIRED');
    // No longer offered at login.
    expect((await loginOptions(u.email)).body.allowCredentials.map((c: { id: string }) => c.id)).not.toContain(a.id);
    const warn = lines.find((l) => l.level === 40 && l.credential_id === a.id);
    expect(warn).toMatchObject({ security: true, msg: expect.stringMatching(/clone/) });
  });

  it('counter regression to a LOWER count (stored 5, presented 3): 401 PASSKEY_CLONE_DETECTED, the credential is disabled', async () => {
    const { u, a } = await enrolled();
    expect((await loginWith(t, u.email, a, { counter: 5 })).status).toBe(200);
    const clone = await loginWith(t, u.email, a, { counter: 3 });
    expectError(clone, 401, 'PASSKEY_CLONE_DETECTED');
    expect(clone.body.token).toBeUndefined();
    const doc = (await creds().findOne({ credential_id: a.id }))!;
    expect(doc).toMatchObject({ disabled_reason: 'clone_detected', sign_count: 5 });
    expect(doc.disabled_at).toBeInstanceOf(Date);
    // Disabled: a higher count afterwards does not bring it back.
    expectError(await loginWith(t, u.email, a, { counter: 6 }), 401, 'AUTH_REQUIRED');
  });

  it('re-enrolment after a clone: the disabled passkey stays in excludeCredentials until deleted; then a new one registers and logs in', async () => {
    const { u, a } = await enrolled();
    expect((await loginWith(t, u.email, a, { counter: 5 })).status).toBe(200);
    expectError(await loginWith(t, u.email, a, { counter: 3 }), 401, 'PASSKEY_CLONE_DETECTED');
    // Decision (docs/passkeys.md): excludeCredentials still lists the disabled credential, so the
    // browser will not make a second credential on that authenticator until the old one is deleted.
    const before = await regOptions(u.key);
    expect(before.body.excludeCredentials.map((c: { id: string }) => c.id)).toEqual([a.id]);
    // Not even a client ignoring excludeCredentials can store the same credential again.
    const same = await t.http('POST', '/auth/webauthn/register', { key: u.key, json: a.makeCredential(before.body.challenge) });
    expect(expectError(same, 422, 'VALIDATION_ERROR').details.reason).toBe('credential_exists');
    // The disabled passkey is listed, so the user can find and delete it.
    const list = await t.http('GET', '/auth/webauthn/credentials', { key: u.key });
    expect(list.body.map((c: { credential_id: string }) => c.credential_id)).toEqual([a.id]);
    expect((await t.http('DELETE', `/auth/webauthn/credentials/${a.id}`, { key: u.key })).status).toBe(204);
    expect(await creds().countDocuments({ credential_id: a.id })).toBe(0);
    expect((await regOptions(u.key)).body.excludeCredentials).toEqual([]);

    const b = new SoftAuthenticator();
    expect((await registerPasskey(t, u.key, b, { device_name: 'New laptop' })).status).toBe(201);
    expect((await loginOptions(u.email)).body.allowCredentials.map((c: { id: string }) => c.id)).toEqual([b.id]);
    const login = await loginWith(t, u.email, b);
    expect(login.status).toBe(200);
    const me = await t.http('GET', '/auth/me', { token: login.body.token });
    expect(me.body.id).toBe(u.userId);
    expect((await creds().findOne({ credential_id: b.id }))!).toMatchObject({ sign_count: 1, disabled_at: null });
    // The old credential stays refused.
    expectError(await loginWith(t, u.email, a, { counter: 50 }), 401, 'AUTH_REQUIRED');
  });

  it('a forged assertion with a low counter does not disable anyone (the clone check runs only on a valid signature)', async () => {
    const { u, a } = await enrolled();
    expect((await loginWith(t, u.email, a, { counter: 7 })).status).toBe(200);
    const o = await loginOptions(u.email);
    const forged = { ...new SoftAuthenticator().getAssertion(o.body.challenge, { counter: 1 }), credential_id: a.id };
    expectError(await authenticate({ email: u.email, ...forged }), 401, 'AUTH_REQUIRED');
    expect((await creds().findOne({ credential_id: a.id }))!.disabled_at).toBeNull();
    expect((await loginWith(t, u.email, a)).status).toBe(200);
  });

  it("another user's credential is refused", async () => {
    const alice = await enrolled();
    const bob = await enrolled();
    // Bob's valid assertion presented under Alice's email.
    await expectLoginRefused(await loginWith(t, alice.u.email, bob.a), bob.a.id);
  });

  it('a deleted credential is refused, and tokens issued from it stop working', async () => {
    const { u, a } = await enrolled();
    const tok = await loginWith(t, u.email, a);
    expect(tok.status).toBe(200);
    const del = await t.http('DELETE', `/auth/webauthn/credentials/${a.id}`, { key: u.key });
    expect(del.status).toBe(204);
    expect(await creds().countDocuments({ credential_id: a.id })).toBe(0);
    expectError(await loginWith(t, u.email, a), 401, 'AUTH_REQUIRED');
    expectError(await t.http('GET', '/auth/me', { token: tok.body.token }), 401, 'AUTH_REQUIRED');
    expectError(await t.http('DELETE', `/auth/webauthn/credentials/${a.id}`, { key: u.key }), 404, 'NOT_FOUND');
  });

  it('a disabled user cannot log in; re-enabled, the passkey works again; a deleted user loses its passkeys', async () => {
    const { u, a } = await enrolled();
    const tok = await loginWith(t, u.email, a);
    expect((await t.http('PATCH', `/admin/users/${u.userId}`, { json: { is_active: false } })).status).toBe(200);
    expectError(await loginWith(t, u.email, a), 401, 'AUTH_REQUIRED');
    expectError(await t.http('GET', '/auth/me', { token: tok.body.token }), 401, 'AUTH_REQUIRED');
    expect((await t.http('PATCH', `/admin/users/${u.userId}`, { json: { is_active: true } })).status).toBe(200);
    expect((await loginWith(t, u.email, a)).status).toBe(200);
    expect((await t.http('DELETE', `/admin/users/${u.userId}`)).status).toBe(204);
    // A durable consumer of user.deleted removes them within a poll (generous bound for a busy machine).
    await expect.poll(() => creds().countDocuments({ credential_id: a.id }), { timeout: 15_000 }).toBe(0);
    expectError(await loginWith(t, u.email, a), 401, 'AUTH_REQUIRED');
  });

  it('malformed base64url or a missing field is 422; the pending challenge survives', async () => {
    const { u, a } = await enrolled();
    const o = await loginOptions(u.email);
    const good = { email: u.email, ...a.getAssertion(o.body.challenge) };
    for (const bad of [
      { ...good, signature: 'a+b/' },
      { ...good, authenticator_data: '' },
      { ...good, client_data_json: undefined },
      { ...good, email: 'not-an-email' },
      { ...good, extra: 1 },
    ]) {
      const r = await authenticate(bad);
      expect(r.status).toBe(422);
      expect(envelope(r).code).toBe('VALIDATION_ERROR');
    }
    expectError(await loginOptions('nope'), 422, 'VALIDATION_ERROR');
    expect((await authenticate(good)).status).toBe(200);
  });

  it('the challenge store has a TTL index on expires_at and one challenge per (purpose, subject)', async () => {
    const idx = await challenges().indexes();
    expect(idx.find((i) => i.key.expires_at === 1)?.expireAfterSeconds).toBe(0);
    expect(idx.find((i) => i.key.purpose === 1 && i.key.subject === 1)?.unique).toBe(true);
    expect((await creds().indexes()).find((i) => i.key.credential_id === 1)?.unique).toBe(true);
  });
});
