import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';

/** Every value of `operation` (spec document 2, AuditEntry). */
export const AUDIT_OPERATIONS = ['insert', 'update', 'replace', 'delete', 'depersonalize'] as const;
export type AuditOperation = (typeof AUDIT_OPERATIONS)[number];

export const AUDIT_COLLECTION = 'audit_log';

/** One audit entry (spec document 2, AuditEntry); `tenant_id` is the tenant of the audited document. */
export const auditEntrySchema = new Schema(
  {
    resource: { type: String, required: true },
    item_id: { type: Schema.Types.ObjectId, required: true },
    operation: { type: String, enum: AUDIT_OPERATIONS, required: true },
    user_id: { type: Schema.Types.ObjectId, default: null },
    user_name: { type: String, default: null },
    ip: { type: String, default: null },
    changes: { type: Schema.Types.Mixed, default: null },
    snapshot: { type: Schema.Types.Mixed, default: null },
    // Set when the change happens, not when the buffered entry reaches the database.
    created_at: { type: Date, required: true },
    tenant_id: { type: Schema.Types.ObjectId, default: null },
  },
  { versionKey: false, minimize: false },
);
auditEntrySchema.index({ resource: 1, item_id: 1 });
auditEntrySchema.index({ user_id: 1 });
auditEntrySchema.index({ created_at: -1 });
// Every read by a tenant administrator filters on tenant and sorts or ranges on created_at.
auditEntrySchema.index({ tenant_id: 1, created_at: -1 });

export type AuditEntryDoc = InferSchemaType<typeof auditEntrySchema>;
/** An entry as read back with `.lean()`. */
export type AuditEntryRecord = AuditEntryDoc & { _id: Types.ObjectId };
export type AuditEntryModel = Model<AuditEntryDoc>;

/** Registers (once per connection) and returns the audit model on collection `audit_log`. */
export const auditModel = (conn: Connection): AuditEntryModel =>
  (conn.models.AuditEntry ?? conn.model('AuditEntry', auditEntrySchema, AUDIT_COLLECTION)) as Model<InferSchemaType<typeof auditEntrySchema>>;
