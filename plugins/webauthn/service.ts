import { createHash, createHmac } from 'node:crypto';
import { Types } from 'mongoose';
import type * as Server from '@simplewebauthn/server';
import type * as Helpers from '@simplewebauthn/server/helpers';
import type { AuthenticatorTransport, PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server';
import { AppError, AuthRequiredError, NotFoundError, RateLimitedError, type ErrorCodes } from '../../core/errors.ts';
import { requestOf, type Actor } from '../../core/context.ts';
import { requireRole } from '../../core/access.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { AuthenticationService } from '../identity/index.ts';
import { TenantRequiredError } from '../../core/errors.ts';
import type { MembershipService } from '../identity/index.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { AuthFailureLimiter } from '../../core/rate-limit.ts';
import type { Logger } from '../../core/logger.ts';
import { credentialView, type CredentialRecord, type CredentialView, type WebAuthnModels } from './model.ts';
import type { AuthenticateBody, RegisterBody } from './schemas.ts';

/**
 * The key of an email in stored login state (challenges, the failed-login limiter): a hash, never
 * the address, so that no collection outside the user's own records holds it (privacy erasure).
 */
export const emailKey = (email: string): string => `email:${createHash('sha256').update(email.trim().toLowerCase()).digest('hex').slice(0, 32)}`;

/** Error code of a login refused because the sign count did not increase (possible cloned authenticator). */
export const PASSKEY_CLONE_DETECTED = 'PASSKEY_CLONE_DETECTED';
/** The passkeys plugin's codes in the error catalogue. */
export const passkeyErrorCodes: ErrorCodes = {
  PASSKEY_CLONE_DETECTED: {
    example: new AppError(401, PASSKEY_CLONE_DETECTED, 'The authenticator reported a sign count that did not increase; this passkey is disabled'),
    description: 'A passkey login whose sign count did not increase: the passkey is disabled.',
  },
};
/** Credential kind bearer tokens issued by a passkey login are bound to (`cid` claim `passkey:<id>`). */
export const PASSKEY_CREDENTIAL_KIND = 'passkey';
/** COSE algorithms offered and accepted: ES256 (-7) and RS256 (-257). */
export const SUPPORTED_ALGORITHMS = [-7, -257];

/**
 * Who may call each passkey operation: the one declaration its REST route and GraphQL field both
 * read. `userPasskeys` (an administrator's view of any user of their tenant) and `passkeysOf`
 * (`User.passkeys`: any caller, who then sees only their own unless an administrator) both call
 * {@link WebAuthnService.listForUser}.
 */
export const WEBAUTHN_PERMISSIONS = {
  registerOptions: 'user', register: 'user', authenticateOptions: 'public', authenticate: 'public',
  listOwn: 'user', passkeysOf: 'user', userPasskeys: 'admin', deleteOwn: 'user',
} as const satisfies Permissions;

export interface WebAuthnSettings {
  rpId: string;
  rpName: string;
  origins: string[];
  /** Option `timeout` and challenge lifetime, in ms. */
  timeoutMs: number;
  /** Key for decoy credential ids of unknown emails. */
  decoySecret: string;
}

/**
 * @simplewebauthn/server, loaded on first use: it pulls in ASN.1 and certificate parsing that
 * costs about as much start-up time as mongoose, which a server that never sees a passkey
 * ceremony (or fails on a bad setting) should not pay.
 */
let library: Promise<[typeof Server, typeof Helpers]> | undefined;
const webauthnLib = () => (library ??= Promise.all([import('@simplewebauthn/server'), import('@simplewebauthn/server/helpers')]));

/** Registration refusal: 422 `VALIDATION_ERROR` with the machine-readable `details.reason`. */
class RegistrationError extends AppError {
  constructor(reason: string, message: string, field = 'client_data_json') {
    super(422, 'VALIDATION_ERROR', `Passkey registration failed: ${message}`, { reason, errors: [{ loc: ['body', field], msg: message, type: reason }] });
  }
}

/** Any refused login. Clients see one generic 401; the reason is logged only (no oracle for attackers). */
class LoginFailure extends Error {
  constructor(readonly reason: string, readonly clone = false) {
    super(reason);
  }
}

interface ClientData {
  type?: unknown;
  challenge?: unknown;
  origin?: unknown;
}

function parseClientData(b64: string): ClientData | null {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(b64, 'base64url').toString('utf8'));
    return parsed && typeof parsed === 'object' ? (parsed as ClientData) : null;
  } catch {
    return null;
  }
}

export interface WebAuthnDeps {
  models: WebAuthnModels;
  /** Identity's authentication: users by email, token issue, credential kinds and their cache. */
  identity: AuthenticationService;
  /** The person behind a passkey: its memberships, and the one a login acts in. */
  memberships: MembershipService;
  failures: AuthFailureLimiter;
  /** `MULTI_TENANT_ENABLED`: whether administrators see only their own tenant's passkeys. */
  tenancy: Tenancy;
  settings: WebAuthnSettings;
  log: Logger;
}

/**
 * Passkey registration and login on top of @simplewebauthn/server: it builds the options and
 * verifies attestation and assertion (CBOR, COSE keys, rp id hash, flags, signature); this
 * service owns challenges, credentials, the clone check, rate limiting and token issue.
 * No Koa or GraphQL here.
 */
export class WebAuthnService {
  private readonly models: WebAuthnModels;
  private readonly identity: AuthenticationService;
  private readonly memberships: MembershipService;
  private readonly failures: AuthFailureLimiter;
  private readonly tenancy: Tenancy;
  private readonly settings: WebAuthnSettings;
  private readonly log: Logger;

  constructor(deps: WebAuthnDeps) {
    ({ models: this.models, identity: this.identity, memberships: this.memberships, failures: this.failures, tenancy: this.tenancy, settings: this.settings, log: this.log } = deps);
  }

  /** Token binding: a passkey token lives only while its credential exists and is not disabled. */
  async resolveCredential(id: string): Promise<{ user_id: string } | null> {
    if (!Types.ObjectId.isValid(id)) return null;
    const c = await this.models.Credential.findOne({ _id: id, disabled_at: null }, { user_id: 1 }).lean();
    return c ? { user_id: String(c.user_id) } : null;
  }

  /** `POST /auth/webauthn/register/options`: creation options; the challenge replaces any pending one of this user. */
  async registerOptions(actor: Actor): Promise<PublicKeyCredentialCreationOptionsJSON> {
    const existing = await this.models.Credential.find(await this.own(actor), { credential_id: 1, transports: 1 }).lean();
    const [{ generateRegistrationOptions }] = await webauthnLib();
    const options = await generateRegistrationOptions({
      rpName: this.settings.rpName,
      rpID: this.settings.rpId,
      userName: actor.email,
      userID: Buffer.from(actor.id, 'hex'),
      userDisplayName: actor.name,
      timeout: this.settings.timeoutMs,
      attestationType: 'none',
      excludeCredentials: existing.map((c) => ({ id: c.credential_id, transports: c.transports as AuthenticatorTransport[] })),
      authenticatorSelection: { authenticatorAttachment: 'platform', userVerification: 'preferred', residentKey: 'preferred' },
      supportedAlgorithmIDs: SUPPORTED_ALGORITHMS,
    });
    await this.storeChallenge('register', `user:${actor.id}`, options.challenge);
    return options;
  }

  /**
   * `POST /auth/webauthn/register`: four checks in this order (a challenge stored for this user,
   * client data type, challenge, origin), then full attestation verification by the library.
   * A refusal names the first check that failed.
   * @throws AppError 422 `VALIDATION_ERROR` with `details.reason`
   */
  async register(actor: Actor, body: RegisterBody): Promise<CredentialView> {
    // Consumed whatever follows: a challenge serves one attempt.
    const stored = await this.takeChallenge('register', `user:${actor.id}`);
    if (!stored) throw new RegistrationError('challenge_not_found', 'no pending registration challenge for this user (none requested, expired or already used)');
    const clientData = parseClientData(body.client_data_json);
    if (!clientData) throw new RegistrationError('client_data_invalid', 'client_data_json is not base64url-encoded JSON');
    if (clientData.type !== 'webauthn.create') throw new RegistrationError('type_mismatch', 'client data type must be webauthn.create');
    if (clientData.challenge !== stored) throw new RegistrationError('challenge_mismatch', 'client data challenge does not match the issued challenge');
    if (typeof clientData.origin !== 'string' || !this.settings.origins.includes(clientData.origin))
      throw new RegistrationError('origin_mismatch', `client data origin is not one of ${this.settings.origins.join(', ')}`);

    const [{ verifyRegistrationResponse }, { decodeCredentialPublicKey }] = await webauthnLib();
    let info;
    try {
      const res = await verifyRegistrationResponse({
        response: {
          id: body.credential_id,
          rawId: body.credential_id,
          type: 'public-key',
          response: { clientDataJSON: body.client_data_json, attestationObject: body.attestation_object, transports: body.transports as AuthenticatorTransport[] },
          clientExtensionResults: {},
        },
        expectedChallenge: stored,
        expectedOrigin: this.settings.origins,
        expectedRPID: this.settings.rpId,
        expectedType: 'webauthn.create',
        // userVerification is `preferred`: presence is required, verification is not.
        requireUserVerification: false,
        supportedAlgorithmIDs: SUPPORTED_ALGORITHMS,
      });
      if (!res.verified) throw new Error('attestation statement did not verify');
      info = res.registrationInfo;
    } catch (err) {
      throw new RegistrationError('attestation_invalid', err instanceof Error ? err.message : String(err), 'attestation_object');
    }
    if (info.credential.id !== body.credential_id)
      throw new RegistrationError('credential_id_mismatch', 'credential_id differs from the id in the authenticator data', 'credential_id');

    const alg = coseAlg(decodeCredentialPublicKey(new Uint8Array(info.credential.publicKey)));
    try {
      const doc = await this.models.Credential.create({
        credential_id: body.credential_id,
        public_key: Buffer.from(info.credential.publicKey),
        alg,
        sign_count: info.credential.counter,
        transports: body.transports,
        device_name: body.device_name,
        attestation_object: Buffer.from(body.attestation_object, 'base64url'),
        user_id: actor.id,
        tenant_id: actor.tenant_id,
        registered_at: new Date(),
        last_used_at: null,
      });
      requestOf(actor)?.log.info({ credential_id: doc.credential_id, user_id: actor.id }, 'passkey registered');
      return credentialView(doc.toObject());
    } catch (err) {
      if ((err as { code?: number }).code === 11000) throw new RegistrationError('credential_exists', 'this credential is already registered', 'credential_id');
      throw err;
    }
  }

  /**
   * `POST /auth/webauthn/authenticate/options`. Same answer shape for every email: an unknown one,
   * or a user without passkeys, gets a stable decoy credential id, and a challenge is stored either way.
   */
  async authenticateOptions(email: string): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const users = await this.identity.usersByEmail(email);
    const creds = await this.models.Credential.find({ user_id: { $in: users.map((u) => u.id) }, disabled_at: null }, { credential_id: 1, transports: 1 })
      .sort({ _id: 1 })
      .limit(50)
      .lean();
    const allow = creds.length
      ? creds.map((c) => ({ id: c.credential_id, transports: c.transports as AuthenticatorTransport[] }))
      : [{ id: this.decoyId(email), transports: ['internal' as const] }];
    const [{ generateAuthenticationOptions }] = await webauthnLib();
    const options = await generateAuthenticationOptions({
      rpID: this.settings.rpId,
      allowCredentials: allow,
      timeout: this.settings.timeoutMs,
      userVerification: 'preferred',
    });
    await this.storeChallenge('authenticate', emailKey(email), options.challenge);
    return options;
  }

  /**
   * `POST /auth/webauthn/authenticate`: challenge (consumed), credential of an active user with
   * this email, assertion (type, challenge, origin, rp id hash, flags, signature) by the library,
   * then the clone check and an atomic sign-count update. A passkey is its person's: the token acts
   * in the person's only membership, or in `tenantId` (`X-Tenant-Id`) among several; a tenant the
   * person is no member of fails like an unknown credential. Failures count in the failed-auth limiter.
   * @throws AuthRequiredError 401 for any failure; AppError 401 `PASSKEY_CLONE_DETECTED`; RateLimitedError 429;
   *   TenantRequiredError 409 `TENANT_REQUIRED` (after a verified assertion only) for several memberships and no tenant
   */
  async authenticate(body: AuthenticateBody, ip: string | null, log: Logger = this.log, tenantId: string | null = null) {
    const who = emailKey(body.email);
    // As for API keys, only failures are refused (429 past AUTH_FAILURE_LIMIT): a valid passkey
    // always logs in, so nobody can lock a user out by failing on purpose.
    try {
      return await this.login(body, tenantId);
    } catch (err) {
      if (!(err instanceof LoginFailure)) throw err;
      if (err.clone) log.warn({ security: true, credential_id: body.credential_id, email: body.email, ip }, 'passkey sign count did not increase: possible cloned authenticator; credential disabled');
      else log.info({ reason: err.reason, credential_id: body.credential_id, ip }, 'passkey login refused');
      const locked = await this.failures.fail(ip, who);
      if (locked !== null) throw new RateLimitedError(locked);
      if (err.clone)
        throw new AppError(401, PASSKEY_CLONE_DETECTED, 'The authenticator reported a sign count that did not increase; this passkey is disabled: delete it and register a new one', {});
      throw new AuthRequiredError('Passkey login failed');
    }
  }

  private async login(body: AuthenticateBody, tenantId: string | null) {
    const stored = await this.takeChallenge('authenticate', emailKey(body.email));
    if (!stored) throw new LoginFailure('challenge_not_found');
    // The credential names the account (its id is global); the email sent must be that account's.
    // The email is never searched across tenants here: one email may be several tenants' users.
    const cred = await this.models.Credential.findOne({ credential_id: body.credential_id }).lean();
    if (!cred) throw new LoginFailure('unknown_credential');
    // Inactive and deleted memberships are not chosen: they cannot be logged in to.
    const choice = await this.memberships.choose(String(cred.user_id), body.email, tenantId);
    if (choice.kind === 'none') throw new LoginFailure(tenantId ? 'no_membership_in_tenant' : 'credential_of_another_account');
    if (cred.disabled_at) throw new LoginFailure('credential_disabled');

    const [{ verifyAuthenticationResponse }] = await webauthnLib();
    let newCounter: number;
    try {
      const res = await verifyAuthenticationResponse({
        response: {
          id: body.credential_id,
          rawId: body.credential_id,
          type: 'public-key',
          response: { clientDataJSON: body.client_data_json, authenticatorData: body.authenticator_data, signature: body.signature },
          clientExtensionResults: {},
        },
        expectedChallenge: stored,
        expectedOrigin: this.settings.origins,
        expectedRPID: this.settings.rpId,
        expectedType: 'webauthn.get',
        // Counter 0: the library would refuse a regression before checking the signature; the
        // clone check below runs only on a verified signature, so a forged assertion can never
        // disable someone's passkey.
        credential: { id: cred.credential_id, publicKey: bytes(cred.public_key), counter: 0, transports: cred.transports as AuthenticatorTransport[] },
        requireUserVerification: false,
      });
      if (!res.verified) throw new Error('signature did not verify');
      newCounter = res.authenticationInfo.newCounter;
    } catch (err) {
      throw new LoginFailure(`assertion_invalid: ${err instanceof Error ? err.message : String(err)}`);
    }

    // Clone check: a stored count > 0 and a new count <= it (authenticators without a counter always report 0).
    if (cred.sign_count > 0 && newCounter <= cred.sign_count) {
      await this.models.Credential.updateOne({ _id: cred._id, disabled_at: null }, { $set: { disabled_at: new Date(), disabled_reason: 'clone_detected' } });
      this.identity.invalidateCredential(PASSKEY_CREDENTIAL_KIND, String(cred._id));
      throw new LoginFailure('clone_detected', true);
    }
    // Conditional on the count read: two logins racing on one count cannot both pass.
    const updated = await this.models.Credential.findOneAndUpdate(
      { _id: cred._id, disabled_at: null, sign_count: newCounter > 0 ? { $lt: newCounter } : 0 },
      { $set: { sign_count: newCounter, last_used_at: new Date() } },
      { returnDocument: 'after', projection: { _id: 1 } },
    ).lean();
    if (!updated) throw new LoginFailure('sign_count_race');
    // Only now, with the assertion verified, may the answer name the person's tenants.
    if (choice.kind === 'choose') throw new TenantRequiredError(choice.tenants);
    return this.identity.issueToken(choice.user, { kind: PASSKEY_CREDENTIAL_KIND, id: String(cred._id) });
  }

  /** `GET /auth/webauthn/credentials` / GraphQL `me.passkeys`: the actor's own passkeys. */
  async listOwn(actor: Actor): Promise<CredentialView[]> {
    return this.list(await this.own(actor));
  }

  /**
   * An administrator's view of one user's passkeys, inside the administrator's tenant (system
   * actors, or every administrator when `MULTI_TENANT_ENABLED` is off: any tenant). Anyone may ask
   * for their own: whose passkeys the caller may see is a rule about the data, checked here.
   * @throws AccessDeniedError for a non-administrator asking for someone else's
   */
  async listForUser(actor: Actor, userId: string): Promise<CredentialView[]> {
    if (actor.id === userId) return this.listOwn(actor);
    requireRole(actor, 'admin');
    return this.list({ user_id: userId, ...this.tenancy.filter(actor) });
  }

  /**
   * `DELETE /auth/webauthn/credentials/{credential_id}`: only the actor's own; tokens issued from
   * it stop working (this process at once, other replicas within `AUTH_CACHE_TTL_MS`).
   * @throws NotFoundError for anyone else's or an unknown credential
   */
  async deleteOwn(actor: Actor, credentialId: string): Promise<void> {
    const doc = await this.models.Credential.findOneAndDelete({ credential_id: credentialId, ...(await this.own(actor)) }).lean();
    if (!doc) throw new NotFoundError('passkey', credentialId);
    this.identity.invalidateCredential(PASSKEY_CREDENTIAL_KIND, String(doc._id));
    requestOf(actor)?.log.info({ credential_id: credentialId, user_id: actor.id }, 'passkey deleted');
  }

  /**
   * `user.disabled` / `user.deleted` (a durable consumer): a disabled user's passkeys stay (that
   * membership is refused at login) and return on re-enabling. A deleted user's go with it, unless
   * its person has another membership: then they pass to that one (they are the person's).
   */
  async onUserDisabled(e: { user_id: string; reason: 'disabled' | 'deleted' }): Promise<void> {
    const docs = await this.models.Credential.find({ user_id: e.user_id }, { _id: 1 }).lean();
    for (const d of docs) this.identity.invalidateCredential(PASSKEY_CREDENTIAL_KIND, String(d._id));
    const heir = e.reason === 'deleted' && docs.length ? await this.memberships.heirOf(e.user_id) : null;
    if (heir) {
      await this.models.Credential.updateMany({ user_id: e.user_id }, { $set: { user_id: heir.user_id, tenant_id: heir.tenant_id } });
    } else if (e.reason === 'deleted') {
      const res = await this.models.Credential.deleteMany({ user_id: e.user_id });
      if (res.deletedCount) this.log.info({ user_id: e.user_id, count: res.deletedCount }, 'passkeys of a deleted user removed');
    }
  }

  /** The actor's own credentials: its person's, registered from any of the person's memberships (never by the tenant it acts in). */
  private async own(actor: Actor) {
    const ids = await this.memberships.siblingIds(actor.id);
    return { user_id: { $in: ids.includes(actor.id) ? ids : [...ids, actor.id] } };
  }

  private async list(filter: Record<string, unknown>): Promise<CredentialView[]> {
    const docs = await this.models.Credential.find(filter).sort({ registered_at: 1, _id: 1 }).lean();
    return docs.map((d) => credentialView(d as CredentialRecord));
  }

  /** Upsert: one pending challenge per (purpose, subject); a newer options call replaces the older. */
  private async storeChallenge(purpose: 'register' | 'authenticate', subject: string, challenge: string): Promise<void> {
    const update = { $set: { challenge, expires_at: new Date(Date.now() + this.settings.timeoutMs) } };
    try {
      await this.models.Challenge.updateOne({ purpose, subject }, update, { upsert: true });
    } catch (err) {
      // Two concurrent first upserts: the loser's insert hits the unique index; the document exists now.
      if ((err as { code?: number }).code !== 11000) throw err;
      await this.models.Challenge.updateOne({ purpose, subject }, update);
    }
  }

  /** Atomically remove and return the pending, unexpired challenge (single use). */
  private async takeChallenge(purpose: 'register' | 'authenticate', subject: string): Promise<string | null> {
    const doc = await this.models.Challenge.findOneAndDelete({ purpose, subject, expires_at: { $gt: new Date() } }).lean();
    return doc?.challenge ?? null;
  }

  /** A stable fake credential id per email, so options for unknown emails look like real ones. */
  private decoyId(email: string): string {
    return createHmac('sha256', this.settings.decoySecret).update(`webauthn-decoy:${email}`).digest().subarray(0, 32).toString('base64url');
  }
}

/** A stored binary as bytes: lean reads return BSON `Binary`, documents return `Buffer`. */
function bytes(v: unknown): Uint8Array<ArrayBuffer> {
  if (v instanceof Uint8Array) return new Uint8Array(v);
  const inner = (v as { buffer?: unknown } | null)?.buffer;
  if (inner instanceof Uint8Array) return new Uint8Array(inner);
  throw new Error('stored passkey public key is not binary');
}

/** COSE `alg` (label 3) of a COSE_Key decoded by the library. */
function coseAlg(key: { get(label: number): unknown }): number {
  const alg = key.get(3);
  return typeof alg === 'number' ? alg : 0;
}
