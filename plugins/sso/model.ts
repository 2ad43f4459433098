import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';

const timestamps = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

/**
 * A tenant's OpenID Connect provider. `name` is the provider's slug in the sign-in URL, unique
 * per tenant among providers not deleted. The client secret is kept encrypted (crypto.ts).
 */
const providerSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, ref: 'Tenant', required: true, index: true },
    name: { type: String, required: true },
    issuer: { type: String, required: true },
    client_id: { type: String, required: true },
    /** AES-256-GCM of the client secret (`iv.tag.ciphertext`, base64url): never returned. */
    client_secret_enc: { type: String, required: true },
    allowed_domains: { type: [String], default: [] },
    /** Group (a value of the `groups_claim` claim) → roles granted. Empty: roles are not managed by the provider. */
    role_mapping: { type: Schema.Types.Mixed, default: {} },
    groups_claim: { type: String, default: 'groups' },
    scopes: { type: [String], default: ['openid', 'email', 'profile'] },
    jit: { type: Boolean, default: false },
    is_deleted: { type: Boolean, default: false },
    deleted_at: { type: Date, default: null },
    version: { type: Number, default: 1 },
    /** Events of provider changes not yet in the log. */
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false },
);
providerSchema.index({ tenant_id: 1, name: 1 }, { unique: true, partialFilterExpression: { is_deleted: false } });

/** A sign-in under way: what the callback must find. Consumed once (`findOneAndDelete`); gone after 10 minutes. */
const stateSchema = new Schema(
  {
    _id: { type: String, required: true },
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    provider_id: { type: Schema.Types.ObjectId, required: true },
    nonce: { type: String, required: true },
    code_verifier: { type: String, required: true },
    redirect_uri: { type: String, required: true },
    return_to: { type: String, enum: ['token', 'console'], required: true },
    created_at: { type: Date, required: true },
  },
  { versionKey: false },
);
stateSchema.index({ created_at: 1 }, { expireAfterSeconds: 600 });
// The callback looks a state up by its id within the tenant of the URL.
stateSchema.index({ tenant_id: 1, _id: 1 });

/**
 * The link of a provider's subject (`sub`) to a user: the credential SSO tokens are bound to.
 * `disabled_by_sso` records that a sign-in cut the user off because the mapping no longer granted
 * them, so a later sign-in that grants them again turns them back on (and nothing else does).
 */
const linkSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, required: true, index: true },
    provider_id: { type: Schema.Types.ObjectId, required: true },
    subject: { type: String, required: true },
    user_id: { type: Schema.Types.ObjectId, required: true, index: true },
    email: { type: String, required: true },
    disabled_by_sso: { type: Boolean, default: false },
    last_sign_in_at: { type: Date, default: null },
  },
  { timestamps, versionKey: false },
);
linkSchema.index({ tenant_id: 1, provider_id: 1, subject: 1 }, { unique: true });

/** A console hand-over: single use, one minute; the hash of the code the browser brings back. */
const codeSchema = new Schema(
  {
    _id: { type: String, required: true },
    link_id: { type: Schema.Types.ObjectId, required: true },
    user_id: { type: Schema.Types.ObjectId, required: true },
    created_at: { type: Date, required: true },
  },
  { versionKey: false },
);
codeSchema.index({ created_at: 1 }, { expireAfterSeconds: 60 });

/**
 * One sign-in attempt, kept as the record its audit entry and event are written from: the outcome,
 * and for a refusal its reason. A refused sign-in writes only this record.
 */
const signInSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, required: true, index: true },
    provider_id: { type: Schema.Types.ObjectId, default: null },
    provider: { type: String, required: true },
    outcome: { type: String, enum: ['succeeded', 'refused'], required: true },
    reason: { type: String, default: null },
    email: { type: String, default: null },
    subject: { type: String, default: null },
    user_id: { type: Schema.Types.ObjectId, default: null },
    ip: { type: String, default: null },
    created_at: { type: Date, required: true },
    ...outboxPath,
  },
  { versionKey: false, minimize: false },
);

for (const schema of [providerSchema, signInSchema]) schema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export type ProviderDoc = InferSchemaType<typeof providerSchema>;
export type ProviderRecord = ProviderDoc & { _id: Types.ObjectId; created_at: Date; updated_at: Date };
export type StateDoc = InferSchemaType<typeof stateSchema>;
export type LinkDoc = InferSchemaType<typeof linkSchema>;
export type SignInDoc = InferSchemaType<typeof signInSchema>;

export interface SsoModels {
  Provider: Model<ProviderDoc>;
  State: Model<StateDoc>;
  Link: Model<LinkDoc>;
  Code: Model<InferSchemaType<typeof codeSchema>>;
  SignIn: Model<SignInDoc>;
}

/** Registers (once per connection) and returns the SSO models. */
export const ssoModels = (conn: Connection): SsoModels => ({
  Provider: modelOn(conn, 'SsoProvider', providerSchema, 'sso_providers'),
  State: modelOn(conn, 'SsoState', stateSchema, 'sso_states'),
  Link: modelOn(conn, 'SsoLink', linkSchema, 'sso_links'),
  Code: modelOn(conn, 'SsoCode', codeSchema, 'sso_codes'),
  SignIn: modelOn(conn, 'SsoSignIn', signInSchema, 'sso_sign_ins'),
});
