import { Readable } from 'node:stream';
import { Types, type Connection, type Model } from 'mongoose';
import { AccessDeniedError, ConflictError, NotFoundError, ValidationError } from '../../core/errors.ts';
import { isAdmin, isSystemActor, hasSystemScope, requestOf, systemActor, type AuthUser } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { tenantFilter, type Filter } from '../../core/identity/guards.ts';
import { identityModels, type IdentityModels } from '../../core/identity/models.ts';
import type { IdentityService } from '../../core/identity/service.ts';
import type { Logger } from '../../core/logger.ts';
import type { JobRunner, PersonalDataDeclaration } from '../../core/plugin.ts';
import type { AuditActor, AuditLogger } from '../audit/index.ts';
import {
  CONSENT_COLLECTION, consentView, erasureView,
  type CollectionCount, type ConsentRecord, type ErasureItemDoc, type ConsentView, type ErasureRequestRecord, type ErasureRequestView, type PrivacyModels,
} from './model.ts';
import type { ConsentsQuery, ErasureListQuery, GrantInput } from './schemas.ts';

/** The job that executes an erasure request when the jobs plugin is enabled. */
export const ERASURE_JOB = 'execute_erasure';

export interface PrivacySettings {
  /** Neutral value of required text fields, the user's name and scrubbed audit values. */
  pseudonym: string;
  /** Domain of the pseudonymous email an erased user keeps (`erased-<id>@<domain>`). */
  emailDomain: string;
  /** A running execution not renewed for this long is taken to have crashed and may be resumed. */
  leaseMs: number;
  /** Allowed consent purposes; empty = any well-formed purpose. */
  purposes: readonly string[];
}

export interface PrivacyDeps {
  db: Connection;
  identity: IdentityService;
  /** Looked up per call: audit and jobs are optional plugins. */
  audit: () => AuditLogger | undefined;
  jobs: () => JobRunner | undefined;
  declarations: () => readonly PersonalDataDeclaration[];
  log: Logger;
  settings: PrivacySettings;
}

/** Progress and cancellation of one execution (a job's run context, or nothing inline). */
export interface RunControl {
  progress?: (current: number, total?: number | null, message?: string | null) => void | Promise<void>;
  signal?: AbortSignal;
}

type Page<T> = { items: T[]; total: number; page: number; per_page: number };
type ErasureAction = 'depersonalize' | 'delete' | 'revoke_consent' | 'disable';
type ErasureItemRecord = ErasureItemDoc & { _id: Types.ObjectId };

/** Least interval between two progress reports of one execution. */
const PROGRESS_MS = 250;

/**
 * A service account drove the change: the one case where a depersonalization entry names its actor
 * (spec document 2, audit rule 3). Service accounts are the non-human system users
 * (`is_system_user`), never the `systemActor()` of jobs, and never a human administrator.
 */
export const auditActorOf = (caller: AuthUser): AuditActor | null =>
  caller.is_system_user && !isSystemActor(caller) ? { id: caller.id, name: caller.name } : null;

const oid = (v: unknown) => new Types.ObjectId(String(v));
/** A subject or tenant reference stored as an object id or as its hex string. */
const either = (id: Types.ObjectId) => ({ $in: [id, String(id)] });

/** A user's value of an account field is its pseudonymised value; an empty object or array accepts a missing value too. */
const isNeutral = (value: unknown, neutral: unknown): boolean => {
  if (neutral && typeof neutral === 'object' && Object.keys(neutral).length === 0) return !value || (typeof value === 'object' && Object.keys(value).length === 0);
  return neutral === null ? value == null : value === neutral;
};

const omit = (doc: Doc, fields: readonly string[]): Doc => {
  const out: Doc = { ...doc };
  for (const f of fields) delete out[f];
  return out;
};

/**
 * Consents, the right of access (export) and the erasure flow (spec document 2, audit rule 3).
 * Works only from the personal-data declarations every plugin contributes (`kernel.personalData()`):
 * it never knows a plugin's collections. No Koa or GraphQL here.
 */
export class PrivacyService {
  private readonly identityModels: IdentityModels;

  constructor(
    private readonly models: PrivacyModels,
    private readonly deps: PrivacyDeps,
  ) {
    this.identityModels = identityModels(deps.db);
  }

  // --- declarations ------------------------------------------------------------------------

  /** @throws Error when a declaration names a model nobody registered (checked at start-up). */
  checkDeclarations(): void {
    for (const d of this.deps.declarations()) {
      if (!this.deps.db.models[d.model]) throw new Error(`Personal data "${d.name}": model "${d.model}" is not registered on the connection`);
    }
  }

  private modelOf(d: PersonalDataDeclaration): Model<Doc> {
    return this.deps.db.models[d.model] as Model<Doc>;
  }

  /** Documents of a declaration linked to the subject. A non-system subject's documents are looked for in its own tenant only. */
  private linkFilter(d: PersonalDataDeclaration, subject: { _id: Types.ObjectId; tenant_id: Types.ObjectId; is_system_user?: boolean | null; scope?: string | null }): Filter {
    const filter: Filter = { [d.subject_field ?? 'created_by']: either(subject._id) };
    const tenantField = d.tenant_field === undefined ? 'tenant_id' : d.tenant_field;
    const systemSubject = subject.is_system_user || subject.scope === 'system';
    if (tenantField && !systemSubject) filter[tenantField] = either(subject.tenant_id);
    return filter;
  }

  /** The declaration of the account itself (`on_erasure: 'account'`, identity's `users`); undefined when nobody declares it. */
  private account(): PersonalDataDeclaration | undefined {
    return this.deps.declarations().find((d) => d.on_erasure === 'account');
  }

  /** Declarations of documents linked to the subject: every one but the account's. */
  private linked() {
    return this.deps.declarations().filter((d): d is PersonalDataDeclaration & { on_erasure?: 'depersonalize' | 'delete' } => d.on_erasure !== 'account');
  }

  /** Linked declarations an erasure changes: every `delete` one, and `depersonalize` ones with fields. */
  private erasable() {
    return this.linked().filter((d) => (d.on_erasure ?? 'depersonalize') === 'delete' || d.gdpr_fields.length > 0);
  }

  /**
   * The erased account's value of each declared field: a unique pseudonymous `email`, the pseudonym
   * as `name`, the declared neutral value (null by default) for any other field.
   */
  private accountValues(d: PersonalDataDeclaration, userId: Types.ObjectId): Doc {
    const value = (f: string) => {
      if (f === 'email') return this.pseudoEmail(userId);
      if (f === 'name') return this.deps.settings.pseudonym;
      return d.neutral && f in d.neutral ? d.neutral[f] : null;
    };
    return Object.fromEntries(d.gdpr_fields.map((f) => [f, value(f)]));
  }

  private neutralOf(d: PersonalDataDeclaration): Doc {
    return Object.fromEntries(d.gdpr_fields.map((f) => [f, d.neutral && f in d.neutral ? d.neutral[f] : null]));
  }

  // --- consents ----------------------------------------------------------------------------

  /**
   * Grant the caller's consent to a purpose. Idempotent: while a consent to the purpose is active,
   * granting again returns it (`created: false`) and writes nothing.
   */
  async grantConsent(caller: AuthUser, input: GrantInput, defaultSource: string, loc: readonly string[] = ['body']): Promise<{ consent: ConsentView; created: boolean }> {
    const userId = this.personOf(caller);
    const { purposes } = this.deps.settings;
    if (purposes.length && !purposes.includes(input.purpose))
      throw new ValidationError([{ loc: [...loc, 'purpose'], msg: `must be one of: ${purposes.join(', ')}`, type: 'invalid_value' }]);
    const { Consent } = this.models;
    try {
      const doc = await Consent.create({
        user_id: userId, tenant_id: oid(caller.tenant_id), purpose: input.purpose, granted_at: new Date(),
        revoked_at: null, source: input.source ?? defaultSource, active: true,
      });
      const consent = doc.toObject() as ConsentRecord;
      await this.deps.audit()?.logInsert({ resource: CONSENT_COLLECTION, item_id: consent._id, user: caller, tenant_id: consent.tenant_id, ip: requestOf(caller)?.ip ?? null });
      return { consent: consentView(consent), created: true };
    } catch (err) {
      if ((err as { code?: number }).code !== 11000) throw err;
      const existing = await Consent.findOne({ user_id: userId, purpose: input.purpose, active: true }).lean<ConsentRecord>();
      if (!existing) throw err;
      return { consent: consentView(existing), created: false };
    }
  }

  /**
   * Consents of the caller, or (administrators) of `user_id` in their tenant. Another tenant's
   * user has no consents as far as a tenant administrator can tell.
   */
  async listConsents(caller: AuthUser, q: ConsentsQuery): Promise<Page<ConsentView>> {
    const self = !q.user_id || q.user_id === caller.id;
    if (!self && !isAdmin(caller)) throw new AccessDeniedError("Only administrators read other users' consents");
    const filter: Filter = self ? { user_id: this.personOf(caller) } : { user_id: oid(q.user_id), ...tenantFilter(caller, true) };
    if (q.purpose) filter.purpose = q.purpose;
    if (q.active !== undefined) filter.active = q.active ? true : { $ne: true };
    const { Consent } = this.models;
    const [items, total] = await Promise.all([
      Consent.find(filter).sort({ granted_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<ConsentRecord[]>(),
      Consent.countDocuments(filter),
    ]);
    return { items: items.map(consentView), total, page: q.page, per_page: q.per_page };
  }

  /** Revoke one of the caller's own consents. Idempotent: an already revoked consent is returned unchanged. */
  async revokeConsent(caller: AuthUser, id: string): Promise<ConsentView> {
    const userId = this.personOf(caller);
    const { Consent } = this.models;
    const now = new Date();
    const old = await Consent.findOneAndUpdate({ _id: id, user_id: userId, active: true }, { $set: { revoked_at: now }, $unset: { active: 1 } }, { returnDocument: 'before' }).lean<ConsentRecord>();
    if (!old) {
      const existing = await Consent.findOne({ _id: id, user_id: userId }).lean<ConsentRecord>();
      if (!existing) throw new NotFoundError('consent', id);
      return consentView(existing);
    }
    const doc = { ...old, revoked_at: now, active: undefined };
    await this.deps.audit()?.logUpdate({
      resource: CONSENT_COLLECTION, item_id: old._id, user: caller, tenant_id: old.tenant_id, ip: requestOf(caller)?.ip ?? null,
      old: old as unknown as Doc, doc: doc as unknown as Doc,
    });
    return consentView(doc);
  }

  /** Consents belong to people: the `systemActor()` has none. */
  private personOf(caller: AuthUser): Types.ObjectId {
    if (isSystemActor(caller) || !Types.ObjectId.isValid(caller.id)) throw new AccessDeniedError('Consents belong to users; the system actor has none');
    return oid(caller.id);
  }

  // --- subject -----------------------------------------------------------------------------

  /**
   * The user an administrator (or the user themself) may act on: in the caller's tenant (system
   * callers: anywhere), soft-deleted users included (their data is still held).
   * @throws NotFoundError outside the caller's scope (the same answer as for an unknown id)
   */
  private async subjectFor(caller: AuthUser, userId: string) {
    const user = await this.identityModels.User.findOne({ _id: userId, ...tenantFilter(caller, true) }).lean();
    if (!user) throw new NotFoundError('user', userId);
    return user;
  }

  // --- right of access ---------------------------------------------------------------------

  /**
   * `GET /privacy/users/{user_id}/export`: the user's account, consents and every document of every
   * declaration linked to them (soft-deleted ones included), minus each declaration's
   * `export_exclude`, as one JSON object streamed from database cursors.
   * @throws AccessDeniedError for a non-administrator asking for someone else; NotFoundError outside the caller's tenant
   */
  async exportData(caller: AuthUser, userId: string): Promise<{ stream: Readable; filename: string; contentType: string }> {
    if (caller.id !== userId && !isAdmin(caller)) throw new AccessDeniedError("Only administrators export other users' data");
    const user = await this.subjectFor(caller, userId);
    const declarations = this.linked();
    const { Consent } = this.models;
    const modelOf = (d: PersonalDataDeclaration) => this.modelOf(d);
    const linkFilter = (d: PersonalDataDeclaration) => this.linkFilter(d, user);
    const account = {
      id: String(user._id), email: user.email, name: user.name, tenant_id: String(user.tenant_id), roles: user.roles, features: user.features,
      attributes: user.attributes ?? {}, is_active: user.is_active !== false, is_deleted: !!user.is_deleted, created_at: (user as { created_at?: Date }).created_at ?? null,
    };
    async function* body(): AsyncGenerator<string> {
      yield `{"generated_at":${JSON.stringify(new Date())},"user":${JSON.stringify(account)},"consents":[`;
      let sep = '';
      for await (const c of Consent.find({ user_id: user._id }).sort({ granted_at: 1, _id: 1 }).lean<ConsentRecord[]>().cursor()) {
        yield sep + JSON.stringify(consentView(c));
        sep = ',';
      }
      yield '],"collections":{';
      let first = true;
      for (const d of declarations) {
        yield `${first ? '' : ','}${JSON.stringify(d.name)}:[`;
        first = false;
        sep = '';
        for await (const doc of modelOf(d).find(linkFilter(d)).sort({ _id: 1 }).lean<Doc[]>().cursor({ batchSize: 500 })) {
          yield sep + JSON.stringify(omit(doc, d.export_exclude ?? []));
          sep = ',';
        }
        yield ']';
      }
      yield '}}';
    }
    const stamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-');
    return { stream: Readable.from(body()), filename: `personal-data-${userId}-${stamp}.json`, contentType: 'application/json; charset=utf-8' };
  }

  // --- erasure requests --------------------------------------------------------------------

  /**
   * Create an erasure request with its preview (counts and field names only). One open request per
   * user: a second is a 409 naming the open one.
   * @throws NotFoundError for a user outside the caller's tenant (no preview is computed)
   * @throws AccessDeniedError for the caller's own account, or a system user and a non-system caller
   */
  async createErasure(caller: AuthUser, userId: string): Promise<ErasureRequestView> {
    if (!isAdmin(caller)) throw new AccessDeniedError('Administrator role required');
    const user = await this.subjectFor(caller, userId);
    if (caller.id === userId) throw new AccessDeniedError('You cannot erase your own account', { reason: 'self' });
    if ((user.is_system_user || user.scope === 'system') && !hasSystemScope(caller))
      throw new AccessDeniedError('Only system administrators erase system administrators');
    const preview = await this.preview(user);
    const { ErasureRequest } = this.models;
    try {
      const doc = await ErasureRequest.create({
        tenant_id: user.tenant_id, user_id: user._id, requested_by: isSystemActor(caller) ? null : oid(caller.id),
        status: 'pending', preview, open: true,
      });
      return erasureView(doc.toObject() as ErasureRequestRecord);
    } catch (err) {
      if ((err as { code?: number }).code !== 11000) throw err;
      const open = await ErasureRequest.findOne({ user_id: user._id, open: true }, { _id: 1, status: 1 }).lean();
      throw new ConflictError('An erasure request for this user is already open', { request_id: open ? String(open._id) : null, status: open?.status ?? null });
    }
  }

  private pseudoEmail(userId: Types.ObjectId): string {
    return `erased-${String(userId)}@${this.deps.settings.emailDomain}`;
  }

  /** Linked documents that still hold a personal value: every one for `delete`, those with a non-neutral field for `depersonalize`. */
  private remaining(d: PersonalDataDeclaration, user: Parameters<PrivacyService['linkFilter']>[1]): Filter {
    const filter = this.linkFilter(d, user);
    if ((d.on_erasure ?? 'depersonalize') === 'delete') return filter;
    const neutral = this.neutralOf(d);
    return { ...filter, $or: d.gdpr_fields.map((f) => ({ [f]: { $ne: neutral[f] } })) };
  }

  /** The user document holds nothing personal any more: every declared account field has its pseudonymised value. */
  private isPseudonymous(d: PersonalDataDeclaration, user: { _id: Types.ObjectId }): boolean {
    const values = this.accountValues(d, user._id);
    return d.gdpr_fields.every((f) => isNeutral((user as Doc)[f], values[f]));
  }

  private async preview(user: { _id: Types.ObjectId; tenant_id: Types.ObjectId; email: string; name: string; attributes?: unknown; is_active?: boolean | null; is_deleted?: boolean | null }) {
    const collections: CollectionCount[] = [];
    for (const d of this.erasable()) {
      collections.push({ name: d.name, action: d.on_erasure ?? 'depersonalize', count: await this.modelOf(d).countDocuments(this.remaining(d, user)), fields: [...d.gdpr_fields] });
    }
    const account = this.account();
    if (account) collections.push({ name: account.name, action: 'depersonalize', count: this.isPseudonymous(account, user) ? 0 : 1, fields: [...account.gdpr_fields] });
    const [consents, apiKeys] = await Promise.all([
      this.models.Consent.countDocuments({ user_id: user._id, active: true }),
      account ? this.identityModels.ApiKey.countDocuments({ user_id: user._id, revoked_at: null }) : 0,
    ]);
    return { collections, consents, api_keys: apiKeys, account: !!account && user.is_active !== false && !user.is_deleted };
  }

  async listErasures(caller: AuthUser, q: ErasureListQuery): Promise<Page<ErasureRequestView>> {
    if (!isAdmin(caller)) throw new AccessDeniedError('Administrator role required');
    const filter: Filter = tenantFilter(caller, true);
    if (q.status) filter.status = q.status;
    if (q.user_id) filter.user_id = oid(q.user_id);
    const { ErasureRequest } = this.models;
    const [items, total] = await Promise.all([
      ErasureRequest.find(filter).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<ErasureRequestRecord[]>(),
      ErasureRequest.countDocuments(filter),
    ]);
    return { items: items.map(erasureView), total, page: q.page, per_page: q.per_page };
  }

  async getErasure(caller: AuthUser, id: string): Promise<ErasureRequestView> {
    return erasureView(await this.findErasure(caller, id));
  }

  private async findErasure(caller: AuthUser, id: string): Promise<ErasureRequestRecord> {
    if (!isAdmin(caller)) throw new AccessDeniedError('Administrator role required');
    const r = await this.models.ErasureRequest.findOne({ _id: id, ...tenantFilter(caller, true) }).lean<ErasureRequestRecord>();
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
  async executeErasure(caller: AuthUser, id: string): Promise<{ request: ErasureRequestView; queued: boolean }> {
    const r = await this.findErasure(caller, id);
    if (r.status === 'completed') return { request: erasureView(r), queued: false };
    const jobs = this.deps.jobs();
    if (!jobs) return { request: await this.runErasure(caller, id), queued: false };
    const { ErasureRequest } = this.models;
    // Reserve the request before triggering: one conditional update that sees it claimable (as
    // `runErasure` would) and not already queued, so two concurrent executes queue one job.
    const now = new Date();
    const token = new Types.ObjectId();
    const reserved = await ErasureRequest.findOneAndUpdate(
      {
        _id: r._id,
        $and: [
          { $or: [{ status: { $in: ['pending', 'failed'] } }, { status: 'running', lease_until: { $lt: now } }] },
          { $or: [{ queued_until: null }, { queued_until: { $lte: now } }] },
        ],
      },
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
      run = await jobs.trigger(ERASURE_JOB, { request_id: id }, { actor: caller, tenant_id: String(r.tenant_id) });
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
  async runErasure(actor: AuthUser, id: string, control: RunControl = {}): Promise<ErasureRequestView> {
    const { ErasureRequest } = this.models;
    const scope = tenantFilter(actor, true);
    const now = new Date();
    const claimed = await ErasureRequest.findOneAndUpdate(
      { _id: id, ...scope, $or: [{ status: { $in: ['pending', 'failed'] } }, { status: 'running', lease_until: { $lt: now } }] },
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
      const done = await ErasureRequest.findOneAndUpdate(
        { _id: claimed._id, status: 'running' },
        { $set: { status: 'completed', completed_at: new Date(), lease_until: null, result }, $unset: { open: 1 } },
        { returnDocument: 'after' },
      ).lean<ErasureRequestRecord>();
      if (!done) throw new ConflictError('The erasure request changed while it was executed');
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

  /** The work of one execution; safe to repeat after a crash at any point. */
  private async erase(actor: AuthUser, req: ErasureRequestRecord, control: RunControl) {
    const { Consent, ErasureRequest, ErasureItem } = this.models;
    const { User, ApiKey } = this.identityModels;
    const { settings, identity } = this.deps;
    const audit = this.deps.audit();
    const auditUser = auditActorOf(actor);
    const user = await User.findOne({ _id: req.user_id }).lean();
    if (!user) throw new NotFoundError('user', String(req.user_id));
    const tenantId = String(user.tenant_id);
    const total = (req.preview?.collections ?? []).reduce((n, c) => n + c.count, 0) + (req.preview?.consents ?? 0);
    let done = 0;
    let lastRenew = Date.now();
    /** A long execution keeps its claim; an execution that stops renewing is taken over after the lease. */
    const renew = async (force = false) => {
      if (control.signal?.aborted) throw new Error('Erasure aborted');
      if (!force && Date.now() - lastRenew <= settings.leaseMs / 3) return;
      lastRenew = Date.now();
      await ErasureRequest.updateOne({ _id: req._id, status: 'running' }, { $set: { lease_until: new Date(lastRenew + settings.leaseMs) } });
    };
    let lastProgress = 0;
    /** Progress is reported at most every `PROGRESS_MS` (a job runner may write each report), and always at the end. */
    const step = async (message: string, last = false) => {
      done += 1;
      if (last || Date.now() - lastProgress >= PROGRESS_MS) {
        lastProgress = Date.now();
        await control.progress?.(done, Math.max(total, done), message);
      }
      await renew();
    };
    /** The ledger row of an item, created on first sight (before the item is changed). */
    const ledger = async (resource: string, itemId: Types.ObjectId, action: ErasureAction, extra: { fields?: string[]; tenant_id?: unknown; snapshot?: Doc | null } = {}) => {
      const key = { request_id: req._id, resource, item_id: itemId, action };
      const insert = { fields: extra.fields ?? [], tenant_id: extra.tenant_id ? oid(extra.tenant_id) : null, snapshot: extra.snapshot ?? null, logged: false };
      // The common case (a new row) takes one round trip; only a row left by an earlier run is read back.
      // (findOneAndUpdate's `lastErrorObject.updatedExisting` is not relied on: the database stand-in reports it unreliably for a no-op upsert.)
      const res = await ErasureItem.updateOne(key, { $setOnInsert: insert }, { upsert: true });
      const created = res.upsertedCount > 0;
      const row: ErasureItemRecord = created ? { ...key, ...insert, _id: res.upsertedId as unknown as Types.ObjectId } as ErasureItemRecord : (await ErasureItem.findOne(key).lean<ErasureItemRecord>())!;
      return {
        row,
        /** True when this run created the row: the item was not touched by an earlier (crashed) run. */
        created,
        logged: async () => void (await ErasureItem.updateOne({ _id: row._id }, { $set: { logged: true } })),
        /** The item needed no change (already neutral before this request): no ledger row, no entry. */
        drop: async () => void (await ErasureItem.deleteOne({ _id: row._id })),
      };
    };
    /**
     * Audit an item once: when this run changed it, or when an earlier run created its ledger row
     * (it may have changed it and crashed before the entry). An item that was neutral already
     * before this request gets no entry.
     */
    const settle = async (item: Awaited<ReturnType<typeof ledger>>, changed: boolean, log: () => Promise<unknown>) => {
      if (item.row.logged) return;
      if (!changed && item.created) return item.drop();
      await log();
      await item.logged();
    };

    // 1. Consents: revoked (and audited) one by one; those this request revoked before a crash are found again.
    for await (const c of Consent.find({ user_id: user._id, $or: [{ active: true }, { revoked_by_erasure: req._id }] }).lean<ConsentRecord[]>().cursor()) {
      const item = await ledger(CONSENT_COLLECTION, c._id, 'revoke_consent', { tenant_id: c.tenant_id });
      const revokedAt = c.revoked_at ?? new Date();
      const res = await Consent.updateOne({ _id: c._id, active: true }, { $set: { revoked_at: revokedAt, revoked_by_erasure: req._id }, $unset: { active: 1 } });
      await settle(item, res.modifiedCount > 0, async () => {
        const old = { ...c, active: true, revoked_at: null, revoked_by_erasure: null };
        const doc = { ...c, active: undefined, revoked_at: revokedAt, revoked_by_erasure: req._id };
        await audit?.logUpdate({ resource: CONSENT_COLLECTION, item_id: c._id, user: auditUser, tenant_id: c.tenant_id, old: old as unknown as Doc, doc: doc as unknown as Doc });
      });
      await step(`consent ${String(c._id)} revoked`);
    }

    // 2. Declared collections: depersonalize or delete each linked document.
    const scrubDocs: { resource: string; item_id: Types.ObjectId; fields: string[] }[] = [];
    for (const d of this.erasable()) {
      const model = this.modelOf(d);
      const resource = model.collection.collectionName;
      const tenantField = d.tenant_field === undefined ? 'tenant_id' : d.tenant_field;
      const fields = [...d.gdpr_fields];
      if ((d.on_erasure ?? 'depersonalize') === 'delete') {
        for await (const doc of model.find(this.linkFilter(d, user)).lean<Doc[]>().cursor({ batchSize: 100 })) {
          const id = doc._id as Types.ObjectId;
          const snapshot = omit(doc, [...fields, ...(d.export_exclude ?? [])]);
          const item = await ledger(resource, id, 'delete', { fields, tenant_id: tenantField ? doc[tenantField] : null, snapshot });
          const res = await model.deleteOne({ _id: id });
          await settle(item, res.deletedCount > 0, () => audit?.logDelete({ resource, item_id: id, user: auditUser, tenant_id: item.row.tenant_id, old: snapshot }) ?? Promise.resolve());
          await step(`${d.name} ${String(id)} deleted`);
        }
      } else {
        const neutral = this.neutralOf(d);
        const versioned = !!model.schema.path('version');
        const touched = !!model.schema.path('updated_at');
        for await (const doc of model.find(this.linkFilter(d, user), { _id: 1, ...(tenantField ? { [tenantField]: 1 } : {}) }).lean<Doc[]>().cursor({ batchSize: 100 })) {
          const id = doc._id as Types.ObjectId;
          const item = await ledger(resource, id, 'depersonalize', { fields, tenant_id: tenantField ? doc[tenantField] : null });
          // Conditional: a document already neutral is left alone (its version does not move again on resume).
          const res = await model.updateOne(
            { _id: id, $or: fields.map((f) => ({ [f]: { $ne: neutral[f] } })) },
            { $set: { ...neutral, ...(touched ? { updated_at: new Date() } : {}) }, ...(versioned ? { $inc: { version: 1 } } : {}) },
            { strict: false },
          );
          await settle(item, res.modifiedCount > 0, () =>
            audit?.logDepersonalize({ resource, item_id: id, gdpr_fields: fields, subject_user_id: user._id, user: auditUser, tenant_id: item.row.tenant_id }) ?? Promise.resolve(),
          );
          scrubDocs.push({ resource, item_id: id, fields });
          await step(`${d.name} ${String(id)} depersonalized`);
        }
      }
    }

    // Documents deleted by an earlier run that crashed before their entry: found only in the ledger.
    for await (const row of ErasureItem.find({ request_id: req._id, action: 'delete', logged: false }).lean<ErasureItemRecord[]>().cursor()) {
      await audit?.logDelete({ resource: row.resource, item_id: row.item_id, user: auditUser, tenant_id: row.tenant_id ?? null, old: (row.snapshot as Doc | null) ?? { _id: row.item_id } });
      await ErasureItem.updateOne({ _id: row._id }, { $set: { logged: true } });
    }

    // 3. The account (when declared, `on_erasure: 'account'`): keys revoked, account disabled (identity audits the disable as an update of the user).
    const account = this.account();
    const accountValues = account ? this.accountValues(account, user._id) : {};
    const accountFields = account ? [...account.gdpr_fields] : [];
    const keys = account ? await ApiKey.find({ user_id: user._id, revoked_at: null }, { _id: 1 }).lean() : [];
    for (const k of keys) {
      try {
        await identity.revokeApiKey(systemActor(tenantId), String(k._id));
        await ErasureRequest.updateOne({ _id: req._id }, { $inc: { 'counters.api_keys_revoked': 1 } });
      } catch (err) {
        // Revoked meanwhile by someone else: the goal is reached.
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
    if (account && user.is_active !== false && !user.is_deleted) {
      const item = await ledger(User.collection.collectionName, user._id, 'disable', { tenant_id: user.tenant_id });
      const caller = auditUser ? actor : systemActor(tenantId);
      // Identity writes the audit entry of the disable itself (an `update` of the user, through its AFTER_UPDATE event).
      await settle(item, true, () => identity.updateUser(caller, String(user._id), { is_active: false }));
    }
    identity.invalidateUser(String(user._id));

    // 4. The audit log: entries by or about the subject keep their place but lose the personal values.
    await renew(true);
    const deleted = await ErasureItem.find({ request_id: req._id, action: 'delete' }, { resource: 1, item_id: 1, fields: 1 }).lean();
    if (audit) {
      const res = await audit.scrubSubject({
        subject_user_id: user._id,
        documents: [
          ...scrubDocs,
          ...deleted.map((x) => ({ resource: x.resource, item_id: x.item_id, fields: [...x.fields] })),
          ...(account ? [{ resource: User.collection.collectionName, item_id: user._id, fields: accountFields }] : []),
        ],
        // The account's personal values as stored (a resumed execution finds them still there: the account is depersonalized last).
        values: accountFields.map((f) => (user as Doc)[f]).filter((v): v is string => typeof v === 'string' && !Object.values(accountValues).includes(v)),
        replacement: settings.pseudonym,
      });
      await ErasureRequest.updateOne({ _id: req._id }, { $inc: { 'counters.audit_entries_scrubbed': res.scrubbed } });
    }

    // 5. Last, the user document itself (its email and name were needed to scrub the audit log).
    await renew(true);
    if (account && accountFields.length) {
      const userItem = await ledger(User.collection.collectionName, user._id, 'depersonalize', { fields: accountFields, tenant_id: user.tenant_id });
      const userRes = await User.updateOne(
        { _id: user._id, $or: accountFields.map((f) => ({ [f]: { $ne: accountValues[f] } })) },
        { $set: accountValues },
      );
      identity.invalidateUser(String(user._id));
      await settle(userItem, userRes.modifiedCount > 0, () =>
        audit?.logDepersonalize({ resource: User.collection.collectionName, item_id: user._id, gdpr_fields: accountFields, subject_user_id: user._id, user: auditUser, tenant_id: user.tenant_id }) ?? Promise.resolve(),
      );
    }
    await step(account ? 'account depersonalized' : 'declared data erased', true);
    await audit?.flush();

    // 6. Never `completed` while a declared personal value or an active consent remains.
    await this.assertErased(user);
    const count = (action: ErasureAction, resource?: string) =>
      ErasureItem.countDocuments({ request_id: req._id, action, ...(resource ? { resource } : {}) });
    const counters = (await ErasureRequest.findById(req._id, { counters: 1 }).lean())?.counters;
    return {
      documents_depersonalized: await count('depersonalize'),
      documents_deleted: await count('delete'),
      consents_revoked: await count('revoke_consent'),
      api_keys_revoked: counters?.api_keys_revoked ?? 0,
      account_disabled: (await count('disable')) > 0 || user.is_active === false || !!user.is_deleted,
      audit_entries_scrubbed: counters?.audit_entries_scrubbed ?? 0,
    };
  }

  /** @throws Error naming what still holds personal data */
  private async assertErased(user: { _id: Types.ObjectId; tenant_id: Types.ObjectId; is_system_user?: boolean | null; scope?: string | null }) {
    const left: string[] = [];
    for (const d of this.erasable()) {
      const n = await this.modelOf(d).countDocuments(this.remaining(d, user));
      if (n) left.push(`${d.name}: ${n}`);
    }
    if (await this.models.Consent.exists({ user_id: user._id, active: true })) left.push('active consents');
    const account = this.account();
    if (account) {
      const u = await this.identityModels.User.findById(user._id, { is_active: 1, ...Object.fromEntries(account.gdpr_fields.map((f) => [f, 1])) }).lean();
      if (u?.is_active !== false || !this.isPseudonymous(account, u)) left.push('account');
    }
    if (left.length) throw new Error(`Personal data remains after erasure (${left.join(', ')})`);
  }
}
