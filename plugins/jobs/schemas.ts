import { z } from 'zod';
import { idParams, objectId, pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';
import { DEPENDENCY_MODES, ON_FAILURE, RUN_STATUSES } from './model.ts';

/** Shared by REST and GraphQL: every input of the jobs plugin, its options and response shapes. */

const jsonObject = z.record(z.string(), z.unknown());
const jobName = z.string().min(1).max(200);

export const jobNameParams = z.object({ job_name: jobName });
export { idParams };
export const runIdParams = z.object({ run_id: objectId });

/** `POST /jobs/run/{job_name}`. */
export const triggerBody = z.object({ parameters: jsonObject.default({}) }).strict().default({ parameters: {} });
/** `POST /jobs/run` (extended model). `tenant_id`: a system administrator's run for one tenant. */
export const runBody = z.object({ job: jobName, params: jsonObject.default({}), tenant_id: objectId.optional() }).strict();

export const PER_PAGE_MAX = 100;
export const listRunsQuery = pageQuery(20, PER_PAGE_MAX)
  .extend({
    job_name: jobName.optional(),
    status: z.enum(RUN_STATUSES).optional(),
    tenant_id: objectId.optional(),
    schedule_id: objectId.optional(),
    chain_run_id: objectId.optional(),
    parent_job_id: objectId.optional(),
  })
  .strict();
export type ListRunsQuery = z.output<typeof listRunsQuery>;

const cronText = z.string().min(1).max(200);
const scheduleShape = {
  job_name: jobName.optional(),
  name: jobName.optional(),
  description: z.string().max(2000).nullable().optional(),
  cron_expression: cronText.optional(),
  cron: cronText.optional(),
  timezone: z.string().min(1).max(100).optional(),
  is_enabled: z.boolean().optional(),
  type: z.enum(['job', 'chain']).optional(),
  job_type: jobName.optional(),
  target: z.string().min(1).max(200).optional(),
  parameters: jsonObject.optional(),
  params: jsonObject.optional(),
  allow_param_override: z.boolean().optional(),
  max_attempts: z.number().int().min(1).max(100).nullable().optional(),
  timeout_seconds: z.number().int().min(1).max(7 * 86_400).nullable().optional(),
  chain: z.array(jobName).max(50).optional(),
  depends_on_schedules: z.array(objectId).max(50).optional(),
  dependency_mode: z.enum(DEPENDENCY_MODES).optional(),
  tenant_id: objectId.nullable().optional(),
  per_tenant: z.boolean().optional(),
};
/**
 * Schedule create/update body: the primary fields, or the extended names for the same values (see
 * docs/jobs.md). `chain` is the schedule's sequence: jobs run one after another after its job succeeds.
 */
export const scheduleBody = z.object(scheduleShape).strict();
export type ScheduleBody = z.output<typeof scheduleBody>;
export const scheduleRunBody = z.object({ params: jsonObject.optional() }).strict().default({});

export const chainStepInput = z
  .object({
    job: jobName,
    params: jsonObject.default({}),
    depends_on: z.array(jobName).max(50).default([]),
    on_failure: z.enum(ON_FAILURE).optional(),
    retries: z.number().int().min(0).max(20).default(0),
    retry_delay_seconds: z.number().int().min(0).max(86_400).default(60),
  })
  .strict();
export const chainBody = z
  .object({
    name: z.string().min(1).max(200),
    description: z.string().max(2000).default(''),
    steps: z.array(chainStepInput).min(1).max(50),
    default_on_failure: z.enum(ON_FAILURE).default('stop'),
  })
  .strict();
export const chainPatch = z
  .object({
    name: z.string().min(1).max(200).optional(),
    description: z.string().max(2000).optional(),
    steps: z.array(chainStepInput).min(1).max(50).optional(),
    default_on_failure: z.enum(ON_FAILURE).optional(),
  })
  .strict();
export type ChainBody = z.output<typeof chainBody>;
export type ChainStepInput = z.output<typeof chainStepInput>;
export const chainRunBody = z.object({ params: jsonObject.default({}) }).strict().default({ params: {} });

/** Options of the jobs plugin: `jobsPlugin.configure({ ... })`. */
export const jobsOptions = z.object({
  /** Built-in chains, created at start-up when missing, marked `is_system` (never deletable). */
  chains: z.array(chainBody).default([]),
});

/** One entry of the registry's `params` map, derived from the job's zod schema. */
export interface ParamInfo {
  type: string;
  required: boolean;
  description: string;
  enum?: unknown[];
}

export const runResponse = z.object({ id: z.string(), job_name: z.string(), status: z.enum(RUN_STATUSES) }).passthrough();
export const runsPageResponse = pageSchema(runResponse);
export const triggerResponse = z.object({ run_id: z.string(), status: z.literal('pending'), message: z.string() });

/** A registry entry (the main fields; see docs/jobs.md for the rest). */
export const registryResponse = z
  .object({
    name: z.string(), description: z.string(), timeout: z.number().int(), max_attempts: z.number().int(), per_tenant: z.boolean(), plugin: z.string(),
    params: z.record(z.string(), z.object({ type: z.string(), required: z.boolean(), description: z.string(), enum: z.array(z.unknown()).optional() })),
  })
  .passthrough();
/** A schedule (the main fields; the extended names of the same values come beside them). */
export const scheduleResponse = z
  .object({
    id: z.string(), job_name: z.string(), cron_expression: z.string(), timezone: z.string(), is_enabled: z.boolean(), type: z.enum(['job', 'chain']),
    parameters: z.record(z.string(), z.unknown()), next_run_at: z.date().nullable(), last_run_status: z.string().nullable(),
  })
  .passthrough();
/** A chain and its steps. */
export const chainResponse = z
  .object({
    id: z.string(), name: z.string(), description: z.string(), is_system: z.boolean(), default_on_failure: z.enum(ON_FAILURE),
    steps: z.array(z.object({ job: z.string(), params: z.record(z.string(), z.unknown()), depends_on: z.array(z.string()) }).passthrough()),
  })
  .passthrough();
/** `POST /jobs/check-schedules`. */
export const checkSchedulesResponse = z.object({ checked: z.number().int(), triggered: z.array(z.object({ schedule_id: z.string(), run_id: z.string() })) }).passthrough();
const nullableId = z.string().nullable();
/** The data of every `job_run.*` event: the run in its list form (views.ts `runEventData`). */
export const runEventData = z.object({
  id: z.string(),
  job_name: z.string(),
  job_type: z.enum(['scheduled', 'manual', 'chain']),
  status: z.enum(RUN_STATUSES),
  started_at: z.date().nullable(),
  completed_at: z.date().nullable(),
  duration_ms: z.number().nullable(),
  duration_seconds: z.number().nullable(),
  parameters: jsonObject,
  result: z.unknown().describe('What the job returned (JSON), null when it failed'),
  error: z.string().nullable().describe('The failure message, secrets redacted'),
  error_traceback: z.null().describe('Never in an event (only system administrators see tracebacks, through /jobs/runs)'),
  progress_current: z.number(),
  progress_total: z.number().nullable(),
  progress_message: z.string().nullable(),
  percentage: z.number().nullable(),
  parent_job_id: nullableId,
  chain_index: z.number().int().nullable(),
  attempt: z.number().int(),
  max_attempts: z.number().int(),
  triggered_by: z.string().nullable(),
  trigger: z.string(),
  triggered_by_user: z.string().nullable(),
  tenant_id: nullableId,
  chain_id: nullableId,
  chain_run_id: nullableId,
  schedule_id: nullableId,
  timeout_seconds: z.number(),
  created_at: z.date(),
  updated_at: z.date(),
});

/**
 * The jobs plugin's event types, each stored in the changed document's outbox by the write that
 * makes the change: a run's by the conditional writes of store.ts (`insert`, `claimPending`,
 * `cancel`, `finish`), a schedule's and a chain's by their services' writes (schedules.ts, chains.ts).
 */
export const jobEventTypes = [
  { name: 'job_run.created', description: 'A job run was queued (by a request, a schedule, a chain or a fan-out); data is the run (no logs)', data: runEventData },
  { name: 'job_run.started', description: 'A worker started a job run (pending → running); data is the run (no logs)', data: runEventData },
  { name: 'job_run.cancelled', description: 'A pending or running job run was cancelled; data is the run (no logs)', data: runEventData },
  { name: 'job_run.completed', description: 'A job run completed; data is the run (no logs)', data: runEventData },
  { name: 'job_run.failed', description: 'A job run failed after its last attempt; data is the run (no logs, error redacted as for tenant administrators)', data: runEventData },
  { name: 'job_schedule.created', description: 'A schedule was created; data is the schedule as GET /jobs/schedules shows it', data: scheduleResponse },
  { name: 'job_schedule.updated', description: 'A schedule was changed through the API; data is the schedule after the change', data: scheduleResponse },
  { name: 'job_schedule.deleted', description: 'A schedule was deleted; data is the schedule as it was', data: scheduleResponse },
  { name: 'job_chain.created', description: 'A stored chain was created; data is the chain', data: chainResponse },
  { name: 'job_chain.updated', description: 'A stored chain was changed; data is the chain after the change', data: chainResponse },
  { name: 'job_chain.deleted', description: 'A stored chain was deleted; data is the chain as it was', data: chainResponse },
];
