import { Schema, type Connection, type InferSchemaType, type Model } from 'mongoose';
import { modelOn } from '../../core/db.ts';

/**
 * One `Idempotency-Key` of one actor in one tenant: reserved (`running`) by the first request that
 * carries it, then holding that request's answer (`done`) until `expires_at`. The unique index is
 * the reservation: of concurrent requests with the same key, on any replica, exactly one insert wins.
 */
const idempotencyKeySchema = new Schema(
  {
    actor_id: { type: String, required: true },
    /** The tenant the actor acted in ('' for a system actor acting in every tenant). */
    tenant_id: { type: String, default: '' },
    key: { type: String, required: true },
    /** sha256 of method, path, query, If-Match and canonical JSON body: a repeat must send the same request. */
    fingerprint: { type: String, required: true },
    /** Token of the run holding the reservation: a run whose lease lapsed and was taken over no longer matches. */
    run: { type: String, required: true },
    state: { type: String, enum: ['running', 'done'], required: true },
    status: { type: Number, default: null },
    /** Response headers worth replaying (Content-Type, ETag, Location, Last-Modified). */
    headers: { type: Schema.Types.Mixed, default: {} },
    /** The response body as sent (success answers). */
    body: { type: Buffer, default: null },
    /** An error answer (4xx): replayed through the error envelope with the repeat's own request id. */
    error: { type: Schema.Types.Mixed, default: null },
    created_at: { type: Date, required: true },
    /** Running: end of the lease (renewed while the request runs). Done: end of the retention (`IDEMPOTENCY_TTL_HOURS`). */
    expires_at: { type: Date, required: true },
  },
  { collection: 'idempotency_keys', versionKey: false },
);
idempotencyKeySchema.index({ tenant_id: 1, actor_id: 1, key: 1 }, { unique: true });
idempotencyKeySchema.index({ expires_at: 1 }, { expireAfterSeconds: 0 });

export type IdempotencyKeyDoc = InferSchemaType<typeof idempotencyKeySchema>;
export type IdempotencyKeyModel = Model<IdempotencyKeyDoc>;

/** The model on the app's connection (registered once; its indexes are built with every model's at start-up). */
export function idempotencyKeyModel(conn: Connection): IdempotencyKeyModel {
  return modelOn(conn, 'IdempotencyKey', idempotencyKeySchema);
}

/** The bytes of a stored body as a lean or driver read gives them (BSON Binary: its bytes are `buffer` up to `position`). */
export function bytesOf(body: unknown): Buffer | null {
  if (!body) return null;
  if (Buffer.isBuffer(body)) return body;
  const b = body as { buffer: Uint8Array; position: number };
  return Buffer.from(b.buffer.subarray(0, b.position));
}
