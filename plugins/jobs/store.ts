import { Types, type Model } from 'mongoose';
import { isSystemActor, type Actor } from '../../core/context.ts';
import { currentTraceparent } from '../../core/observability/tracing.ts';
import { OUTBOX_FIELD, type OutboxEntry, type OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import type { Doc } from '../../core/hooks.ts';
import { FINISHED, type JobRunDoc, type JobRunRecord, type RunStatus } from './model.ts';
import { runEventData } from './views.ts';

/** Coordinating runs (per-tenant parents, stored chains) outlive their children: a day, retried on a lost worker only. */
export const COORDINATOR_TIMEOUT_S = 86_400;
const COORDINATOR_ATTEMPTS = 3;

/** Most log lines kept per run; later lines are dropped (the last kept line says so). */
export const MAX_LOG_LINES = 1000;

type Trigger = JobRunDoc['trigger'];

/**
 * What a new run is: everything else of its document follows from this in `runDocument`, the
 * one place a `job_runs` document is put together.
 */
export interface RunSpec {
  job_name: string;
  job_type: JobRunDoc['job_type'];
  parameters: unknown;
  tenant_id: Types.ObjectId | string | null | undefined;
  /**
   * Who started it: an actor with the kind of trigger, or the run it continues (a tenant's run of
   * a fan-out, a chain step, the next job of a schedule's sequence), whose starter it keeps and
   * which becomes its `parent_job_id`.
   */
  origin: { actor: Actor | null; trigger: Trigger } | { parent: JobRunRecord; trigger?: Trigger };
  /** A coordinating run: `fanout` (one child per tenant) or `chain` (a stored chain's steps). */
  coordinator?: 'fanout' | 'chain' | null;
  /** Attempts and time limit; a coordinator without them gets its own (3 attempts, a day). */
  limits?: { max_attempts: number; timeout_seconds: number; retry_delay_ms?: number };
  /** Its own id, known beforehand (a chain run is its own `chain_run_id`). */
  _id?: Types.ObjectId;
  chain_index?: number | null;
  chain_id?: Types.ObjectId | null;
  chain_run_id?: Types.ObjectId | null;
  schedule_id?: Types.ObjectId | string | null;
  /** Job names of a schedule's sequence still to run after this one (stored as `chain_next`). */
  sequence_next?: string[];
  chain_steps?: JobRunDoc['chain_steps'];
  chain_default_on_failure?: JobRunDoc['chain_default_on_failure'];
  /** Makes the start idempotent: a second insert with the same key is refused. */
  dedupe_key?: string;
}

const oid = (id: Types.ObjectId | string) => (typeof id === 'string' ? new Types.ObjectId(id) : id);

/** The `job_runs` document of a new run (fields not named take the model's defaults). */
export function runDocument(spec: RunSpec, retryDelayMs: number): Partial<JobRunDoc> & { _id?: Types.ObjectId } {
  const o = spec.origin;
  let who: Pick<JobRunDoc, 'triggered_by' | 'trigger' | 'triggered_by_user'> & { parent_job_id?: Types.ObjectId };
  if ('parent' in o) {
    who = { triggered_by: o.parent.triggered_by, trigger: o.trigger ?? o.parent.trigger, triggered_by_user: o.parent.triggered_by_user, parent_job_id: o.parent._id };
  } else {
    const byUser = o.actor && !isSystemActor(o.actor) ? o.actor.id : null;
    who = { triggered_by: o.trigger === 'schedule' || o.trigger === 'dependency' ? 'scheduler' : (byUser ?? 'system'), trigger: o.trigger, triggered_by_user: byUser };
  }
  const limits = spec.limits ?? { max_attempts: COORDINATOR_ATTEMPTS, timeout_seconds: COORDINATOR_TIMEOUT_S };
  return {
    ...(spec._id ? { _id: spec._id } : {}),
    job_name: spec.job_name,
    job_type: spec.job_type,
    parameters: spec.parameters ?? {},
    tenant_id: spec.tenant_id ? oid(spec.tenant_id) : null,
    ...who,
    max_attempts: limits.max_attempts,
    timeout_seconds: limits.timeout_seconds,
    retry_delay_ms: limits.retry_delay_ms ?? retryDelayMs,
    coordinator: spec.coordinator ?? null,
    chain_next: spec.sequence_next ?? [],
    ...(spec.chain_index !== undefined ? { chain_index: spec.chain_index } : {}),
    ...(spec.chain_id ? { chain_id: spec.chain_id } : {}),
    ...(spec.chain_run_id ? { chain_run_id: spec.chain_run_id } : {}),
    ...(spec.schedule_id ? { schedule_id: oid(spec.schedule_id) } : {}),
    ...(spec.chain_steps ? { chain_steps: spec.chain_steps } : {}),
    ...(spec.chain_default_on_failure ? { chain_default_on_failure: spec.chain_default_on_failure } : {}),
    ...(spec.dedupe_key ? { dedupe_key: spec.dedupe_key } : {}),
    traceparent: currentTraceparent() ?? null,
  };
}

/** A unique-index violation (E11000). */
export const isDup = (err: unknown): boolean => !!err && typeof err === 'object' && (err as { code?: number }).code === 11000;

const ACTIVE = { $in: ['pending', 'running'] as RunStatus[] };

/**
 * Every read and write of `job_runs` the engine and the coordinators make: state changes are
 * conditional updates on the run's lock (`lock_token`), so a late or duplicate worker never
 * overwrites a cancel or a takeover.
 */
export class RunStore {
  /** `job_runs` as an outbox source of the event log: a run's `job_run.*` events wait in its document until relayed. */
  readonly source: OutboxSource;

  constructor(
    readonly Run: Model<JobRunDoc>,
    private readonly retryDelayMs: number,
    private readonly events: Pick<EventLog, 'stage' | 'committed' | 'outbox'>,
  ) {
    this.source = { name: 'job_runs', model: Run, view: (d: Doc) => runEventData(d as unknown as JobRunRecord) };
  }

  /**
   * Insert a new run; null when its `dedupe_key` exists already (insert-first idempotency). Its
   * `job_run.created` event is inserted with it, in its outbox, with its object frozen (the run
   * changes on).
   */
  async insert(spec: RunSpec): Promise<JobRunRecord | null> {
    const doc = new this.Run(runDocument(spec, this.retryDelayMs));
    (doc as unknown as { initializeTimestamps(): void }).initializeTimestamps();
    const actor = 'actor' in spec.origin ? spec.origin.actor : null;
    doc.set(OUTBOX_FIELD, [this.entry('job_run.created', doc.toObject() as JobRunRecord, actor)]);
    try {
      await doc.save({ timestamps: false });
    } catch (err) {
      if (isDup(err)) return null;
      throw err;
    }
    const run = doc.toObject() as JobRunRecord;
    await this.relay(run);
    return run;
  }

  /** An outbox entry of `run`'s change, with the run after it frozen as the event's object. */
  private entry(type: string, run: JobRunRecord, actor: Actor | null): OutboxEntry {
    return { ...this.events.stage(type, { actor, tenant_id: run.tenant_id ? String(run.tenant_id) : null }), data: runEventData(run) as unknown as Doc };
  }

  byId(id: Types.ObjectId | string): Promise<JobRunRecord | null> {
    return this.Run.findById(id).lean<JobRunRecord>().exec();
  }

  /** Ids of runs still pending `olderThanMs` after they were created (at most 100). */
  async stalePending(olderThanMs: number): Promise<Types.ObjectId[]> {
    const rows = await this.Run.find({ status: 'pending', created_at: { $lt: new Date(Date.now() - olderThanMs) } }, { _id: 1 }).limit(100).lean();
    return rows.map((r) => r._id);
  }

  /** Ends this worker's lease at once so another replica takes the run over. */
  async releaseLease(id: string, worker: string): Promise<void> {
    await this.Run.updateOne({ _id: id, status: 'running', worker }, { $set: { lease_until: new Date(0) } });
  }

  /**
   * pending → running for this worker; null when the run is not pending. The same conditional
   * update stores `job_run.started` in the run's outbox, with the run as started frozen into it.
   */
  async claimPending(id: string, token: string, worker: string, lease: Date): Promise<JobRunRecord | null> {
    const cur = await this.Run.findOne({ _id: id, status: 'pending' }).lean<JobRunRecord>().exec();
    if (!cur) return null;
    const now = new Date();
    const set = { status: 'running' as const, started_at: now, lock_token: token, lease_until: lease, worker, updated_at: now };
    const run = await this.Run.findOneAndUpdate(
      { _id: id, status: 'pending' },
      { $set: set, $push: { [OUTBOX_FIELD]: this.entry('job_run.started', { ...cur, ...set }, null) } },
      { returnDocument: 'after', timestamps: false },
    ).lean<JobRunRecord>().exec();
    if (run) await this.relay(run);
    return run;
  }

  lockState(id: string): Promise<Pick<JobRunRecord, '_id' | 'status' | 'lease_until' | 'lock_token' | 'attempt'> | null> {
    return this.Run.findById(id, { status: 1, lease_until: 1, lock_token: 1, attempt: 1 }).lean<JobRunRecord>().exec();
  }

  /** Takes a running run over from a holder (`fromToken`) whose lease expired, with a warning line. */
  takeOver(id: string, fromToken: string | null | undefined, token: string, worker: string, lease: Date, message: string): Promise<JobRunRecord | null> {
    return this.Run.findOneAndUpdate(
      { _id: id, status: 'running', lock_token: fromToken },
      {
        $set: { lock_token: token, lease_until: lease, worker },
        $inc: { takeovers: 1 },
        $push: { logs: { timestamp: new Date(), level: 'warning', message, percentage: null } },
      },
      { returnDocument: 'after' },
    ).lean<JobRunRecord>().exec();
  }

  async renewLease(id: string, token: string, lease: Date): Promise<void> {
    await this.Run.updateOne({ _id: id, lock_token: token }, { $set: { lease_until: lease } });
  }

  /** The next attempt of a run still held with `token`; null when it is not. */
  nextAttempt(id: string, token: string, lease: Date): Promise<JobRunRecord | null> {
    return this.Run.findOneAndUpdate(
      { _id: id, status: 'running', lock_token: token },
      { $inc: { attempt: 1 }, $set: { lease_until: lease } },
      { returnDocument: 'after' },
    ).lean<JobRunRecord>().exec();
  }

  /**
   * The final state of a run still held with `token`; null when cancelled or taken over meanwhile.
   * The same conditional update stores its `job_run.<status>` event in the run's outbox, so the
   * event exists if and only if the run finished (docs/events.md). Hand the returned run to `relay`
   * afterwards (a process that dies first leaves the event to the sweep).
   */
  async finish(run: Pick<JobRunRecord, '_id' | 'tenant_id'>, token: string, set: Record<string, unknown> & { status: 'completed' | 'failed' }, line: Record<string, unknown>): Promise<JobRunRecord | null> {
    // The system finishes a run (null actor); a finished run never changes again, so the relay reads its object from the document.
    const entry = this.events.stage(`job_run.${set.status}`, { actor: null, tenant_id: run.tenant_id ? String(run.tenant_id) : null });
    const done = await this.Run.findOneAndUpdate(
      { _id: run._id, status: 'running', lock_token: token },
      { $set: set, $push: { logs: line, [OUTBOX_FIELD]: entry } },
      { returnDocument: 'after' },
    ).lean<JobRunRecord>().exec();
    return done;
  }

  /** Hands a run `finish` returned to the event log's relay (resolves once stored when `EVENTS_RELAY_INTERVAL_MS` is 0). */
  relay(done: JobRunRecord): Promise<void> {
    return this.events.committed(this.source, done as unknown as Doc);
  }

  /** A log or progress write of the holder: applies only while it still holds the running run. */
  async write(id: string, token: string, update: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<void> {
    await this.Run.updateOne({ _id: id, lock_token: token, status: 'running', ...extra }, update);
  }

  /** The runs a coordinating run started (indexed by `parent_job_id`). */
  children(parent: Types.ObjectId): Promise<Pick<JobRunRecord, '_id' | 'status' | 'tenant_id' | 'chain_index' | 'error'>[]> {
    return this.Run.find({ parent_job_id: parent }, { status: 1, tenant_id: 1, chain_index: 1, error: 1 }).lean<JobRunRecord[]>().exec();
  }

  activeChildren(parent: Types.ObjectId): Promise<{ _id: Types.ObjectId }[]> {
    return this.Run.find({ parent_job_id: parent, status: ACTIVE }, { _id: 1 }).lean<{ _id: Types.ObjectId }[]>().exec();
  }

  /**
   * pending/running → cancelled with `reason` as its last log line; null when it had finished. The
   * same conditional update stores `job_run.cancelled` in the run's outbox.
   */
  async cancel(id: Types.ObjectId, reason: string, actor: Actor | null = null): Promise<JobRunRecord | null> {
    // Conditional on the status read, so the frozen object is the run as cancelled; a run that
    // started in between is read again.
    for (let tries = 0; tries < 3; tries++) {
      const now = new Date();
      const cur = await this.Run.findOne({ _id: id, status: ACTIVE }, { logs: 0 }).lean<JobRunRecord>();
      if (!cur) return null;
      const ms = cur.started_at ? now.getTime() - cur.started_at.getTime() : null;
      const set = { status: 'cancelled' as const, completed_at: now, duration_ms: ms, duration_seconds: ms === null ? null : ms / 1000, lock_token: null, lease_until: null, updated_at: now };
      const done = await this.Run.findOneAndUpdate(
        { _id: id, status: cur.status },
        {
          $set: set,
          $push: { logs: { timestamp: now, level: 'warning', message: reason, percentage: null }, [OUTBOX_FIELD]: this.entry('job_run.cancelled', { ...cur, ...set }, actor) },
        },
        { returnDocument: 'after', timestamps: false },
      ).lean<JobRunRecord>().exec();
      if (done) {
        await this.relay(done);
        return done;
      }
    }
    return null;
  }

  /** Deletes finished runs created before `cutoff` within `scope` (a tenant filter). */
  async purgeFinished(scope: Record<string, unknown>, cutoff: Date): Promise<number> {
    const res = await this.Run.deleteMany({ ...scope, status: { $in: FINISHED }, created_at: { $lt: cutoff } });
    return res.deletedCount;
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
