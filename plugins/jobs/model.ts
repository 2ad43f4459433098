import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';

const timestamps = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

export const RUN_STATUSES = ['pending', 'running', 'completed', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const FINISHED: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];
/** What started a run (extended model); the primary `triggered_by` holds the user id or `scheduler`. */
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

/** `job_runs`: one document per run, kept through retries (spec document 3, JobRun plus the extended run extras). */
export const jobRunSchema = new Schema(
  {
    job_name: { type: String, required: true },
    job_type: { type: String, enum: ['scheduled', 'manual', 'chain'], required: true },
    status: { type: String, enum: RUN_STATUSES, required: true, default: 'pending' },
    started_at: { type: Date, default: null },
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
    /** Primary chain: job names still to run after this one succeeds. */
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
  },
  { timestamps, versionKey: false, minimize: false, collection: 'job_runs' },
);
jobRunSchema.index({ job_name: 1, started_at: -1 });
jobRunSchema.index({ status: 1 });
jobRunSchema.index({ tenant_id: 1, created_at: -1 });
jobRunSchema.index({ parent_job_id: 1 });
jobRunSchema.index({ created_at: -1 });
jobRunSchema.index({ dedupe_key: 1 }, { unique: true, partialFilterExpression: { dedupe_key: { $type: 'string' } } });

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
  },
  { timestamps, versionKey: false, minimize: false, collection: 'job_schedules' },
);
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
  },
  { timestamps, versionKey: false, minimize: false, collection: 'job_chains' },
);

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

const iso = (d: Date | null | undefined) => d ?? null;
const str = (id: Types.ObjectId | null | undefined) => (id ? String(id) : null);

/** Public shape of a run. `logs` only where asked for (one run), not in lists. */
export function runView(r: JobRunRecord, withLogs = true) {
  const total = r.progress_total ?? null;
  return {
    id: String(r._id),
    job_name: r.job_name,
    job_type: r.job_type,
    status: r.status as RunStatus,
    started_at: iso(r.started_at),
    completed_at: iso(r.completed_at),
    duration_ms: r.duration_ms ?? null,
    duration_seconds: r.duration_seconds ?? null,
    parameters: (r.parameters ?? {}) as Record<string, unknown>,
    result: r.result ?? null,
    error: r.error ?? null,
    error_traceback: r.error_traceback ?? null,
    progress_current: r.progress_current ?? 0,
    progress_total: total,
    progress_message: r.progress_message ?? null,
    percentage: total ? Math.min(100, Math.round(((r.progress_current ?? 0) / total) * 100)) : null,
    parent_job_id: str(r.parent_job_id),
    chain_index: r.chain_index ?? null,
    attempt: r.attempt,
    max_attempts: r.max_attempts,
    triggered_by: r.triggered_by ?? null,
    trigger: r.trigger,
    triggered_by_user: r.triggered_by_user ?? null,
    tenant_id: str(r.tenant_id),
    chain_id: str(r.chain_id),
    chain_run_id: str(r.chain_run_id),
    schedule_id: str(r.schedule_id),
    timeout_seconds: r.timeout_seconds,
    created_at: r.created_at,
    updated_at: r.updated_at,
    ...(withLogs ? { logs: (r.logs ?? []).map((l) => ({ timestamp: l.timestamp, level: l.level, message: l.message, percentage: l.percentage ?? null })) } : {}),
  };
}
export type RunView = ReturnType<typeof runView>;

/** Public shape of a schedule: the primary fields and, beside them, the extended names for the same values. */
export function scheduleView(s: JobScheduleRecord) {
  const target = s.type === 'chain' ? str(s.chain_id) : (s.job_type ?? null);
  return {
    id: String(s._id),
    job_name: s.job_name,
    name: s.job_name,
    description: s.description ?? null,
    cron_expression: s.cron_expression,
    cron: s.cron_expression,
    timezone: s.timezone,
    is_enabled: s.is_enabled,
    type: s.type as 'job' | 'chain',
    job_type: s.job_type ?? null,
    target,
    parameters: (s.parameters ?? {}) as Record<string, unknown>,
    params: (s.parameters ?? {}) as Record<string, unknown>,
    allow_param_override: s.allow_param_override,
    max_attempts: s.max_attempts ?? null,
    timeout_seconds: s.timeout_seconds ?? null,
    chain: [...(s.chain ?? [])],
    depends_on_schedules: (s.depends_on_schedules ?? []).map(String),
    dependency_mode: s.dependency_mode,
    tenant_id: str(s.tenant_id),
    per_tenant: s.per_tenant,
    last_run_id: str(s.last_run_id),
    last_run_at: iso(s.last_run_at),
    last_run_status: s.last_run_status ?? null,
    next_run_at: iso(s.next_run_at),
    dependency_unmet: s.dependency_unmet,
    skipped_at: iso(s.skipped_at),
    created_at: s.created_at,
    updated_at: s.updated_at,
  };
}
export type ScheduleView = ReturnType<typeof scheduleView>;

export function chainView(c: JobChainRecord) {
  return {
    id: String(c._id),
    name: c.name,
    description: c.description ?? '',
    is_system: c.is_system,
    default_on_failure: c.default_on_failure,
    steps: (c.steps ?? []).map((s) => ({
      job: s.job, params: (s.params ?? {}) as Record<string, unknown>, depends_on: [...(s.depends_on ?? [])],
      on_failure: s.on_failure ?? null, retries: s.retries, retry_delay_seconds: s.retry_delay_seconds,
    })),
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}
export type ChainView = ReturnType<typeof chainView>;
