import { createHash, randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import type { Config } from '../../config/index.ts';
import { AccessDeniedError, AuthRequiredError, NotFoundError } from '../errors.ts';
import { PluginError } from '../plugin.ts';
import { isSystemActor, isSystemCaller, scopedTenantId, writeTenantId, type AuthUser } from '../context.ts';
import { tenantFilter, type Filter } from './guards.ts';
import type { Logger } from '../logger.ts';
import type { IdentityModels, UserDoc } from './models.ts';

export const API_KEY_PREFIX = 'ak_';
const LAST_USED_THROTTLE_MS = 60_000;

export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');
export const generateApiKey = (): string => API_KEY_PREFIX + randomBytes(32).toString('base64url');

type UserRecord = UserDoc & { _id: Types.ObjectId; created_at?: Date };

export const toAuthUser = (u: UserRecord): AuthUser => ({
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

/** Public shape of a user in admin responses. */
export const userView = (u: UserRecord) => ({
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

export interface Page {
  page: number;
  per_page: number;
}

/**
 * Tenants, users, API keys and bearer tokens. No Koa or GraphQL here: REST and GraphQL both call it.
 * Tenant admins act only inside their own tenant; system callers act anywhere.
 */
export class IdentityService {
  private readonly cache = new Map<string, { user: AuthUser; keyId?: string; expires: number }>();
  private readonly lastUsedWrites = new Map<string, number>();
  private readonly secret: Uint8Array;

  constructor(
    private readonly models: IdentityModels,
    private readonly config: Config,
    private readonly log: Logger,
  ) {
    this.secret = new TextEncoder().encode(config.TOKEN_SECRET);
  }

  /** Resolve an `X-API-Key`. @throws AuthRequiredError when unknown, revoked, or its user is inactive */
  async authenticateApiKey(key: string): Promise<AuthUser> {
    const hash = hashKey(key);
    const hit = this.fromCache(`k:${hash}`);
    if (hit) {
      this.touchKey(hit.keyId);
      return hit.user;
    }
    const apiKey = await this.models.ApiKey.findOne({ key_hash: hash, revoked_at: null }).lean();
    if (!apiKey) throw new AuthRequiredError('Invalid API key');
    const user = await this.models.User.findOne({ _id: apiKey.user_id, is_active: true }).lean();
    if (!user) throw new AuthRequiredError('Invalid API key');
    const auth = toAuthUser(user);
    this.toCache(`k:${hash}`, auth, String(apiKey._id));
    this.touchKey(String(apiKey._id));
    return auth;
  }

  /** Resolve a bearer token. @throws AuthRequiredError when invalid, expired, or its user is gone */
  async authenticateToken(token: string): Promise<AuthUser> {
    let sub: string | undefined;
    try {
      const { payload } = await jwtVerify(token, this.secret, { algorithms: ['HS256'] });
      sub = payload.sub;
    } catch (err) {
      throw new AuthRequiredError(err instanceof joseErrors.JWTExpired ? 'Token expired' : 'Invalid token');
    }
    if (!sub || !Types.ObjectId.isValid(sub)) throw new AuthRequiredError('Invalid token');
    const hit = this.fromCache(`u:${sub}`);
    if (hit) return hit.user;
    const user = await this.models.User.findOne({ _id: sub, is_active: true }).lean();
    if (!user) throw new AuthRequiredError('Invalid token');
    const auth = toAuthUser(user);
    this.toCache(`u:${sub}`, auth);
    return auth;
  }

  /** Issue a signed HS256 JWT for the caller. Claims: `sub` (user id), `tid` (tenant id). */
  async issueToken(user: AuthUser): Promise<{ token: string; token_type: 'Bearer'; expires_in: number }> {
    const expiresIn = this.config.TOKEN_TTL_SECONDS;
    const token = await new SignJWT({ tid: user.tenant_id })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(user.id)
      .setIssuedAt()
      .setExpirationTime(`${expiresIn}s`)
      .sign(this.secret);
    return { token, token_type: 'Bearer', expires_in: expiresIn };
  }

  async createTenant(caller: AuthUser, input: { name: string }) {
    if (!isSystemCaller(caller)) throw new AccessDeniedError('Only system administrators create tenants');
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
    const u = await this.models.User.create({
      email: input.email,
      name: input.name,
      tenant_id: tenantId,
      roles: input.roles ?? ['user'],
      features: input.features ?? [],
      attributes: input.attributes ?? {},
    });
    return userView(u.toObject());
  }

  async listUsers(caller: AuthUser, page: Page & { tenant_id?: string | undefined }) {
    const filter = this.tenantScope(caller);
    if (!filter.tenant_id && page.tenant_id) filter.tenant_id = new Types.ObjectId(page.tenant_id);
    const [items, total] = await Promise.all([
      this.models.User.find(filter).sort({ created_at: 1, _id: 1 }).skip((page.page - 1) * page.per_page).limit(page.per_page).lean(),
      this.models.User.countDocuments(filter),
    ]);
    return { items: items.map(userView), total, page: page.page, per_page: page.per_page };
  }

  /** Create an API key for a user the caller administers. The plain key is in this response only. */
  async createApiKey(caller: AuthUser, input: { user_id: string; name: string }) {
    const user = await this.models.User.findOne({ _id: input.user_id, ...this.tenantScope(caller) }).lean();
    if (!user) throw new NotFoundError('user', input.user_id);
    // A tenant admin of the system tenant must not mint keys that act as a system administrator.
    if (!isSystemCaller(caller) && isSystemCaller(toAuthUser(user)))
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
    return apiKeyView(doc);
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
    const existing = await User.findOne({ email }).lean();
    if (existing && String(existing.tenant_id) !== String(tenant._id)) {
      // Never promote a tenant's user to system administrator because its email matches.
      throw new PluginError(`ADMIN_EMAIL ${email} belongs to a user of another tenant; set ADMIN_EMAIL to a free address`);
    }
    const user = await User.findOneAndUpdate(
      { email, tenant_id: tenant._id },
      {
        $setOnInsert: { email, name: 'System Administrator', tenant_id: tenant._id, features: [], attributes: {} },
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
    for (const [k, v] of this.cache) if (v.user.id === userId) this.cache.delete(k);
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
    const hit = this.cache.get(key);
    if (!hit) return undefined;
    if (hit.expires < Date.now()) {
      this.cache.delete(key);
      return undefined;
    }
    return hit;
  }

  private toCache(key: string, user: AuthUser, keyId?: string) {
    const ttl = this.config.AUTH_CACHE_TTL_MS;
    if (ttl <= 0) return;
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(key, { user, ...(keyId ? { keyId } : {}), expires: Date.now() + ttl });
  }

  private invalidate(key: string) {
    this.cache.delete(key);
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
