import { ConflictError, ValidationError, zodIssues } from '../../core/errors.ts';
import type { Actor } from '../../core/context.ts';
import type { JobRunDoc, JobRunRecord, JobScheduleRecord } from './model.ts';
import type { JobRegistry, RegisteredJob } from './registry.ts';
import type { RunSpec, RunStore } from './store.ts';

/** What the plugin needs from the dispatcher (Agenda): queue a run, keep one repeating job per schedule. */
export interface Dispatcher {
  /** `host:pid:random` of this process's worker. */
  readonly worker: string;
  enqueue(runId: string, at?: Date): Promise<void>;
  syncSchedule(s: JobScheduleRecord): Promise<void>;
  removeSchedule(id: string): Promise<void>;
  /** Abort a run executing in this process (cancel): resolves at once. */
  abortLocal(runId: string): void;
}

/** How a run of a registered job is started (`RunLauncher.startJob`). */
export interface JobStart {
  actor?: Actor | null;
  tenant_id: string | null;
  trigger: JobRunDoc['trigger'];
  job_type: JobRunDoc['job_type'];
  /** Where the parameters sit in the request, for validation errors. */
  loc: (string | number)[];
  /** Fan out over the tenants even if the job is not per-tenant (a per-tenant schedule). */
  fanout?: boolean;
  schedule_id?: string;
  dedupe_key?: string;
  max_attempts?: number | null;
  timeout_seconds?: number | null;
  /** The schedule's sequence: jobs run one after another after this one succeeds. */
  sequence_next?: string[];
}

/** Starts runs: inserts the run document (store) and queues it (dispatcher). */
export class RunLauncher {
  dispatcher!: Dispatcher;

  constructor(
    readonly store: RunStore,
    readonly jobs: JobRegistry,
  ) {}

  /** Insert a run and queue it; null when its `dedupe_key` exists already. */
  async create(spec: RunSpec): Promise<JobRunRecord | null> {
    const run = await this.store.insert(spec);
    if (run) await this.dispatcher.enqueue(String(run._id));
    return run;
  }

  /** `params` parsed by the job's schema; 422 naming `loc` when they do not match. */
  parseParams(job: RegisteredJob, params: unknown, loc: (string | number)[]): Record<string, unknown> {
    const res = job.schema.safeParse(params);
    if (!res.success) throw new ValidationError(zodIssues(loc, res.error.issues), `Parameters do not match the schema of job "${job.name}"`);
    return res.data;
  }

  /** A run of `job` (a per-tenant parent when the job is per-tenant and no tenant is given). 409 when its dedupe key exists. */
  async startJob(job: RegisteredJob, params: unknown, o: JobStart): Promise<JobRunRecord> {
    const parameters = this.parseParams(job, params ?? {}, o.loc);
    const fanout = !o.tenant_id && (o.fanout || job.per_tenant);
    const run = await this.create({
      job_name: job.name,
      job_type: o.job_type,
      parameters,
      tenant_id: o.tenant_id,
      origin: { actor: o.actor ?? null, trigger: o.trigger },
      ...(fanout
        ? { coordinator: 'fanout' as const }
        : { limits: { max_attempts: o.max_attempts ?? job.max_attempts, timeout_seconds: o.timeout_seconds ?? job.timeout } }),
      ...(o.sequence_next ? { sequence_next: o.sequence_next } : {}),
      ...(o.schedule_id ? { schedule_id: o.schedule_id } : {}),
      ...(o.dedupe_key ? { dedupe_key: o.dedupe_key } : {}),
    });
    if (!run) throw new ConflictError('This run exists already', { dedupe_key: o.dedupe_key });
    return run;
  }
}
