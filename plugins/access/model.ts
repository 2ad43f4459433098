import { Schema, type Connection, type InferSchemaType, type Model } from 'mongoose';
import { modelOn } from '../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';

const roleSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    includes: { type: [String], default: [] },
    /**
     * Resource → action → rule, as validated by `permissionsSchema`, stored as JSON text: its
     * filters hold `$`-prefixed keys, which not every MongoDB-compatible store accepts as field names.
     */
    permissions: { type: String, default: '{}' },
    created_by: { type: Schema.Types.ObjectId, default: null },
    updated_by: { type: Schema.Types.ObjectId, default: null },
    version: { type: Number, default: 1 },
    /** Soft delete: the deleting write carries the `role.deleted` event in its outbox. */
    is_deleted: { type: Boolean, default: false },
    deleted_at: { type: Date, default: null },
  },
  { timestamps: { createdAt: 'created_at', updatedAt: 'updated_at' } as const, versionKey: false, minimize: false },
);
roleSchema.index({ tenant_id: 1, name: 1 }, { unique: true, name: 'tenant_role_name_unique', partialFilterExpression: { is_deleted: false } });
roleSchema.index({ tenant_id: 1, is_deleted: 1, created_at: 1, _id: 1 });
roleSchema.add(outboxPath);
roleSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export type RoleDoc = InferSchemaType<typeof roleSchema>;

/** The `roles` collection (one document per custom role of a tenant). */
export const roleModel = (conn: Connection): Model<RoleDoc> => modelOn(conn, 'Role', roleSchema, 'roles');
