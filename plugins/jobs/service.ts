import { Types } from 'mongoose';
import type { z } from 'zod';
import { AccessDeniedError, ConflictError, NotFoundError, ValidationError, zodIssues, type ValidationIssue } from '../../core/errors.ts';
import { isAdmin, hasSystemScope, scopedTenantId, systemActor, type AuthUser } from '../../core/context.ts';
import type { JobRunner } from '../../core/plugin.ts';
import { objectId } from '../../core/http/schemas.ts';
import { tenantFilter } from '../../core/identity/guards.ts';
import type { Logger } from '../../core/logger.ts';
import {
  FINISHED, chainView, runView, scheduleView,
  type ChainView, type JobChainRecord, type JobModels, type JobRunDoc, type JobRunRecord, type JobScheduleRecord, type RunView, type ScheduleView,
} from './model.ts';
import { registryView, type RegisteredJob, type RegistryEntry } from './registry.ts';
import type { ChainBody, ChainStepInput, ListRunsQuery, ScheduleBody } from './schemas.ts';
import type { chainPatch } from './schemas.ts';
import { checkCron, isTimeZone, localDay, nextOccurrence, resolveTemplates, templateValues } from './cron.ts';

export interface JobsSettings {
  multiTenant: boolean;
  pollMs: number;
  retryDelayMs: number;
  defaultTimezone: string;
}

/** What the service needs from the dispatcher (Agenda): queue a run, keep one repeating job per schedule. */
export interface Dispatcher {
  enqueue(runId: string, at?: Date): Promise<void>;
  syncSchedule(s: JobScheduleRecord): Promise<void>;
  removeSchedule(id: string): Promise<void>;
  /** Abort a run executing in this process (cancel): resolves at once. */
  abortLocal(runId: string): void;
}

/** Fields of a new run; everything else takes the model's defaults. */
export type NewRun = Partial<JobRunDoc> & { _id?: Types.ObjectId } & Pick<JobRunDoc, 'job_name' | 'job_type' | 'max_attempts' | 'timeout_seconds'>;

/** Coordinating runs (per-tenant parents, stored chains) outlive their children: a day, retried on a lost worker only. */
export const COORDINATOR_TIMEOUT_S = 86_400;

const oid = (s: string) => new Types.ObjectId(s);
const isDup = (err: unknown) => !!err && typeof err === 'object' && (err as { code?: number }).code === 11000;

function paramsError(job: string, issues: readonly { path: readonly PropertyKey[]; message: string; code: string }[], loc: (string | number)[]): ValidationError {
  return new ValidationError(zodIssues(loc, issues), `Parameters do not match the schema of job "${job}"`);
}

/**
 * The jobs plugin's logic: registry, runs, schedules, chains, access rules. No Koa or GraphQL
 * here; REST, GraphQL and other plugins (through `JobRunner`) call it. Execution and dispatch
 * (Agenda) live in engine.ts.
 */
export class JobsService implements JobRunner {
  private jobs = new Map<string, RegisteredJob>();
  dispatcher!: Dispatcher & { readonly worker: string };

  constructor(
    readonly models: JobModels,
    readonly settings: JobsSettings,
    private readonly listTenants: () => Promise<string[]>,
    readonly log: Logger,
  ) {}

  setJobs(jobs: RegisteredJob[]): void {
    this.jobs = new Map(jobs.map((j) => [j.name, j]));
  }

  job(name: string): RegisteredJob | undefined {
    return this.jobs.get(name);
  }

  // ----- access -----

  /** Every endpoint: administrators only (tenant admins within their tenant, see docs/jobs.md). */
  private admin(user: AuthUser): string | null {
    if (!isAdmin(user)) throw new AccessDeniedError('Administrator role required');
    return this.settings.multiTenant ? scopedTenantId(user) : null;
  }

  private system(user: AuthUser): void {
    if (!hasSystemScope(user)) throw new AccessDeniedError('System administrator required');
  }

  /** A job the caller may see and run: every job for system callers, per-tenant jobs for tenant admins. */
  private visibleJob(user: AuthUser, name: string): RegisteredJob {
    const tenant = this.admin(user);
    const j = this.jobs.get(name);
    if (!j || (tenant && !hasSystemScope(user) && !j.per_tenant)) throw new NotFoundError('job', name, `Job "${name}" is not registered`);
    return j;
  }

  private tenantScope(user: AuthUser, field = 'tenant_id'): Record<string, unknown> {
    this.admin(user);
    return tenantFilter(user, this.settings.multiTenant, field);
  }

  // ----- registry -----

  registry(user: AuthUser): RegistryEntry[] {
    const tenant = this.admin(user);
    return [...this.jobs.values()].filter((j) => !tenant || hasSystemScope(user) || j.per_tenant).map(registryView);
  }

  registryEntry(user: AuthUser, name: string): RegistryEntry {
    return registryView(this.visibleJob(user, name));
  }

  parseParams(job: RegisteredJob, params: unknown, loc: (string | number)[] = ['body', 'parameters']): Record<string, unknown> {
    const res = job.schema.safeParse(params);
    if (!res.success) throw paramsError(job.name, res.error.issues, loc);
    return res.data;
  }

  // ----- runs -----

  /** Insert a run (insert-first: null when its `dedupe_key` exists already) and queue it. */
  async createRun(input: NewRun): Promise<JobRunRecord | null> {
    let doc: JobRunRecord;
    try {
      doc = (await this.models.Run.create({ retry_delay_ms: this.settings.retryDelayMs, ...input })).toObject() as JobRunRecord;
    } catch (err) {
      if (isDup(err)) return null;
      throw err;
    }
    await this.dispatcher.enqueue(String(doc._id));
    return doc;
  }

  /** `JobRunner.trigger`: trusted callers (other plugins); no role check, params validated. */
  async trigger(name: string, params: Record<string, unknown>, opts: { actor: AuthUser; tenant_id?: string | null }) {
    const job = this.jobs.get(name);
    if (!job) throw new NotFoundError('job', name, `Job "${name}" is not registered`);
    const tenant = opts.tenant_id !== undefined ? opts.tenant_id : hasSystemScope(opts.actor) ? (opts.actor.acting_tenant_id ?? null) : opts.actor.tenant_id;
    const run = await this.startJob(job, params, { actor: opts.actor, tenant_id: tenant || null, trigger: 'manual', job_type: 'manual', loc: ['params'] });
    return { run_id: String(run._id), status: run.status };
  }

  /** A run of `job` (a per-tenant parent when the job is per-tenant and no tenant is given). */
  private async startJob(
    job: RegisteredJob,
    params: unknown,
    o: {
      actor?: AuthUser | null; tenant_id: string | null; trigger: JobRunDoc['trigger']; job_type: JobRunDoc['job_type']; loc: (string | number)[];
      fanout?: boolean; schedule_id?: string; dedupe_key?: string; max_attempts?: number | null; timeout_seconds?: number | null; chain_next?: string[];
    },
  ): Promise<JobRunRecord> {
    const parameters = this.parseParams(job, params ?? {}, o.loc);
    const byUser = o.actor && o.actor.id !== 'system' ? o.actor.id : null;
    const fanout = !o.tenant_id && (o.fanout || job.per_tenant);
    const run = await this.createRun({
      job_name: job.name,
      job_type: o.job_type,
      parameters,
      tenant_id: o.tenant_id ? oid(o.tenant_id) : null,
      triggered_by: o.trigger === 'schedule' || o.trigger === 'dependency' ? 'scheduler' : (byUser ?? 'system'),
      trigger: o.trigger,
      triggered_by_user: byUser,
      max_attempts: fanout ? 3 : (o.max_attempts ?? job.max_attempts),
      timeout_seconds: fanout ? COORDINATOR_TIMEOUT_S : (o.timeout_seconds ?? job.timeout),
      coordinator: fanout ? 'fanout' : null,
      chain_next: o.chain_next ?? [],
      ...(o.schedule_id ? { schedule_id: oid(o.schedule_id) } : {}),
      ...(o.dedupe_key ? { dedupe_key: o.dedupe_key } : {}),
    });
    if (!run) throw new ConflictError('This run exists already', { dedupe_key: o.dedupe_key });
    return run;
  }

  /** `POST /jobs/run/{job_name}` and `POST /jobs/run`: an administrator's manual run. */
  async triggerAs(user: AuthUser, name: string, params: unknown, tenantId?: string, loc: (string | number)[] = ['body', 'parameters']): Promise<RunView> {
    const job = this.visibleJob(user, name);
    const scope = this.admin(user);
    if (tenantId && scope && tenantId !== scope) throw new AccessDeniedError('Runs for another tenant need a system administrator');
    const tenant = scope ?? tenantId ?? null;
    return runView(await this.startJob(job, params, { actor: user, tenant_id: tenant, trigger: 'manual', job_type: 'manual', loc }));
  }

  async listRuns(user: AuthUser, q: ListRunsQuery) {
    const filter: Record<string, unknown> = { ...this.tenantScope(user) };
    if (q.job_name) filter.job_name = q.job_name;
    if (q.status) filter.status = q.status;
    if (q.tenant_id && !filter.tenant_id) filter.tenant_id = oid(q.tenant_id);
    for (const k of ['schedule_id', 'chain_run_id', 'parent_job_id'] as const) if (q[k]) filter[k] = oid(q[k]);
    const [items, total] = await Promise.all([
      this.models.Run.find(filter, { logs: 0 }).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<JobRunRecord[]>(),
      this.models.Run.countDocuments(filter),
    ]);
    return { items: items.map((r) => runView(r, false)), total, page: q.page, per_page: q.per_page, total_pages: Math.ceil(total / q.per_page) };
  }

  private async findRun(user: AuthUser, id: string): Promise<JobRunRecord> {
    const r = await this.models.Run.findOne({ _id: id, ...this.tenantScope(user) }).lean<JobRunRecord>();
    if (!r) throw new NotFoundError('job_run', id);
    return r;
  }

  async getRun(user: AuthUser, id: string): Promise<RunView> {
    return runView(await this.findRun(user, id));
  }

  /** Cancel a pending or running run (and the runs it started: tenants of a fan-out, chain steps). 409 when it has finished. */
  async cancel(user: AuthUser, id: string): Promise<RunView> {
    const run = await this.findRun(user, id);
    const done = await this.cancelRun(run._id, `cancelled by ${user.id === 'system' ? 'system' : user.id}`);
    if (!done) {
      const cur = await this.models.Run.findById(run._id).lean<JobRunRecord>();
      throw new ConflictError(`Run ${id} has already finished (${cur?.status ?? run.status})`, { status: cur?.status ?? run.status });
    }
    return runView(done);
  }

  async cancelRun(id: Types.ObjectId, reason: string): Promise<JobRunRecord | null> {
    const now = new Date();
    const cur = await this.models.Run.findOne({ _id: id, status: { $in: ['pending', 'running'] } }, { started_at: 1 }).lean();
    if (!cur) return null;
    const ms = cur.started_at ? now.getTime() - cur.started_at.getTime() : null;
    const done = await this.models.Run.findOneAndUpdate(
      { _id: id, status: { $in: ['pending', 'running'] } },
      {
        $set: { status: 'cancelled', completed_at: now, duration_ms: ms, duration_seconds: ms === null ? null : ms / 1000, lock_token: null, lease_until: null },
        $push: { logs: { timestamp: now, level: 'warning', message: reason, percentage: null } },
      },
      { returnDocument: 'after' },
    ).lean<JobRunRecord>();
    if (!done) return null;
    this.dispatcher.abortLocal(String(id));
    const children = await this.models.Run.find({ parent_job_id: id, status: { $in: ['pending', 'running'] } }, { _id: 1 }).lean();
    for (const c of children) await this.cancelRun(c._id, 'parent run cancelled');
    await this.afterFinish(done);
    return done;
  }

  /**
   * What follows a finished run: the schedule's last status, the next job of a primary chain
   * (after success only; a failure stops it), dependent schedules waiting for this one.
   */
  async afterFinish(run: JobRunRecord): Promise<void> {
    if (run.schedule_id) {
      await this.models.Schedule.updateOne({ _id: run.schedule_id, last_run_id: run._id }, { $set: { last_run_status: run.status } });
    }
    const [next, ...rest] = run.chain_next ?? [];
    if (next && run.status === 'completed') {
      const job = this.jobs.get(next);
      const created = await this.createRun({
        job_name: next,
        job_type: 'chain',
        parameters: run.parameters,
        parent_job_id: run._id,
        chain_index: (run.chain_index ?? -1) + 1,
        chain_next: rest,
        tenant_id: run.tenant_id,
        triggered_by: run.triggered_by,
        trigger: 'chain',
        triggered_by_user: run.triggered_by_user,
        max_attempts: job?.max_attempts ?? 1,
        timeout_seconds: job?.timeout ?? 3600,
        coordinator: job?.per_tenant && !run.tenant_id ? 'fanout' : null,
        dedupe_key: `${String(run._id)}:next`,
        ...(run.schedule_id ? { schedule_id: run.schedule_id } : {}),
      });
      if (created && run.schedule_id) {
        await this.models.Schedule.updateOne({ _id: run.schedule_id, last_run_id: run._id }, { $set: { last_run_id: created._id, last_run_status: 'pending' } });
      }
    }
    if (run.schedule_id && run.status === 'completed' && !run.chain_next?.length) {
      const waiting = await this.models.Schedule.find({ depends_on_schedules: run.schedule_id, dependency_unmet: true, is_enabled: true }).lean<JobScheduleRecord[]>();
      // The occurrence is this run's completion, so firing a dependent for it twice (see `fire`) starts one run.
      for (const s of waiting) {
        if (await this.dependenciesMet(s)) await this.fire(s, run.completed_at ?? new Date(), 'dependency');
      }
    }
  }

  // ----- schedules -----

  /** Both field sets onto one schedule: extended names are aliases; a conflict between them is 422. */
  private async scheduleFields(user: AuthUser, body: ScheduleBody, current: JobScheduleRecord | null) {
    const issues: ValidationIssue[] = [];
    const pick = <T>(a: T | undefined, b: T | undefined, na: string, nb: string): T | undefined => {
      if (a !== undefined && b !== undefined && JSON.stringify(a) !== JSON.stringify(b)) issues.push({ loc: ['body', nb], msg: `${nb} differs from ${na}; give one of them`, type: 'conflict' });
      return a ?? b;
    };
    const name = pick(body.job_name, body.name, 'job_name', 'name');
    const cron = pick(body.cron_expression, body.cron, 'cron_expression', 'cron');
    const parameters = pick(body.parameters, body.params, 'parameters', 'params');
    const type = body.type ?? (current?.type as 'job' | 'chain' | undefined) ?? 'job';
    let jobType: string | null | undefined = type === 'job' ? pick(body.job_type, body.target, 'job_type', 'target') : undefined;
    let chainId: Types.ObjectId | null | undefined;
    if (type === 'chain') {
      if (body.job_type !== undefined) issues.push({ loc: ['body', 'job_type'], msg: 'a chain schedule names its chain in target', type: 'invalid' });
      const t = body.target;
      if (t !== undefined) {
        if (!objectId.safeParse(t).success || !(await this.models.Chain.exists({ _id: t }))) issues.push({ loc: ['body', 'target'], msg: `chain ${t} not found`, type: 'not_found' });
        else chainId = oid(t);
      } else if (!current || current.type !== 'chain') issues.push({ loc: ['body', 'target'], msg: 'required: the chain id', type: 'missing' });
      jobType = null;
    } else if (body.type === 'job' && current?.type === 'chain' && jobType === undefined) {
      issues.push({ loc: ['body', 'target'], msg: 'required: the job name', type: 'missing' });
    }
    if (!current) {
      if (!name) issues.push({ loc: ['body', 'job_name'], msg: 'required (or name)', type: 'missing' });
      if (!cron) issues.push({ loc: ['body', 'cron_expression'], msg: 'required (or cron)', type: 'missing' });
      if (type === 'job' && !jobType) issues.push({ loc: ['body', 'job_type'], msg: 'required (or target): the registered job to run', type: 'missing' });
    }
    const tz = body.timezone ?? current?.timezone ?? this.settings.defaultTimezone;
    if (!isTimeZone(tz)) issues.push({ loc: ['body', 'timezone'], msg: `unknown time zone "${tz}"`, type: 'invalid_timezone' });
    const cronExpr = cron ?? current?.cron_expression;
    if (cronExpr && isTimeZone(tz)) {
      const reason = checkCron(cronExpr, tz);
      if (reason) issues.push({ loc: ['body', body.cron_expression !== undefined ? 'cron_expression' : 'cron'], msg: `invalid cron expression: ${reason}`, type: 'invalid_cron' });
    }
    const scope = this.admin(user);
    const tenantAdmin = !!scope && !hasSystemScope(user);
    let tenantId: string | null | undefined = body.tenant_id;
    if (tenantAdmin) {
      if (tenantId && tenantId !== scope) throw new AccessDeniedError('Schedules for another tenant need a system administrator');
      if (body.per_tenant) throw new AccessDeniedError('Per-tenant fan-out schedules need a system administrator');
      if (type === 'chain') throw new AccessDeniedError('Chain schedules need a system administrator');
      tenantId = scope;
    } else if (scope && tenantId === undefined && !current) tenantId = scope;
    const effJob = type === 'job' ? (jobType ?? current?.job_type ?? null) : null;
    const job = effJob ? this.jobs.get(effJob) : undefined;
    if (effJob && (!job || (tenantAdmin && !job.per_tenant))) issues.push({ loc: ['body', body.job_type !== undefined ? 'job_type' : 'target'], msg: `job "${effJob}" is not registered`, type: 'not_found' });
    const chain = body.chain;
    for (const [i, c] of (chain ?? []).entries()) if (!this.jobs.has(c)) issues.push({ loc: ['body', 'chain', i], msg: `job "${c}" is not registered`, type: 'not_found' });
    const deps = body.depends_on_schedules;
    if (deps?.length) {
      const found = await this.models.Schedule.find({ _id: { $in: deps.map(oid) }, ...(tenantAdmin ? { tenant_id: oid(scope) } : {}) }, { _id: 1 }).lean();
      for (const [i, d] of deps.entries()) {
        if (!found.some((f) => String(f._id) === d)) issues.push({ loc: ['body', 'depends_on_schedules', i], msg: `schedule ${d} not found`, type: 'not_found' });
        if (current && String(current._id) === d) issues.push({ loc: ['body', 'depends_on_schedules', i], msg: 'a schedule cannot depend on itself', type: 'invalid' });
      }
    }
    const effParams = parameters ?? (current?.parameters as Record<string, unknown> | undefined) ?? {};
    if (job && issues.length === 0) {
      const res = job.schema.safeParse(resolveTemplates(effParams, templateValues(new Date(), tz)));
      if (!res.success) issues.push(...zodIssues(['body', body.params !== undefined ? 'params' : 'parameters'], res.error.issues));
    }
    if (issues.length) throw new ValidationError(issues);
    const set: Record<string, unknown> = {};
    if (name !== undefined) set.job_name = name;
    if (cron !== undefined) set.cron_expression = cron;
    if (parameters !== undefined) set.parameters = parameters;
    set.type = type;
    if (jobType !== undefined) set.job_type = jobType;
    if (chainId !== undefined) set.chain_id = chainId;
    if (type === 'job') set.chain_id = null;
    set.timezone = tz;
    for (const k of ['description', 'is_enabled', 'allow_param_override', 'max_attempts', 'timeout_seconds', 'chain', 'dependency_mode', 'per_tenant'] as const) {
      if (body[k] !== undefined) set[k] = body[k];
    }
    if (deps !== undefined) set.depends_on_schedules = deps.map(oid);
    if (tenantId !== undefined) set.tenant_id = tenantId ? oid(tenantId) : null;
    const enabled = (body.is_enabled ?? current?.is_enabled ?? true) as boolean;
    set.next_run_at = enabled && cronExpr ? nextOccurrence(cronExpr, tz) : null;
    return set;
  }

  async listSchedules(user: AuthUser): Promise<ScheduleView[]> {
    const items = await this.models.Schedule.find(this.tenantScope(user)).sort({ job_name: 1 }).lean<JobScheduleRecord[]>();
    return items.map(scheduleView);
  }

  private async findSchedule(user: AuthUser, id: string): Promise<JobScheduleRecord> {
    const s = await this.models.Schedule.findOne({ _id: id, ...this.tenantScope(user) }).lean<JobScheduleRecord>();
    if (!s) throw new NotFoundError('job_schedule', id);
    return s;
  }

  async getSchedule(user: AuthUser, id: string): Promise<ScheduleView> {
    return scheduleView(await this.findSchedule(user, id));
  }

  async createSchedule(user: AuthUser, body: ScheduleBody): Promise<ScheduleView> {
    const set = await this.scheduleFields(user, body, null);
    let doc: JobScheduleRecord;
    try {
      doc = (await this.models.Schedule.create({ ...set, created_by: user.id })).toObject() as JobScheduleRecord;
    } catch (err) {
      if (isDup(err)) throw new ConflictError(`A schedule named "${String(set.job_name)}" exists already`, { field: 'job_name' });
      throw err;
    }
    await this.dispatcher.syncSchedule(doc);
    return scheduleView(doc);
  }

  async updateSchedule(user: AuthUser, id: string, body: ScheduleBody): Promise<ScheduleView> {
    const current = await this.findSchedule(user, id);
    const set = await this.scheduleFields(user, body, current);
    // Answer a rename onto a taken name before writing (the unique index still decides races). Not
    // redundant with the catch below: a DocumentDB-based server (the one the tests run on) reports a
    // unique violation of findAndModify as code 1 (InternalError), not E11000; only this makes it a 409 there.
    if (set.job_name && (await this.models.Schedule.exists({ job_name: set.job_name, _id: { $ne: current._id } })))
      throw new ConflictError(`A schedule named "${String(set.job_name)}" exists already`, { field: 'job_name' });
    let doc: JobScheduleRecord | null;
    try {
      doc = await this.models.Schedule.findOneAndUpdate({ _id: current._id }, { $set: set }, { returnDocument: 'after' }).lean<JobScheduleRecord>();
    } catch (err) {
      if (isDup(err)) throw new ConflictError(`A schedule named "${String(set.job_name)}" exists already`, { field: 'job_name' });
      throw err;
    }
    if (!doc) throw new NotFoundError('job_schedule', id);
    await this.dispatcher.syncSchedule(doc);
    return scheduleView(doc);
  }

  async deleteSchedule(user: AuthUser, id: string): Promise<void> {
    const s = await this.findSchedule(user, id);
    await this.models.Schedule.deleteOne({ _id: s._id });
    await this.dispatcher.removeSchedule(id);
  }

  /** Run a schedule now (`POST /jobs/schedules/{id}/run`); `params` only when `allow_param_override`. */
  async runSchedule(user: AuthUser, id: string, params: Record<string, unknown> | undefined): Promise<RunView> {
    const s = await this.findSchedule(user, id);
    if (params && !s.allow_param_override) throw new ValidationError([{ loc: ['body', 'params'], msg: 'this schedule does not allow parameter overrides', type: 'override_not_allowed' }]);
    const run = await this.fire(s, new Date(), 'manual', { params, actor: user });
    if (!run) throw new ConflictError('The schedule did not start a run');
    return runView(run);
  }

  async dependenciesMet(s: JobScheduleRecord): Promise<boolean> {
    if (!s.depends_on_schedules?.length || s.dependency_mode === 'none') return true;
    const deps = await this.models.Schedule.find({ _id: { $in: s.depends_on_schedules } }, { last_run_status: 1, last_run_id: 1 }).lean();
    if (deps.length < s.depends_on_schedules.length) return false;
    if (!deps.every((d) => d.last_run_status === 'completed' && d.last_run_id)) return false;
    if (s.dependency_mode === 'last_run') return true;
    // same_day: the day each last run completed (not the day it was started: `last_run_at`), in this schedule's zone.
    const runs = await this.models.Run.find({ _id: { $in: deps.map((d) => d.last_run_id!) } }, { completed_at: 1 }).lean();
    const completed = new Map(runs.map((r) => [String(r._id), r.completed_at]));
    const today = localDay(new Date(), s.timezone);
    return deps.every((d) => {
      const at = completed.get(String(d.last_run_id));
      return !!at && localDay(at, s.timezone) === today;
    });
  }

  /**
   * Start a schedule's run for the occurrence `at` (idempotent per occurrence: one run however many
   * replicas or check-schedules calls fire it). Skips and flags it when a dependency is unmet.
   */
  async fire(
    s: JobScheduleRecord, at: Date, trigger: 'schedule' | 'dependency' | 'manual',
    o: { params?: Record<string, unknown> | undefined; actor?: AuthUser } = {},
  ): Promise<JobRunRecord | null> {
    if (trigger === 'schedule') {
      const next = nextOccurrence(s.cron_expression, s.timezone, new Date(Math.max(Date.now(), at.getTime())));
      await this.models.Schedule.updateOne({ _id: s._id }, { $set: { next_run_at: s.is_enabled ? next : null } });
      if (!(await this.dependenciesMet(s))) {
        await this.models.Schedule.updateOne({ _id: s._id }, { $set: { dependency_unmet: true, skipped_at: new Date(), last_run_status: 'skipped' } });
        this.log.info({ schedule: s.job_name }, 'schedule skipped: a dependency has not completed');
        return null;
      }
    }
    const params = resolveTemplates({ ...(s.parameters as Record<string, unknown>), ...(o.params ?? {}) }, templateValues(at, s.timezone));
    const key = trigger === 'manual' ? undefined : `${String(s._id)}@${trigger === 'dependency' ? 'dep@' : ''}${at.toISOString()}`;
    let run: JobRunRecord | null = null;
    try {
      if (s.type === 'chain') {
        const chain = await this.models.Chain.findById(s.chain_id).lean<JobChainRecord>();
        if (!chain) throw new NotFoundError('job_chain', String(s.chain_id));
        run = await this.startChain(chain, params as Record<string, unknown>, {
          actor: o.actor ?? null, trigger, schedule_id: s._id, ...(key ? { dedupe_key: key } : {}), tenant_id: s.tenant_id ? String(s.tenant_id) : null,
        });
      } else {
        const job = this.jobs.get(s.job_type ?? '');
        if (!job) throw new NotFoundError('job', s.job_type ?? '', `Job "${s.job_type}" is not registered`);
        run = await this.startJob(job, params, {
          actor: o.actor ?? null, tenant_id: s.tenant_id ? String(s.tenant_id) : null, trigger, job_type: trigger === 'manual' ? 'manual' : 'scheduled',
          loc: ['params'], fanout: s.per_tenant, schedule_id: String(s._id), max_attempts: s.max_attempts, timeout_seconds: s.timeout_seconds,
          chain_next: [...(s.chain ?? [])], ...(key ? { dedupe_key: key } : {}),
        });
      }
    } catch (err) {
      if (err instanceof ConflictError) return null; // this occurrence has its run already
      if (trigger === 'manual') throw err;
      this.log.warn({ err, schedule: s.job_name }, 'schedule could not start its run');
      await this.models.Schedule.updateOne({ _id: s._id }, { $set: { last_run_at: new Date(), last_run_status: 'failed' } });
      return null;
    }
    await this.models.Schedule.updateOne(
      { _id: s._id },
      { $set: { last_run_id: run._id, last_run_at: new Date(), last_run_status: 'pending', dependency_unmet: false, skipped_at: null } },
    );
    // A quick run can finish before the line above names it the schedule's last run: its own
    // `afterFinish` then found another last_run_id and changed nothing. Repeat it (every step is idempotent).
    const now = await this.models.Run.findById(run._id).lean<JobRunRecord>();
    if (now && ['completed', 'failed', 'cancelled'].includes(now.status)) await this.afterFinish(now);
    return run;
  }

  /** `POST /jobs/check-schedules`: every enabled schedule whose `next_run_at` has passed runs now. */
  async checkSchedules(user: AuthUser | null) {
    if (user) this.system(user);
    const due = await this.models.Schedule.find({ is_enabled: true, next_run_at: { $lte: new Date() } }).lean<JobScheduleRecord[]>();
    const triggered: { schedule_id: string; run_id: string }[] = [];
    const skipped: string[] = [];
    for (const s of due) {
      const run = await this.fire(s, s.next_run_at!, 'schedule');
      if (run) triggered.push({ schedule_id: String(s._id), run_id: String(run._id) });
      else skipped.push(String(s._id));
    }
    return { checked: due.length, triggered, skipped };
  }

  /** `calculate_next_schedules`: recompute `next_run_at` of every schedule (null when disabled). */
  async recomputeNextRuns(): Promise<{ updated: number }> {
    const all = await this.models.Schedule.find({}, { cron_expression: 1, timezone: 1, is_enabled: 1 }).lean();
    for (const s of all) {
      await this.models.Schedule.updateOne({ _id: s._id }, { $set: { next_run_at: s.is_enabled ? nextOccurrence(s.cron_expression, s.timezone) : null } });
    }
    return { updated: all.length };
  }

  // ----- chains -----

  private checkSteps(steps: ChainStepInput[], loc: string): void {
    const issues: ValidationIssue[] = [];
    const names = steps.map((s) => s.job);
    steps.forEach((s, i) => {
      const job = this.jobs.get(s.job);
      if (!job) issues.push({ loc: ['body', loc, i, 'job'], msg: `job "${s.job}" is not registered`, type: 'not_found' });
      if (names.indexOf(s.job) !== i) issues.push({ loc: ['body', loc, i, 'job'], msg: `job "${s.job}" appears twice; depends_on names steps by job`, type: 'duplicate' });
      s.depends_on.forEach((d, k) => {
        if (!names.includes(d) || d === s.job) issues.push({ loc: ['body', loc, i, 'depends_on', k], msg: `"${d}" is not another step of this chain`, type: 'not_found' });
      });
      if (job) {
        const res = job.schema.safeParse(s.params);
        if (!res.success) issues.push(...zodIssues(['body', loc, i, 'params'], res.error.issues));
      }
    });
    // A dependency cycle would never start.
    const state = new Map<string, number>();
    const visit = (n: string): boolean => {
      if (state.get(n) === 2) return false;
      if (state.get(n) === 1) return true;
      state.set(n, 1);
      const cyc = (steps.find((s) => s.job === n)?.depends_on ?? []).some((d) => names.includes(d) && visit(d));
      state.set(n, 2);
      return cyc;
    };
    if (!issues.length && names.some((n) => visit(n))) issues.push({ loc: ['body', loc], msg: 'depends_on forms a cycle', type: 'cycle' });
    if (issues.length) throw new ValidationError(issues);
  }

  async listChains(user: AuthUser): Promise<ChainView[]> {
    this.system(user);
    return (await this.models.Chain.find().sort({ name: 1 }).lean<JobChainRecord[]>()).map(chainView);
  }

  private async findChain(user: AuthUser, id: string): Promise<JobChainRecord> {
    this.system(user);
    const c = await this.models.Chain.findById(id).lean<JobChainRecord>();
    if (!c) throw new NotFoundError('job_chain', id);
    return c;
  }

  async getChain(user: AuthUser, id: string): Promise<ChainView> {
    return chainView(await this.findChain(user, id));
  }

  async createChain(user: AuthUser, body: ChainBody, isSystem = false): Promise<ChainView> {
    if (!isSystem) this.system(user);
    this.checkSteps(body.steps, 'steps');
    try {
      const doc = await this.models.Chain.create({ ...body, is_system: isSystem, created_by: user.id });
      return chainView(doc.toObject() as JobChainRecord);
    } catch (err) {
      if (isDup(err)) throw new ConflictError(`A chain named "${body.name}" exists already`, { field: 'name' });
      throw err;
    }
  }

  /** Built-in chains (plugin options): created once, `is_system`, never deleted. */
  async ensureSystemChain(body: ChainBody): Promise<void> {
    if (await this.models.Chain.exists({ name: body.name })) return;
    try {
      await this.createChain(systemActor(), body, true);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
    }
  }

  async updateChain(user: AuthUser, id: string, body: z.output<typeof chainPatch>): Promise<ChainView> {
    await this.findChain(user, id);
    if (body.steps) this.checkSteps(body.steps, 'steps');
    // Checked before writing, as in updateSchedule (DocumentDB: findAndModify's unique violation is not E11000).
    if (body.name && (await this.models.Chain.exists({ name: body.name, _id: { $ne: id } })))
      throw new ConflictError(`A chain named "${body.name}" exists already`, { field: 'name' });
    try {
      const doc = await this.models.Chain.findOneAndUpdate({ _id: id }, { $set: body }, { returnDocument: 'after' }).lean<JobChainRecord>();
      if (!doc) throw new NotFoundError('job_chain', id);
      return chainView(doc);
    } catch (err) {
      if (isDup(err)) throw new ConflictError(`A chain named "${body.name}" exists already`, { field: 'name' });
      throw err;
    }
  }

  async deleteChain(user: AuthUser, id: string): Promise<void> {
    const c = await this.findChain(user, id);
    if (c.is_system) throw new ConflictError(`Chain "${c.name}" is a built-in chain and cannot be deleted`, { is_system: true });
    if (await this.models.Schedule.exists({ type: 'chain', chain_id: c._id })) throw new ConflictError(`Chain "${c.name}" is the target of a schedule`);
    await this.models.Chain.deleteOne({ _id: c._id });
  }

  async runChain(user: AuthUser, id: string, params: Record<string, unknown>): Promise<RunView> {
    const chain = await this.findChain(user, id);
    return runView(await this.startChain(chain, params, { actor: user, trigger: 'manual', tenant_id: null }));
  }

  /** The coordinating run of a stored chain: its steps run as child runs (see `Engine.chain` in engine.ts). */
  private async startChain(
    chain: JobChainRecord, params: Record<string, unknown>,
    o: { actor: AuthUser | null; trigger: JobRunDoc['trigger']; tenant_id: string | null; schedule_id?: Types.ObjectId; dedupe_key?: string },
  ): Promise<JobRunRecord> {
    const issues: ValidationIssue[] = [];
    chain.steps.forEach((s, i) => {
      const job = this.jobs.get(s.job);
      if (!job) issues.push({ loc: ['steps', i, 'job'], msg: `job "${s.job}" is not registered`, type: 'not_found' });
      else {
        const res = job.schema.safeParse({ ...(s.params as object), ...params });
        if (!res.success) issues.push(...zodIssues(['params'], res.error.issues));
      }
    });
    if (issues.length) throw new ValidationError(issues, `Chain "${chain.name}" cannot run with these parameters`);
    const byUser = o.actor && o.actor.id !== 'system' ? o.actor.id : null;
    // Its own id is its chain_run_id: chosen here so the run is inserted complete.
    const id = new Types.ObjectId();
    const run = await this.createRun({
      _id: id,
      chain_run_id: id,
      job_name: chain.name,
      job_type: 'chain',
      parameters: params,
      chain_id: chain._id,
      tenant_id: o.tenant_id ? oid(o.tenant_id) : null,
      triggered_by: o.trigger === 'schedule' || o.trigger === 'dependency' ? 'scheduler' : (byUser ?? 'system'),
      trigger: o.trigger,
      triggered_by_user: byUser,
      max_attempts: 3,
      timeout_seconds: COORDINATOR_TIMEOUT_S,
      coordinator: 'chain',
      chain_steps: chain.steps,
      chain_default_on_failure: chain.default_on_failure,
      ...(o.schedule_id ? { schedule_id: o.schedule_id } : {}),
      ...(o.dedupe_key ? { dedupe_key: o.dedupe_key } : {}),
    });
    if (!run) throw new ConflictError('This run exists already');
    return run;
  }

  // ----- live view -----

  /**
   * A run's log lines and progress as they happen (SSE): existing lines first, then new ones,
   * polling the database every `pollMs` (no change streams needed, works whichever process
   * executes the run). Ends after the run finishes or when `signal` aborts.
   */
  async *watch(user: AuthUser, id: string, signal: AbortSignal): AsyncGenerator<{ event: 'log' | 'progress' | 'end'; data: unknown }> {
    await this.findRun(user, id);
    let sent = 0;
    let lastProgress = '';
    while (!signal.aborted) {
      const r = await this.models.Run.findById(id, { logs: { $slice: [sent, 500] }, status: 1, progress_current: 1, progress_total: 1, progress_message: 1, result: 1, error: 1 }).lean<JobRunRecord>();
      if (!r) return;
      for (const l of r.logs ?? []) yield { event: 'log', data: { timestamp: l.timestamp, level: l.level, message: l.message, percentage: l.percentage ?? null } };
      sent += (r.logs ?? []).length;
      const total = r.progress_total ?? null;
      const p = { status: r.status, progress_current: r.progress_current ?? 0, progress_total: total, progress_message: r.progress_message ?? null,
        percentage: total ? Math.min(100, Math.round(((r.progress_current ?? 0) / total) * 100)) : null };
      const key = JSON.stringify(p);
      if (key !== lastProgress) {
        lastProgress = key;
        yield { event: 'progress', data: p };
      }
      if (FINISHED.includes(r.status) && (r.logs ?? []).length < 500) {
        yield { event: 'end', data: { status: r.status, result: r.result ?? null, error: r.error ?? null } };
        return;
      }
      if ((r.logs ?? []).length < 500) await sleep(this.settings.pollMs, signal);
    }
  }

  // ----- maintenance -----

  async tenants(): Promise<string[]> {
    return this.listTenants();
  }

  /**
   * `cleanup_job_runs`: finished runs created more than `days` ago, in the actor's tenant scope:
   * `systemActor()` every run (runs without a tenant included), `systemActor(tenantId)` only that
   * tenant's runs (a per-tenant run of the job passes its `ctx.actor`).
   * @throws AccessDeniedError for a non-system caller, tenant administrators included (nothing deleted)
   */
  async purgeRuns(actor: AuthUser, days: number): Promise<{ deleted_count: number; cutoff_date: Date }> {
    this.system(actor);
    const scope = tenantFilter(actor, this.settings.multiTenant);
    const cutoff = new Date(Date.now() - days * 86_400_000);
    const res = await this.models.Run.deleteMany({ ...scope, status: { $in: FINISHED }, created_at: { $lt: cutoff } });
    return { deleted_count: res.deletedCount, cutoff_date: cutoff };
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
