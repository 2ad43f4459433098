import { Types } from 'mongoose';
import { AccessDeniedError, ConflictError, NotFoundError } from '../../core/errors.ts';
import { hasSystemScope, isSystemActor, type Actor } from '../../core/context.ts';
import type { JobRunner } from './public/runner.ts';
import { requireRole } from '../../core/access.ts';
import type { Permissions } from '../../core/permissions.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import { FINISHED, type JobModels, type JobRunRecord } from './model.ts';
import { registryView, type RegistryEntry } from './registry.ts';
import type { ListRunsQuery } from './schemas.ts';
import type { JobAccess } from './access.ts';
import type { Dispatcher, RunLauncher } from './runs.ts';
import { sleep, type RunStore } from './store.ts';
import { failureView, logLineView, runView, type RunView } from './views.ts';

/** An event of a run's live log stream (`JobsService.watch`). */
export type WatchEvent = { event: 'log' | 'progress' | 'end'; data: unknown };

export interface JobsServiceDeps {
  models: Pick<JobModels, 'Run'>;
  store: RunStore;
  launcher: RunLauncher;
  access: JobAccess;
  /** What follows a finished run (schedules: last status, sequence, dependents). */
  afterFinish: (run: JobRunRecord) => Promise<void>;
  /** How often the live log stream reads the run again. */
  pollMs: number;
}

/** Log lines read per poll of the live log stream. */
const WATCH_BATCH = 500;

/**
 * The jobs plugin's runs: the registry, manual runs, listing, cancelling and watching runs, and
 * `JobRunner.trigger` for other plugins. No Koa or GraphQL here; schedules and chains are their
 * own services (schedules.ts, chains.ts), execution is the engine's (engine.ts).
 */
/**
 * Who may call each jobs operation: the one declaration its REST route and GraphQL field read.
 * Every one is for administrators; a tenant administrator's reach (its tenant, per-tenant jobs) is
 * the data rule of {@link JobAccess}.
 */
export const JOB_PERMISSIONS = { registry: 'admin', registryEntry: 'admin', listRuns: 'admin', getRun: 'admin', watch: 'admin', cancel: 'admin', trigger: 'admin' } as const satisfies Permissions;

export class JobsService implements JobRunner {
  constructor(private readonly deps: JobsServiceDeps) {}

  /** The dispatcher (Agenda engine) of this process. */
  get dispatcher(): Dispatcher {
    return this.deps.launcher.dispatcher;
  }

  registry(actor: Actor): RegistryEntry[] {
    return this.deps.access.visibleJobs(actor).map(registryView);
  }

  registryEntry(actor: Actor, name: string): RegistryEntry {
    return registryView(this.deps.access.visibleJob(actor, name));
  }

  /** `JobRunner.trigger`: trusted code (other plugins) as `opts.actor`; no role check, params validated. */
  async trigger(name: string, params: Record<string, unknown>, opts: { actor: Actor; tenant_id?: string | null }) {
    const job = this.deps.launcher.jobs.get(name);
    if (!job) throw new NotFoundError('job', name, `Job "${name}" is not registered`);
    const { actor } = opts;
    const tenant = opts.tenant_id !== undefined ? opts.tenant_id : hasSystemScope(actor) ? (actor.acting_tenant_id ?? null) : actor.tenant_id;
    const run = await this.deps.launcher.startJob(job, params, { actor, tenant_id: tenant || null, trigger: 'manual', job_type: 'manual', loc: ['params'] });
    return { run_id: String(run._id), status: run.status };
  }

  /** `POST /jobs/run/{job_name}` and `POST /jobs/run`: an administrator's manual run. */
  async triggerAs(actor: Actor, name: string, params: unknown, tenantId?: string, loc: (string | number)[] = ['body', 'parameters']): Promise<RunView> {
    const job = this.deps.access.visibleJob(actor, name);
    const scope = this.deps.access.scope(actor);
    if (tenantId && scope && tenantId !== scope) throw new AccessDeniedError('Runs for another tenant need a system administrator');
    const tenant = scope ?? tenantId ?? null;
    return runView(actor, await this.deps.launcher.startJob(job, params, { actor, tenant_id: tenant, trigger: 'manual', job_type: 'manual', loc }));
  }

  async listRuns(actor: Actor, q: ListRunsQuery): Promise<Page<RunView>> {
    const { Run } = this.deps.models;
    const filter: Record<string, unknown> = { ...this.deps.access.filter(actor) };
    if (q.job_name) filter.job_name = q.job_name;
    if (q.status) filter.status = q.status;
    if (q.tenant_id && !filter.tenant_id) filter.tenant_id = new Types.ObjectId(q.tenant_id);
    for (const k of ['schedule_id', 'chain_run_id', 'parent_job_id'] as const) if (q[k]) filter[k] = new Types.ObjectId(q[k]);
    const [items, total] = await Promise.all([
      Run.find(filter, { logs: 0 }).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<JobRunRecord[]>(),
      Run.countDocuments(filter),
    ]);
    return pageOf(items.map((r) => runView(actor, r, false)), total, q);
  }

  private async findRun(actor: Actor, id: string): Promise<JobRunRecord> {
    const r = await this.deps.models.Run.findOne({ _id: id, ...this.deps.access.filter(actor) }).lean<JobRunRecord>();
    if (!r) throw new NotFoundError('job_run', id);
    return r;
  }

  async getRun(actor: Actor, id: string): Promise<RunView> {
    return runView(actor, await this.findRun(actor, id));
  }

  /** Cancel a pending or running run (and the runs it started: tenants of a fan-out, chain steps). 409 when it has finished. */
  async cancel(actor: Actor, id: string): Promise<RunView> {
    const run = await this.findRun(actor, id);
    const done = await this.cancelRun(run._id, `cancelled by ${isSystemActor(actor) ? 'system' : actor.id}`, actor);
    if (!done) {
      const cur = await this.deps.store.byId(run._id);
      throw new ConflictError(`Run ${id} has already finished (${cur?.status ?? run.status})`, { status: cur?.status ?? run.status });
    }
    return runView(actor, done);
  }

  async cancelRun(id: Types.ObjectId, reason: string, actor: Actor | null = null): Promise<JobRunRecord | null> {
    const done = await this.deps.store.cancel(id, reason, actor);
    if (!done) return null;
    this.dispatcher.abortLocal(String(id));
    for (const c of await this.deps.store.activeChildren(id)) await this.cancelRun(c._id, 'parent run cancelled', actor);
    await this.deps.afterFinish(done);
    return done;
  }

  /** Checks that the actor may see the run (404 otherwise) before a stream of it starts. */
  async checkVisible(actor: Actor, id: string): Promise<void> {
    await this.findRun(actor, id);
  }

  /**
   * A run's log lines and progress as they happen (SSE): existing lines first, then new ones,
   * polling the database every `pollMs` (no change streams needed, works whichever process
   * executes the run). Ends after the run finishes or when `signal` aborts. Lines and the final
   * error are shown as `runView` shows them to this actor.
   */
  async *watch(actor: Actor, id: string, signal: AbortSignal): AsyncGenerator<WatchEvent> {
    await this.findRun(actor, id);
    let sent = 0;
    let lastProgress = '';
    while (!signal.aborted) {
      const r = await this.deps.models.Run.findById(id, {
        logs: { $slice: [sent, WATCH_BATCH] }, status: 1, progress_current: 1, progress_total: 1, progress_message: 1, result: 1, error: 1,
      }).lean<JobRunRecord>();
      if (!r) return;
      const lines = r.logs ?? [];
      for (const l of lines) yield { event: 'log', data: logLineView(actor, l) };
      sent += lines.length;
      const total = r.progress_total ?? null;
      const p = {
        status: r.status, progress_current: r.progress_current ?? 0, progress_total: total, progress_message: r.progress_message ?? null,
        percentage: total ? Math.min(100, Math.round(((r.progress_current ?? 0) / total) * 100)) : null,
      };
      const key = JSON.stringify(p);
      if (key !== lastProgress) {
        lastProgress = key;
        yield { event: 'progress', data: p };
      }
      if (FINISHED.includes(r.status) && lines.length < WATCH_BATCH) {
        yield { event: 'end', data: { status: r.status, result: r.result ?? null, error: failureView(actor, r).error } };
        return;
      }
      if (lines.length < WATCH_BATCH) await sleep(this.deps.pollMs, signal);
    }
  }

  /**
   * `cleanup_job_runs`: finished runs created more than `days` ago, in the actor's tenant scope:
   * `systemActor()` every run (runs without a tenant included), `systemActor(tenantId)` only that
   * tenant's runs (a per-tenant run of the job passes its `ctx.actor`).
   * @throws AccessDeniedError for an actor without system scope, tenant administrators included (nothing deleted)
   */
  async purgeRuns(actor: Actor, days: number): Promise<{ deleted_count: number; cutoff_date: Date }> {
    requireRole(actor, 'system');
    const cutoff = new Date(Date.now() - days * 86_400_000);
    const deleted = await this.deps.store.purgeFinished(this.deps.access.tenancy.filter(actor), cutoff);
    return { deleted_count: deleted, cutoff_date: cutoff };
  }
}
