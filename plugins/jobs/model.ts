import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';

const timestamps = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

export const RUN_STATUSES = ['pending', 'running', 'completed', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const FINISHED: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];
/**
 * What started a run (extended model); the primary `triggered_by` holds the user id or `scheduler`.
 * `chain` (also a `job_type`) marks a stored chain's step and the next job of a schedule's sequence alike.
 */
export const TRIGGER_KINDS = ['schedule', 'manual', 'chain', 'dependency'] as const;
export const LOG_LEVELS = ['debug', 'info', 'progress', 'warning', 'error'] as const;
export const ON_FAILURE = ['stop', 'continue', 'retry'] as const;
export const DEPENDENCY_MODES = ['same_day', 'last_run', 'none'] as const;

const logLine = new Schema(
  {
    timestamp: { type: Date, required: true },
    level: { type: String, enum: LOG_LEVELS, required: true },
    message: { type: String, required: true },
    percentage: { type: Number, default: null },
  },
  { _id: false },
);

const chainStep = new Schema(
  {
    job: { type: String, required: true },
    params: { type: Schema.Types.Mixed, default: {} },
    depends_on: { type: [String], default: [] },
    on_failure: { type: String, enum: [...ON_FAILURE, null], default: null },
    retries: { type: Number, default: 0 },
    retry_delay_seconds: { type: Number, default: 60 },
  },
  { _id: false, minimize: false },
);

/** `job_runs`: one document per run, kept through retries (the run's own fields plus the extended model's extras). */
export const jobRunSchema = new Schema(
  {
    job_name: { type: String, required: true },
    job_type: { type: String, enum: ['scheduled', 'manual', 'chain'], required: true },
    status: { type: String, enum: RUN_STATUSES, required: true, default: 'pending' },
    started_at: { type: Date, default: null },
    /** W3C trace context of the request that queued the run: its span links to that trace (docs/observability.md). */
    traceparent: { type: String, default: null },
    completed_at: { type: Date, default: null },
    duration_ms: { type: Number, default: null },
    duration_seconds: { type: Number, default: null },
    parameters: { type: Schema.Types.Mixed, default: {} },
    result: { type: Schema.Types.Mixed, default: null },
    error: { type: String, default: null },
    error_traceback: { type: String, default: null },
    progress_current: { type: Number, default: 0 },
    progress_total: { type: Number, default: null },
    progress_message: { type: String, default: null },
    parent_job_id: { type: Schema.Types.ObjectId, default: null },
    chain_index: { type: Number, default: null },
    attempt: { type: Number, default: 1 },
    max_attempts: { type: Number, default: 3 },
    /** Primary framework: the triggering user's id, `scheduler`, or `system` (the system actor). */
    triggered_by: { type: String, default: null },
    /** Extended model: what started the run. */
    trigger: { type: String, enum: TRIGGER_KINDS, default: 'manual' },
    triggered_by_user: { type: String, default: null },
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    chain_id: { type: Schema.Types.ObjectId, default: null },
    chain_run_id: { type: Schema.Types.ObjectId, default: null },
    schedule_id: { type: Schema.Types.ObjectId, default: null },
    logs: { type: [logLine], default: [] },
    timeout_seconds: { type: Number, required: true },
    /** Wait between a failed attempt and the next one (the same before every retry). */
    retry_delay_ms: { type: Number, required: true },
    /**
     * The schedule's sequence (its `chain` field): job names still to run, one after another, after
     * this one succeeds. The stored name predates the word "sequence"; it is kept so runs already queued keep theirs.
     */
    chain_next: { type: [String], default: [] },
    /** Kind of coordinating run (`fanout`: per-tenant parent; `chain`: stored chain), null for a job run. */
    coordinator: { type: String, enum: ['fanout', 'chain', null], default: null },
    /** Snapshot of a stored chain's steps, on its coordinator run. */
    chain_steps: { type: [chainStep], default: undefined },
    chain_default_on_failure: { type: String, enum: [...ON_FAILURE, null], default: null },
    /** Makes a trigger idempotent (schedule tick, chain step, tenant of a fan-out): a second insert fails on the unique index. */
    dedupe_key: { type: String, default: undefined },
    /** Lock: holder's token and lease end; another worker may take over once it passes. */
    lock_token: { type: String, default: null },
    lease_until: { type: Date, default: null },
    worker: { type: String, default: null },
    /** Times another worker took this run over from a holder that stopped renewing its lock. */
    takeovers: { type: Number, default: 0 },
    /** The `job_run.completed` / `job_run.failed` event until the relay moves it to the log (docs/events.md). */
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false, collection: 'job_runs' },
);
jobRunSchema.index({ job_name: 1, started_at: -1 });
jobRunSchema.index({ status: 1 });
jobRunSchema.index({ tenant_id: 1, created_at: -1 });
jobRunSchema.index({ parent_job_id: 1 });
jobRunSchema.index({ created_at: -1 });
jobRunSchema.index({ dedupe_key: 1 }, { unique: true, partialFilterExpression: { dedupe_key: { $type: 'string' } } });
// The event log's sweep finds outbox entries a dead process left behind.
jobRunSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export const jobScheduleSchema = new Schema(
  {
    /** Unique schedule name (extended `name`). */
    job_name: { type: String, required: true, unique: true },
    description: { type: String, default: null },
    /** Five-field cron (six with leading seconds); extended `cron`. */
    cron_expression: { type: String, required: true },
    timezone: { type: String, required: true },
    is_enabled: { type: Boolean, default: true },
    /** Extended `type`: run a registered job or a stored chain. */
    type: { type: String, enum: ['job', 'chain'], default: 'job' },
    /** The registered job to run (extended `target` when `type` is `job`). */
    job_type: { type: String, default: null },
    /** The stored chain to run (extended `target` when `type` is `chain`). */
    chain_id: { type: Schema.Types.ObjectId, default: null },
    /** Extended `params`; `{today}`, `{yesterday}`, `{month}`, `{previous_month}` resolved in `timezone`. */
    parameters: { type: Schema.Types.Mixed, default: {} },
    allow_param_override: { type: Boolean, default: false },
    max_attempts: { type: Number, default: null },
    timeout_seconds: { type: Number, default: null },
    /** The schedule's sequence: jobs run one after another after its job succeeds (API name `chain`, kept). */
    chain: { type: [String], default: [] },
    depends_on_schedules: { type: [Schema.Types.ObjectId], default: [] },
    dependency_mode: { type: String, enum: DEPENDENCY_MODES, default: 'same_day' },
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    per_tenant: { type: Boolean, default: false },
    last_run_id: { type: Schema.Types.ObjectId, default: null },
    last_run_at: { type: Date, default: null },
    last_run_status: { type: String, default: null },
    next_run_at: { type: Date, default: null },
    /** Set when a due run was skipped because a dependency was unmet; cleared by the next run. */
    dependency_unmet: { type: Boolean, default: false },
    skipped_at: { type: Date, default: null },
    created_by: { type: String, default: null },
    /** The schedule's `job_schedule.*` events until the relay moves them to the log; a delete's tombstone mark. */
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false, collection: 'job_schedules' },
);
jobScheduleSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });
jobScheduleSchema.index({ is_enabled: 1, next_run_at: 1 });
jobScheduleSchema.index({ tenant_id: 1 });
jobScheduleSchema.index({ depends_on_schedules: 1 });

export const jobChainSchema = new Schema(
  {
    name: { type: String, required: true, unique: true },
    description: { type: String, default: '' },
    is_system: { type: Boolean, default: false },
    steps: { type: [chainStep], default: [] },
    default_on_failure: { type: String, enum: ON_FAILURE, default: 'stop' },
    created_by: { type: String, default: null },
    /** The chain's `job_chain.*` events until the relay moves them to the log; a delete's tombstone mark. */
    ...outboxPath,
  },
  { timestamps, versionKey: false, minimize: false, collection: 'job_chains' },
);
jobChainSchema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });

export type JobRunDoc = InferSchemaType<typeof jobRunSchema>;
export type JobRunRecord = JobRunDoc & { _id: Types.ObjectId; created_at: Date; updated_at: Date };
export type JobScheduleDoc = InferSchemaType<typeof jobScheduleSchema>;
export type JobScheduleRecord = JobScheduleDoc & { _id: Types.ObjectId; created_at: Date; updated_at: Date };
export type JobChainDoc = InferSchemaType<typeof jobChainSchema>;
export type JobChainRecord = JobChainDoc & { _id: Types.ObjectId; created_at: Date; updated_at: Date };
export type ChainStepDoc = InferSchemaType<typeof chainStep>;
export type LogLine = InferSchemaType<typeof logLine>;

export interface JobModels {
  Run: Model<JobRunDoc>;
  Schedule: Model<JobScheduleDoc>;
  Chain: Model<JobChainDoc>;
}

export const jobModels = (conn: Connection): JobModels => ({
  Run: modelOn(conn, 'JobRun', jobRunSchema),
  Schedule: modelOn(conn, 'JobSchedule', jobScheduleSchema),
  Chain: modelOn(conn, 'JobChain', jobChainSchema),
});
