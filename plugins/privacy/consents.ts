import type { Page } from '../../core/page.ts';
/** Consents: grant, list and revoke a user's consent to a purpose. No Koa or GraphQL here. */
import { Types } from 'mongoose';
import { AccessDeniedError, NotFoundError, ValidationError } from '../../core/errors.ts';
import { isAdmin, isSystemActor, requestOf, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Filter } from '../../core/access.ts';
import { CONSENT_COLLECTION, consentView, type ConsentRecord, type ConsentView, type PrivacyModels } from './model.ts';
import { findPage, oid } from './personal-data.ts';
import type { ConsentsQuery, GrantInput } from './schemas.ts';
import type { PrivacyDeps } from './types.ts';

/**
 * A user's consents. A grant is a new record; a revocation keeps the record (it is the proof of
 * what was agreed, and when). Grants and revocations are audited with the user as actor.
 */
export class ConsentsService {
  constructor(
    private readonly models: PrivacyModels,
    private readonly deps: Pick<PrivacyDeps, 'audit' | 'settings' | 'tenancy'>,
  ) {}

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
    try {
      const doc = await Consent.create({
        user_id: userId, tenant_id: oid(actor.tenant_id), purpose: input.purpose, granted_at: new Date(),
        revoked_at: null, source: input.source ?? defaultSource, active: true,
      });
      const consent = doc.toObject() as ConsentRecord;
      await this.deps.audit()?.logInsert({ resource: CONSENT_COLLECTION, item_id: consent._id, user: actor, tenant_id: consent.tenant_id, ip: requestOf(actor)?.ip ?? null });
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
    const old = await Consent.findOneAndUpdate({ _id: id, user_id: userId, active: true }, { $set: { revoked_at: now }, $unset: { active: 1 } }, { returnDocument: 'before' }).lean<ConsentRecord>();
    if (!old) {
      const existing = await Consent.findOne({ _id: id, user_id: userId }).lean<ConsentRecord>();
      if (!existing) throw new NotFoundError('consent', id);
      return consentView(existing);
    }
    const doc = { ...old, revoked_at: now, active: undefined };
    await this.deps.audit()?.logUpdate({
      resource: CONSENT_COLLECTION, item_id: old._id, user: actor, tenant_id: old.tenant_id, ip: requestOf(actor)?.ip ?? null,
      old: old as unknown as Doc, doc: doc as unknown as Doc,
    });
    return consentView(doc);
  }

  /** Consents belong to people: the `systemActor()` has none. */
  private personOf(actor: Actor): Types.ObjectId {
    if (isSystemActor(actor) || !Types.ObjectId.isValid(actor.id)) throw new AccessDeniedError('Consents belong to users; the system actor has none');
    return oid(actor.id);
  }
}
