import { createHash, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Types } from 'mongoose';
import { SignJWT, jwtVerify, errors as joseErrors, type JWTPayload } from 'jose';
import type { Config } from '../../config/index.ts';
import { AccessDeniedError, AuthRequiredError, ConflictError, NotFoundError } from '../errors.ts';
import { isSystemActor, requestOf, hasSystemScope, scopedTenantId, writeTenantId, type AuthUser, type CredentialRef } from '../context.ts';
import type { Doc, DocumentEventBase, HookBus } from '../hooks.ts';
import { tenantFilter, type Filter } from './guards.ts';
import type { Logger } from '../logger.ts';
import type { IdentityModels, UserDoc } from './models.ts';

/** Most credentials (and key-use timestamps) one process keeps in memory. */
const CACHE_MAX_ENTRIES = 10_000;
export const API_KEY_PREFIX = 'ak_';
const LAST_USED_THROTTLE_MS = 60_000;

export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');
const generateApiKey = (): string => API_KEY_PREFIX + randomBytes(32).toString('base64url');

type UserRecord = UserDoc & { _id: Types.ObjectId; created_at?: Date };

const toAuthUser = (u: UserRecord): AuthUser => ({
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
const LIVE = { is_deleted: { $ne: true } } as const;

/** Public shape of a user in admin responses. */
const userView = (u: UserRecord) => ({
  ...toAuthUser(u),
  is_active: u.is_active !== false,
  created_at: u.created_at ?? null,
});

export interface CreateUserInput {
  email: string;
  name: string;
  tenant_id?: string | undefined;
  roles?: ('user' | 'admin')[] | undefined;
  features?: string[] | undefined;
  attributes?: Record<string, unknown> | undefined;
}

/**
 * Finds who owns a live credential of one kind: the user id, or null when the credential is gone
 * (revoked, deleted). Token authentication calls it (cached for `AUTH_CACHE_TTL_MS`) so a token
 * dies with the credential it descends from.
 */
export type CredentialResolver = (id: string) => Promise<{ user_id: string } | null>;

/** Claim naming a token's root credential: `<kind>:<id>`, e.g. `api_key:65f0…`. */
const CREDENTIAL_CLAIM = 'cid';
const CREDENTIAL_KIND = /^[a-z][a-z0-9_]{0,31}$/;

/** Fields `PATCH /admin/users/{id}` (GraphQL `updateUser`) may change; anything else is refused (422). */
export interface UpdateUserInput {
  name?: string | undefined;
  roles?: ('user' | 'admin')[] | undefined;
  features?: string[] | undefined;
  attributes?: Record<string, unknown> | undefined;
  is_active?: boolean | undefined;
}

export interface Page {
  page: number;
  per_page: number;
}

/**
 * Tenants, users, API keys and bearer tokens. No Koa or GraphQL here: REST and GraphQL both call it.
 * Tenant admins act only inside their own tenant; system callers act anywhere.
 */
export class IdentityService {
  /**
   * Resolved credentials, per process, for `AUTH_CACHE_TTL_MS` (lru-cache: bounded by entry count
   * and TTL, least recently used evicted first). Revocation here drops entries at once; other
   * replicas follow when their entry expires, so the TTL is the revocation delay across replicas.
   */
  private readonly cache: LRUCache<string, { user: AuthUser; keyId?: string }> | null;
  private readonly lastUsedWrites = new LRUCache<string, number>({ max: CACHE_MAX_ENTRIES });
  private readonly secret: Uint8Array;
  private readonly credentialKinds = new Map<string, CredentialResolver>();

  constructor(
    private readonly models: IdentityModels,
    private readonly config: Config,
    private readonly log: Logger,
    private readonly hooks?: HookBus,
  ) {
    this.secret = new TextEncoder().encode(config.TOKEN_SECRET);
    this.cache = config.AUTH_CACHE_TTL_MS > 0 ? new LRUCache({ max: CACHE_MAX_ENTRIES, ttl: config.AUTH_CACHE_TTL_MS }) : null;
    this.registerCredentialKind('api_key', async (id) => {
      const key = Types.ObjectId.isValid(id) ? await this.models.ApiKey.findOne({ _id: id, revoked_at: null }, { user_id: 1 }).lean() : null;
      return key ? { user_id: String(key.user_id) } : null;
    });
  }

  /**
   * Let tokens be bound to another kind of credential (e.g. `passkey`): `resolve` says whether one
   * is still live and whose it is. Call `invalidateCredential(kind, id)` when one is removed.
   * @example identity.registerCredentialKind('passkey', async (id) => ...)
   */
  registerCredentialKind(kind: string, resolve: CredentialResolver): void {
    if (!CREDENTIAL_KIND.test(kind)) throw new Error(`Credential kind "${kind}" must match ${CREDENTIAL_KIND}`);
    if (this.credentialKinds.has(kind)) throw new Error(`Credential kind "${kind}" is already registered`);
    this.credentialKinds.set(kind, resolve);
  }

  /** Forget this process's cached resolution of a credential (after revoking it); other processes follow within `AUTH_CACHE_TTL_MS`. */
  invalidateCredential(kind: string, id: string): void {
    this.invalidate(`t:${kind}:${id}`);
  }

  /** Resolve an `X-API-Key`. @throws AuthRequiredError when unknown, revoked, or its user is inactive */
  async authenticateApiKey(key: string, hash = hashKey(key)): Promise<AuthUser> {
    const hit = this.fromCache(`k:${hash}`);
    if (hit) {
      this.touchKey(hit.keyId);
      return hit.user;
    }
    const apiKey = await this.models.ApiKey.findOne({ key_hash: hash, revoked_at: null }).lean();
    if (!apiKey) throw new AuthRequiredError('Invalid API key');
    const user = await this.models.User.findOne({ _id: apiKey.user_id, is_active: true, ...LIVE }).lean();
    if (!user) throw new AuthRequiredError('Invalid API key');
    const auth: AuthUser = { ...toAuthUser(user), credential: { kind: 'api_key', id: String(apiKey._id) } };
    this.toCache(`k:${hash}`, auth, String(apiKey._id));
    this.touchKey(String(apiKey._id));
    return auth;
  }

  /**
   * Resolve a bearer token: signature, `exp`, then its root credential (`cid` claim) must still be
   * live and belong to `sub`, and the user must be active. The credential check is cached like
   * other credentials, so revoking a key ends every token of its chain within `AUTH_CACHE_TTL_MS`.
   * @throws AuthRequiredError when invalid, expired, unbound, or its credential or user is gone
   */
  async authenticateToken(token: string): Promise<AuthUser> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.secret, { algorithms: ['HS256'], requiredClaims: ['exp', 'sub', CREDENTIAL_CLAIM] }));
    } catch (err) {
      throw new AuthRequiredError(err instanceof joseErrors.JWTExpired ? 'Token expired' : 'Invalid token');
    }
    const { sub, exp } = payload;
    const cid = payload[CREDENTIAL_CLAIM];
    const m = typeof cid === 'string' ? /^([a-z][a-z0-9_]*):(.+)$/.exec(cid) : null;
    const resolve = m ? this.credentialKinds.get(m[1]!) : undefined;
    if (!sub || !Types.ObjectId.isValid(sub) || !m || !resolve || typeof exp !== 'number') throw new AuthRequiredError('Invalid token');
    const [kind, id] = [m[1]!, m[2]!];
    let user = this.fromCache(`t:${kind}:${id}`)?.user;
    if (!user) {
      const owner = await resolve(id);
      if (!owner) throw new AuthRequiredError('Invalid token');
      const doc = await this.models.User.findOne({ _id: owner.user_id, is_active: true, ...LIVE }).lean();
      if (!doc) throw new AuthRequiredError('Invalid token');
      user = toAuthUser(doc);
      this.toCache(`t:${kind}:${id}`, user, kind === 'api_key' ? id : undefined);
    }
    // A token naming someone else's credential is forged or stale: never act as either user.
    if (user.id !== sub) throw new AuthRequiredError('Invalid token');
    return { ...user, credential: { kind, id, exp } };
  }

  /**
   * Issue a signed HS256 JWT for the caller, bound to the credential it authenticated with.
   * Claims: `sub` (user id), `tid` (tenant id), `cid` (`<kind>:<id>` of the root credential),
   * `iat`, `exp`. Lifetime `TOKEN_TTL_SECONDS`, but a token minted from a token keeps the root
   * credential and never outlives its parent (`exp` is capped at the parent's).
   * @param credential defaults to `user.credential`; plugins that log users in (passkeys) pass their own
   * @throws AuthRequiredError when the parent token has (just) expired
   */
  async issueToken(user: AuthUser, credential: CredentialRef | undefined = user.credential): Promise<{ token: string; token_type: 'Bearer'; expires_in: number }> {
    if (!credential) throw new Error('issueToken: the caller has no credential to bind the token to');
    if (!this.credentialKinds.has(credential.kind)) throw new Error(`issueToken: credential kind "${credential.kind}" is not registered`);
    const now = Math.floor(Date.now() / 1000);
    const exp = Math.min(now + this.config.TOKEN_TTL_SECONDS, credential.exp ?? Number.POSITIVE_INFINITY);
    if (exp <= now) throw new AuthRequiredError('Token expired');
    const token = await new SignJWT({ tid: user.tenant_id, [CREDENTIAL_CLAIM]: `${credential.kind}:${credential.id}` })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(user.id)
      .setIssuedAt(now)
      .setExpirationTime(exp)
      .sign(this.secret);
    return { token, token_type: 'Bearer', expires_in: exp - now };
  }

  async createTenant(caller: AuthUser, input: { name: string }) {
    if (!hasSystemScope(caller)) throw new AccessDeniedError('Only system administrators create tenants');
    const t = await this.models.Tenant.create({ name: input.name });
    return tenantView(t.toObject());
  }

  async listTenants(caller: AuthUser, page: Page) {
    const filter = tenantFilter(caller, true, '_id');
    const [items, total] = await Promise.all([
      this.models.Tenant.find(filter).sort({ created_at: 1, _id: 1 }).skip((page.page - 1) * page.per_page).limit(page.per_page).lean(),
      this.models.Tenant.countDocuments(filter),
    ]);
    return { items: items.map(tenantView), total, ...page };
  }

  async createUser(caller: AuthUser, input: CreateUserInput) {
    const tenantId = input.tenant_id ?? writeTenantId(caller);
    this.assertTenantAccess(caller, tenantId);
    if (!(await this.models.Tenant.exists({ _id: tenantId }))) throw new NotFoundError('tenant', tenantId);
    let u;
    try {
      u = await this.models.User.create({
        email: input.email,
        name: input.name,
        tenant_id: tenantId,
        roles: input.roles ?? ['user'],
        features: input.features ?? [],
        attributes: input.attributes ?? {},
      });
    } catch (err) {
      // Emails are unique per tenant only, so a conflict is about the caller's own tenant and says nothing of others.
      if ((err as { code?: number }).code === 11000) throw new ConflictError('A user with this email already exists in this tenant', { field: 'email' });
      throw err;
    }
    return userView(u.toObject());
  }

  /**
   * Change a user's name, roles, features, attributes or `is_active`, with the tenant rules of the
   * other admin endpoints. Disabling ends the user's keys and tokens (this process at once, others
   * within `AUTH_CACHE_TTL_MS`) and emits `AFTER_USER_DISABLED`; re-enabling brings its keys back.
   * @throws NotFoundError outside the caller's tenant or for a deleted user
   * @throws AccessDeniedError for a tenant admin touching a system user, or anyone disabling or re-roling themselves
   */
  async updateUser(caller: AuthUser, id: string, input: UpdateUserInput) {
    const old = await this.managedUser(caller, id);
    const roles = input.roles ? [...new Set(input.roles)] : undefined;
    if (caller.id === id && (input.is_active === false || (roles && [...roles].sort().join() !== [...(old.roles ?? [])].sort().join())))
      throw new AccessDeniedError('You cannot disable yourself or change your own roles', { reason: 'self' });
    const set: Record<string, unknown> = {};
    for (const k of ['name', 'features', 'attributes', 'is_active'] as const) if (input[k] !== undefined) set[k] = input[k];
    if (roles) set.roles = roles;
    const doc = Object.keys(set).length
      ? await this.models.User.findOneAndUpdate({ _id: id, ...LIVE, ...this.tenantScope(caller) }, { $set: set }, { returnDocument: 'after', runValidators: true }).lean()
      : old;
    if (!doc) throw new NotFoundError('user', id);
    this.invalidateUser(id);
    await this.emitDocument('AFTER_UPDATE', caller, { id, tenant_id: String(doc.tenant_id), old, doc, replace: false });
    if (old.is_active !== false && doc.is_active === false) await this.emitDisabled(caller, doc, 'disabled');
    return userView(doc);
  }

  /**
   * Soft-delete a user: `is_deleted`, `deleted_at`, `deleted_by`, `is_active: false`, every key
   * revoked. The document stays (audit entries keep pointing at it); lists and logins skip it and
   * its email is free again in its tenant.
   * @throws NotFoundError outside the caller's tenant or when already deleted
   * @throws AccessDeniedError for a tenant admin deleting a system user, or anyone deleting themselves
   */
  async deleteUser(caller: AuthUser, id: string): Promise<void> {
    const old = await this.managedUser(caller, id);
    if (caller.id === id) throw new AccessDeniedError('You cannot delete yourself', { reason: 'self' });
    const now = new Date();
    const doc = await this.models.User.findOneAndUpdate(
      { _id: id, ...LIVE, ...this.tenantScope(caller) },
      { $set: { is_deleted: true, deleted_at: now, deleted_by: isSystemActor(caller) ? null : new Types.ObjectId(caller.id), is_active: false } },
      { returnDocument: 'after' },
    ).lean();
    if (!doc) throw new NotFoundError('user', id);
    await this.models.ApiKey.updateMany({ user_id: doc._id, revoked_at: null }, { $set: { revoked_at: now } });
    this.invalidateUser(id);
    await this.emitDocument('AFTER_DELETE', caller, { id, tenant_id: String(doc.tenant_id), old, doc });
    await this.emitDisabled(caller, doc, 'deleted');
  }

  /**
   * Active users with this email, across tenants, for logins by email (passkeys). Emails are unique
   * per tenant only: a login must be settled by the credential presented (a passkey id is global),
   * never by picking one of these.
   */
  async usersByEmail(email: string): Promise<AuthUser[]> {
    const docs = await this.models.User.find({ email: email.trim().toLowerCase(), is_active: true, ...LIVE }).sort({ _id: 1 }).limit(100).lean();
    return docs.map(toAuthUser);
  }

  async listUsers(caller: AuthUser, page: Page & { tenant_id?: string | undefined }) {
    const filter: Filter = { ...this.tenantScope(caller), ...LIVE };
    if (!filter.tenant_id && page.tenant_id) filter.tenant_id = new Types.ObjectId(page.tenant_id);
    const [items, total] = await Promise.all([
      this.models.User.find(filter).sort({ created_at: 1, _id: 1 }).skip((page.page - 1) * page.per_page).limit(page.per_page).lean(),
      this.models.User.countDocuments(filter),
    ]);
    return { items: items.map(userView), total, page: page.page, per_page: page.per_page };
  }

  /** Create an API key for a user the caller administers. The plain key is in this response only. */
  async createApiKey(caller: AuthUser, input: { user_id: string; name: string }) {
    const user = await this.models.User.findOne({ _id: input.user_id, ...LIVE, ...this.tenantScope(caller) }).lean();
    if (!user) throw new NotFoundError('user', input.user_id);
    // A tenant admin of the system tenant must not mint keys that act as a system administrator.
    if (!hasSystemScope(caller) && hasSystemScope(toAuthUser(user)))
      throw new AccessDeniedError('Only system administrators create keys for system administrators');
    const key = generateApiKey();
    const doc = await this.models.ApiKey.create({
      name: input.name,
      user_id: user._id,
      tenant_id: user.tenant_id,
      key_hash: hashKey(key),
      prefix: key.slice(0, API_KEY_PREFIX.length + 6),
      created_by: isSystemActor(caller) ? null : new Types.ObjectId(caller.id),
    });
    return { ...apiKeyView(doc.toObject()), key };
  }

  async revokeApiKey(caller: AuthUser, id: string) {
    const doc = await this.models.ApiKey.findOneAndUpdate(
      { _id: id, revoked_at: null, ...this.tenantScope(caller) },
      { $set: { revoked_at: new Date() } },
      { returnDocument: 'after' },
    ).lean();
    if (!doc) throw new NotFoundError('api_key', id);
    this.invalidate(`k:${doc.key_hash}`);
    this.invalidateCredential('api_key', String(doc._id));
    return apiKeyView(doc);
  }

  /**
   * Deletes dead API keys (the `cleanup_expired_tokens` job): keys revoked before `cutoff`, and
   * keys of users deleted before `cutoff`, within the caller's tenant scope: `systemActor()` every
   * tenant, `systemActor(tenantId)` that tenant only. Live keys are never touched.
   * @throws AccessDeniedError for a non-system caller, tenant administrators included (nothing deleted)
   */
  async purgeDeadApiKeys(caller: AuthUser, cutoff: Date): Promise<{ revoked_keys_deleted: number; deleted_user_keys_deleted: number }> {
    if (!hasSystemScope(caller)) throw new AccessDeniedError('System administrator required');
    const scope = this.tenantScope(caller);
    const revoked = await this.models.ApiKey.deleteMany({ ...scope, revoked_at: { $ne: null, $lt: cutoff } });
    const goneUsers = await this.models.User.find({ ...scope, is_deleted: true, deleted_at: { $lt: cutoff } }, { _id: 1 }).lean();
    const orphaned = goneUsers.length ? await this.models.ApiKey.deleteMany({ ...scope, user_id: { $in: goneUsers.map((u) => u._id) } }) : { deletedCount: 0 };
    return { revoked_keys_deleted: revoked.deletedCount, deleted_user_keys_deleted: orphaned.deletedCount };
  }

  /**
   * Make sure a system tenant, a system administrator and an API key equal to `adminKey` exist.
   * Idempotent: a restart with the same key changes nothing; a new key is added alongside.
   */
  async bootstrap(adminKey: string, email: string): Promise<{ created: boolean; user_id: string }> {
    const { Tenant, User, ApiKey } = this.models;
    const tenant = await Tenant.findOneAndUpdate(
      { is_system: true },
      { $setOnInsert: { name: 'system', is_system: true } },
      { upsert: true, returnDocument: 'after' },
    ).lean();
    // Emails are per tenant: only a user of the system tenant is ever the administrator; a tenant's
    // user with the same address is a different person and stays untouched.
    const user = await User.findOneAndUpdate(
      { email: email.toLowerCase(), tenant_id: tenant._id, ...LIVE },
      {
        $setOnInsert: { email: email.toLowerCase(), name: 'System Administrator', tenant_id: tenant._id, features: [], attributes: {}, is_deleted: false },
        $set: { roles: ['admin'], scope: 'system', is_system_user: true, is_active: true },
      },
      { upsert: true, returnDocument: 'after' },
    ).lean();
    const hash = hashKey(adminKey);
    const res = await ApiKey.updateOne(
      { key_hash: hash },
      { $setOnInsert: { name: 'bootstrap', user_id: user._id, tenant_id: tenant._id, key_hash: hash, prefix: adminKey.slice(0, 6), revoked_at: null } },
      { upsert: true },
    );
    // A revoked bootstrap key stays revoked: the operator revoked it on purpose, so say so instead of undoing it.
    const revoked = res.upsertedCount === 0 && (await ApiKey.exists({ key_hash: hash, revoked_at: { $ne: null } }));
    if (revoked) this.log.warn('ADMIN_API_KEY has been revoked and stays revoked; remove it from the environment or set a new one');
    return { created: res.upsertedCount > 0, user_id: String(user._id) };
  }

  countUsers(): Promise<number> {
    return this.models.User.estimatedDocumentCount();
  }

  /** Drop cached credentials of a user, e.g. after its roles changed. */
  invalidateUser(userId: string): void {
    if (!this.cache) return;
    for (const [k, v] of this.cache.entries()) if (v.user.id === userId) this.cache.delete(k);
  }

  /** A live user the caller administers. @throws NotFoundError outside its scope, AccessDeniedError for a system user and a non-system caller */
  private async managedUser(caller: AuthUser, id: string) {
    const user = await this.models.User.findOne({ _id: id, ...LIVE, ...this.tenantScope(caller) }).lean();
    if (!user) throw new NotFoundError('user', id);
    if (!hasSystemScope(caller) && hasSystemScope(toAuthUser(user)))
      throw new AccessDeniedError('Only system administrators change system administrators');
    return user;
  }

  private eventBase(caller: AuthUser, tenantId: string): DocumentEventBase {
    const ctx = requestOf(caller);
    return { resource: 'users', actor: caller, tenant_id: tenantId, ip: ctx?.ip ?? null, request_id: ctx?.requestId ?? null, secret_fields: [], bulk: false };
  }

  /** Document events as the resources plugin emits them, so the audit plugin records user changes without identity knowing it. */
  private async emitDocument(
    event: 'AFTER_UPDATE' | 'AFTER_DELETE',
    caller: AuthUser,
    e: { id: string; tenant_id: string; old: UserRecord; doc: UserRecord; replace?: boolean },
  ) {
    if (!this.hooks) return;
    await this.hooks.emitAfter(event, { ...this.eventBase(caller, e.tenant_id), ...e, old: e.old as unknown as Doc, doc: e.doc as unknown as Doc } as never);
  }

  private async emitDisabled(caller: AuthUser, user: { _id: Types.ObjectId; tenant_id: Types.ObjectId }, reason: 'disabled' | 'deleted') {
    await this.hooks?.emitAfter('AFTER_USER_DISABLED', {
      user_id: String(user._id),
      tenant_id: String(user.tenant_id),
      reason,
      actor: caller,
      request_id: requestOf(caller)?.requestId ?? null,
    });
  }

  private assertTenantAccess(caller: AuthUser, tenantId: string) {
    const scoped = scopedTenantId(caller);
    if (scoped && tenantId !== scoped) throw new AccessDeniedError('Tenant administrators act only inside their own tenant');
  }

  /** Identity is always tenant-confined for non-system callers, whatever `MULTI_TENANT_ENABLED` says. */
  private tenantScope(caller: AuthUser): Filter {
    return tenantFilter(caller, true);
  }

  private fromCache(key: string) {
    return this.cache?.get(key);
  }

  private toCache(key: string, user: AuthUser, keyId?: string) {
    this.cache?.set(key, { user, ...(keyId ? { keyId } : {}) });
  }

  private invalidate(key: string) {
    this.cache?.delete(key);
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

const tenantView = (t: { _id: Types.ObjectId; name: string; is_system?: boolean | null; created_at?: Date }) => ({
  id: String(t._id),
  name: t.name,
  is_system: !!t.is_system,
  created_at: t.created_at ?? null,
});

const apiKeyView = (k: {
  _id: Types.ObjectId;
  name: string;
  user_id: Types.ObjectId;
  tenant_id: Types.ObjectId;
  prefix: string;
  revoked_at?: Date | null;
  last_used_at?: Date | null;
  created_at?: Date;
}) => ({
  id: String(k._id),
  name: k.name,
  user_id: String(k.user_id),
  tenant_id: String(k.tenant_id),
  prefix: k.prefix,
  revoked_at: k.revoked_at ?? null,
  last_used_at: k.last_used_at ?? null,
  created_at: k.created_at ?? null,
});
