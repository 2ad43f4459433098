import { Schema, type Collection, type Connection, type InferSchemaType, type Model } from 'mongoose';
import { modelOn } from '../db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/model.ts';
import type { Logger } from '../logger.ts';

const timestamps = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

const tenantSchema = new Schema(
  {
    name: { type: String, required: true, trim: true, maxlength: 200 },
    is_system: { type: Boolean, default: false },
    /** Events of changes not yet in the log (core/identity/events.ts). */
    ...outboxPath,
  },
  { timestamps, versionKey: false },
);

/** The built-in roles. A user may also hold custom roles of its tenant (see `IdentityService.registerRoleCheck`). */
export const ROLES = ['user', 'admin'] as const;

const userSchema = new Schema(
  {
    /** Unique per tenant among users not deleted (docs/auth.md, "Emails"). */
    email: { type: String, required: true, lowercase: true, trim: true },
    name: { type: String, required: true, trim: true },
    tenant_id: { type: Schema.Types.ObjectId, ref: 'Tenant', required: true, index: true },
    roles: { type: [String], default: ['user'] },
    scope: { type: String, enum: ['system', null], default: null },
    is_system_user: { type: Boolean, default: false },
    features: { type: [String], default: [] },
    attributes: { type: Schema.Types.Mixed, default: {} },
    is_active: { type: Boolean, default: true },
    /** Soft delete: the document stays for the audit trail; lists, lookups and logins skip it. */
    is_deleted: { type: Boolean, default: false },
    deleted_at: { type: Date, default: null },
    deleted_by: { type: Schema.Types.ObjectId, ref: 'User', default: null },
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false },
);
/** Emails are per tenant, so nothing a tenant does reveals another tenant's users; a deleted user's address is free again. */
const USER_EMAIL_INDEX = 'tenant_email_unique';
userSchema.index({ tenant_id: 1, email: 1 }, { unique: true, name: USER_EMAIL_INDEX, partialFilterExpression: { is_deleted: false } });
userSchema.index({ email: 1 });

const apiKeySchema = new Schema(
  {
    name: { type: String, required: true, trim: true },
    user_id: { type: Schema.Types.ObjectId, ref: 'User', required: true, index: true },
    tenant_id: { type: Schema.Types.ObjectId, ref: 'Tenant', required: true, index: true },
    /** SHA-256 of the key: keys are 256-bit random, so a fast hash is safe and lookups stay O(1). */
    key_hash: { type: String, required: true, unique: true },
    /** First characters of the key, shown in listings so people can tell keys apart. */
    prefix: { type: String, required: true },
    created_by: { type: Schema.Types.ObjectId, ref: 'User', default: null },
    revoked_at: { type: Date, default: null },
    last_used_at: { type: Date, default: null },
    ...outboxPath,
  },
  { timestamps, versionKey: false },
);

/** A tenant's lock for changes that take an administrator away (core/identity/last-admin.ts): `_id` is the tenant's id. */
const adminLockSchema = new Schema(
  {
    _id: { type: String, required: true },
    token: { type: String, required: true },
    until: { type: Date, required: true },
  },
  { versionKey: false },
);
// Leases are deleted when released; one left by a dead process goes a minute after it ended.
adminLockSchema.index({ until: 1 }, { expireAfterSeconds: 60 });

// The sweep's windows are ranges of the outbox stamps (docs/events.md).
for (const schema of [tenantSchema, userSchema, apiKeySchema]) schema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export type TenantDoc = InferSchemaType<typeof tenantSchema>;
export type UserDoc = InferSchemaType<typeof userSchema>;
export type ApiKeyDoc = InferSchemaType<typeof apiKeySchema>;
export type AdminLockDoc = InferSchemaType<typeof adminLockSchema>;

export interface IdentityModels {
  Tenant: Model<TenantDoc>;
  User: Model<UserDoc>;
  ApiKey: Model<ApiKeyDoc>;
  AdminLock: Model<AdminLockDoc>;
}

/** Registers (once per connection) and returns the identity models. */
export const identityModels = (conn: Connection): IdentityModels => ({
  Tenant: modelOn(conn, 'Tenant', tenantSchema, 'tenants'),
  User: modelOn(conn, 'User', userSchema, 'users'),
  ApiKey: modelOn(conn, 'ApiKey', apiKeySchema, 'api_keys'),
  AdminLock: modelOn(conn, 'AdminLock', adminLockSchema, 'admin_locks'),
});

/**
 * Brings a users collection of an earlier version up to date: emails were globally unique (index
 * `email_1`) and users had no `is_deleted`. Safe to run on every start and from several processes.
 */
export async function migrateUsers(coll: Collection, log: Logger): Promise<void> {
  const indexes = await coll.indexes().catch(() => []);
  if (indexes.some((i) => i.name === 'email_1' && i.unique)) {
    await coll.dropIndex('email_1').catch(() => undefined);
    log.info('users: dropped the global unique email index; emails are now unique per tenant');
  }
  await coll.updateMany({ is_deleted: { $exists: false } }, { $set: { is_deleted: false } });
}
