import type { Page } from '../../lib/page.ts';
/**
 * Erasure requests: creation with a preview, reading, and execution (inline, or queued as the
 * `execute_erasure` job), with the claim, lease and reservation that make two executions of one
 * request impossible and a crashed one resumable. The work itself is `ErasureRun`. No Koa or
 * GraphQL here.
 */
import { Types } from 'mongoose';
import { AccessDeniedError, ConflictError, NotFoundError } from '../../core/errors.ts';
import { hasSystemScope, isSystemActor, type Actor } from '../../core/context.ts';
import type { Filter } from '../../core/access.ts';
import type { Permissions } from '../../core/permissions.ts';
import { OUTBOX_FIELD, type DocumentChanges, type OutboxSource } from '../events/public/outbox.ts';
import type { Doc } from '../../core/hooks.ts';
import { ERASURE_COLLECTION, erasureView, type CollectionCount, type ErasureRequestRecord, type ErasureRequestView, type PrivacyModels } from './model.ts';
import { findPage, oid, subjectAsActor, type PersonalData, type Subject } from './personal-data.ts';
import { ErasureRun, type ErasureEnv } from './erasure-run.ts';
import type { ErasureListQuery } from './schemas.ts';
import type { PrivacyDeps, RunControl } from './types.ts';

/** The job that executes an erasure request when the jobs plugin is enabled. */
export const ERASURE_JOB = 'execute_erasure';
/** The event type stored when an erasure request completes. */
export const ERASURE_COMPLETED_EVENT = 'erasure_request.completed';

/** What `execute` answers: the request, and whether its execution was queued as a job. */
export interface ErasureExecution {
  request: ErasureRequestView;
  queued: boolean;
}

/** A request that may be claimed: not started, failed, or running under a lease that expired. */
const claimable = (now: Date): Filter => ({ $or: [{ status: { $in: ['pending', 'failed'] } }, { status: 'running', lease_until: { $lt: now } }] });

/** Who may call each erasure operation (administrators, within their tenant): the one declaration its REST route and GraphQL field read. */
export const ERASURE_PERMISSIONS = { create: 'admin', list: 'admin', get: 'admin', execute: 'admin' } as const satisfies Permissions;

export class ErasureService {
  private readonly env: ErasureEnv;
  /** `privacy_erasure_requests` as an outbox source of the event log (the completion's event waits there). */
  readonly source: OutboxSource;

  constructor(
    private readonly models: PrivacyModels,
    private readonly personal: PersonalData,
    private readonly deps: PrivacyDeps,
    consents: DocumentChanges,
  ) {
    this.env = { models, personal, deps, consents };
    this.source = { name: ERASURE_COLLECTION, model: models.ErasureRequest, view: (d: Doc) => erasureView(d as unknown as ErasureRequestRecord) };
  }

  /**
   * Create an erasure request with its preview (counts and field names only). One open request per
   * user: a second is a 409 naming the open one.
   * @throws NotFoundError for a user outside the actor's tenant scope (no preview is computed)
   * @throws AccessDeniedError for the actor's own account, or a user with system scope and an actor without it
   * @throws ConflictError (`details.reason: "last_admin"`) for the last active administrator of a tenant
   */
  async create(actor: Actor, userId: string): Promise<ErasureRequestView> {
    const user = await this.personal.subjectFor(actor, userId);
    if (actor.id === userId) throw new AccessDeniedError('You cannot erase your own account', { reason: 'self' });
    if (hasSystemScope(subjectAsActor(user)) && !hasSystemScope(actor)) throw new AccessDeniedError('Only system administrators erase system administrators');
    await refuseLastAdmin(this.personal, user);
    const preview = await this.preview(user);
    const { ErasureRequest } = this.models;
    try {
      const doc = await ErasureRequest.create({
        tenant_id: user.tenant_id, user_id: user._id, requested_by: isSystemActor(actor) ? null : oid(actor.id),
        status: 'pending', preview, open: true,
      });
      return erasureView(doc.toObject() as ErasureRequestRecord);
    } catch (err) {
      if ((err as { code?: number }).code !== 11000) throw err;
      const open = await ErasureRequest.findOne({ user_id: user._id, open: true }, { _id: 1, status: 1 }).lean();
      throw new ConflictError('An erasure request for this user is already open', { request_id: open ? String(open._id) : null, status: open?.status ?? null });
    }
  }

  /** What an execution will change, counted now: per declaration, then consents, keys and the account. */
  private async preview(user: Subject) {
    const { personal } = this;
    const collections: CollectionCount[] = [];
    for (const d of personal.erasable()) {
      collections.push({ name: d.name, action: d.on_erasure ?? 'depersonalize', count: await personal.modelOf(d).countDocuments(personal.remaining(d, user)), fields: [...d.gdpr_fields] });
    }
    const account = personal.account();
    if (account) collections.push({ name: account.name, action: 'depersonalize', count: personal.isPseudonymous(account, user) ? 0 : 1, fields: [...account.gdpr_fields] });
    const [consents, apiKeys] = await Promise.all([
      this.models.Consent.countDocuments({ user_id: user._id, active: true }),
      account ? personal.identity.ApiKey.countDocuments({ user_id: user._id, revoked_at: null }) : 0,
    ]);
    return { collections, consents, api_keys: apiKeys, account: !!account && user.is_active !== false && !user.is_deleted };
  }

  /** Erasure requests within the actor's tenant scope, newest first. */
  async list(actor: Actor, q: ErasureListQuery): Promise<Page<ErasureRequestView>> {
    const filter: Filter = this.deps.tenancy.filter(actor);
    if (q.status) filter.status = q.status;
    if (q.user_id) filter.user_id = oid(q.user_id);
    return findPage(this.models.ErasureRequest, filter, { created_at: -1, _id: -1 }, q, erasureView);
  }

  /** @throws NotFoundError for an unknown id or one outside the actor's tenant scope */
  async get(actor: Actor, id: string): Promise<ErasureRequestView> {
    return erasureView(await this.find(actor, id));
  }

  private async find(actor: Actor, id: string): Promise<ErasureRequestRecord> {
    const r = await this.models.ErasureRequest.findOne({ _id: id, ...this.deps.tenancy.filter(actor) }).lean<ErasureRequestRecord>();
    if (!r) throw new NotFoundError('erasure_request', id);
    return r;
  }

  /**
   * `POST /privacy/erasure-requests/{id}/execute`. A completed request is returned unchanged (a
   * no-op). With the jobs plugin, the execution is queued as job `execute_erasure` (`queued: true`,
   * progress on the job run); otherwise it runs inline and the finished request is returned.
   * A request is queued at most once: while its lease is live, or it is queued and its run has not
   * claimed it yet (`queued_until`), executing it again is a 409 and triggers nothing.
   * @throws ConflictError while another execution holds or has queued the request
   */
  async execute(actor: Actor, id: string): Promise<ErasureExecution> {
    const r = await this.find(actor, id);
    if (r.status === 'completed') return { request: erasureView(r), queued: false };
    const jobs = this.deps.jobs();
    if (!jobs) return { request: await this.run(actor, id), queued: false };
    const { ErasureRequest } = this.models;
    // Reserve the request before triggering: one conditional update that sees it claimable (as
    // `run` would) and not already queued, so two concurrent executes queue one job.
    const now = new Date();
    const token = new Types.ObjectId();
    const reserved = await ErasureRequest.findOneAndUpdate(
      { _id: r._id, $and: [claimable(now), { $or: [{ queued_until: null }, { queued_until: { $lte: now } }] }] },
      { $set: { queued_until: new Date(now.getTime() + this.deps.settings.leaseMs), queue_token: token } },
      { returnDocument: 'after' },
    ).lean<ErasureRequestRecord>();
    if (!reserved) {
      const current = await ErasureRequest.findOne({ _id: r._id }).lean<ErasureRequestRecord>();
      if (!current) throw new NotFoundError('erasure_request', id);
      if (current.status === 'completed') return { request: erasureView(current), queued: false };
      throw new ConflictError('This erasure request is being executed', { status: current.status });
    }
    let run: { run_id: string };
    try {
      run = await jobs.trigger(ERASURE_JOB, { request_id: id }, { actor, tenant_id: String(r.tenant_id) });
    } catch (err) {
      await ErasureRequest.updateOne({ _id: r._id, queue_token: token }, { $set: { queued_until: null, queue_token: null } });
      throw err;
    }
    // Only the queuing that still owns the request names its run (the run may have claimed it already).
    const updated =
      (await ErasureRequest.findOneAndUpdate({ _id: r._id, queue_token: token }, { $set: { job_run_id: run.run_id } }, { returnDocument: 'after' }).lean<ErasureRequestRecord>()) ??
      (await ErasureRequest.findOne({ _id: r._id }).lean<ErasureRequestRecord>());
    return { request: erasureView(updated ?? reserved), queued: true };
  }

  /**
   * Execute an erasure request (inline, or as the `execute_erasure` job). Claims the request
   * (`pending`/`failed`, or `running` whose lease expired) with one conditional update, then works
   * item by item: every step is idempotent and recorded in the ledger, so a crashed execution
   * resumes where it stopped, and `completed` is written only after a final check finds no
   * personal value left. A completed request is returned unchanged.
   * @throws ConflictError while another execution holds the request; the original error (request `failed`) when a step fails
   */
  async run(actor: Actor, id: string, control: RunControl = {}): Promise<ErasureRequestView> {
    const { ErasureRequest } = this.models;
    const scope = this.deps.tenancy.filter(actor);
    const now = new Date();
    const claimed = await ErasureRequest.findOneAndUpdate(
      { _id: id, ...scope, ...claimable(now) },
      { $set: { status: 'running', lease_until: new Date(now.getTime() + this.deps.settings.leaseMs), queued_until: null, error: null }, $inc: { attempts: 1 } },
      { returnDocument: 'after' },
    ).lean<ErasureRequestRecord>();
    if (!claimed) {
      const current = await ErasureRequest.findOne({ _id: id, ...scope }).lean<ErasureRequestRecord>();
      if (!current) throw new NotFoundError('erasure_request', id);
      if (current.status === 'completed') return erasureView(current);
      throw new ConflictError('This erasure request is being executed', { status: current.status });
    }
    if (!claimed.started_at) await ErasureRequest.updateOne({ _id: claimed._id, started_at: null }, { $set: { started_at: now } });
    try {
      const result = await this.erase(actor, claimed, control);
      // The event travels in the request's outbox, written by the same conditional update as `completed`.
      const entry = this.deps.events.stage(ERASURE_COMPLETED_EVENT, { actor, tenant_id: String(claimed.tenant_id) });
      const done = await ErasureRequest.findOneAndUpdate(
        { _id: claimed._id, status: 'running' },
        { $set: { status: 'completed', completed_at: new Date(), lease_until: null, result }, $unset: { open: 1 }, $push: { [OUTBOX_FIELD]: entry } },
        { returnDocument: 'after' },
      ).lean<ErasureRequestRecord>();
      if (!done) throw new ConflictError('The erasure request changed while it was executed');
      await this.deps.events.committed(this.source, done as unknown as Doc);
      this.deps.log.info({ request_id: id, ...result }, 'erasure request completed');
      return erasureView(done);
    } catch (err) {
      await ErasureRequest.updateOne(
        { _id: claimed._id, status: 'running' },
        { $set: { status: 'failed', lease_until: null, error: err instanceof Error ? err.message : String(err) } },
      );
      this.deps.log.error({ err, request_id: id }, 'erasure request failed');
      throw err;
    }
  }

  /** The work of one execution, step by step; safe to repeat after a crash at any point. */
  private async erase(actor: Actor, req: ErasureRequestRecord, control: RunControl) {
    // Before any step: the account's disable would be refused halfway through, with data already erased.
    await refuseLastAdmin(this.personal, await this.personal.identity.User.findOne({ _id: req.user_id }).lean<Subject>());
    const run = await ErasureRun.start(this.env, actor, req, control);
    await run.revokeConsents();
    await run.eraseLinkedDocuments();
    await run.auditDeletionsOfEarlierRuns();
    await run.revokeApiKeys();
    await run.disableAccount();
    await run.scrubCopies();
    await run.scrubAuditLog();
    await run.depersonalizeAccount();
    await run.finish();
    await run.assertErased();
    return run.result();
  }
}

/**
 * An erasure disables the account, and a tenant keeps at least one active administrator: erasing
 * its last one is refused before anything is written.
 * @throws ConflictError (409, `details.reason: "last_admin"`)
 */
async function refuseLastAdmin(personal: PersonalData, user: Subject | null): Promise<void> {
  if (!user || user.is_deleted || user.is_active === false || !user.roles?.includes('admin')) return;
  const others = await personal.identity.User.countDocuments({
    tenant_id: user.tenant_id, roles: 'admin', is_active: { $ne: false }, is_deleted: { $ne: true }, _id: { $ne: user._id },
  });
  if (others === 0) {
    throw new ConflictError('This user is the last active administrator of their tenant: make another user an administrator before erasing this one', { reason: 'last_admin' });
  }
}
