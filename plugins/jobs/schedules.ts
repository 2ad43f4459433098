import { Types } from 'mongoose';
import { AccessDeniedError, ConflictError, NotFoundError, ValidationError, zodIssues, type ValidationIssue } from '../../core/errors.ts';
import { hasSystemScope, type Actor } from '../../core/context.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Logger } from '../../core/logger.ts';
import { objectId } from '../../core/http/schemas.ts';
import { FINISHED, type JobModels, type JobRunRecord, type JobScheduleRecord } from './model.ts';
import type { ScheduleBody } from './schemas.ts';
import type { JobAccess } from './access.ts';
import type { RunLauncher } from './runs.ts';
import { isDup } from './store.ts';
import type { ChainService } from './chains.ts';
import { type DocumentChanges, notRemoved } from '../events/public/outbox.ts';
import { checkCron, isTimeZone, localDay, nextOccurrence, previousOccurrence, resolveTemplates, smallestGapSeconds, templateValues } from './cron.ts';
import { runView, scheduleView, type RunView, type ScheduleView } from './views.ts';

export interface ScheduleSettings {
  defaultTimezone: string;
  /** `JOBS_MIN_SCHEDULE_INTERVAL_SECONDS`: the shortest gap between two runs a non-system actor may schedule. */
  minIntervalSeconds: number;
}

/** Fire times checked for the smallest gap of a cron expression. */
const GAP_SAMPLE = 20;

const oid = (s: string) => new Types.ObjectId(s);
const nameTaken = (name: unknown) => new ConflictError(`A schedule named "${String(name)}" exists already`, { field: 'job_name' });

/**
 * Cron schedules (`job_schedules`): their CRUD, firing an occurrence exactly once, dependencies
 * between schedules, and a schedule's sequence (the jobs run one after another after its job
 * succeeds, field `chain` of the API).
 */
/** Who may call each schedule operation: the one declaration its REST route and GraphQL field read. */
export const SCHEDULE_PERMISSIONS = { list: 'admin', get: 'admin', create: 'admin', update: 'admin', remove: 'admin', runNow: 'admin', checkDue: 'system' } as const satisfies Permissions;

export class ScheduleService {
  constructor(
    private readonly models: Pick<JobModels, 'Schedule' | 'Run'>,
    private readonly access: JobAccess,
    private readonly launcher: RunLauncher,
    private readonly chains: ChainService,
    private readonly settings: ScheduleSettings,
    private readonly log: Logger,
    private readonly changes: DocumentChanges,
  ) {}

  /** Both field sets onto one schedule: extended names are aliases; a conflict between them is 422. */
  private async fields(actor: Actor, body: ScheduleBody, current: JobScheduleRecord | null) {
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
        if (!objectId.safeParse(t).success || !(await this.chains.exists(t))) issues.push({ loc: ['body', 'target'], msg: `chain ${t} not found`, type: 'not_found' });
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
      const field = body.cron_expression !== undefined ? 'cron_expression' : 'cron';
      const reason = checkCron(cronExpr, tz);
      if (reason) issues.push({ loc: ['body', field], msg: `invalid cron expression: ${reason}`, type: 'invalid_cron' });
      else if (cron !== undefined) issues.push(...this.frequencyIssues(actor, cron, tz, field));
    }
    const scope = this.access.scope(actor);
    const tenantAdmin = this.access.isTenantAdmin(actor);
    let tenantId: string | null | undefined = body.tenant_id;
    if (tenantAdmin) {
      if (tenantId && tenantId !== scope) throw new AccessDeniedError('Schedules for another tenant need a system administrator');
      if (body.per_tenant) throw new AccessDeniedError('Per-tenant fan-out schedules need a system administrator');
      if (type === 'chain') throw new AccessDeniedError('Chain schedules need a system administrator');
      tenantId = scope;
    } else if (scope && tenantId === undefined && !current) tenantId = scope;
    const effJob = type === 'job' ? (jobType ?? current?.job_type ?? null) : null;
    const job = effJob ? this.launcher.jobs.get(effJob) : undefined;
    if (effJob && (!job || (tenantAdmin && !job.per_tenant))) issues.push({ loc: ['body', body.job_type !== undefined ? 'job_type' : 'target'], msg: `job "${effJob}" is not registered`, type: 'not_found' });
    const sequence = body.chain;
    for (const [i, c] of (sequence ?? []).entries()) if (!this.launcher.jobs.has(c)) issues.push({ loc: ['body', 'chain', i], msg: `job "${c}" is not registered`, type: 'not_found' });
    const deps = body.depends_on_schedules;
    if (deps?.length) {
      const found = await this.models.Schedule.find({ _id: { $in: deps.map(oid) }, ...(tenantAdmin ? { tenant_id: oid(scope!) } : {}) }, { _id: 1 }).lean();
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

  /**
   * A cron given by an actor without system scope may not fire more often than
   * `minIntervalSeconds`: the smallest gap among its next fire times decides.
   */
  private frequencyIssues(actor: Actor, cron: string, tz: string, field: string): ValidationIssue[] {
    const min = this.settings.minIntervalSeconds;
    if (hasSystemScope(actor) || min <= 0) return [];
    const gap = smallestGapSeconds(cron, tz, GAP_SAMPLE);
    if (gap >= min) return [];
    return [{ loc: ['body', field], msg: `fires every ${gap} s at its most frequent; schedules may run at most once every ${min} s`, type: 'too_frequent' }];
  }

  async list(actor: Actor): Promise<ScheduleView[]> {
    const items = await this.models.Schedule.find({ ...this.access.filter(actor), ...notRemoved }).sort({ job_name: 1 }).lean<JobScheduleRecord[]>();
    return items.map(scheduleView);
  }

  private async find(actor: Actor, id: string): Promise<JobScheduleRecord> {
    const s = await this.models.Schedule.findOne({ _id: id, ...this.access.filter(actor), ...notRemoved }).lean<JobScheduleRecord>();
    if (!s) throw new NotFoundError('job_schedule', id);
    return s;
  }

  async get(actor: Actor, id: string): Promise<ScheduleView> {
    return scheduleView(await this.find(actor, id));
  }

  async create(actor: Actor, body: ScheduleBody): Promise<ScheduleView> {
    const set = await this.fields(actor, body, null);
    const now = new Date();
    const draft = new this.models.Schedule({ ...set, created_by: actor.id, created_at: now, updated_at: now });
    draft.set(this.changes.insert(this.changes.entry('created', actor, null, draft.toObject() as JobScheduleRecord)));
    let doc: JobScheduleRecord;
    try {
      doc = (await draft.save()).toObject() as JobScheduleRecord;
    } catch (err) {
      if (isDup(err)) throw nameTaken(set.job_name);
      throw err;
    }
    await this.changes.committed(doc);
    await this.launcher.dispatcher.syncSchedule(doc);
    return scheduleView(doc);
  }

  async update(actor: Actor, id: string, body: ScheduleBody): Promise<ScheduleView> {
    const current = await this.find(actor, id);
    const set = await this.fields(actor, body, current);
    // Answer a rename onto a taken name before writing (the unique index still decides races). Not
    // redundant with the catch below: a DocumentDB-based server (the one the tests run on) reports a
    // unique violation of findAndModify as code 1 (InternalError), not E11000; only this makes it a 409 there.
    if (set.job_name && (await this.models.Schedule.exists({ job_name: set.job_name, _id: { $ne: current._id } }))) throw nameTaken(set.job_name);
    let doc: JobScheduleRecord | null;
    try {
      const at = { ...set, updated_at: new Date() };
      const entry = this.changes.entry('updated', actor, current, { ...current, ...at } as JobScheduleRecord);
      doc = await this.models.Schedule.findOneAndUpdate({ _id: current._id, ...notRemoved }, { $set: at, $push: this.changes.push(entry) }, { returnDocument: 'after' }).lean<JobScheduleRecord>();
    } catch (err) {
      if (isDup(err)) throw nameTaken(set.job_name);
      throw err;
    }
    if (!doc) throw new NotFoundError('job_schedule', id);
    await this.changes.committed(doc);
    await this.launcher.dispatcher.syncSchedule(doc);
    return scheduleView(doc);
  }

  async remove(actor: Actor, id: string): Promise<void> {
    const s = await this.find(actor, id);
    // The tombstone frees the name at once: a new schedule may take it before the relay removes it.
    const { $set, $push } = this.changes.remove(this.changes.entry('deleted', actor, s, s));
    const tomb = await this.models.Schedule.findOneAndUpdate(
      { _id: s._id, ...notRemoved }, { $set: { ...$set, job_name: `${s.job_name} (deleted ${String(s._id)})`, is_enabled: false }, $push }, { returnDocument: 'after' },
    ).lean<JobScheduleRecord>();
    if (!tomb) throw new NotFoundError('job_schedule', id);
    await this.changes.committed(tomb);
    await this.launcher.dispatcher.removeSchedule(id);
  }

  /** Run a schedule now (`POST /jobs/schedules/{id}/run`); `params` only when `allow_param_override`. */
  async runNow(actor: Actor, id: string, params: Record<string, unknown> | undefined): Promise<RunView> {
    const s = await this.find(actor, id);
    if (params && !s.allow_param_override) throw new ValidationError([{ loc: ['body', 'params'], msg: 'this schedule does not allow parameter overrides', type: 'override_not_allowed' }]);
    const run = await this.fire(s, new Date(), 'manual', { params, actor });
    if (!run) throw new ConflictError('The schedule did not start a run');
    return runView(actor, run);
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
   * A schedule's repeating Agenda job is due: start the run of its latest occurrence. False when
   * the schedule no longer exists (its Agenda job is then removed).
   */
  async due(id: string): Promise<boolean> {
    const s = Types.ObjectId.isValid(id) ? await this.models.Schedule.findOne({ _id: id, ...notRemoved }).lean<JobScheduleRecord>() : null;
    if (!s) return false;
    if (!s.is_enabled) return true;
    // Agenda fires at the occurrence (never early): the latest occurrence is the one due.
    const at = previousOccurrence(s.cron_expression, s.timezone, new Date(Date.now() + 250));
    await this.fire(s, at, 'schedule');
    return true;
  }

  /**
   * Start a schedule's run for the occurrence `at` (idempotent per occurrence: one run however many
   * replicas or check-schedules calls fire it). Skips and flags it when a dependency is unmet.
   */
  async fire(
    s: JobScheduleRecord, at: Date, trigger: 'schedule' | 'dependency' | 'manual',
    o: { params?: Record<string, unknown> | undefined; actor?: Actor } = {},
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
    const params = resolveTemplates({ ...(s.parameters as Record<string, unknown>), ...(o.params ?? {}) }, templateValues(at, s.timezone)) as Record<string, unknown>;
    const key = trigger === 'manual' ? undefined : `${String(s._id)}@${trigger === 'dependency' ? 'dep@' : ''}${at.toISOString()}`;
    const tenantId = s.tenant_id ? String(s.tenant_id) : null;
    let run: JobRunRecord;
    try {
      if (s.type === 'chain') {
        const chain = await this.chains.forSchedule(s.chain_id);
        run = await this.chains.start(chain, params, { actor: o.actor ?? null, trigger, schedule_id: s._id, ...(key ? { dedupe_key: key } : {}), tenant_id: tenantId });
      } else {
        const job = this.launcher.jobs.get(s.job_type ?? '');
        if (!job) throw new NotFoundError('job', s.job_type ?? '', `Job "${s.job_type}" is not registered`);
        run = await this.launcher.startJob(job, params, {
          actor: o.actor ?? null, tenant_id: tenantId, trigger, job_type: trigger === 'manual' ? 'manual' : 'scheduled',
          loc: ['params'], fanout: s.per_tenant, schedule_id: String(s._id), max_attempts: s.max_attempts, timeout_seconds: s.timeout_seconds,
          sequence_next: [...(s.chain ?? [])], ...(key ? { dedupe_key: key } : {}),
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
    const now = await this.launcher.store.byId(run._id);
    if (now && FINISHED.includes(now.status)) await this.afterFinish(now);
    return run;
  }

  /**
   * What follows a finished run: the schedule's last status, the next job of the schedule's
   * sequence (after success only; a failure stops it), dependent schedules waiting for this one.
   */
  async afterFinish(run: JobRunRecord): Promise<void> {
    if (!run.schedule_id) return;
    await this.models.Schedule.updateOne({ _id: run.schedule_id, last_run_id: run._id }, { $set: { last_run_status: run.status } });
    const [next, ...rest] = run.chain_next ?? [];
    if (next && run.status === 'completed') {
      const job = this.launcher.jobs.get(next);
      const created = await this.launcher.create({
        job_name: next,
        job_type: 'chain',
        parameters: run.parameters,
        origin: { parent: run, trigger: 'chain' },
        chain_index: (run.chain_index ?? -1) + 1,
        sequence_next: rest,
        tenant_id: run.tenant_id,
        limits: { max_attempts: job?.max_attempts ?? 1, timeout_seconds: job?.timeout ?? 3600 },
        coordinator: job?.per_tenant && !run.tenant_id ? 'fanout' : null,
        dedupe_key: `${String(run._id)}:next`,
        schedule_id: run.schedule_id,
      });
      if (created) {
        await this.models.Schedule.updateOne({ _id: run.schedule_id, last_run_id: run._id }, { $set: { last_run_id: created._id, last_run_status: 'pending' } });
      }
    }
    if (run.status === 'completed' && !run.chain_next?.length) {
      const waiting = await this.models.Schedule.find({ depends_on_schedules: run.schedule_id, dependency_unmet: true, is_enabled: true }).lean<JobScheduleRecord[]>();
      // The occurrence is this run's completion, so firing a dependent for it twice (see `fire`) starts one run.
      for (const s of waiting) {
        if (await this.dependenciesMet(s)) await this.fire(s, run.completed_at ?? new Date(), 'dependency');
      }
    }
  }

  /** `POST /jobs/check-schedules`: every enabled schedule whose `next_run_at` has passed runs now. */
  async checkDue(_actor: Actor | null) {
    const due = await this.models.Schedule.find({ is_enabled: true, next_run_at: { $lte: new Date() }, ...notRemoved }).lean<JobScheduleRecord[]>();
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
}
