/** Consents: grant, list and revoke a user's consent to a purpose. No Koa or GraphQL here. */
import { Types } from 'mongoose';
import type { Page } from '../../lib/page.ts';
import { AccessDeniedError, NotFoundError, ValidationError } from '../../core/errors.ts';
import { isAdmin, isSystemActor, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { DocumentChanges, type OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Filter } from '../../core/access.ts';
import { CONSENT_COLLECTION, consentView, type ConsentRecord, type ConsentView, type PrivacyModels } from './model.ts';
import { findPage, oid } from './personal-data.ts';
import type { ConsentsQuery, GrantInput } from './schemas.ts';
import type { PrivacyDeps } from './types.ts';

/** A consent was given: a new record. */
export const CONSENT_GRANTED_EVENT = 'consent.granted';
/** A consent was revoked, by its user or by an erasure of the user. */
export const CONSENT_REVOKED_EVENT = 'consent.revoked';

/**
 * The writes of consents, each carrying its `consent.granted` or `consent.revoked` event (and, with
 * it, its audit entry) in the consent's outbox. Consents are never deleted: a revocation is their
 * last change.
 */
function consentChanges(models: PrivacyModels, events: () => EventLog): { source: OutboxSource; changes: DocumentChanges } {
  const source: OutboxSource = { name: CONSENT_COLLECTION, model: models.Consent, view: (d) => consentView(d as unknown as ConsentRecord) as unknown as Doc };
  return { source, changes: new DocumentChanges(events, source, { created: CONSENT_GRANTED_EVENT, updated: CONSENT_REVOKED_EVENT, deleted: CONSENT_REVOKED_EVENT }) };
}

/**
 * Who may call each consent operation: the one declaration its REST route and GraphQL field read.
 * Whose consents a caller reaches (its own; an administrator, its tenant's) is the service's rule.
 */
export const CONSENT_PERMISSIONS = { list: 'user', grant: 'user', revoke: 'user' } as const satisfies Permissions;

/**
 * A user's consents. A grant is a new record; a revocation keeps the record (it is the proof of
 * what was agreed, and when). Each write carries its event, whose audit entry names the user.
 */
export class ConsentsService {
  /** Every write of a consent goes through these (an erasure's revocations too). */
  readonly changes: DocumentChanges;
  /** `privacy_consents` as an outbox source of the event log. */
  readonly source: OutboxSource;

  constructor(
    private readonly models: PrivacyModels,
    private readonly deps: Pick<PrivacyDeps, 'events' | 'settings' | 'tenancy'>,
  ) {
    ({ changes: this.changes, source: this.source } = consentChanges(models, () => deps.events));
  }

  /**
   * Grant the actor's consent to a purpose. Idempotent: while a consent to the purpose is active,
   * granting again returns it (`created: false`) and writes nothing.
   * @throws ValidationError for a purpose outside `PRIVACY_CONSENT_PURPOSES` (when set), at `[...loc, 'purpose']`
   */
  async grant(actor: Actor, input: GrantInput, defaultSource: string, loc: readonly string[] = ['body']): Promise<{ consent: ConsentView; created: boolean }> {
    const userId = this.personOf(actor);
    const { purposes } = this.deps.settings;
    if (purposes.length && !purposes.includes(input.purpose))
      throw new ValidationError([{ loc: [...loc, 'purpose'], msg: `must be one of: ${purposes.join(', ')}`, type: 'invalid_value' }]);
    const { Consent } = this.models;
    const fields = {
      _id: new Types.ObjectId(), user_id: userId, tenant_id: oid(actor.tenant_id), purpose: input.purpose, granted_at: new Date(),
      revoked_at: null, source: input.source ?? defaultSource, active: true,
    };
    try {
      const entry = this.changes.entry('created', actor, null, fields);
      const doc = await Consent.create({ ...fields, ...this.changes.insert(entry) });
      const consent = doc.toObject() as ConsentRecord;
      await this.changes.committed(consent as unknown as Doc);
      return { consent: consentView(consent), created: true };
    } catch (err) {
      if ((err as { code?: number }).code !== 11000) throw err;
      const existing = await Consent.findOne({ user_id: userId, purpose: input.purpose, active: true }).lean<ConsentRecord>();
      if (!existing) throw err;
      return { consent: consentView(existing), created: false };
    }
  }

  /**
   * Consents of the actor, or (administrators) of `user_id` within the actor's tenant scope. Another
   * tenant's user has no consents as far as a tenant administrator can tell (an empty page).
   * @throws AccessDeniedError for a non-administrator naming someone else
   */
  async list(actor: Actor, q: ConsentsQuery): Promise<Page<ConsentView>> {
    const self = !q.user_id || q.user_id === actor.id;
    if (!self && !isAdmin(actor)) throw new AccessDeniedError("Only administrators read other users' consents");
    const filter: Filter = self ? { user_id: this.personOf(actor) } : { user_id: oid(q.user_id), ...this.deps.tenancy.filter(actor) };
    if (q.purpose) filter.purpose = q.purpose;
    if (q.active !== undefined) filter.active = q.active ? true : { $ne: true };
    return findPage(this.models.Consent, filter, { granted_at: -1, _id: -1 }, q, consentView);
  }

  /**
   * Revoke one of the actor's own consents. Idempotent: an already revoked consent is returned unchanged.
   * @throws NotFoundError for a consent that is not the actor's (administrators included)
   */
  async revoke(actor: Actor, id: string): Promise<ConsentView> {
    const userId = this.personOf(actor);
    const { Consent } = this.models;
    const now = new Date();
    const old = await Consent.findOne({ _id: id, user_id: userId, active: true }).lean<ConsentRecord>();
    // The event needs the consent as it was; the update is conditional on it being still active.
    const entry = old && this.changes.entry('updated', actor, old as unknown as Doc & { _id: unknown }, { ...old, revoked_at: now, active: undefined } as unknown as Doc & { _id: unknown });
    const revoked = old && entry
      ? await Consent.findOneAndUpdate({ _id: old._id, active: true }, { $set: { revoked_at: now }, $unset: { active: 1 }, $push: this.changes.push(entry) }, { returnDocument: 'after' }).lean<ConsentRecord>()
      : null;
    if (!revoked) {
      const existing = await Consent.findOne({ _id: id, user_id: userId }).lean<ConsentRecord>();
      if (!existing) throw new NotFoundError('consent', id);
      return consentView(existing);
    }
    await this.changes.committed(revoked as unknown as Doc);
    return consentView(revoked);
  }

  /** Consents belong to people: the `systemActor()` has none. */
  private personOf(actor: Actor): Types.ObjectId {
    if (isSystemActor(actor) || !Types.ObjectId.isValid(actor.id)) throw new AccessDeniedError('Consents belong to users; the system actor has none');
    return oid(actor.id);
  }
}
