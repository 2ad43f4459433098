import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';

export const INVITATION_STATUSES = ['pending', 'accepted', 'revoked'] as const;

/**
 * An invitation to join a tenant, by e-mail. Only the SHA-256 of its link's token is stored (the
 * token is 256 random bits, so a fast hash is enough and finds it by index). Every change is a
 * compare-and-set on `version` carrying its event in the outbox.
 */
const invitationSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, ref: 'Tenant', required: true, index: true },
    email: { type: String, required: true, lowercase: true, trim: true },
    roles: { type: [String], default: ['user'] },
    features: { type: [String], default: [] },
    token_hash: { type: String, required: true, unique: true },
    status: { type: String, enum: INVITATION_STATUSES, default: 'pending' },
    expires_at: { type: Date, required: true },
    invited_by: { type: Schema.Types.ObjectId, ref: 'User', default: null },
    sent_count: { type: Number, default: 1 },
    last_sent_at: { type: Date, default: null },
    accepted_at: { type: Date, default: null },
    accepted_user_id: { type: Schema.Types.ObjectId, ref: 'User', default: null },
    revoked_at: { type: Date, default: null },
    version: { type: Number, default: 1 },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
    ...outboxPath,
  },
  { versionKey: false },
);
invitationSchema.index({ tenant_id: 1, created_at: -1 });
invitationSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export type InvitationDoc = InferSchemaType<typeof invitationSchema>;
export type InvitationRecord = InvitationDoc & { _id: Types.ObjectId };

/** Registers (once per connection) and returns the model on `invitations`. */
export const invitationModel = (conn: Connection): Model<InvitationDoc> => modelOn(conn, 'Invitation', invitationSchema, 'invitations');
