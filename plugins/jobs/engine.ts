import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Agenda, InMemoryNotificationChannel, type Job } from 'agenda';
import { MongoBackend } from '@agendajs/mongo-backend';
import type { Db } from 'mongodb';
import { Types } from 'mongoose';
import { systemActor } from '../../core/context.ts';
import type { JobRunContext } from '../../core/plugin.ts';
import { FINISHED, type ChainStepDoc, type JobRunRecord, type JobScheduleRecord } from './model.ts';
import { previousOccurrence } from './cron.ts';
import { sleep, type Dispatcher, type JobsService } from './service.ts';

/** Agenda job names: one carries a run id, one repeats per schedule. */
export const AGENDA_RUN = 'jobs:run';
export const AGENDA_SCHEDULE = 'jobs:schedule';
export const AGENDA_COLLECTION = 'agenda_jobs';

/**
 * A lost holder (crash, SIGKILL) is not the job's failure: the attempt runs again elsewhere with
 * the same number. Past this many takeovers the run fails, so a job that kills its process
 * cannot loop forever.
 */
export const MAX_TAKEOVERS = 3;

/** An attempt that must not be retried (invalid result, a chain or fan-out whose part failed). */
class FinalError extends Error {}
class StopSignal extends Error {
  constructor(readonly kind: 'cancelled' | 'lost' | 'timeout', message: string) {
    super(message);
  }
}

/** A result as it will be stored: plain JSON values only; anything else names its path. */
export function checkJson(value: unknown, path = 'result'): string | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : `${path} is ${value}`;
  if (value instanceof Date) return null;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const e = checkJson(v, `${path}[${i}]`);
      if (e) return e;
    }
    return null;
  }
  if (typeof value === 'object' && (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null)) {
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue;
      const e = checkJson(v, `${path}.${k}`);
      if (e) return e;
    }
    return null;
  }
  const kind = typeof value === 'object' ? (value.constructor?.name ?? 'object') : typeof value;
  return `${path} is a ${kind}`;
}

export interface EngineOptions {
  db: Db;
  lockTtlMs: number;
  pollMs: number;
  concurrency: number;
}

/**
 * Executes runs. Agenda (its Mongo backend on the app's connection) dispatches them: one replica
 * gets each Agenda job, a holder that stops touching it loses it after `lockTtlMs`. On top of
 * that every run document carries its own lock (`lock_token`, `lease_until`) so state changes are
 * conditional updates: a late or duplicate worker can never overwrite a cancel or a takeover.
 */
export class Engine implements Dispatcher {
  readonly agenda: Agenda;
  private readonly local = new Map<string, AbortController>();
  /** `host:pid:random`: tells processes, and apps within one process, apart. */
  readonly worker = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private started = false;

  constructor(
    private readonly svc: JobsService,
    private readonly opts: EngineOptions,
  ) {
    this.agenda = new Agenda({
      backend: new MongoBackend({ mongo: opts.db, collection: AGENDA_COLLECTION }),
      // Same-process wake-up on enqueue; other replicas find work by polling every pollMs.
      notificationChannel: new InMemoryNotificationChannel(),
      processEvery: opts.pollMs,
      maxConcurrency: opts.concurrency * 2,
      defaultLockLifetime: opts.lockTtlMs,
    });
    this.agenda.on('error', (err) => svc.log.error({ err }, 'agenda error'));
    this.agenda.define(AGENDA_RUN, (job: Job<{ run_id: string }>) => this.execute(job), {
      concurrency: opts.concurrency, lockLimit: opts.concurrency, lockLifetime: opts.lockTtlMs, removeOnComplete: true,
    });
    this.agenda.define(AGENDA_SCHEDULE, (job: Job<{ schedule_id: string }>) => this.tick(job), {
      concurrency: opts.concurrency, lockLifetime: opts.lockTtlMs,
    });
  }

  private sweeper: NodeJS.Timeout | undefined;

  async start(): Promise<void> {
    await this.agenda.start();
    this.started = true;
    const every = Math.max(this.opts.pollMs * 50, 5000);
    this.sweeper = setInterval(() => {
      this.requeueOrphans(every).catch((err: unknown) => this.svc.log.warn({ err }, 'job sweep failed'));
    }, every);
    this.sweeper.unref();
  }

  /**
   * A run still pending `olderThanMs` after it was created with no Agenda job to carry it (the
   * process died between the insert and the enqueue) is queued again. Extra deliveries are
   * harmless: only one claim of a pending run succeeds.
   */
  async requeueOrphans(olderThanMs: number): Promise<number> {
    const stale = await this.svc.models.Run.find({ status: 'pending', created_at: { $lt: new Date(Date.now() - olderThanMs) } }, { _id: 1 }).limit(100).lean();
    let n = 0;
    const queued = this.opts.db.collection(AGENDA_COLLECTION);
    for (const r of stale) {
      if (await queued.findOne({ name: AGENDA_RUN, 'data.run_id': String(r._id) }, { projection: { _id: 1 } })) continue;
      await this.enqueue(String(r._id));
      n++;
    }
    if (n) this.svc.log.warn({ count: n }, 'queued pending runs that had lost their Agenda job');
    return n;
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    clearInterval(this.sweeper);
    // Runs of this process stop; their leases end now so another replica takes them over at once.
    for (const [id, ac] of this.local) {
      ac.abort(new StopSignal('lost', 'this process is shutting down'));
      await this.svc.models.Run.updateOne({ _id: id, status: 'running', worker: this.worker }, { $set: { lease_until: new Date(0) } });
    }
    await this.agenda.stop(false);
  }

  async enqueue(runId: string, at?: Date): Promise<void> {
    if (at) await this.agenda.schedule(at, AGENDA_RUN, { run_id: runId });
    else await this.agenda.now(AGENDA_RUN, { run_id: runId });
  }

  async syncSchedule(s: JobScheduleRecord): Promise<void> {
    const job = this.agenda.create(AGENDA_SCHEDULE, { schedule_id: String(s._id) });
    job.repeatEvery(s.cron_expression, { timezone: s.timezone, skipImmediate: true }).unique({ 'data.schedule_id': String(s._id) });
    if (s.is_enabled) job.enable();
    else job.disable();
    await job.save();
  }

  async removeSchedule(id: string): Promise<void> {
    await this.agenda.cancel({ name: AGENDA_SCHEDULE, data: { schedule_id: id } });
  }

  abortLocal(runId: string): void {
    this.local.get(runId)?.abort(new StopSignal('cancelled', 'run cancelled'));
  }

  /** A schedule is due: start the run of this occurrence (idempotent per occurrence). */
  private async tick(job: Job<{ schedule_id: string }>): Promise<void> {
    const id = job.attrs.data.schedule_id;
    const s = Types.ObjectId.isValid(id) ? await this.svc.models.Schedule.findById(id).lean<JobScheduleRecord>() : null;
    if (!s) {
      await this.removeSchedule(id);
      return;
    }
    if (!s.is_enabled) return;
    // Agenda fires at the occurrence (never early): the latest occurrence is the one due.
    const at = previousOccurrence(s.cron_expression, s.timezone, new Date(Date.now() + 250));
    await this.svc.fire(s, at, 'schedule');
  }

  /** Claim a run: pending → running, or take over a running one whose holder's lease expired. */
  private async claim(runId: string): Promise<{ run: JobRunRecord; token: string } | null> {
    const { Run } = this.svc.models;
    const token = randomUUID();
    const now = new Date();
    const lease = new Date(now.getTime() + this.opts.lockTtlMs);
    const run = await Run.findOneAndUpdate(
      { _id: runId, status: 'pending' },
      { $set: { status: 'running', started_at: now, lock_token: token, lease_until: lease, worker: this.worker } },
      { returnDocument: 'after' },
    ).lean<JobRunRecord>();
    if (run) return { run, token };
    const cur = await Run.findById(runId, { status: 1, lease_until: 1, lock_token: 1, attempt: 1 }).lean<JobRunRecord>();
    if (!cur || cur.status !== 'running') return null;
    if (cur.lease_until && cur.lease_until > now) {
      // Held by a live worker: look again when its lease would end (it renews it while it runs).
      await this.enqueue(runId, new Date(cur.lease_until.getTime() + 100));
      return null;
    }
    const taken = await Run.findOneAndUpdate(
      { _id: runId, status: 'running', lock_token: cur.lock_token },
      {
        $set: { lock_token: token, lease_until: lease, worker: this.worker },
        $inc: { takeovers: 1 },
        $push: { logs: { timestamp: now, level: 'warning', message: `the worker running attempt ${cur.attempt} stopped renewing its lock; ${this.worker} runs it again`, percentage: null } },
      },
      { returnDocument: 'after' },
    ).lean<JobRunRecord>();
    return taken ? { run: taken, token } : null;
  }

  private async execute(agendaJob: Job<{ run_id: string }>): Promise<void> {
    const runId = agendaJob.attrs.data.run_id;
    if (!Types.ObjectId.isValid(runId)) return;
    const claimed = await this.claim(runId);
    if (!claimed) return;
    const { token } = claimed;
    let run = claimed.run;
    const { Run } = this.svc.models;
    const controller = new AbortController();
    this.local.set(runId, controller);
    let lastRenew = Date.now();
    let beating = false;
    const heartbeat = setInterval(() => {
      if (beating) return;
      beating = true;
      void (async () => {
        const cur = await Run.findById(runId, { status: 1, lock_token: 1 }).lean();
        if (!cur || cur.status !== 'running') controller.abort(new StopSignal('cancelled', 'run cancelled'));
        else if (cur.lock_token !== token) controller.abort(new StopSignal('lost', 'another worker took this run over'));
        else if (Date.now() - lastRenew > this.opts.lockTtlMs / 3) {
          lastRenew = Date.now();
          await Run.updateOne({ _id: runId, lock_token: token }, { $set: { lease_until: new Date(Date.now() + this.opts.lockTtlMs) } });
          await agendaJob.touch();
        }
      })()
        .catch((err: unknown) => this.svc.log.warn({ err, run_id: runId }, 'job heartbeat failed'))
        .finally(() => (beating = false));
    }, this.opts.pollMs);
    const writer = new RunWriter(this.svc, runId, token);
    try {
      if ((run.takeovers ?? 0) > MAX_TAKEOVERS) {
        await this.finish(run, token, writer, { status: 'failed', error: `The workers running this job stopped ${run.takeovers} times (a job that crashes its process?)`, traceback: null });
        return;
      }
      for (;;) {
        const outcome = await this.attempt(run, writer, controller.signal);
        if (controller.signal.aborted) return; // cancelled or taken over: the other party owns the document now
        if (outcome.ok) {
          const bad = checkJson(outcome.value);
          if (bad) await this.finish(run, token, writer, { status: 'failed', error: `The job's result is not JSON-serialisable: ${bad}`, traceback: null });
          else await this.finish(run, token, writer, { status: 'completed', result: outcome.value === undefined ? null : JSON.parse(JSON.stringify(outcome.value)) });
          return;
        }
        const err = outcome.error;
        const message = err instanceof Error ? err.message : String(err);
        if (err instanceof FinalError || run.attempt >= run.max_attempts) {
          await this.finish(run, token, writer, { status: 'failed', error: message, traceback: err instanceof Error ? (err.stack ?? message) : message });
          return;
        }
        const wait = run.retry_delay_ms;
        writer.log(`attempt ${run.attempt} of ${run.max_attempts} failed: ${message}; retrying in ${wait} ms`, 'warning');
        await sleep(wait, controller.signal);
        if (controller.signal.aborted) return;
        await writer.flush();
        const next = await Run.findOneAndUpdate(
          { _id: runId, status: 'running', lock_token: token },
          { $inc: { attempt: 1 }, $set: { lease_until: new Date(Date.now() + this.opts.lockTtlMs) } },
          { returnDocument: 'after' },
        ).lean<JobRunRecord>();
        if (!next) return;
        run = next;
      }
    } finally {
      clearInterval(heartbeat);
      this.local.delete(runId);
      await writer.flush();
    }
  }

  /** One attempt: the job function raced against its timeout and the run's cancellation. */
  private async attempt(run: JobRunRecord, writer: RunWriter, runSignal: AbortSignal): Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> {
    const ac = new AbortController();
    const onRunAbort = () => ac.abort(runSignal.reason);
    runSignal.addEventListener('abort', onRunAbort, { once: true });
    const timer = setTimeout(
      () => ac.abort(new StopSignal('timeout', `Job timed out after ${run.timeout_seconds} s (attempt ${run.attempt})`)),
      run.timeout_seconds * 1000,
    );
    let active = true;
    const tenantId = run.tenant_id ? String(run.tenant_id) : null;
    const ctx: JobRunContext = {
      run_id: String(run._id),
      attempt: run.attempt,
      signal: ac.signal,
      actor: systemActor(tenantId),
      tenant_id: tenantId,
      // A function that ignores its signal may go on writing: only the live attempt's lines count.
      log: (line, level = 'info') => {
        if (active) writer.log(String(line), level);
      },
      progress: (current, total, message) => (active ? writer.progress(current, total ?? null, message ?? null) : undefined),
    };
    const aborted = new Promise<never>((_, reject) => {
      ac.signal.addEventListener('abort', () => reject(ac.signal.reason as Error), { once: true });
    });
    aborted.catch(() => undefined);
    try {
      const work = Promise.resolve().then(() => this.body(run, ctx));
      work.catch(() => undefined);
      return { ok: true, value: await Promise.race([work, aborted]) };
    } catch (error) {
      return { ok: false, error };
    } finally {
      active = false;
      clearTimeout(timer);
      runSignal.removeEventListener('abort', onRunAbort);
    }
  }

  private body(run: JobRunRecord, ctx: JobRunContext): Promise<unknown> {
    if (run.coordinator === 'fanout') return this.fanout(run, ctx);
    if (run.coordinator === 'chain') return this.chain(run, ctx);
    const job = this.svc.job(run.job_name);
    if (!job) throw new FinalError(`Job "${run.job_name}" is no longer registered`);
    const parsed = job.schema.safeParse(run.parameters ?? {});
    if (!parsed.success) throw new FinalError(`Parameters do not match the job's schema: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
    return job.run(ctx, parsed.data);
  }

  /** A per-tenant job: one child run per tenant, each as that tenant's system actor; one tenant's failure leaves the others running. */
  private async fanout(run: JobRunRecord, ctx: JobRunContext): Promise<unknown> {
    const job = this.svc.job(run.job_name);
    if (!job) throw new FinalError(`Job "${run.job_name}" is no longer registered`);
    const tenants = await this.svc.tenants();
    for (const t of tenants) {
      await this.svc.createRun({
        job_name: run.job_name, job_type: run.job_type, parameters: run.parameters, tenant_id: new Types.ObjectId(t), parent_job_id: run._id,
        triggered_by: run.triggered_by, trigger: run.trigger, triggered_by_user: run.triggered_by_user,
        max_attempts: job.max_attempts, timeout_seconds: job.timeout, dedupe_key: `${String(run._id)}:tenant:${t}`,
      });
    }
    ctx.log(`started one run per tenant (${tenants.length})`);
    const report = progressOnChange(ctx);
    for (;;) {
      const children = await this.svc.models.Run.find({ parent_job_id: run._id }, { status: 1, tenant_id: 1, error: 1 }).lean();
      const done = children.filter((c) => FINISHED.includes(c.status));
      await report(done.length, children.length, `${done.length} of ${children.length} tenants done`);
      if (done.length === children.length) {
        const failed = children.filter((c) => c.status !== 'completed');
        const result = { tenants: children.length, completed: children.length - failed.length, failed: failed.length, failed_tenants: failed.map((c) => String(c.tenant_id)) };
        if (failed.length) throw new FinalError(`${failed.length} of ${children.length} tenants failed: ${failed.map((c) => `${String(c.tenant_id)} (${c.error ?? c.status})`).join(', ')}`);
        return result;
      }
      await sleep(this.opts.pollMs, ctx.signal);
      if (ctx.signal.aborted) throw ctx.signal.reason as Error;
    }
  }

  /**
   * A stored chain: steps without dependencies start first, each further step once its
   * dependencies completed (independent ones in parallel, as separate runs). A failed step stops
   * the chain unless its policy is `continue`; `retry` gives it `retries` more attempts first.
   */
  private async chain(run: JobRunRecord, ctx: JobRunContext): Promise<unknown> {
    const steps = (run.chain_steps ?? []) as ChainStepDoc[];
    const policy = (i: number) => steps[i]!.on_failure ?? run.chain_default_on_failure ?? 'stop';
    const index = new Map(steps.map((s, i) => [s.job, i]));
    const report = progressOnChange(ctx);
    for (;;) {
      // The steps: only this coordinator starts runs with it as their parent (indexed, unlike chain_run_id).
      const children = await this.svc.models.Run.find({ parent_job_id: run._id }, { status: 1, chain_index: 1, error: 1 }).lean();
      const byStep = new Map(children.map((c) => [c.chain_index!, c]));
      const status = (i: number) => byStep.get(i)?.status ?? 'not_started';
      const failedStop = steps.findIndex((_, i) => (status(i) === 'failed' || status(i) === 'cancelled') && policy(i) !== 'continue');
      if (failedStop < 0) {
        for (const [i, s] of steps.entries()) {
          if (status(i) !== 'not_started') continue;
          const ready = (s.depends_on ?? []).every((d) => {
            const k = index.get(d)!;
            return status(k) === 'completed' || ((status(k) === 'failed' || status(k) === 'cancelled') && policy(k) === 'continue');
          });
          if (!ready) continue;
          const job = this.svc.job(s.job);
          const retries = policy(i) === 'retry' ? Math.max(1, s.retries ?? 0) : (s.retries ?? 0);
          const created = await this.svc.createRun({
            job_name: s.job, job_type: 'chain', parameters: { ...(s.params as object), ...(run.parameters as object) }, tenant_id: run.tenant_id,
            parent_job_id: run._id, chain_index: i, chain_id: run.chain_id, chain_run_id: run._id, schedule_id: run.schedule_id,
            triggered_by: run.triggered_by, trigger: 'chain', triggered_by_user: run.triggered_by_user,
            max_attempts: 1 + retries, timeout_seconds: job?.timeout ?? 3600, retry_delay_ms: (s.retry_delay_seconds ?? 60) * 1000,
            dedupe_key: `${String(run._id)}:step:${i}`,
          });
          if (created) {
            ctx.log(`step ${i} (${s.job}) started`);
            byStep.set(i, { _id: created._id, status: 'pending', chain_index: i, error: null });
          }
        }
      }
      const active = [...byStep.values()].some((c) => c.status === 'pending' || c.status === 'running');
      await report([...byStep.values()].filter((c) => FINISHED.includes(c.status)).length, steps.length);
      if (!active) {
        const summary = steps.map((s, i) => ({ job: s.job, status: status(i) === 'not_started' ? 'skipped' : status(i), run_id: byStep.get(i) ? String(byStep.get(i)!._id) : null }));
        if (failedStop >= 0) {
          const bad = byStep.get(failedStop);
          throw new FinalError(`step ${failedStop} (${steps[failedStop]!.job}) ${status(failedStop)}: ${bad?.error ?? ''}; chain stopped, skipped: ${summary.filter((x) => x.status === 'skipped').map((x) => x.job).join(', ') || 'none'}`);
        }
        return { steps: summary };
      }
      await sleep(this.opts.pollMs, ctx.signal);
      if (ctx.signal.aborted) throw ctx.signal.reason as Error;
    }
  }

  private async finish(
    run: JobRunRecord, token: string, writer: RunWriter,
    out: { status: 'completed'; result: unknown } | { status: 'failed'; error: string; traceback: string | null },
  ): Promise<void> {
    await writer.flush();
    const now = new Date();
    const ms = run.started_at ? now.getTime() - new Date(run.started_at).getTime() : 0;
    const set: Record<string, unknown> = {
      status: out.status, completed_at: now, duration_ms: ms, duration_seconds: ms / 1000, lock_token: null, lease_until: null,
      ...(out.status === 'completed' ? { result: out.result, error: null, error_traceback: null } : { error: out.error, error_traceback: out.traceback }),
    };
    const line = out.status === 'completed'
      ? { timestamp: now, level: 'info', message: `completed in ${ms} ms`, percentage: null }
      : { timestamp: now, level: 'error', message: `failed: ${out.error}`, percentage: null };
    const done = await this.svc.models.Run.findOneAndUpdate(
      { _id: run._id, status: 'running', lock_token: token },
      { $set: set, $push: { logs: line } },
      { returnDocument: 'after' },
    ).lean<JobRunRecord>();
    // Null: cancelled or taken over meanwhile; this attempt's outcome is discarded.
    if (done) await this.svc.afterFinish(done);
  }
}

/**
 * A coordinator's `ctx.progress` that writes only when (current, total) changed since its last
 * call: a poll that finds nothing new adds no log line (a long run would otherwise fill its log
 * with identical lines and lose the real ones past MAX_LOG_LINES).
 */
function progressOnChange(ctx: JobRunContext): (current: number, total: number, message?: string) => Promise<void> {
  let last: string | undefined;
  return async (current, total, message) => {
    const key = `${current}/${total}`;
    if (key === last) return;
    last = key;
    await ctx.progress(current, total, message);
  };
}

/** Most log lines kept per run; later lines are dropped (the last kept line says so). */
export const MAX_LOG_LINES = 1000;

/** Writes a run's log lines and progress in order, each conditional on still holding the run. */
class RunWriter {
  private chain: Promise<unknown> = Promise.resolve();
  constructor(
    private readonly svc: JobsService,
    private readonly runId: string,
    private readonly token: string,
  ) {}

  private push(update: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<void> {
    const p = this.chain.then(() =>
      this.svc.models.Run.updateOne({ _id: this.runId, lock_token: this.token, status: 'running', ...extra }, update),
    );
    this.chain = p.catch((err: unknown) => this.svc.log.warn({ err, run_id: this.runId }, 'job log write failed'));
    return this.chain.then(() => undefined);
  }

  log(message: string, level: string): void {
    const line = { timestamp: new Date(), level, message: message.slice(0, 10_000), percentage: null };
    void this.push({ $push: { logs: line } }, { [`logs.${MAX_LOG_LINES - 1}`]: { $exists: false } });
  }

  progress(current: number, total: number | null, message: string | null): Promise<void> {
    const pct = total ? Math.max(0, Math.min(100, Math.round((current / total) * 100))) : null;
    const line = { timestamp: new Date(), level: 'progress', message: message ?? `${current}${total ? ` / ${total}` : ''}`, percentage: pct };
    void this.push({ $set: { progress_current: current, progress_total: total, progress_message: message } });
    return this.push({ $push: { logs: line } }, { [`logs.${MAX_LOG_LINES - 1}`]: { $exists: false } });
  }

  flush(): Promise<void> {
    return this.chain.then(() => undefined);
  }
}
