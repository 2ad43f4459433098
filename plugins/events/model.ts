import { Schema, Types, type Connection } from 'mongoose';
import { modelOn } from '../../core/db.ts';

/**
 * One event of the log (`events`). `_id` is the event id (`evt_` + 24 hex, time-ordered), also the
 * idempotency key: the relay and the sweeper insert the same id at most once.
 */
export const eventSchema = new Schema(
  {
    _id: { type: String, required: true },
    type: { type: String, required: true },
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    /** When the change happened (the writer's clock, staged with the change). */
    created_at: { type: Date, required: true },
    /** When the event entered the log; tails and durable consumers read in this order. */
    committed_at: { type: Date, required: true },
    /** The object as the API shows it, private fields removed. */
    data: { type: Schema.Types.Mixed, default: {} },
    /** User id of the actor, or null for the system. */
    actor: { type: String, default: null },
    request_id: { type: String, default: null },
    /** Internal, never shown: the object before an update or delete (for diffs such as audit's). */
    previous: { type: Schema.Types.Mixed, default: null },
    /** Internal, never shown: what the emitter adds for in-process consumers (ip, bulk, resource...). */
    meta: { type: Schema.Types.Mixed, default: null },
    /** Internal: the document the event came from (`collection`, `id`, `version`), for reconciliation. */
    source: { type: Schema.Types.Mixed, default: null },
  },
  { versionKey: false, minimize: false, collection: 'events' },
);
eventSchema.index({ tenant_id: 1, created_at: -1, _id: -1 });
eventSchema.index({ created_at: -1, _id: -1 });
eventSchema.index({ committed_at: 1, _id: 1 });
eventSchema.index({ tenant_id: 1, 'source.collection': 1, 'source.id': 1 });

export const eventModel = (conn: Connection) => modelOn(conn, 'Event', eventSchema, 'events');

/**
 * Durable consumers' claims: one per (consumer, event). Its unique `_id` makes the effect happen
 * once across replicas; `lease_until` hands a crashed holder's claim to another process.
 */
export const eventClaimSchema = new Schema(
  {
    _id: { type: String, required: true },
    consumer: { type: String, required: true },
    event_id: { type: String, required: true },
    committed_at: { type: Date, required: true },
    status: { type: String, enum: ['claimed', 'done', 'failed'], required: true },
    attempts: { type: Number, default: 1 },
    lease_until: { type: Date, required: true },
    last_error: { type: String, default: null },
    updated_at: { type: Date, required: true },
  },
  { versionKey: false, collection: 'event_claims' },
);
eventClaimSchema.index({ consumer: 1, status: 1, lease_until: 1 });

export const eventClaimModel = (conn: Connection) => modelOn(conn, 'EventClaim', eventClaimSchema, 'event_claims');

/** Where each durable consumer has read up to (`committed_at`), one document per consumer. */
export const eventCursorSchema = new Schema(
  {
    _id: { type: String, required: true },
    position: { type: Date, required: true },
    updated_at: { type: Date, required: true },
  },
  { versionKey: false, collection: 'event_consumers' },
);
export const eventCursorModel = (conn: Connection) => modelOn(conn, 'EventConsumerCursor', eventCursorSchema, 'event_consumers');

/** A new event id: `evt_` and a time-ordered 24-hex object id. */
export const newEventId = (): string => `evt_${new Types.ObjectId().toHexString()}`;
