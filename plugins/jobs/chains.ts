import { Types } from 'mongoose';
import type { z } from 'zod';
import { ConflictError, NotFoundError, ValidationError, zodIssues, type ValidationIssue } from '../../core/errors.ts';
import type { Permissions } from '../../core/permissions.ts';
import { systemActor, type Actor } from '../../core/context.ts';
import { FINISHED, type ChainStepDoc, type JobChainRecord, type JobModels, type JobRunDoc, type JobRunRecord } from './model.ts';
import type { ChainBody, ChainStepInput, chainPatch } from './schemas.ts';
import type { RunLauncher } from './runs.ts';
import { type DocumentChanges, notRemoved } from '../events/public/outbox.ts';
import { isDup, sleep } from './store.ts';
import { FinalError, progressOnChange, type Coordinator } from './coordinators.ts';
import { chainView, runView, type ChainView, type RunView } from './views.ts';

const nameTaken = (name: string | undefined) => new ConflictError(`A chain named "${String(name)}" exists already`, { field: 'name' });

/** How a stored chain's run is started (`ChainService.start`). */
export interface ChainStart {
  actor: Actor | null;
  trigger: JobRunDoc['trigger'];
  tenant_id: string | null;
  schedule_id?: Types.ObjectId;
  dedupe_key?: string;
}

/**
 * Stored chains (`job_chains`, `/jobs/chains`): steps naming registered jobs, with dependencies
 * between them and a failure policy. Their CRUD (system administrators), their coordinating run
 * and the coordinator that starts each step as a child run once its dependencies completed.
 */
/** Who may call each chain operation (system administrators): the one declaration the REST routes and GraphQL field read. */
export const CHAIN_PERMISSIONS = { list: 'system', get: 'system', create: 'system', update: 'system', remove: 'system', run: 'system' } as const satisfies Permissions;

export class ChainService {
  constructor(
    private readonly models: Pick<JobModels, 'Chain' | 'Schedule'>,
    private readonly launcher: RunLauncher,
    private readonly pollMs: number,
    private readonly changes: DocumentChanges,
  ) {}

  private checkSteps(steps: ChainStepInput[], loc: string): void {
    const issues: ValidationIssue[] = [];
    const names = steps.map((s) => s.job);
    steps.forEach((s, i) => {
      const job = this.launcher.jobs.get(s.job);
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

  async list(_actor: Actor): Promise<ChainView[]> {
    return (await this.models.Chain.find(notRemoved).sort({ name: 1 }).lean<JobChainRecord[]>()).map(chainView);
  }

  private async find(_actor: Actor, id: string): Promise<JobChainRecord> {
    const c = await this.models.Chain.findOne({ _id: id, ...notRemoved }).lean<JobChainRecord>();
    if (!c) throw new NotFoundError('job_chain', id);
    return c;
  }

  /** A chain by id for a schedule targeting it (no role check: the schedule's was made when it was saved). */
  async forSchedule(id: Types.ObjectId | null | undefined): Promise<JobChainRecord> {
    const chain = id ? await this.models.Chain.findOne({ _id: id, ...notRemoved }).lean<JobChainRecord>() : null;
    if (!chain) throw new NotFoundError('job_chain', String(id));
    return chain;
  }

  async exists(id: string): Promise<boolean> {
    return !!(await this.models.Chain.exists({ _id: id, ...notRemoved }));
  }

  async get(actor: Actor, id: string): Promise<ChainView> {
    return chainView(await this.find(actor, id));
  }

  async create(actor: Actor, body: ChainBody, isSystem = false): Promise<ChainView> {
    this.checkSteps(body.steps, 'steps');
    try {
      const now = new Date();
      const draft = new this.models.Chain({ ...body, is_system: isSystem, created_by: actor.id, created_at: now, updated_at: now });
      draft.set(this.changes.insert(this.changes.entry('created', actor, null, draft.toObject() as JobChainRecord)));
      const doc = (await draft.save()).toObject() as JobChainRecord;
      await this.changes.committed(doc);
      return chainView(doc);
    } catch (err) {
      if (isDup(err)) throw nameTaken(body.name);
      throw err;
    }
  }

  /** Built-in chains (plugin options): created once, `is_system`, never deleted. */
  async ensureSystemChain(body: ChainBody): Promise<void> {
    if (await this.models.Chain.exists({ name: body.name })) return;
    try {
      await this.create(systemActor(), body, true);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
    }
  }

  async update(actor: Actor, id: string, body: z.output<typeof chainPatch>): Promise<ChainView> {
    const old = await this.find(actor, id);
    if (body.steps) this.checkSteps(body.steps, 'steps');
    // Checked before writing, as for schedules (DocumentDB: findAndModify's unique violation is not E11000).
    if (body.name && (await this.models.Chain.exists({ name: body.name, _id: { $ne: id } }))) throw nameTaken(body.name);
    try {
      const set = { ...body, updated_at: new Date() };
      const entry = this.changes.entry('updated', actor, old, { ...old, ...set } as JobChainRecord);
      const doc = await this.models.Chain.findOneAndUpdate({ _id: old._id, ...notRemoved }, { $set: set, $push: this.changes.push(entry) }, { returnDocument: 'after' }).lean<JobChainRecord>();
      if (!doc) throw new NotFoundError('job_chain', id);
      await this.changes.committed(doc);
      return chainView(doc);
    } catch (err) {
      if (isDup(err)) throw nameTaken(body.name);
      throw err;
    }
  }

  async remove(actor: Actor, id: string): Promise<void> {
    const c = await this.find(actor, id);
    if (c.is_system) throw new ConflictError(`Chain "${c.name}" is a built-in chain and cannot be deleted`, { is_system: true });
    if (await this.models.Schedule.exists({ type: 'chain', chain_id: c._id, ...notRemoved })) throw new ConflictError(`Chain "${c.name}" is the target of a schedule`);
    // The tombstone frees the name at once: a new chain may take it before the relay removes it.
    const { $set, $push } = this.changes.remove(this.changes.entry('deleted', actor, c, c));
    const tomb = await this.models.Chain.findOneAndUpdate({ _id: c._id, ...notRemoved }, { $set: { ...$set, name: `${c.name} (deleted ${String(c._id)})` }, $push }, { returnDocument: 'after' }).lean<JobChainRecord>();
    if (!tomb) throw new NotFoundError('job_chain', id);
    await this.changes.committed(tomb);
  }

  /** `POST /jobs/chains/{id}/run`: the chain's coordinating run. */
  async run(actor: Actor, id: string, params: Record<string, unknown>): Promise<RunView> {
    const chain = await this.find(actor, id);
    return runView(actor, await this.start(chain, params, { actor, trigger: 'manual', tenant_id: null }));
  }

  /** The coordinating run of a stored chain (its steps run as child runs, see `coordinator`). 409 when its dedupe key exists. */
  async start(chain: JobChainRecord, params: Record<string, unknown>, o: ChainStart): Promise<JobRunRecord> {
    const issues: ValidationIssue[] = [];
    chain.steps.forEach((s, i) => {
      const job = this.launcher.jobs.get(s.job);
      if (!job) issues.push({ loc: ['steps', i, 'job'], msg: `job "${s.job}" is not registered`, type: 'not_found' });
      else {
        const res = job.schema.safeParse({ ...(s.params as object), ...params });
        if (!res.success) issues.push(...zodIssues(['params'], res.error.issues));
      }
    });
    if (issues.length) throw new ValidationError(issues, `Chain "${chain.name}" cannot run with these parameters`);
    // Its own id is its chain_run_id: chosen here so the run is inserted complete.
    const id = new Types.ObjectId();
    const run = await this.launcher.create({
      _id: id,
      chain_run_id: id,
      job_name: chain.name,
      job_type: 'chain',
      parameters: params,
      chain_id: chain._id,
      tenant_id: o.tenant_id,
      origin: { actor: o.actor, trigger: o.trigger },
      coordinator: 'chain',
      chain_steps: chain.steps,
      chain_default_on_failure: chain.default_on_failure,
      ...(o.schedule_id ? { schedule_id: o.schedule_id } : {}),
      ...(o.dedupe_key ? { dedupe_key: o.dedupe_key } : {}),
    });
    if (!run) throw new ConflictError('This run exists already');
    return run;
  }

  /**
   * The body of a chain's coordinating run: steps without dependencies start first, each further
   * step once its dependencies completed (independent ones in parallel, as separate runs). A
   * failed step stops the chain unless its policy is `continue`; `retry` gives it `retries` more
   * attempts first.
   */
  readonly coordinator: Coordinator = async (run, ctx) => {
    const steps = (run.chain_steps ?? []) as ChainStepDoc[];
    const policy = (i: number) => steps[i]!.on_failure ?? run.chain_default_on_failure ?? 'stop';
    const index = new Map(steps.map((s, i) => [s.job, i]));
    const report = progressOnChange(ctx);
    for (;;) {
      // The steps: only this coordinator starts runs with it as their parent (indexed, unlike chain_run_id).
      const children = await this.launcher.store.children(run._id);
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
          const job = this.launcher.jobs.get(s.job);
          const retries = policy(i) === 'retry' ? Math.max(1, s.retries ?? 0) : (s.retries ?? 0);
          const created = await this.launcher.create({
            job_name: s.job, job_type: 'chain', parameters: { ...(s.params as object), ...(run.parameters as object) }, tenant_id: run.tenant_id,
            origin: { parent: run, trigger: 'chain' }, chain_index: i, chain_id: run.chain_id, chain_run_id: run._id, schedule_id: run.schedule_id,
            limits: { max_attempts: 1 + retries, timeout_seconds: job?.timeout ?? 3600, retry_delay_ms: (s.retry_delay_seconds ?? 60) * 1000 },
            dedupe_key: `${String(run._id)}:step:${i}`,
          });
          if (created) {
            ctx.log(`step ${i} (${s.job}) started`);
            byStep.set(i, { _id: created._id, status: 'pending', chain_index: i, error: null, tenant_id: created.tenant_id });
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
      await sleep(this.pollMs, ctx.signal);
      if (ctx.signal.aborted) throw ctx.signal.reason as Error;
    }
  };
}
