import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';

const timestamps = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

/**
 * A registered passkey (WebAuthn credential). `credential_id` is globally unique (authenticators
 * make 16+ random bytes), so a login is settled by the credential presented.
 */
export const credentialSchema = new Schema(
  {
    /** base64url, as the browser reports `PublicKeyCredential.id`. */
    credential_id: { type: String, required: true, unique: true },
    /** COSE-encoded public key from the attestation's authenticator data. */
    public_key: { type: Buffer, required: true },
    /** COSE algorithm of the key (-7 ES256, -257 RS256). */
    alg: { type: Number, required: true },
    sign_count: { type: Number, required: true, default: 0, min: 0 },
    transports: { type: [String], default: [] },
    device_name: { type: String, required: true, trim: true, maxlength: 200 },
    /** The attestation object exactly as received (format `none`: no trust chain to check). */
    attestation_object: { type: Buffer, required: true },
    user_id: { type: Schema.Types.ObjectId, ref: 'User', required: true, index: true },
    tenant_id: { type: Schema.Types.ObjectId, ref: 'Tenant', required: true, index: true },
    registered_at: { type: Date, required: true },
    last_used_at: { type: Date, default: null },
    /** Set when a login showed a non-increasing sign count (possible clone): the credential no longer logs in. */
    disabled_at: { type: Date, default: null },
    disabled_reason: { type: String, default: null },
  },
  { timestamps, versionKey: false },
);

export type CredentialDoc = InferSchemaType<typeof credentialSchema>;
export type CredentialRecord = CredentialDoc & { _id: Types.ObjectId };

/** What `GET /auth/webauthn/credentials` and GraphQL `passkeys` show: these four fields, never the key material. */
export type CredentialView = Pick<CredentialDoc, 'credential_id' | 'device_name' | 'registered_at' | 'last_used_at'>;

export const credentialView = (c: CredentialRecord): CredentialView => ({
  credential_id: c.credential_id,
  device_name: c.device_name,
  registered_at: c.registered_at,
  last_used_at: c.last_used_at ?? null,
});

export const CHALLENGE_PURPOSES = ['register', 'authenticate'] as const;

/**
 * A pending ceremony's challenge. One per (purpose, subject): registration challenges belong to a
 * user id, login challenges to a normalised email. Stored in MongoDB (not process memory) so
 * options from one replica verify on another; `expires_at` drives a TTL index and every read also
 * checks it, since the TTL monitor only runs once a minute.
 */
export const challengeSchema = new Schema(
  {
    purpose: { type: String, enum: CHALLENGE_PURPOSES, required: true },
    /** `user:<id>` for registration, `email:<address>` for login. */
    subject: { type: String, required: true },
    challenge: { type: String, required: true },
    expires_at: { type: Date, required: true },
  },
  { versionKey: false },
);
challengeSchema.index({ purpose: 1, subject: 1 }, { unique: true });
challengeSchema.index({ expires_at: 1 }, { expireAfterSeconds: 0 });

export type ChallengeDoc = InferSchemaType<typeof challengeSchema>;

export interface WebAuthnModels {
  Credential: Model<CredentialDoc>;
  Challenge: Model<ChallengeDoc>;
}

/** Registers (once per connection) and returns the models on `webauthn_credentials` and `webauthn_challenges`. */
export const webauthnModels = (conn: Connection): WebAuthnModels => ({
  Credential: modelOn(conn, 'WebAuthnCredential', credentialSchema, 'webauthn_credentials'),
  Challenge: modelOn(conn, 'WebAuthnChallenge', challengeSchema, 'webauthn_challenges'),
});
