import { Schema, type Collection, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';
import type { Logger } from '../../core/logger.ts';

const timestamps = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

const tenantSchema = new Schema(
  {
    name: { type: String, required: true, trim: true, maxlength: 200 },
    is_system: { type: Boolean, default: false },
    /** Events of changes not yet in the log (plugins/identity/events.ts). */
    ...outboxPath,
  },
  { timestamps, versionKey: false },
);

export { ROLES } from '../../core/access.ts';

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
    /**
     * The person this user document is a membership of (plugins/identity/memberships.ts). A user
     * created on its own is its own person (the same id); set by the save hook below and by the
     * start-up migration for users written before memberships existed.
     */
    person_id: { type: Schema.Types.ObjectId, ref: 'Person', default: null, index: true },
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false },
);
/** Emails are per tenant, so nothing a tenant does reveals another tenant's users; a deleted user's address is free again. */
const USER_EMAIL_INDEX = 'tenant_email_unique';
userSchema.index({ tenant_id: 1, email: 1 }, { unique: true, name: USER_EMAIL_INDEX, partialFilterExpression: { is_deleted: false } });
userSchema.index({ email: 1 });
// A new user is a person of its own unless it is given one (an invitation accepted by a known person).
userSchema.pre('save', async function () {
  if (!this.isNew) return;
  this.person_id ??= this._id;
  if (String(this.person_id) === String(this._id)) await ensurePerson(this.db.model('Person').collection, this._id);
});

/**
 * A person: who holds memberships (users documents with its `person_id`) in one or more tenants.
 * It holds no copy of an e-mail or a name: those are each membership's own (and privacy erasure
 * pseudonymises them there). Its id is its first membership's. People are never merged by e-mail.
 */
const personSchema = new Schema({}, { timestamps, versionKey: false });

/** Inserts the person `_id` unless it exists: safe to repeat and to race (the loser's insert is a no-op). */
export async function ensurePerson(people: Collection, id: Types.ObjectId): Promise<void> {
  const now = new Date();
  try {
    await people.updateOne({ _id: id }, { $setOnInsert: { created_at: now, updated_at: now } }, { upsert: true });
  } catch (err) {
    if ((err as { code?: number }).code !== 11000) throw err;
  }
}

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

/** A tenant's lock for changes that take an administrator away (plugins/identity/last-admin.ts): `_id` is the tenant's id. */
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
export type PersonDoc = InferSchemaType<typeof personSchema>;

export interface IdentityModels {
  Tenant: Model<TenantDoc>;
  User: Model<UserDoc>;
  ApiKey: Model<ApiKeyDoc>;
  AdminLock: Model<AdminLockDoc>;
  Person: Model<PersonDoc>;
}

/** Registers (once per connection) and returns the identity models. */
export const identityModels = (conn: Connection): IdentityModels => ({
  Tenant: modelOn(conn, 'Tenant', tenantSchema, 'tenants'),
  User: modelOn(conn, 'User', userSchema, 'users'),
  ApiKey: modelOn(conn, 'ApiKey', apiKeySchema, 'api_keys'),
  AdminLock: modelOn(conn, 'AdminLock', adminLockSchema, 'admin_locks'),
  Person: modelOn(conn, 'Person', personSchema, 'people'),
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
