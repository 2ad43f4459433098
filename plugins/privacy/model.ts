import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';

const timestamps = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

export const CONSENT_COLLECTION = 'privacy_consents';
export const ERASURE_COLLECTION = 'privacy_erasure_requests';
export const ERASURE_ITEM_COLLECTION = 'privacy_erasure_items';

/**
 * One consent of a user to one purpose. A grant is a new record; a revocation sets `revoked_at`
 * (records are never deleted: they are the proof of what was agreed when). `active` is true while
 * not revoked and is unset on revocation: the partial unique index on it allows one live consent
 * per (user, purpose).
 */
export const consentSchema = new Schema(
  {
    user_id: { type: Schema.Types.ObjectId, required: true },
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    purpose: { type: String, required: true },
    granted_at: { type: Date, required: true },
    revoked_at: { type: Date, default: null },
    /** Where the consent was given: `api`, `graphql`, or a client-supplied label (`signup-form`...). */
    source: { type: String, required: true },
    active: { type: Boolean },
    /** The erasure request that revoked it, so a resumed erasure finds what it revoked before a crash. */
    revoked_by_erasure: { type: Schema.Types.ObjectId, default: null },
    /** The `consent.granted` / `consent.revoked` event until the relay moves it to the log (docs/events.md). */
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false },
);
consentSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });
consentSchema.index({ user_id: 1, purpose: 1 }, { unique: true, partialFilterExpression: { active: true }, name: 'one_active_consent' });
consentSchema.index({ tenant_id: 1, user_id: 1, granted_at: -1 });

export const ERASURE_STATUSES = ['pending', 'running', 'completed', 'failed'] as const;
export type ErasureStatus = (typeof ERASURE_STATUSES)[number];

/** What an erasure does to a linked document: keep it with neutral values, or delete it. */
export const LINKED_ACTIONS = ['depersonalize', 'delete'] as const;
/** What an erasure did to one item, as its ledger row records it. */
export const ERASURE_ACTIONS = [...LINKED_ACTIONS, 'revoke_consent', 'disable'] as const;
export type ErasureAction = (typeof ERASURE_ACTIONS)[number];

/** What an erasure will do (at creation) or did (result), per collection; never the personal values themselves. */
const collectionCount = new Schema(
  {
    name: { type: String, required: true },
    action: { type: String, enum: LINKED_ACTIONS, required: true },
    count: { type: Number, required: true },
    fields: { type: [String], default: [] },
  },
  { _id: false },
);

/**
 * An erasure request (GDPR art. 17) for one user. Holds ids and counts only, never the subject's
 * personal values, so it survives the erasure it describes. `open` is set while the request is not
 * completed (one open request per subject, unique partial index); `lease_until` marks a running
 * execution: past it, the runner is taken to have crashed and another execution resumes.
 */
export const erasureRequestSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    user_id: { type: Schema.Types.ObjectId, required: true },
    /** Who asked: null for a system actor. */
    requested_by: { type: Schema.Types.ObjectId, default: null },
    status: { type: String, enum: ERASURE_STATUSES, required: true },
    preview: {
      collections: { type: [collectionCount], default: [] },
      consents: { type: Number, default: 0 },
      api_keys: { type: Number, default: 0 },
      account: { type: Boolean, default: true },
    },
    result: {
      type: new Schema(
        {
          documents_depersonalized: { type: Number, default: 0 },
          documents_deleted: { type: Number, default: 0 },
          consents_revoked: { type: Number, default: 0 },
          api_keys_revoked: { type: Number, default: 0 },
          account_disabled: { type: Boolean, default: false },
          audit_entries_scrubbed: { type: Number, default: 0 },
        },
        { _id: false },
      ),
      default: null,
    },
    /** Running totals of what leaves no ledger row (key revocations, audit scrubbing), summed over resumed runs. */
    counters: {
      api_keys_revoked: { type: Number, default: 0 },
      audit_entries_scrubbed: { type: Number, default: 0 },
    },
    error: { type: String, default: null },
    attempts: { type: Number, default: 0 },
    job_run_id: { type: String, default: null },
    open: { type: Boolean },
    lease_until: { type: Date, default: null },
    /**
     * Jobs plugin: set when an execution is queued as a job, until its run claims the request (or,
     * if it never does, for one lease): meanwhile another execute is a 409, not a second job.
     */
    queued_until: { type: Date, default: null },
    /** Which queuing owns the request: only that one records its job run id. */
    queue_token: { type: Schema.Types.ObjectId, default: null },
    started_at: { type: Date, default: null },
    completed_at: { type: Date, default: null },
    /** The `erasure_request.completed` event until the relay moves it to the log (docs/events.md). */
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false },
);
// The event log's sweep finds outbox entries a dead process left behind.
erasureRequestSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });
erasureRequestSchema.index({ user_id: 1 }, { unique: true, partialFilterExpression: { open: true }, name: 'one_open_request' });
erasureRequestSchema.index({ tenant_id: 1, created_at: -1 });

/**
 * The ledger of one execution: one row per item an erasure changed (document, consent, account),
 * inserted before the change. It makes resumption exact: the write that sets `logged` carries the
 * item's `erasure.item_recorded` event (whose audit entry the audit plugin writes from the log), so
 * a resumed run never announces an item twice, and a deleted document is still known (with its
 * non-personal `snapshot`) after it is gone.
 */
export const erasureItemSchema = new Schema(
  {
    request_id: { type: Schema.Types.ObjectId, required: true },
    resource: { type: String, required: true },
    item_id: { type: Schema.Types.ObjectId, required: true },
    action: { type: String, enum: ERASURE_ACTIONS, required: true },
    fields: { type: [String], default: [] },
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    /** Delete only: the document minus its personal and excluded fields, for the audit entry. */
    snapshot: { type: Schema.Types.Mixed, default: null },
    logged: { type: Boolean, default: false },
    /** The item's `erasure.item_recorded` event until the relay moves it to the log. */
    ...outboxPath,
  },
  { versionKey: false, minimize: false },
);
erasureItemSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });
// The relay's writes of a row's outbox carry its tenant (a sharded deployment's key).
erasureItemSchema.index({ tenant_id: 1, request_id: 1 });
erasureItemSchema.index({ request_id: 1, resource: 1, item_id: 1, action: 1 }, { unique: true });

export type ConsentDoc = InferSchemaType<typeof consentSchema>;
export type ConsentRecord = ConsentDoc & { _id: Types.ObjectId; created_at: Date; updated_at: Date };
export type ErasureRequestDoc = InferSchemaType<typeof erasureRequestSchema>;
export type ErasureRequestRecord = ErasureRequestDoc & { _id: Types.ObjectId; created_at: Date; updated_at: Date };
export type ErasureItemDoc = InferSchemaType<typeof erasureItemSchema>;
export type CollectionCount = InferSchemaType<typeof collectionCount>;

export interface PrivacyModels {
  Consent: Model<ConsentDoc>;
  ErasureRequest: Model<ErasureRequestDoc>;
  ErasureItem: Model<ErasureItemDoc>;
}

/** Registers (once per connection) and returns the privacy models. */
export const privacyModels = (conn: Connection): PrivacyModels => ({
  Consent: modelOn(conn, 'PrivacyConsent', consentSchema, CONSENT_COLLECTION),
  ErasureRequest: modelOn(conn, 'PrivacyErasureRequest', erasureRequestSchema, ERASURE_COLLECTION),
  ErasureItem: modelOn(conn, 'PrivacyErasureItem', erasureItemSchema, ERASURE_ITEM_COLLECTION),
});

/** API shape of a consent. */
export const consentView = (c: ConsentRecord) => ({
  id: String(c._id),
  user_id: String(c.user_id),
  tenant_id: String(c.tenant_id),
  purpose: c.purpose,
  granted_at: c.granted_at,
  revoked_at: c.revoked_at ?? null,
  source: c.source,
  active: c.active === true,
});
export type ConsentView = ReturnType<typeof consentView>;

/** API shape of an erasure request. */
export const erasureView = (r: ErasureRequestRecord) => ({
  id: String(r._id),
  tenant_id: String(r.tenant_id),
  user_id: String(r.user_id),
  requested_by: r.requested_by ? String(r.requested_by) : null,
  status: r.status as ErasureStatus,
  preview: {
    collections: (r.preview?.collections ?? []).map((c) => ({ name: c.name, action: c.action as (typeof LINKED_ACTIONS)[number], count: c.count, fields: [...c.fields] })),
    consents: r.preview?.consents ?? 0,
    api_keys: r.preview?.api_keys ?? 0,
    account: r.preview?.account ?? true,
  },
  result: r.result
    ? {
        documents_depersonalized: r.result.documents_depersonalized,
        documents_deleted: r.result.documents_deleted,
        consents_revoked: r.result.consents_revoked,
        api_keys_revoked: r.result.api_keys_revoked,
        account_disabled: r.result.account_disabled,
        audit_entries_scrubbed: r.result.audit_entries_scrubbed,
      }
    : null,
  error: r.error ?? null,
  attempts: r.attempts ?? 0,
  job_run_id: r.job_run_id ?? null,
  created_at: r.created_at,
  started_at: r.started_at ?? null,
  completed_at: r.completed_at ?? null,
});
export type ErasureRequestView = ReturnType<typeof erasureView>;
