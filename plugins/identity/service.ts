import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import { AccessDeniedError, ConflictError, NotFoundError, ValidationError } from '../../core/errors.ts';
import { hasSystemScope, isSystemActor, writeTenantId, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import { ROLES } from './model.ts';
import { pageOf } from '../../lib/page.ts';
import { requireRole, type Filter } from '../../core/access.ts';
import { API_KEY_PREFIX, hashKey } from '../../core/authentication.ts';
import type { Permissions } from '../../core/permissions.ts';
import { AuthenticationService, LIVE, toAuthUser, type AuthenticationDeps, type UserRecord } from './authentication.ts';
import { IdentityEvents } from './events.ts';
import { isActiveAdmin, LastAdminGuard } from './last-admin.ts';
import type { EventLog } from '../events/index.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import type { CreateApiKeyInput, CreateTenantInput, CreateUserInput, ListApiKeysQuery, ListUsersQuery, PageRequest, UpdateUserInput } from './schemas.ts';

const generateApiKey = (): string => API_KEY_PREFIX + randomBytes(32).toString('base64url');

/** Public shape of a user in admin responses. */
const userView = (u: UserRecord) => ({
  ...toAuthUser(u),
  is_active: u.is_active !== false,
  created_at: u.created_at ?? null,
});

/** The names among `roles` that are no role of tenant `tenantId` (built-in roles are known without it). */
export type RoleCheck = (tenantId: string, roles: readonly string[]) => Promise<string[]>;

export interface IdentityDeps extends AuthenticationDeps {
  /** `MULTI_TENANT_ENABLED`: whether tenant administrators administer only their own tenant. */
  tenancy: Tenancy;
  /** The event log (set up after identity, so reached when a change is made). */
  events: () => EventLog;
}

/** Timestamps of a document about to be inserted, set before the insert so its event's object has them. */
const stamped = <T extends { set(v: Doc): unknown }>(doc: T): T => {
  const now = new Date();
  doc.set({ created_at: now, updated_at: now });
  return doc;
};

/** Who may call each identity operation (REST and GraphQL read it); whom an administrator reaches is the service's rule. */
export const IDENTITY_PERMISSIONS = {
  me: 'user', memberships: 'user', issueToken: 'user', createTenant: 'system', listTenants: 'admin', createUser: 'admin', listUsers: 'admin', updateUser: 'admin',
  deleteUser: 'admin', listApiKeys: 'admin', createApiKey: 'admin', revokeApiKey: 'admin',
} as const satisfies Permissions;

/**
 * The `identity` service: authentication (inherited) plus directory administration of tenants,
 * users and API keys. No Koa or GraphQL here: REST, GraphQL and jobs all call it, and every
 * method checks the actor's role itself (`requireRole`). Tenant administrators act only inside
 * their own tenant (every tenant when `MULTI_TENANT_ENABLED` is off); system actors act anywhere;
 * only system actors touch system administrators.
 */
export class IdentityService extends AuthenticationService {
  private readonly tenancy: Tenancy;
  private roleCheck: RoleCheck | null = null;
  private readonly roleHolders: { kind: string; held: (tenantId: string, role: string) => Promise<boolean> }[] = [];
  /** Stages the events of tenant, user and key changes into the changed document's own write. */
  readonly changes: IdentityEvents;
  private readonly lastAdmin: LastAdminGuard;

  constructor(deps: IdentityDeps) {
    super(deps);
    this.tenancy = deps.tenancy;
    this.changes = new IdentityEvents(deps.models, deps.events);
    this.lastAdmin = new LastAdminGuard(deps.models.User, deps.models.AdminLock);
  }

  async createTenant(actor: Actor, input: CreateTenantInput) {
    const t = stamped(new this.models.Tenant({ name: input.name }));
    const entry = this.changes.stage('tenants', { type: 'tenant.created', actor, tenantId: t._id, audit: 'insert' });
    t.set(OUTBOX_FIELD, this.changes.forInsert([entry], tenantView(t.toObject())));
    await t.save();
    await this.changes.committed('tenants', t.toObject() as unknown as Doc);
    return tenantView(t.toObject());
  }

  /** A page of tenants, oldest first: every tenant for system administrators, their own for tenant administrators. */
  async listTenants(actor: Actor, page: PageRequest) {
    const filter = this.tenancy.filter(actor, '_id');
    const [items, total] = await Promise.all([
      this.models.Tenant.find(filter).sort({ created_at: 1, _id: 1 }).skip((page.page - 1) * page.per_page).limit(page.per_page).lean(),
      this.models.Tenant.countDocuments(filter),
    ]);
    return pageOf(items.map(tenantView), total, page);
  }

  /** `extra.person_id`: the new user is a membership of that person (an accepted invitation), not a person of its own. */
  async createUser(actor: Actor, input: CreateUserInput, extra?: { scope?: 'system'; is_system_user?: true; person_id?: Types.ObjectId }): Promise<ReturnType<typeof userView>> {
    if (input.scope === 'system') return this.createSystemAdmin(actor, input);
    const tenantId = input.tenant_id ?? writeTenantId(actor);
    const scoped = this.tenancy.scope(actor);
    if (scoped && tenantId !== scoped) throw new AccessDeniedError('Tenant administrators act only inside their own tenant');
    if (!(await this.models.Tenant.exists({ _id: tenantId }))) throw new NotFoundError('tenant', tenantId);
    if (input.roles) await this.checkRoles(tenantId, input.roles);
    const u = stamped(new this.models.User({
      email: input.email,
      name: input.name,
      tenant_id: tenantId,
      roles: input.roles ?? ['user'],
      features: input.features ?? [],
      attributes: input.attributes ?? {},
      ...extra,
    }));
    const entry = this.changes.stage('users', { type: 'user.created', actor, tenantId, audit: 'insert' });
    u.set(OUTBOX_FIELD, this.changes.forInsert([entry], userView(u.toObject() as UserRecord)));
    try {
      await u.save();
    } catch (err) {
      // Emails are unique per tenant only, so a conflict is about the target tenant and says nothing of others.
      if ((err as { code?: number }).code === 11000) throw new ConflictError('A user with this email already exists in this tenant', { field: 'email' });
      throw err;
    }
    const doc = u.toObject() as UserRecord;
    await this.changes.committed('users', doc as unknown as Doc);
    return userView(doc);
  }

  /**
   * Another system administrator, in the system tenant (role admin, `scope: system`). Give it a key
   * with `POST /admin/api-keys`. Its creation is audited (resource `users`, by the creating actor).
   * @throws AccessDeniedError unless the actor is a system administrator; ValidationError for a
   *   `tenant_id` other than the system tenant's or roles without `admin`
   */
  private async createSystemAdmin(actor: Actor, input: CreateUserInput) {
    requireRole(actor, 'system');
    const tenant = await this.models.Tenant.findOne({ is_system: true }, { _id: 1 }).lean();
    if (!tenant) throw new ValidationError([{ loc: ['body', 'scope'], msg: 'There is no system tenant (start the server with ADMIN_API_KEY once)', type: 'value_error' }]);
    if (input.tenant_id && input.tenant_id !== String(tenant._id)) {
      throw new ValidationError([{ loc: ['body', 'tenant_id'], msg: 'A system administrator belongs to the system tenant: omit tenant_id or give the system tenant\'s id', type: 'value_error' }]);
    }
    if (input.roles && !input.roles.includes('admin')) throw new ValidationError([{ loc: ['body', 'roles'], msg: 'A system administrator has the role admin', type: 'value_error' }]);
    return this.createUser(actor, { ...input, scope: undefined, tenant_id: String(tenant._id), roles: ['admin'] }, { scope: 'system', is_system_user: true });
  }

  /**
   * Change a user's name, roles, features, attributes or `is_active`, with the tenant rules of the
   * other admin endpoints. Disabling ends the user's keys and tokens (this process at once, others
   * within `AUTH_CACHE_TTL_MS`) and stores `user.disabled` with the change; re-enabling brings its keys back.
   * @throws NotFoundError outside the actor's tenant or for a deleted user
   * @throws AccessDeniedError for a non-admin, a tenant admin touching a system user, or anyone disabling or re-roling themselves
   * @throws ConflictError (`details.reason: "last_admin"`) disabling, or taking `admin` from, the tenant's last active administrator
   */
  async updateUser(actor: Actor, id: string, input: UpdateUserInput) {
    const old = await this.managedUser(actor, id);
    const roles = input.roles ? [...new Set(input.roles)] : undefined;
    if (actor.id === id && (input.is_active === false || (roles && [...roles].sort().join() !== [...(old.roles ?? [])].sort().join())))
      throw new AccessDeniedError('You cannot disable yourself or change your own roles', { reason: 'self' });
    if (roles) await this.checkRoles(String(old.tenant_id), roles);
    const set: Record<string, unknown> = {};
    for (const k of ['name', 'features', 'attributes', 'is_active'] as const) if (input[k] !== undefined) set[k] = input[k];
    if (typeof set.name === 'string') {
      set.name = set.name.trim();
      if (!set.name) throw new ValidationError([{ loc: ['body', 'name'], msg: 'A name is required', type: 'value_error' }]);
    }
    if (roles) set.roles = roles;
    const tenantId = old.tenant_id;
    const entries = [this.changes.stage('users', { type: 'user.updated', actor, tenantId, audit: 'update' })];
    const disabling = old.is_active !== false && set.is_active === false;
    if (disabling) entries.push(this.changes.stage('users', { type: 'user.disabled', actor, tenantId }));
    const write = async () => await this.models.User.collection.findOneAndUpdate(
      { _id: new Types.ObjectId(id), ...LIVE, ...this.tenantScope(actor) },
      this.changes.pipeline('users', { ...set, updated_at: new Date() }, entries),
      { returnDocument: 'after' },
    ) as UserRecord | null;
    const demoting = isActiveAdmin(old) && (set.is_active === false || (roles !== undefined && !roles.includes('admin')));
    const doc = demoting ? await this.lastAdmin.takingAway(old, write) : await write();
    if (!doc) throw new NotFoundError('user', id);
    this.invalidateUser(id);
    await this.changes.committed('users', doc as unknown as Doc);
    return userView(doc);
  }

  /**
   * Soft-delete a user: `is_deleted`, `deleted_at`, `deleted_by`, `is_active: false`, every key
   * revoked. The document stays (audit entries keep pointing at it); lists and logins skip it and
   * its email is free again in its tenant.
   * @throws NotFoundError outside the actor's tenant or when already deleted
   * @throws AccessDeniedError for a non-admin, a tenant admin deleting a system user, or anyone deleting themselves
   * @throws ConflictError (`details.reason: "last_admin"`) for the tenant's last active administrator
   */
  async deleteUser(actor: Actor, id: string): Promise<void> {
    const old = await this.managedUser(actor, id);
    if (actor.id === id) throw new AccessDeniedError('You cannot delete yourself', { reason: 'self' });
    const now = new Date();
    const entry = this.changes.stage('users', { type: 'user.deleted', actor, tenantId: old.tenant_id, audit: 'delete' });
    const write = async () => await this.models.User.collection.findOneAndUpdate(
      { _id: new Types.ObjectId(id), ...LIVE, ...this.tenantScope(actor) },
      this.changes.pipeline('users', { is_deleted: true, deleted_at: now, deleted_by: isSystemActor(actor) ? null : new Types.ObjectId(actor.id), is_active: false, updated_at: now }, [entry]),
      { returnDocument: 'after' },
    ) as UserRecord | null;
    const doc = isActiveAdmin(old) ? await this.lastAdmin.takingAway(old, write) : await write();
    if (!doc) throw new NotFoundError('user', id);
    // Each key's revocation is its own change (`api_key.revoked`, audited), as when revoked by hand.
    const live = await this.models.ApiKey.find({ user_id: doc._id, revoked_at: null }, { _id: 1 }).lean();
    for (const k of live) await this.revokeKey(actor, { _id: k._id, revoked_at: null }, now);
    this.invalidateUser(id);
    await this.changes.committed('users', doc as unknown as Doc);
  }

  /**
   * A page of live users, oldest first, with the total of the same filter: the actor's tenant for
   * tenant administrators (`tenant_id` cannot widen it), every tenant or `tenant_id` for system administrators.
   */
  async listUsers(actor: Actor, query: ListUsersQuery) {
    const filter: Filter = { ...this.tenantScope(actor), ...LIVE };
    if (!filter.tenant_id && query.tenant_id) filter.tenant_id = new Types.ObjectId(query.tenant_id);
    const [items, total] = await Promise.all([
      this.models.User.find(filter).sort({ created_at: 1, _id: 1 }).skip((query.page - 1) * query.per_page).limit(query.per_page).lean(),
      this.models.User.countDocuments(filter),
    ]);
    return pageOf(items.map(userView), total, query);
  }

  /**
   * API keys the actor administers (never their hash or plain key), newest first: of one user with
   * `user_id`, live ones only unless `include_revoked`.
   */
  async listApiKeys(actor: Actor, query: ListApiKeysQuery) {
    const filter: Filter = { ...this.tenantScope(actor) };
    if (query.user_id) filter.user_id = new Types.ObjectId(query.user_id);
    if (!query.include_revoked) filter.revoked_at = null;
    const items = await this.models.ApiKey.find(filter).sort({ created_at: -1, _id: -1 }).skip((query.page - 1) * query.per_page).limit(query.per_page).lean();
    return items.map(apiKeyView);
  }

  /** The e-mail of each of `ids` the actor administers (deleted users included: their keys stay listed as revoked). */
  async userEmails(actor: Actor, ids: string[]): Promise<Map<string, string>> {
    requireRole(actor, 'admin');
    const valid = [...new Set(ids)].filter((id) => Types.ObjectId.isValid(id));
    const users = await this.models.User.find({ _id: { $in: valid }, ...this.tenantScope(actor) }, { email: 1 }).lean();
    return new Map(users.map((u) => [String(u._id), u.email]));
  }

  /**
   * Whether `user` is the only active administrator of its tenant: a console offers no way to
   * disable or delete such a user, since the tenant would have nobody left to administer it.
   */
  async isLastAdmin(user: { id: string; tenant_id: string; roles: readonly string[]; is_active?: boolean }): Promise<boolean> {
    if (!user.roles.includes('admin') || user.is_active === false) return false;
    const others = await this.models.User.countDocuments({ tenant_id: user.tenant_id, roles: 'admin', is_active: { $ne: false }, _id: { $ne: user.id }, ...LIVE });
    return others === 0;
  }

  /** Create an API key for a user the actor administers. The plain key is in this response only. */
  async createApiKey(actor: Actor, input: CreateApiKeyInput) {
    const user = await this.models.User.findOne({ _id: input.user_id, ...LIVE, ...this.tenantScope(actor) }).lean();
    if (!user) throw new NotFoundError('user', input.user_id);
    // A tenant admin (of the system tenant, or of any tenant when tenancy is off) must not mint keys that act as a system administrator.
    if (!hasSystemScope(actor) && hasSystemScope(toAuthUser(user)))
      throw new AccessDeniedError('Only system administrators create keys for system administrators');
    const key = generateApiKey();
    const doc = stamped(new this.models.ApiKey({
      name: input.name,
      user_id: user._id,
      tenant_id: user.tenant_id,
      key_hash: hashKey(key),
      prefix: key.slice(0, API_KEY_PREFIX.length + 6),
      created_by: isSystemActor(actor) ? null : new Types.ObjectId(actor.id),
    }));
    // The event's object is the key's view: never the key itself nor its hash.
    const entry = this.changes.stage('api_keys', { type: 'api_key.created', actor, tenantId: user.tenant_id, audit: 'insert' });
    doc.set(OUTBOX_FIELD, this.changes.forInsert([entry], apiKeyView(doc.toObject())));
    await doc.save();
    await this.changes.committed('api_keys', doc.toObject() as unknown as Doc);
    return { ...apiKeyView(doc.toObject()), key };
  }

  async revokeApiKey(actor: Actor, id: string) {
    if (!hasSystemScope(actor)) {
      // A tenant admin (of the system tenant, or of any tenant when tenancy is off) must not cut off a system administrator.
      const key = await this.models.ApiKey.findOne({ _id: id, revoked_at: null, ...this.tenantScope(actor) }, { user_id: 1 }).lean();
      const owner = key && (await this.models.User.findById(key.user_id).lean());
      if (owner && hasSystemScope(toAuthUser(owner))) throw new AccessDeniedError('Only system administrators revoke keys of system administrators');
    }
    const doc = Types.ObjectId.isValid(id) ? await this.revokeKey(actor, { _id: new Types.ObjectId(id), revoked_at: null, ...this.tenantScope(actor) }, new Date()) : null;
    if (!doc) throw new NotFoundError('api_key', id);
    return apiKeyView(doc);
  }

  /** Revokes the live key `filter` finds, with its `api_key.revoked` event in the same write; null when none matched. */
  private async revokeKey(actor: Actor, filter: Filter, at: Date) {
    const entry = this.changes.stage('api_keys', { type: 'api_key.revoked', actor, tenantId: null, audit: 'update' });
    const doc = await this.models.ApiKey.collection.findOneAndUpdate(filter, this.changes.pipeline('api_keys', { revoked_at: at, updated_at: at }, [entry]), { returnDocument: 'after' });
    if (!doc) return null;
    this.forgetApiKey(doc.key_hash, String(doc._id));
    await this.changes.committed('api_keys', doc as unknown as Doc);
    return doc as unknown as Parameters<typeof apiKeyView>[0];
  }

  /**
   * Deletes dead API keys (the `cleanup_expired_tokens` job): keys revoked before `cutoff`, and
   * keys of users deleted before `cutoff`, within the actor's tenant scope: `systemActor()` every
   * tenant, `systemActor(tenantId)` that tenant only (every tenant when `MULTI_TENANT_ENABLED` is
   * off). Live keys are never touched.
   * @throws AccessDeniedError for a non-system actor, tenant administrators included (nothing deleted)
   */
  async purgeDeadApiKeys(actor: Actor, cutoff: Date): Promise<{ revoked_keys_deleted: number; deleted_user_keys_deleted: number }> {
    requireRole(actor, 'system');
    const scope = this.tenantScope(actor);
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

  /**
   * Lets the plugin keeping custom roles say which names a tenant has. Without one, a user's roles
   * are the built-in `user` and `admin` only.
   */
  registerRoleCheck(check: RoleCheck): void {
    this.roleCheck = check;
  }

  /** @throws ValidationError (422) naming each role that is neither built-in nor a role of the tenant */
  private async checkRoles(tenantId: string, roles: readonly string[]): Promise<void> {
    const unknown = await this.unknownRoles(tenantId, roles);
    if (unknown.length) throw new ValidationError(unknown.map((r) => ({ loc: ['body', 'roles', roles.indexOf(r)], msg: `Unknown role "${r}" in this tenant`, type: 'unknown_role' })));
  }

  /**
   * The names among `roles` that are neither built in nor roles of the tenant, as a user's roles are
   * checked (for other holders of a role, such as webhook endpoints).
   */
  async unknownRoles(tenantId: string, roles: readonly string[]): Promise<string[]> {
    const custom = roles.filter((r) => !(ROLES as readonly string[]).includes(r));
    if (!custom.length) return [];
    return this.roleCheck ? this.roleCheck(tenantId, custom) : custom;
  }

  /**
   * Lets a plugin whose documents name roles keep a role from being deleted or renamed while one
   * of them names it. `kind` names the holders in the 409 (e.g. "webhook endpoints").
   */
  registerRoleHolder(kind: string, held: (tenantId: string, role: string) => Promise<boolean>): void {
    this.roleHolders.push({ kind, held });
  }

  /** What still holds `role` in the tenant ("users", or a registered kind); null when nothing does (it may be deleted). */
  async roleHeld(tenantId: string, role: string): Promise<string | null> {
    if (await this.models.User.exists({ tenant_id: tenantId, roles: role, ...LIVE })) return 'users';
    for (const h of this.roleHolders) if (await h.held(tenantId, role)) return h.kind;
    return null;
  }

  /**
   * A live user the actor administers, as the actor it authenticates as (for explaining its access).
   * @throws NotFoundError outside the actor's scope; AccessDeniedError for a non-admin
   */
  async userAsActor(actor: Actor, id: string): Promise<Actor> {
    requireRole(actor, 'admin');
    const user = await this.models.User.findOne({ _id: id, ...LIVE, ...this.tenantScope(actor) }).lean();
    if (!user) throw new NotFoundError('user', id);
    return toAuthUser(user);
  }

  countUsers(): Promise<number> {
    return this.models.User.estimatedDocumentCount();
  }

  /**
   * A live user the actor administers.
   * @throws AccessDeniedError for a non-admin, or a system user and a non-system actor; NotFoundError outside the actor's scope
   */
  private async managedUser(actor: Actor, id: string) {
    requireRole(actor, 'admin');
    const user = await this.models.User.findOne({ _id: id, ...LIVE, ...this.tenantScope(actor) }).lean();
    if (!user) throw new NotFoundError('user', id);
    if (!hasSystemScope(actor) && hasSystemScope(toAuthUser(user)))
      throw new AccessDeniedError('Only system administrators change system administrators');
    return user;
  }

  private tenantScope(actor: Actor): Filter {
    return this.tenancy.filter(actor);
  }

}

/** A tenant in admin responses. */
export type TenantView = ReturnType<typeof tenantView>;
/** An API key in admin responses (never its hash; the plain `key` only in the creation answer). */
export type ApiKeyView = ReturnType<typeof apiKeyView>;

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
