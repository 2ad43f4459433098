import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';

/** Every value of `status`. `received` is part of the set but never written: an event is stored already `processing`. */
export const WEBHOOK_STATUSES = ['received', 'processing', 'processed', 'failed'] as const;
export type WebhookStatus = (typeof WEBHOOK_STATUSES)[number];

export const WEBHOOK_COLLECTION = 'webhook_events';

/**
 * One delivered event, system-scoped: one collection across tenants. Besides what a delivery
 * brings, `attempts` counts the handler runs so far and `lease_until` bounds a `processing` claim
 * (one whose lease passed is taken to have crashed and may be claimed again).
 */
export const webhookEventSchema = new Schema(
  {
    provider: { type: String, required: true },
    event_id: { type: String, required: true },
    event_type: { type: String, default: null },
    delivery_id: { type: String, default: null },
    payload: { type: Schema.Types.Mixed, required: true },
    headers: { type: Schema.Types.Mixed, default: {} },
    status: { type: String, enum: WEBHOOK_STATUSES, required: true },
    processed_at: { type: Date, default: null },
    error: { type: String, default: null },
    retry_count: { type: Number, default: 0 },
    is_duplicate: { type: Boolean, default: false },
    attempts: { type: Number, default: 0 },
    lease_until: { type: Date, default: null },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
  },
  { versionKey: false, minimize: false },
);
// The idempotency key: insert-first against this index is what makes delivery exactly-once.
webhookEventSchema.index({ provider: 1, event_id: 1 }, { unique: true });
webhookEventSchema.index({ provider: 1, status: 1 });
webhookEventSchema.index({ status: 1 });
webhookEventSchema.index({ created_at: -1 });

export type WebhookEventDoc = InferSchemaType<typeof webhookEventSchema>;
export type WebhookEventRecord = WebhookEventDoc & { _id: Types.ObjectId };
export type WebhookEventModel = Model<WebhookEventDoc>;

/** Registers (once per connection) and returns the model on collection `webhook_events`. */
export const webhookEventModel = (conn: Connection): WebhookEventModel =>
  modelOn(conn, 'WebhookEvent', webhookEventSchema, WEBHOOK_COLLECTION);
