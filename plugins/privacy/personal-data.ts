/**
 * What the privacy modules share: the personal-data declarations every plugin contributes (which
 * documents are linked to a subject, what their neutral values are) and the subject an actor may
 * act on. No Koa or GraphQL here.
 */
import { Types, type Connection, type Model } from 'mongoose';
import { NotFoundError } from '../../core/errors.ts';
import type { Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Filter } from '../../core/access.ts';
import type { IdentityModels, UserDoc } from '../identity/index.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import type { PersonalDataDeclaration } from '../../core/plugin.ts';
import type { Tenancy } from '../../core/tenancy.ts';

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

/** A data subject: a user document as stored (soft-deleted users included). */
export type Subject = UserDoc & { _id: Types.ObjectId };

export async function findPage<D, R extends D, V>(model: Model<D>, filter: Filter, sort: Record<string, 1 | -1>, q: { page: number; per_page: number }, view: (r: R) => V): Promise<Page<V>> {
  const [items, total] = await Promise.all([
    model.find(filter).sort(sort).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<R[]>(),
    model.countDocuments(filter),
  ]);
  return pageOf(items.map(view), total, q);
}

export const oid = (v: unknown) => new Types.ObjectId(String(v));

/** A subject or tenant reference stored as an object id or as its hex string. */
const either = (id: Types.ObjectId) => ({ $in: [id, String(id)] });

export const omit = (doc: Doc, fields: readonly string[]): Doc => {
  const out: Doc = { ...doc };
  for (const f of fields) delete out[f];
  return out;
};

/** A user's value of an account field is its pseudonymised value; an empty object or array accepts a missing value too. */
const isNeutral = (value: unknown, neutral: unknown): boolean => {
  if (neutral && typeof neutral === 'object' && Object.keys(neutral).length === 0) return !value || (typeof value === 'object' && Object.keys(value).length === 0);
  return neutral === null ? value == null : value === neutral;
};

/**
 * The subject as the core's scope rules see an actor (system scope, the tenant it is confined
 * to). Used only to ask those rules about the subject, never to act.
 */
export const subjectAsActor = (subject: Subject): Actor => ({
  id: String(subject._id),
  email: subject.email,
  name: subject.name,
  tenant_id: String(subject.tenant_id),
  roles: [...(subject.roles ?? [])],
  scope: subject.scope === 'system' ? 'system' : null,
  is_system_user: !!subject.is_system_user,
  features: [...(subject.features ?? [])],
  attributes: {},
});

type LinkedDeclaration = PersonalDataDeclaration & { on_erasure?: 'depersonalize' | 'delete' };

/**
 * The personal-data declarations (`kernel.personalData()`) as the privacy plugin reads them: it
 * never knows a plugin's collections, only what each declaration says.
 */
export class PersonalData {
  constructor(
    private readonly db: Connection,
    readonly identity: IdentityModels,
    private readonly declarations: () => readonly PersonalDataDeclaration[],
    private readonly tenancy: Tenancy,
    private readonly settings: PrivacySettings,
  ) {}

  /** @throws Error when a declaration names a model nobody registered (checked at start-up). */
  check(): void {
    for (const d of this.declarations()) {
      if (!this.db.models[d.model]) throw new Error(`Personal data "${d.name}": model "${d.model}" is not registered on the connection`);
    }
  }

  /**
   * The user an administrator (or the user themself) may act on: within the actor's tenant scope
   * (`ctx.tenancy`: system actors and single-tenant deployments reach every tenant), soft-deleted
   * users included (their data is still held).
   * @throws NotFoundError outside the actor's scope (the same answer as for an unknown id)
   */
  async subjectFor(actor: Actor, userId: string): Promise<Subject> {
    const user = await this.identity.User.findOne({ _id: userId, ...this.tenancy.filter(actor) }).lean<Subject>();
    if (!user) throw new NotFoundError('user', userId);
    return user;
  }

  modelOf(d: PersonalDataDeclaration): Model<Doc> {
    return this.db.models[d.model] as Model<Doc>;
  }

  /**
   * Documents of a declaration linked to the subject. They are looked for in the subject's own
   * tenant only, unless the subject has system scope or the deployment is single-tenant (then the
   * tenant term is left out, as in every other filter).
   */
  linkFilter(d: PersonalDataDeclaration, subject: Subject): Filter {
    const filter: Filter = { [d.subject_field ?? 'created_by']: either(subject._id) };
    const tenantField = d.tenant_field === undefined ? 'tenant_id' : d.tenant_field;
    const tenant = this.tenancy.scope(subjectAsActor(subject));
    if (tenantField && tenant) filter[tenantField] = either(oid(tenant));
    return filter;
  }

  /** The declaration of the account itself (`on_erasure: 'account'`, identity's `users`); undefined when nobody declares it. */
  account(): PersonalDataDeclaration | undefined {
    return this.declarations().find((d) => d.on_erasure === 'account');
  }

  /** Declarations of documents linked to the subject: every one but the account's and the stores of copies. */
  linked(): LinkedDeclaration[] {
    return this.declarations().filter((d): d is LinkedDeclaration => d.on_erasure !== 'account' && d.on_erasure !== 'scrub');
  }

  /** Stores of copies (`on_erasure: 'scrub'`): erasure hands them the subject and they remove its values themselves. */
  copies(): (PersonalDataDeclaration & { scrub: NonNullable<PersonalDataDeclaration['scrub']> })[] {
    return this.declarations().filter((d): d is PersonalDataDeclaration & { scrub: NonNullable<PersonalDataDeclaration['scrub']> } => d.on_erasure === 'scrub' && !!d.scrub);
  }

  /** The tenant the subject's data is looked for in; null for every tenant (as in `linkFilter`). */
  tenantOf(subject: Subject): string | null {
    return this.tenancy.scope(subjectAsActor(subject));
  }

  /** Linked declarations an erasure changes: every `delete` one, and `depersonalize` ones with fields. */
  erasable(): LinkedDeclaration[] {
    return this.linked().filter((d) => (d.on_erasure ?? 'depersonalize') === 'delete' || d.gdpr_fields.length > 0);
  }

  /**
   * The erased account's value of each declared field: a unique pseudonymous `email`, the pseudonym
   * as `name`, the declared neutral value (null by default) for any other field.
   */
  accountValues(d: PersonalDataDeclaration, userId: Types.ObjectId): Doc {
    const value = (f: string) => {
      if (f === 'email') return `erased-${String(userId)}@${this.settings.emailDomain}`;
      if (f === 'name') return this.settings.pseudonym;
      return d.neutral && f in d.neutral ? d.neutral[f] : null;
    };
    return Object.fromEntries(d.gdpr_fields.map((f) => [f, value(f)]));
  }

  neutralOf(d: PersonalDataDeclaration): Doc {
    return Object.fromEntries(d.gdpr_fields.map((f) => [f, d.neutral && f in d.neutral ? d.neutral[f] : null]));
  }

  /** Linked documents that still hold a personal value: every one for `delete`, those with a non-neutral field for `depersonalize`. */
  remaining(d: PersonalDataDeclaration, subject: Subject): Filter {
    const filter = this.linkFilter(d, subject);
    if ((d.on_erasure ?? 'depersonalize') === 'delete') return filter;
    const neutral = this.neutralOf(d);
    return { ...filter, $or: d.gdpr_fields.map((f) => ({ [f]: { $ne: neutral[f] } })) };
  }

  /** The user document holds nothing personal any more: every declared account field has its pseudonymised value. */
  isPseudonymous(d: PersonalDataDeclaration, user: { _id: Types.ObjectId }): boolean {
    const values = this.accountValues(d, user._id);
    return d.gdpr_fields.every((f) => isNeutral((user as Doc)[f], values[f]));
  }
}
