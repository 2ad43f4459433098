import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Agenda, InMemoryNotificationChannel, type Job } from 'agenda';
import { MongoBackend } from '@agendajs/mongo-backend';
import type { Db } from 'mongodb';
import { Types } from 'mongoose';
import { systemActor } from '../../core/context.ts';
import type { JobRunContext } from '../../core/plugin.ts';
import type { Logger } from '../../core/logger.ts';
import type { JobMetrics } from './metrics.ts';
import { linkTo, traced } from '../../core/observability/tracing.ts';
import type { JobRunRecord, JobScheduleRecord } from './model.ts';
import type { RegisteredJob } from './registry.ts';
import type { Dispatcher } from './runs.ts';
import { MAX_LOG_LINES, sleep, type RunStore } from './store.ts';
import { FinalError, type Coordinator } from './coordinators.ts';
import { isDatabaseUnavailable } from '../../core/http/map-error.ts';

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

/** Locks younger than this are left alone when lost locks are released: their job may be on its way to this worker. */
const LOCK_GRACE_MS = 5000;

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

/** What the engine needs from the rest of the plugin. */
export interface EngineDeps {
  /** Every read and write of a run. */
  store: RunStore;
  /** A registered job by name. */
  job: (name: string) => RegisteredJob | undefined;
  /** Bodies of coordinating runs: per-tenant fan-out and stored chains. */
  coordinators: Record<'fanout' | 'chain', Coordinator>;
  /** What follows a finished run (schedules). */
  afterFinish: (run: JobRunRecord) => Promise<void>;
  /** A schedule's repeating Agenda job is due; false when the schedule no longer exists. */
  scheduleDue: (scheduleId: string) => Promise<boolean>;
  log: Logger;
  metrics?: JobMetrics;
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
    private readonly deps: EngineDeps,
    private readonly opts: EngineOptions,
  ) {
    this.agenda = new Agenda({
      // Agenda records it as `lastModifiedBy` with every lock it takes: the locks of this worker (releaseLostLocks).
      name: this.worker,
      backend: new MongoBackend({ mongo: opts.db, collection: AGENDA_COLLECTION }),
      // Same-process wake-up on enqueue; other replicas find work by polling every pollMs.
      notificationChannel: new InMemoryNotificationChannel(),
      processEvery: opts.pollMs,
      maxConcurrency: opts.concurrency * 2,
      defaultLockLifetime: opts.lockTtlMs,
    });
    this.agenda.on('error', (err) => {
      if (isDatabaseUnavailable(err)) this.troubleAt = Date.now();
      deps.log.error({ err }, 'agenda error');
    });
    this.agenda.on('fail', (err: unknown) => {
      if (isDatabaseUnavailable(err)) this.troubleAt = Date.now();
    });
    opts.db.client.on('connectionPoolCleared', () => (this.troubleAt = Date.now()));
    this.agenda.define(AGENDA_RUN, (job: Job<{ run_id: string }>) => this.execute(job), {
      concurrency: opts.concurrency, lockLimit: opts.concurrency, lockLifetime: opts.lockTtlMs, removeOnComplete: true,
    });
    this.agenda.define(AGENDA_SCHEDULE, (job: Job<{ schedule_id: string }>) => this.tick(job), {
      concurrency: opts.concurrency, lockLifetime: opts.lockTtlMs,
    });
  }

  private sweeper: NodeJS.Timeout | undefined;
  private lockKeeper: NodeJS.Timeout | undefined;
  /** The orphan sweep under way: stop() waits for it, so it never meets a closed connection. */
  private sweeping: Promise<unknown> | undefined;
  /** When the database last failed under Agenda (0: never), and up to when lost locks are released. */
  private troubleAt = 0;
  private releasedUpTo = 0;

  async start(): Promise<void> {
    await this.agenda.start();
    this.started = true;
    const every = Math.max(this.opts.pollMs * 50, 5000);
    this.sweeper = setInterval(() => {
      if (this.sweeping) return;
      this.sweeping = this.requeueOrphans(every)
        .catch((err: unknown) => this.deps.log.warn({ err }, 'job sweep failed'))
        .finally(() => (this.sweeping = undefined));
    }, every);
    this.sweeper.unref();
    let releasing = false;
    this.lockKeeper = setInterval(() => {
      if (releasing || !this.troubleAt || this.troubleAt < this.releasedUpTo) return;
      releasing = true;
      this.releaseLostLocks()
        .catch((err: unknown) => (isDatabaseUnavailable(err) ? undefined : this.deps.log.warn({ err }, 'releasing lost Agenda locks failed')))
        .finally(() => (releasing = false));
    }, Math.max(this.opts.pollMs, 250));
    this.lockKeeper.unref();
  }

  /**
   * After the database went away, Agenda can leave locks of this worker on jobs it no longer holds:
   * a job whose first state save failed is dropped without an unlock, and a failed final save is
   * ignored. Such a job (a schedule's tick, a run's dispatch) would wait `lockTtlMs` (an hour by
   * default) for the lock to expire. Once the database answers again, the locks this worker took
   * more than LOCK_GRACE_MS before and holds no more are released. Releasing one a moment too early
   * is harmless: a run is claimed once (claimPending), and a schedule starts one run per occurrence.
   */
  async releaseLostLocks(): Promise<number> {
    const started = Date.now();
    const stats = await this.agenda.getRunningStats(true);
    const held = Array.isArray(stats.lockedJobs) ? stats.lockedJobs.map((j) => j._id).filter((id) => id !== undefined).map((id) => new Types.ObjectId(String(id))) : [];
    const res = await this.opts.db.collection(AGENDA_COLLECTION).updateMany(
      { name: { $in: [AGENDA_RUN, AGENDA_SCHEDULE] }, lastModifiedBy: this.worker, lockedAt: { $ne: null, $lt: new Date(started - LOCK_GRACE_MS) }, _id: { $nin: held } },
      { $unset: { lockedAt: true } },
    );
    // Every lock taken before the trouble is older than the grace now: nothing more to release.
    if (started - LOCK_GRACE_MS > this.troubleAt) this.releasedUpTo = started;
    if (res.modifiedCount) this.deps.log.warn({ count: res.modifiedCount }, 'released Agenda locks left behind while the database was away');
    return res.modifiedCount;
  }

  /**
   * A run still pending `olderThanMs` after it was created with no Agenda job to carry it (the
   * process died between the insert and the enqueue) is queued again. Extra deliveries are
   * harmless: only one claim of a pending run succeeds.
   */
  async requeueOrphans(olderThanMs: number): Promise<number> {
    const stale = await this.deps.store.stalePending(olderThanMs);
    let n = 0;
    const queued = this.opts.db.collection(AGENDA_COLLECTION);
    for (const id of stale) {
      if (await queued.findOne({ name: AGENDA_RUN, 'data.run_id': String(id) }, { projection: { _id: 1 } })) continue;
      await this.enqueue(String(id));
      n++;
    }
    if (n) this.deps.log.warn({ count: n }, 'queued pending runs that had lost their Agenda job');
    return n;
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    clearInterval(this.sweeper);
    clearInterval(this.lockKeeper);
    await this.sweeping;
    // Runs of this process stop; their leases end now so another replica takes them over at once.
    for (const [id, ac] of this.local) {
      ac.abort(new StopSignal('lost', 'this process is shutting down'));
      await this.deps.store.releaseLease(id, this.worker);
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
    if (!(await this.deps.scheduleDue(id))) await this.removeSchedule(id);
  }

  /** Claim a run: pending → running, or take over a running one whose holder's lease expired. */
  private async claim(runId: string): Promise<{ run: JobRunRecord; token: string } | null> {
    const { store } = this.deps;
    const token = randomUUID();
    const now = new Date();
    const lease = new Date(now.getTime() + this.opts.lockTtlMs);
    const run = await store.claimPending(runId, token, this.worker, lease);
    if (run) return { run, token };
    const cur = await store.lockState(runId);
    if (!cur || cur.status !== 'running') return null;
    if (cur.lease_until && cur.lease_until > now) {
      // Held by a live worker: look again when its lease would end (it renews it while it runs).
      await this.enqueue(runId, new Date(cur.lease_until.getTime() + 100));
      return null;
    }
    const taken = await store.takeOver(runId, cur.lock_token, token, this.worker, lease, `the worker running attempt ${cur.attempt} stopped renewing its lock; ${this.worker} runs it again`);
    return taken ? { run: taken, token } : null;
  }

  private async execute(agendaJob: Job<{ run_id: string }>): Promise<void> {
    const runId = agendaJob.attrs.data.run_id;
    if (!Types.ObjectId.isValid(runId)) return;
    const claimed = await this.claim(runId);
    if (!claimed) return;
    const { token } = claimed;
    let run = claimed.run;
    this.deps.metrics?.started(run);
    const { store } = this.deps;
    const controller = new AbortController();
    this.local.set(runId, controller);
    let lastRenew = Date.now();
    let beating = false;
    const heartbeat = setInterval(() => {
      if (beating) return;
      beating = true;
      void (async () => {
        const cur = await store.lockState(runId);
        if (!cur || cur.status !== 'running') controller.abort(new StopSignal('cancelled', 'run cancelled'));
        else if (cur.lock_token !== token) controller.abort(new StopSignal('lost', 'another worker took this run over'));
        else if (Date.now() - lastRenew > this.opts.lockTtlMs / 3) {
          lastRenew = Date.now();
          await store.renewLease(runId, token, new Date(Date.now() + this.opts.lockTtlMs));
          await agendaJob.touch();
        }
      })()
        .catch((err: unknown) => this.deps.log.warn({ err, run_id: runId }, 'job heartbeat failed'))
        .finally(() => (beating = false));
    }, this.opts.pollMs);
    const writer = new RunWriter(store, runId, token, this.deps.log);
    try {
      if ((run.takeovers ?? 0) > MAX_TAKEOVERS) {
        await this.finish(run, token, writer, { status: 'failed', error: `The workers running this job stopped ${run.takeovers} times (a job that crashes its process?)`, traceback: null });
        return;
      }
      for (;;) {
        const outcome = await traced(`job ${run.job_name}`, () => this.attempt(run, writer, controller.signal), { root: true, links: linkTo(run.traceparent), attributes: { 'job.name': run.job_name, 'job.run_id': runId, 'job.attempt': run.attempt } });
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
        const next = await store.nextAttempt(runId, token, new Date(Date.now() + this.opts.lockTtlMs));
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
    if (run.coordinator === 'fanout' || run.coordinator === 'chain') return this.deps.coordinators[run.coordinator](run, ctx);
    const job = this.deps.job(run.job_name);
    if (!job) throw new FinalError(`Job "${run.job_name}" is no longer registered`);
    const parsed = job.schema.safeParse(run.parameters ?? {});
    if (!parsed.success) throw new FinalError(`Parameters do not match the job's schema: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
    return job.run(ctx, parsed.data);
  }

  private async finish(
    run: JobRunRecord, token: string, writer: RunWriter,
    out: { status: 'completed'; result: unknown } | { status: 'failed'; error: string; traceback: string | null },
  ): Promise<void> {
    await writer.flush();
    const now = new Date();
    const ms = run.started_at ? now.getTime() - new Date(run.started_at).getTime() : 0;
    const set = {
      status: out.status, completed_at: now, duration_ms: ms, duration_seconds: ms / 1000, lock_token: null, lease_until: null,
      ...(out.status === 'completed' ? { result: out.result, error: null, error_traceback: null } : { error: out.error, error_traceback: out.traceback }),
    };
    const line = out.status === 'completed'
      ? { timestamp: now, level: 'info', message: `completed in ${ms} ms`, percentage: null }
      : { timestamp: now, level: 'error', message: `failed: ${out.error}`, percentage: null };
    const done = await this.deps.store.finish(run, token, set, line);
    // Null: cancelled or taken over meanwhile; this attempt's outcome is discarded.
    if (!done) return;
    this.deps.metrics?.finished(done);
    try {
      // Schedules learn of the outcome first, as before the event log; the event is already safe in the run's outbox.
      await this.deps.afterFinish(done);
    } finally {
      await this.deps.store.relay(done);
    }
  }
}

/** Writes a run's log lines and progress in order, each conditional on still holding the run. */
class RunWriter {
  /** The writes so far, in order: each waits for the one before. */
  private queue: Promise<unknown> = Promise.resolve();
  constructor(
    private readonly store: RunStore,
    private readonly runId: string,
    private readonly token: string,
    private readonly logger: Logger,
  ) {}

  private push(update: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<void> {
    const p = this.queue.then(() => this.store.write(this.runId, this.token, update, extra));
    this.queue = p.catch((err: unknown) => this.logger.warn({ err, run_id: this.runId }, 'job log write failed'));
    return this.queue.then(() => undefined);
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
    return this.queue.then(() => undefined);
  }
}
