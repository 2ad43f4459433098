import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';

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
    /** The `webhook_event.failed` events of failed runs until the relay moves them to the log (docs/events.md). */
    ...outboxPath,
  },
  { versionKey: false, minimize: false },
);
// The event log's sweep finds outbox entries a dead process left behind.
webhookEventSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });
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

// --- outbound webhooks --------------------------------------------------------------------------

/** Statuses of an outbound delivery: `pending` (due or scheduled), `delivered` (a 2xx), `failed` (schedule spent). */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * A tenant's outbound webhook endpoint (`webhook_endpoints`). `secrets` holds the signing secrets
 * (never shown after creation or rotation, never audited): the current one has `expires_at` null,
 * a rotated-out one signs too until its `expires_at`. `failing_since` is the first failed attempt
 * since the last success; the endpoint is disabled when it gets too old.
 */
export const webhookEndpointSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    url: { type: String, required: true },
    description: { type: String, default: null },
    event_types: { type: [String], required: true },
    enabled: { type: Boolean, required: true },
    role: { type: String, default: null },
    disabled_reason: { type: String, default: null },
    secrets: {
      type: [new Schema({ value: { type: String, required: true }, expires_at: { type: Date, default: null } }, { _id: false })],
      required: true,
    },
    secret_rotated_at: { type: Date, default: null },
    failing_since: { type: Date, default: null },
    created_by: { type: Schema.Types.ObjectId, default: null },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
    ...outboxPath,
  },
  { versionKey: false, minimize: false },
);
webhookEndpointSchema.index({ tenant_id: 1, created_at: -1 });
webhookEndpointSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export type WebhookEndpointDoc = InferSchemaType<typeof webhookEndpointSchema>;
export type WebhookEndpointRecord = WebhookEndpointDoc & { _id: Types.ObjectId };
export type WebhookEndpointModel = Model<WebhookEndpointDoc>;

export const webhookEndpointModel = (conn: Connection): WebhookEndpointModel =>
  modelOn(conn, 'WebhookEndpoint', webhookEndpointSchema, 'webhook_endpoints');

/** Attempts kept in a delivery's `attempt_log` (the oldest are dropped first). */
export const ATTEMPT_LOG_SIZE = 20;

/** One attempt of an outbound delivery: `last_attempt` and each entry of `attempt_log`. */
const deliveryAttemptSchema = new Schema(
  {
    status: { type: Number, default: null },
    duration_ms: { type: Number, required: true },
    error: { type: String, default: null },
    response_excerpt: { type: String, default: null },
    attempted_at: { type: Date, required: true },
  },
  { _id: false },
);

/**
 * One event on its way to one endpoint (`webhook_deliveries`). Unique per (endpoint, event): the
 * fan-out may run twice for an event, the delivery exists once. `lease_until` is the claim of the
 * process sending it now (`lease_owner` the claim's id); another process may take it only after it passed.
 */
export const webhookDeliverySchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    endpoint_id: { type: Schema.Types.ObjectId, required: true },
    event_id: { type: String, required: true },
    event_type: { type: String, required: true },
    status: { type: String, enum: DELIVERY_STATUSES, required: true },
    attempts: { type: Number, default: 0 },
    last_attempt: { type: deliveryAttemptSchema, default: null },
    /** Every recorded attempt, oldest first, the last `ATTEMPT_LOG_SIZE` only: pushed by the update that records the attempt. */
    attempt_log: { type: [deliveryAttemptSchema], default: [] },
    next_attempt_at: { type: Date, default: null },
    lease_until: { type: Date, default: null },
    /** The claim holding the lease (a new id per claim): recording an attempt is conditional on it. */
    lease_owner: { type: String, default: null },
    /**
     * Set by a fan-out that hands the new delivery to its own process's sender: other processes'
     * searches leave it until then (that sender claims it by id); after, any process may take it.
     */
    reserved_until: { type: Date, default: null },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
    /** The `webhook_delivery.*` event of a recorded attempt until the relay moves it to the log (docs/events.md). */
    ...outboxPath,
  },
  { versionKey: false, minimize: false },
);
webhookDeliverySchema.index({ endpoint_id: 1, event_id: 1 }, { unique: true });
webhookDeliverySchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });
webhookDeliverySchema.index({ status: 1, next_attempt_at: 1 });
webhookDeliverySchema.index({ tenant_id: 1, endpoint_id: 1, created_at: -1 });

export type WebhookDeliveryDoc = InferSchemaType<typeof webhookDeliverySchema>;
export type WebhookDeliveryRecord = WebhookDeliveryDoc & { _id: Types.ObjectId };
export type WebhookDeliveryModel = Model<WebhookDeliveryDoc>;

export const webhookDeliveryModel = (conn: Connection): WebhookDeliveryModel =>
  modelOn(conn, 'WebhookDelivery', webhookDeliverySchema, 'webhook_deliveries');
