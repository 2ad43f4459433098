import { Schema, type Connection } from 'mongoose';
import { modelOn } from '../../core/db.ts';

export const FILE_STATUSES = ['uploading', 'ready', 'deleted'] as const;
export type FileStatus = (typeof FILE_STATUSES)[number];

/**
 * A file's record: the `files` resource (the resources plugin adds tenant, audit and soft-delete
 * fields). The bytes live in the adapter named by `storage`, under `<tenant>/<_id>`.
 */
export const fileSchema = new Schema({
  filename: { type: String, required: true },
  /** As sniffed from the bytes (the declared type when the bytes name none). */
  content_type: { type: String, required: true },
  size: { type: Number, integer: true, required: true },
  sha256: { type: String, default: null },
  storage: { type: String, required: true },
  status: { type: String, enum: FILE_STATUSES, required: true },
  metadata: { type: Schema.Types.Mixed, default: {} },
  /** Stored image variants, name → `{ width, height, format, size }`. */
  variants: { type: Schema.Types.Mixed, default: {} },
});
fileSchema.index({ tenant_id: 1, status: 1, created_at: -1 });

/**
 * Bytes of live files per tenant. Uploads add their size with a conditional `$inc` (only while the
 * total stays within the quota), so parallel uploads can never take a tenant past it.
 */
const usageSchema = new Schema({ _id: { type: String }, used: { type: Number, default: 0 } }, { versionKey: false });
export const fileUsageModel = (conn: Connection) => modelOn(conn, 'FileUsage', usageSchema, 'file_usage');

/** A resumable (tus) upload in progress; its bytes are parts in the GridFS bucket `file_upload_parts`. */
const uploadSchema = new Schema(
  {
    _id: { type: String },
    tenant_id: { type: String, required: true },
    actor_id: { type: String, required: true },
    size: { type: Number, default: null },
    offset: { type: Number, default: 0 },
    metadata: { type: Schema.Types.Mixed, default: {} },
    /** The PATCH writing at `offset` now, on whichever process: `{ token, at }` (`at` renewed while it writes), or null. */
    writer: { type: Schema.Types.Mixed, default: null },
    created_at: { type: Date, required: true },
  },
  { versionKey: false, minimize: false },
);
uploadSchema.index({ created_at: 1 });
uploadSchema.index({ tenant_id: 1, _id: 1 });
export const fileUploadModel = (conn: Connection) => modelOn(conn, 'FileUpload', uploadSchema, 'file_uploads');
