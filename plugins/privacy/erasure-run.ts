/**
 * The work of one erasure execution, as named steps run in order by `ErasureService`. Every step
 * is safe to repeat after a crash at any point: each item gets a ledger row before it is changed,
 * every write is conditional, and an item's event (with its audit entry) is written once: by the
 * consent's own revoking write, or by the write that marks the item's ledger row `logged`. No Koa
 * or GraphQL here.
 */
import type { Types } from 'mongoose';
import { NotFoundError } from '../../core/errors.ts';
import { isSystemActor, systemActor, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { OUTBOX_FIELD, type AuditedChange, type DocumentChanges, type OutboxSource } from '../events/public/outbox.ts';
import type { PersonalDataDeclaration } from '../../core/plugin.ts';
import type { AuditActor, AuditLogger } from '../audit/index.ts';
import { CONSENT_COLLECTION, ERASURE_ITEM_COLLECTION, type ConsentRecord, type ErasureAction, type ErasureItemDoc, type ErasureRequestRecord, type PrivacyModels } from './model.ts';
import { oid, omit, type PersonalData, type Subject } from './personal-data.ts';
import type { PrivacyDeps, RunControl } from './types.ts';

type ErasureItemRecord = ErasureItemDoc & { _id: Types.ObjectId };

/** A document whose audit entries lose the subject's values of `fields`. */
type ScrubDocument = { resource: string; item_id: Types.ObjectId; fields: string[]; tenant_id: unknown };

/** An erasure changed an item of another collection: its ledger row announces it (the audit entry comes with it). */
export const ERASURE_ITEM_EVENT = 'erasure.item_recorded';

/** The object of `erasure.item_recorded`: which item, of which request, and what was done (never personal values). */
export const erasureItemView = (r: ErasureItemDoc & { _id: unknown }) => ({
  id: String(r._id), request_id: String(r.request_id), resource: r.resource, item_id: String(r.item_id), action: r.action,
});

/** `privacy_erasure_items` as an outbox source of the event log. */
export const erasureItemSource = (models: PrivacyModels): OutboxSource => ({
  name: ERASURE_ITEM_COLLECTION, model: models.ErasureItem, view: (d) => erasureItemView(d as unknown as ErasureItemRecord) as unknown as Doc,
});

/** Least interval between two progress reports of one execution. */
const PROGRESS_MS = 250;

/**
 * A service account drove the change: the one case where an erasure's audit entries name their
 * actor. Service accounts are the non-human system users (`is_system_user`), never the
 * `systemActor()` of jobs, and never a human administrator: naming the operator next to the
 * subject's id would itself be linkable data.
 */
export const auditActorOf = (actor: Actor): AuditActor | null =>
  actor.is_system_user && !isSystemActor(actor) ? { id: actor.id, name: actor.name } : null;

/** What an execution works with: the plugin's models, the declarations and its dependencies. */
export interface ErasureEnv {
  models: PrivacyModels;
  personal: PersonalData;
  deps: Pick<PrivacyDeps, 'identity' | 'events' | 'audit' | 'settings' | 'log'>;
  /** The consents' writes with their events (the consents service's). */
  consents: DocumentChanges;
}

/** The ledger row of one item, with what a step does with it once the item is handled. */
interface LedgerItem {
  row: ErasureItemRecord;
  /** True when this run created the row: the item was not touched by an earlier (crashed) run. */
  created: boolean;
  /** Marks the row handled; with `audit`, the same write carries the item's event, which asks for that entry. */
  logged: (audit?: AuditedChange) => Promise<void>;
  /** The item needed no change (already neutral before this request): no ledger row, no entry. */
  drop: () => Promise<void>;
}

/** One execution of one claimed erasure request. */
export class ErasureRun {
  private readonly audit: AuditLogger | undefined;
  private readonly auditActor: AuditActor | null;
  private readonly tenantId: string;
  private readonly total: number;
  private readonly account: PersonalDataDeclaration | undefined;
  private readonly accountValues: Doc;
  private readonly accountFields: string[];
  /** Documents depersonalized by this run, whose audit entries are scrubbed. */
  private readonly depersonalized: ScrubDocument[] = [];
  /** The ledger as an outbox source, built once per run (every recorded item hands its row to the relay). */
  private readonly itemSource: OutboxSource;
  private done = 0;
  private lastRenew = Date.now();
  private lastProgress = 0;

  private constructor(
    private readonly env: ErasureEnv,
    private readonly actor: Actor,
    private readonly req: ErasureRequestRecord,
    private readonly user: Subject,
    private readonly control: RunControl,
  ) {
    this.audit = env.deps.audit();
    this.auditActor = auditActorOf(actor);
    this.itemSource = erasureItemSource(env.models);
    this.tenantId = String(user.tenant_id);
    this.total = (req.preview?.collections ?? []).reduce((n, c) => n + c.count, 0) + (req.preview?.consents ?? 0);
    this.account = env.personal.account();
    this.accountValues = this.account ? env.personal.accountValues(this.account, user._id) : {};
    this.accountFields = this.account ? [...this.account.gdpr_fields] : [];
  }

  /** @throws NotFoundError when the request's user no longer exists */
  static async start(env: ErasureEnv, actor: Actor, req: ErasureRequestRecord, control: RunControl): Promise<ErasureRun> {
    const user = await env.personal.identity.User.findOne({ _id: req.user_id }).lean<Subject>();
    if (!user) throw new NotFoundError('user', String(req.user_id));
    return new ErasureRun(env, actor, req, user, control);
  }

  /** Revokes (and audits) every active consent one by one; those this request revoked before a crash are found again. */
  async revokeConsents(): Promise<void> {
    const { Consent } = this.env.models;
    const { req, user } = this;
    const changes = this.env.consents;
    for await (const c of Consent.find({ user_id: user._id, $or: [{ active: true }, { revoked_by_erasure: req._id }] }).lean<ConsentRecord[]>().cursor()) {
      const item = await this.ledger(CONSENT_COLLECTION, c._id, 'revoke_consent', { tenant_id: c.tenant_id });
      const revokedAt = c.revoked_at ?? new Date();
      // The revoking write carries the consent's `consent.revoked` event: a crash cannot separate them.
      const entry = changes.entry('updated', this.eventActor(), { ...c, active: true, revoked_at: null, revoked_by_erasure: null }, { ...c, active: undefined, revoked_at: revokedAt, revoked_by_erasure: req._id });
      const doc = await Consent.findOneAndUpdate(
        { _id: c._id, active: true },
        { $set: { revoked_at: revokedAt, revoked_by_erasure: req._id }, $unset: { active: 1 }, $push: changes.push(entry) },
        { returnDocument: 'after' },
      ).lean<ConsentRecord>();
      if (doc) await changes.committed(doc as unknown as Doc);
      await this.settle(item, !!doc);
      await this.step(`consent ${String(c._id)} revoked`);
    }
  }

  /** Who the events of this run name: a service account that drove it, else no one (the system). */
  private eventActor(): Actor {
    return this.auditActor ? this.actor : systemActor(this.tenantId);
  }

  /** The audit entry an item's event asks for: a change of another collection's document, made by this run. */
  private audited(resource: string, itemId: Types.ObjectId, change: Pick<AuditedChange, 'operation' | 'changes' | 'snapshot'>): AuditedChange {
    return { resource, item_id: String(itemId), actor_name: this.auditActor?.name ?? null, ip: null, ...change };
  }

  /** Deletes or depersonalizes each document linked to the subject, declaration by declaration. */
  async eraseLinkedDocuments(): Promise<void> {
    for (const d of this.env.personal.erasable()) {
      if ((d.on_erasure ?? 'depersonalize') === 'delete') await this.deleteLinkedDocuments(d);
      else await this.depersonalizeLinkedDocuments(d);
    }
  }

  /** The collection of a declaration as the erasure steps use it. */
  private collectionOf(d: PersonalDataDeclaration) {
    const model = this.env.personal.modelOf(d);
    const tenantField = d.tenant_field === undefined ? 'tenant_id' : d.tenant_field;
    return { model, resource: model.collection.collectionName, tenantField, fields: [...d.gdpr_fields], linked: this.env.personal.linkFilter(d, this.user) };
  }

  private async deleteLinkedDocuments(d: PersonalDataDeclaration): Promise<void> {
    const { model, resource, tenantField, fields, linked } = this.collectionOf(d);
    for await (const doc of model.find(linked).lean<Doc[]>().cursor({ batchSize: 100 })) {
      const id = doc._id as Types.ObjectId;
      const snapshot = omit(doc, [...fields, ...(d.export_exclude ?? [])]);
      const item = await this.ledger(resource, id, 'delete', { fields, tenant_id: tenantField ? doc[tenantField] : null, snapshot });
      const res = await model.deleteOne({ _id: id });
      await this.settle(item, res.deletedCount > 0, this.audited(resource, id, { operation: 'delete', snapshot }));
      await this.step(`${d.name} ${String(id)} deleted`);
    }
  }

  private async depersonalizeLinkedDocuments(d: PersonalDataDeclaration): Promise<void> {
    const { model, resource, tenantField, fields, linked } = this.collectionOf(d);
    const neutral = this.env.personal.neutralOf(d);
    const versioned = !!model.schema.path('version');
    const touched = !!model.schema.path('updated_at');
    for await (const doc of model.find(linked, { _id: 1, ...(tenantField ? { [tenantField]: 1 } : {}) }).lean<Doc[]>().cursor({ batchSize: 100 })) {
      const id = doc._id as Types.ObjectId;
      const item = await this.ledger(resource, id, 'depersonalize', { fields, tenant_id: tenantField ? doc[tenantField] : null });
      // Conditional: a document already neutral is left alone (its version does not move again on resume).
      const res = await model.updateOne(
        { _id: id, $or: fields.map((f) => ({ [f]: { $ne: neutral[f] } })) },
        { $set: { ...neutral, ...(touched ? { updated_at: new Date() } : {}) }, ...(versioned ? { $inc: { version: 1 } } : {}) },
        { strict: false },
      );
      await this.settle(item, res.modifiedCount > 0, this.audited(resource, id, { operation: 'depersonalize', changes: { gdpr_fields: fields, user_id: this.user._id } }));
      this.depersonalized.push({ resource, item_id: id, fields, tenant_id: item.row.tenant_id });
      await this.step(`${d.name} ${String(id)} depersonalized`);
    }
  }

  /** Audits the documents an earlier run deleted but crashed before their entry: they are found only in the ledger. */
  async auditDeletionsOfEarlierRuns(): Promise<void> {
    const { ErasureItem } = this.env.models;
    for await (const row of ErasureItem.find({ request_id: this.req._id, action: 'delete', logged: false }).lean<ErasureItemRecord[]>().cursor()) {
      await this.recordItem(row, this.audited(row.resource, row.item_id, { operation: 'delete', snapshot: (row.snapshot as Doc | null) ?? { _id: row.item_id } }));
    }
  }

  /** Revokes every live API key of the account (when the account is declared), counting each revocation. */
  async revokeApiKeys(): Promise<void> {
    if (!this.account) return;
    const { identity } = this.env.deps;
    const keys = await this.env.personal.identity.ApiKey.find({ user_id: this.user._id, revoked_at: null }, { _id: 1 }).lean();
    for (const k of keys) {
      try {
        await identity.revokeApiKey(systemActor(this.tenantId), String(k._id));
        await this.env.models.ErasureRequest.updateOne({ _id: this.req._id }, { $inc: { 'counters.api_keys_revoked': 1 } });
      } catch (err) {
        // Revoked meanwhile by someone else: the goal is reached.
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
  }

  /**
   * Disables the account (when declared, and still active) through identity, whose `user.updated`
   * event carries its audit entry (an `update` of the user); then drops every cached
   * credential of the user.
   */
  async disableAccount(): Promise<void> {
    const { identity } = this.env.deps;
    const { user } = this;
    if (this.account && user.is_active !== false && !user.is_deleted) {
      const item = await this.ledger(this.env.personal.identity.User.collection.collectionName, user._id, 'disable', { tenant_id: user.tenant_id });
      const disabledBy = this.auditActor ? this.actor : systemActor(this.tenantId);
      await this.settle(item, true, () => identity.updateUser(disabledBy, String(user._id), { is_active: false }));
    }
    identity.invalidateUser(String(user._id));
  }

  /**
   * Stores of copies (`on_erasure: 'scrub'`, e.g. the stored answers of idempotent requests) lose
   * the subject's values. Before the account is pseudonymised: its email and name are what they look for.
   */
  async scrubCopies(): Promise<void> {
    const { user, accountFields, accountValues } = this;
    const { pseudonym } = this.env.deps.settings;
    const values = accountFields
      .filter((f) => typeof (user as Doc)[f] === 'string' && !Object.values(accountValues).includes((user as Doc)[f]))
      .map((f) => ({ value: (user as Doc)[f] as string, replacement: typeof accountValues[f] === 'string' ? (accountValues[f] as string) : pseudonym }));
    for (const d of this.env.personal.copies()) {
      await this.renew(true);
      const n = await d.scrub({ user_id: String(user._id), tenant_id: this.env.personal.tenantOf(user), values });
      this.env.deps.log.info({ request_id: String(this.req._id), declaration: d.name, scrubbed: n }, 'erasure: copies scrubbed');
    }
  }

  /** Entries by or about the subject keep their place in the audit log but lose the personal values. */
  async scrubAuditLog(): Promise<void> {
    await this.renew(true);
    const { ErasureItem, ErasureRequest } = this.env.models;
    const { user, account, accountFields, accountValues, audit } = this;
    const deleted = await ErasureItem.find({ request_id: this.req._id, action: 'delete' }, { resource: 1, item_id: 1, fields: 1, tenant_id: 1 }).lean();
    // The event log holds the objects as they were: their personal fields go too.
    await this.env.deps.events.scrubSubject({
      documents: [
        ...this.depersonalized, ...deleted.map((x) => ({ resource: x.resource, item_id: x.item_id, fields: [...x.fields], tenant_id: x.tenant_id })),
        // The account's own events (user.created, user.updated...) carry it as the admin API shows it.
        ...(account ? [{ resource: this.env.personal.identity.User.collection.collectionName, item_id: user._id, fields: accountFields, tenant_id: user.tenant_id }] : []),
      ],
      values: accountFields.map((f) => (user as Doc)[f]).filter((v): v is string => typeof v === 'string' && !Object.values(accountValues).includes(v)),
      replacement: this.env.deps.settings.pseudonym,
      actor: { id: String(user._id), tenant_id: user.tenant_id },
    });
    if (!audit) return;
    const users = this.env.personal.identity.User.collection.collectionName;
    const res = await audit.scrubSubject({
      subject_user_id: user._id,
      documents: [
        ...this.depersonalized,
        ...deleted.map((x) => ({ resource: x.resource, item_id: x.item_id, fields: [...x.fields] })),
        ...(account ? [{ resource: users, item_id: user._id, fields: accountFields }] : []),
      ],
      // The account's personal values as stored (a resumed execution finds them still there: the account is depersonalized last).
      values: accountFields.map((f) => (user as Doc)[f]).filter((v): v is string => typeof v === 'string' && !Object.values(accountValues).includes(v)),
      replacement: this.env.deps.settings.pseudonym,
    });
    await ErasureRequest.updateOne({ _id: this.req._id }, { $inc: { 'counters.audit_entries_scrubbed': res.scrubbed } });
  }

  /** Last, the user document itself (its email and name were needed to scrub the audit log). */
  async depersonalizeAccount(): Promise<void> {
    await this.renew(true);
    const { user, account, accountFields, accountValues } = this;
    if (!account || !accountFields.length) return;
    const { User } = this.env.personal.identity;
    const item = await this.ledger(User.collection.collectionName, user._id, 'depersonalize', { fields: accountFields, tenant_id: user.tenant_id });
    const res = await User.updateOne({ _id: user._id, $or: accountFields.map((f) => ({ [f]: { $ne: accountValues[f] } })) }, { $set: accountValues });
    this.env.deps.identity.invalidateUser(String(user._id));
    await this.settle(item, res.modifiedCount > 0, this.audited(User.collection.collectionName, user._id, { operation: 'depersonalize', changes: { gdpr_fields: accountFields, user_id: user._id } }));
  }

  /** Reports the last progress step and writes the audit entries still buffered. */
  async finish(): Promise<void> {
    await this.step(this.account ? 'account depersonalized' : 'declared data erased', true);
    await this.audit?.flush();
  }

  /**
   * Never `completed` while a declared personal value or an active consent remains.
   * @throws Error naming what still holds personal data
   */
  async assertErased(): Promise<void> {
    const { personal, models } = this.env;
    const { user } = this;
    const left: string[] = [];
    for (const d of personal.erasable()) {
      const n = await personal.modelOf(d).countDocuments(personal.remaining(d, user));
      if (n) left.push(`${d.name}: ${n}`);
    }
    if (await models.Consent.exists({ user_id: user._id, active: true })) left.push('active consents');
    const account = this.account;
    if (account) {
      const u = await personal.identity.User.findById(user._id, { is_active: 1, ...Object.fromEntries(account.gdpr_fields.map((f) => [f, 1])) }).lean();
      if (u?.is_active !== false || !personal.isPseudonymous(account, u)) left.push('account');
    }
    if (left.length) throw new Error(`Personal data remains after erasure (${left.join(', ')})`);
  }

  /** What the request did, over every run of it: counted from its ledger and counters. */
  async result() {
    const { ErasureItem, ErasureRequest } = this.env.models;
    const { req, user } = this;
    const count = (action: ErasureAction) => ErasureItem.countDocuments({ request_id: req._id, action });
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

  /** A long execution keeps its claim; an execution that stops renewing is taken over after the lease. */
  private async renew(force = false): Promise<void> {
    if (this.control.signal?.aborted) throw new Error('Erasure aborted');
    const { leaseMs } = this.env.deps.settings;
    if (!force && Date.now() - this.lastRenew <= leaseMs / 3) return;
    this.lastRenew = Date.now();
    await this.env.models.ErasureRequest.updateOne({ _id: this.req._id, status: 'running' }, { $set: { lease_until: new Date(this.lastRenew + leaseMs) } });
  }

  /** Progress is reported at most every `PROGRESS_MS` (a job runner may write each report), and always at the end. */
  private async step(message: string, last = false): Promise<void> {
    this.done += 1;
    if (last || Date.now() - this.lastProgress >= PROGRESS_MS) {
      this.lastProgress = Date.now();
      await this.control.progress?.(this.done, Math.max(this.total, this.done), message);
    }
    await this.renew();
  }

  /** The ledger row of an item, created on first sight (before the item is changed). */
  private async ledger(resource: string, itemId: Types.ObjectId, action: ErasureAction, extra: { fields?: string[]; tenant_id?: unknown; snapshot?: Doc | null } = {}): Promise<LedgerItem> {
    const { ErasureItem } = this.env.models;
    const key = { request_id: this.req._id, resource, item_id: itemId, action };
    const insert = { fields: extra.fields ?? [], tenant_id: extra.tenant_id ? oid(extra.tenant_id) : null, snapshot: extra.snapshot ?? null, logged: false };
    // The common case (a new row) takes one round trip; only a row left by an earlier run is read back.
    // (findOneAndUpdate's `lastErrorObject.updatedExisting` is not relied on: the database stand-in reports it unreliably for a no-op upsert.)
    const res = await ErasureItem.updateOne(key, { $setOnInsert: insert }, { upsert: true });
    const created = res.upsertedCount > 0;
    const row: ErasureItemRecord = created ? ({ ...key, ...insert, _id: res.upsertedId as unknown as Types.ObjectId } as ErasureItemRecord) : (await ErasureItem.findOne(key).lean<ErasureItemRecord>())!;
    return {
      row,
      created,
      logged: (audit) => (audit ? this.recordItem(row, audit) : ErasureItem.updateOne({ _id: row._id }, { $set: { logged: true } }).then(() => undefined)),
      drop: async () => void (await ErasureItem.deleteOne({ _id: row._id })),
    };
  }

  /**
   * Marks a ledger row handled by the write that carries its `erasure.item_recorded` event, which
   * asks audit for `audit`'s entry. Conditional on the row not being handled yet: an item is
   * announced once, whichever run gets there first.
   */
  private async recordItem(row: ErasureItemRecord, audit: AuditedChange): Promise<void> {
    const { events } = this.env.deps;
    const entry = {
      ...events.stage(ERASURE_ITEM_EVENT, { actor: this.eventActor(), tenant_id: row.tenant_id ? String(row.tenant_id) : null, meta: { resource: row.resource, audit } }),
      data: erasureItemView(row) as unknown as Doc,
    };
    const doc = await this.env.models.ErasureItem.findOneAndUpdate(
      { _id: row._id, logged: { $ne: true } },
      { $set: { logged: true }, $push: { [OUTBOX_FIELD]: entry } },
      { returnDocument: 'after' },
    ).lean();
    if (doc) await events.committed(this.itemSource, doc as unknown as Doc);
  }

  /**
   * Audits an item once: when this run changed it, or when an earlier run created its ledger row
   * (it may have changed it and crashed before the entry). An item that was neutral already before
   * this request gets no entry.
   */
  private async settle(item: LedgerItem, changed: boolean, then?: AuditedChange | (() => Promise<unknown>)): Promise<void> {
    if (item.row.logged) return;
    if (!changed && item.created) return item.drop();
    if (typeof then === 'function') await then();
    await item.logged(typeof then === 'function' ? undefined : then);
  }
}
