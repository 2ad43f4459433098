import { hashKey, type Authenticator } from '../../core/authentication.ts';
import { LRUCache } from 'lru-cache';
import { Types } from 'mongoose';
import { SignJWT, jwtVerify, errors as joseErrors, type JWTPayload } from 'jose';
import type { Config } from '../../config/index.ts';
import { AuthRequiredError } from '../../core/errors.ts';
import type { Actor, CredentialRef } from '../../core/context.ts';
import type { Logger } from '../../core/logger.ts';
import type { IdentityModels, UserDoc } from './model.ts';

/** Most credentials (and key-use timestamps) one process keeps in memory. */
const CACHE_MAX_ENTRIES = 10_000;
const LAST_USED_THROTTLE_MS = 60_000;

/** A stored user as read back (lean), with the fields mongoose adds. */
export type UserRecord = UserDoc & { _id: Types.ObjectId; created_at?: Date };

/** A stored user as the actor every service is given. */
export const toAuthUser = (u: UserRecord): Actor => ({
  id: String(u._id),
  email: u.email,
  name: u.name,
  tenant_id: String(u.tenant_id),
  roles: [...(u.roles ?? [])],
  scope: u.scope === 'system' ? 'system' : null,
  is_system_user: !!u.is_system_user,
  features: [...(u.features ?? [])],
  attributes: (u.attributes as Record<string, unknown> | undefined) ?? {},
});

/** Users that exist for every purpose but the audit trail: not soft-deleted. */
export const LIVE = { is_deleted: { $ne: true } } as const;

/**
 * Finds who owns a live credential of one kind: the user id, or null when the credential is gone
 * (revoked, deleted). Token authentication calls it (cached for `AUTH_CACHE_TTL_MS`) so a token
 * dies with the credential it descends from.
 */
export type CredentialResolver = (id: string) => Promise<{ user_id: string } | null>;

/** Claim naming a token's root credential: `<kind>:<id>`, e.g. `api_key:65f0…`. */
const CREDENTIAL_CLAIM = 'cid';
const CREDENTIAL_KIND = /^[a-z][a-z0-9_]{0,31}$/;

export interface AuthenticationDeps {
  models: IdentityModels;
  config: Config;
  log: Logger;
}

/**
 * Authentication: resolves API keys and bearer tokens to their actor, issues tokens bound to the
 * credential that authenticated, and keeps the per-process credential cache. Plugins with other
 * credentials (passkeys) register their kind here. No Koa or GraphQL here.
 */
export class AuthenticationService implements Authenticator {
  /**
   * Resolved credentials, per process, for `AUTH_CACHE_TTL_MS` (lru-cache: bounded by entry count
   * and TTL, least recently used evicted first). Revocation here drops entries at once; other
   * replicas follow when their entry expires, so the TTL is the revocation delay across replicas.
   */
  private readonly cache: LRUCache<string, { actor: Actor; keyId?: string }> | null;
  private readonly lastUsedWrites = new LRUCache<string, number>({ max: CACHE_MAX_ENTRIES });
  /**
   * Lookups under way, by cache key: requests that miss the cache together (its entry just expired,
   * under load) share one database lookup instead of each sending its own.
   */
  private readonly lookups = new Map<string, Promise<{ actor: Actor; keyId?: string }>>();
  private readonly secret: Uint8Array;
  private readonly credentialKinds = new Map<string, CredentialResolver>();
  /**
   * Kinds whose credentials are a person's (passkeys): a token from one may act as any active
   * membership of its owner's person (the token's `sub`), never as a users document of another person.
   */
  private readonly personalKinds = new Set<string>();
  /** The identity collections (the privacy plugin's erasure reads and disables users and keys through them). */
  readonly models: IdentityModels;
  protected readonly config: Config;
  protected readonly log: Logger;

  constructor(deps: AuthenticationDeps) {
    ({ models: this.models, config: this.config, log: this.log } = deps);
    this.secret = new TextEncoder().encode(this.config.TOKEN_SECRET);
    this.cache = this.config.AUTH_CACHE_TTL_MS > 0 ? new LRUCache({ max: CACHE_MAX_ENTRIES, ttl: this.config.AUTH_CACHE_TTL_MS }) : null;
    this.registerCredentialKind('api_key', async (id) => {
      const key = Types.ObjectId.isValid(id) ? await this.models.ApiKey.findOne({ _id: id, revoked_at: null }, { user_id: 1 }).lean() : null;
      return key ? { user_id: String(key.user_id) } : null;
    });
  }

  /**
   * Let tokens be bound to another kind of credential (e.g. `passkey`): `resolve` says whether one
   * is still live and whose it is. Call `invalidateCredential(kind, id)` when one is removed.
   * `personal`: the credential is the person's, so its tokens may act as any of the person's memberships.
   * @example identity.registerCredentialKind('passkey', async (id) => ...)
   */
  registerCredentialKind(kind: string, resolve: CredentialResolver, opts: { personal?: boolean } = {}): void {
    if (!CREDENTIAL_KIND.test(kind)) throw new Error(`Credential kind "${kind}" must match ${CREDENTIAL_KIND}`);
    if (this.credentialKinds.has(kind)) throw new Error(`Credential kind "${kind}" is already registered`);
    this.credentialKinds.set(kind, resolve);
    if (opts.personal) this.personalKinds.add(kind);
  }

  /** Forget this process's cached resolution of a credential (after revoking it); other processes follow within `AUTH_CACHE_TTL_MS`. */
  invalidateCredential(kind: string, id: string): void {
    const key = `t:${kind}:${id}`;
    const mine = (k: string) => k === key || k.startsWith(`${key}@`);
    for (const k of [...this.lookups.keys()]) if (mine(k)) this.lookups.delete(k);
    if (this.cache) for (const k of [...this.cache.keys()]) if (mine(k)) this.cache.delete(k);
  }

  /** Drop cached credentials of a user, e.g. after its roles changed. */
  invalidateUser(userId: string): void {
    // A lookup under way may have read the user as it was: later requests look again.
    this.lookups.clear();
    if (!this.cache) return;
    for (const [k, v] of this.cache.entries()) if (v.actor.id === userId) this.cache.delete(k);
  }

  /** Resolve an `X-API-Key`. @throws AuthRequiredError when unknown, revoked, or its user is inactive */
  async authenticateApiKey(key: string, hash = hashKey(key)): Promise<Actor> {
    const hit = this.cache?.get(`k:${hash}`) ?? (await this.once(`k:${hash}`, () => this.lookUpApiKey(hash)));
    this.touchKey(hit.keyId);
    return hit.actor;
  }

  /** @see Authenticator.cachedApiKey */
  cachedApiKey(hash: string): Actor | undefined {
    const hit = this.cache?.get(`k:${hash}`);
    if (!hit) return undefined;
    this.touchKey(hit.keyId);
    return hit.actor;
  }

  private async lookUpApiKey(hash: string): Promise<{ actor: Actor; keyId: string }> {
    const apiKey = await this.models.ApiKey.findOne({ key_hash: hash, revoked_at: null }).lean();
    if (!apiKey) throw new AuthRequiredError('Invalid API key');
    const user = await this.models.User.findOne({ _id: apiKey.user_id, is_active: true, ...LIVE }).lean();
    if (!user) throw new AuthRequiredError('Invalid API key');
    const actor: Actor = { ...toAuthUser(user), credential: { kind: 'api_key', id: String(apiKey._id) } };
    this.toCache(`k:${hash}`, actor, String(apiKey._id));
    return { actor, keyId: String(apiKey._id) };
  }

  /** Runs `lookUp` for `key` unless a lookup of the same key is under way, whose answer it then shares. */
  private once<T extends { actor: Actor; keyId?: string }>(key: string, lookUp: () => Promise<T>): Promise<T> {
    const running = this.lookups.get(key) as Promise<T> | undefined;
    if (running) return running;
    const p = lookUp().finally(() => this.lookups.delete(key));
    this.lookups.set(key, p);
    return p;
  }

  /**
   * Resolve a bearer token: signature, `exp`, then its root credential (`cid` claim) must still be
   * live and belong to `sub`, and the user must be active. The credential check is cached like
   * other credentials, so revoking a key ends every token of its chain within `AUTH_CACHE_TTL_MS`.
   * @throws AuthRequiredError when invalid, expired, unbound, or its credential or user is gone
   */
  async authenticateToken(token: string): Promise<Actor> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.secret, { algorithms: ['HS256'], requiredClaims: ['exp', 'sub', CREDENTIAL_CLAIM] }));
    } catch (err) {
      throw new AuthRequiredError(err instanceof joseErrors.JWTExpired ? 'Token expired' : 'Invalid token');
    }
    const { sub, exp, tid } = payload;
    const cid = payload[CREDENTIAL_CLAIM];
    const m = typeof cid === 'string' ? /^([a-z][a-z0-9_]*):(.+)$/.exec(cid) : null;
    const resolve = m ? this.credentialKinds.get(m[1]!) : undefined;
    if (!sub || !Types.ObjectId.isValid(sub) || !m || !resolve || typeof exp !== 'number') throw new AuthRequiredError('Invalid token');
    const [kind, id] = [m[1]!, m[2]!];
    // A personal credential's tokens act as different memberships: one cache entry per membership.
    const personal = this.personalKinds.has(kind);
    const cacheKey = personal ? `t:${kind}:${id}@${sub}` : `t:${kind}:${id}`;
    const { actor } = this.cache?.get(cacheKey) ?? (await this.once(cacheKey, async () => {
      const owner = await resolve(id);
      if (!owner) throw new AuthRequiredError('Invalid token');
      const doc = await this.models.User.findOne({ _id: personal ? sub : owner.user_id, is_active: true, ...LIVE }).lean();
      if (!doc) throw new AuthRequiredError('Invalid token');
      if (personal && owner.user_id !== sub) {
        const own = await this.models.User.findOne({ _id: owner.user_id }, { person_id: 1 }).lean();
        if (!own || String(own.person_id ?? own._id) !== String(doc.person_id ?? doc._id)) throw new AuthRequiredError('Invalid token');
      }
      const found = toAuthUser(doc);
      this.toCache(cacheKey, found, kind === 'api_key' ? id : undefined);
      return { actor: found };
    }));
    // A token naming someone else's credential, or another tenant than its user's, is forged or
    // stale: never act as either user, nor in either tenant.
    if (actor.id !== sub || tid !== actor.tenant_id) throw new AuthRequiredError('Invalid token');
    return { ...actor, credential: { kind, id, exp } };
  }

  /**
   * Issue a signed HS256 JWT for the actor, bound to the credential it authenticated with.
   * Claims: `sub` (user id), `tid` (tenant id), `cid` (`<kind>:<id>` of the root credential),
   * `iat`, `exp`. Lifetime `TOKEN_TTL_SECONDS`, but a token minted from a token keeps the root
   * credential and never outlives its parent (`exp` is capped at the parent's).
   * @param credential defaults to `actor.credential`; plugins that log users in (passkeys) pass their own
   * @throws AuthRequiredError when the parent token has (just) expired
   */
  async issueToken(actor: Actor, credential: CredentialRef | undefined = actor.credential): Promise<{ token: string; token_type: 'Bearer'; expires_in: number }> {
    if (!credential) throw new Error('issueToken: the actor has no credential to bind the token to');
    if (!this.credentialKinds.has(credential.kind)) throw new Error(`issueToken: credential kind "${credential.kind}" is not registered`);
    const now = Math.floor(Date.now() / 1000);
    const exp = Math.min(now + this.config.TOKEN_TTL_SECONDS, credential.exp ?? Number.POSITIVE_INFINITY);
    if (exp <= now) throw new AuthRequiredError('Token expired');
    const token = await new SignJWT({ tid: actor.tenant_id, [CREDENTIAL_CLAIM]: `${credential.kind}:${credential.id}` })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(actor.id)
      .setIssuedAt(now)
      .setExpirationTime(exp)
      .sign(this.secret);
    return { token, token_type: 'Bearer', expires_in: exp - now };
  }

  /**
   * Active users with this email, across tenants, for logins by email (passkeys). Emails are unique
   * per tenant only: a login must be settled by the credential presented (a passkey id is global),
   * never by picking one of these.
   */
  async usersByEmail(email: string): Promise<Actor[]> {
    const docs = await this.models.User.find({ email: email.trim().toLowerCase(), is_active: true, ...LIVE }).sort({ _id: 1 }).limit(100).lean();
    return docs.map(toAuthUser);
  }

  /**
   * The active user `id` of tenant `tenantId`, provided its email is `email` (trimmed,
   * case-insensitive); null otherwise. A passkey login names the account by the credential
   * presented and checks the email sent with it here: one tenant's user, never an email search.
   */
  async userForLogin(id: string, tenantId: string, email: string): Promise<Actor | null> {
    const doc = await this.models.User.findOne({ _id: id, tenant_id: tenantId, email: email.trim().toLowerCase(), is_active: true, ...LIVE }).lean();
    return doc ? toAuthUser(doc) : null;
  }

  /** Forget a revoked API key in this process at once: its own lookups and the tokens minted from it. */
  protected forgetApiKey(keyHash: string, id: string): void {
    this.cache?.delete(`k:${keyHash}`);
    this.invalidateCredential('api_key', id);
  }

  private toCache(key: string, actor: Actor, keyId?: string) {
    this.cache?.set(key, { actor, ...(keyId ? { keyId } : {}) });
  }

  /** `last_used_at` is informational: write it at most once a minute per key, off the request path. */
  private touchKey(keyId: string | undefined) {
    if (!keyId) return;
    const now = Date.now();
    if ((this.lastUsedWrites.get(keyId) ?? 0) > now - LAST_USED_THROTTLE_MS) return;
    this.lastUsedWrites.set(keyId, now);
    this.models.ApiKey.updateOne({ _id: keyId }, { $set: { last_used_at: new Date(now) } }).catch((err: unknown) =>
      this.log.warn({ err }, 'could not record api key use'),
    );
  }
}
