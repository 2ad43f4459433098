/**
 * Invitations: a tenant administrator invites an e-mail address; the link (single-use, valid
 * `INVITATION_TTL_HOURS`) makes a membership of the tenant, and a person if the accepter is not a
 * signed-in person with that e-mail. Every change is a compare-and-set carrying its event (audited)
 * in the invitation's outbox; accepting is one conditional update (no transactions here).
 * No Koa or GraphQL here.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Types, type Model } from 'mongoose';
import { AppError, ConflictError, NotFoundError, ValidationError, type ErrorCodes } from '../../core/errors.ts';
import { hasSystemScope, isSystemActor, requestOf, systemActor, writeTenantId, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { OUTBOX_FIELD, type OutboxEntry, type OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { IdentityService } from '../identity/index.ts';
import type { MembershipService } from '../identity/index.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { Logger } from '../../core/logger.ts';
import { pageOf } from '../../lib/page.ts';
import type { MailerService } from '../mailer/index.ts';
import type { InvitationDoc, InvitationRecord } from './model.ts';
import type { AcceptedView, AcceptInvitationInput, CreateInvitationInput, InvitationsQuery, InvitationView } from './schemas.ts';
import { INVITATION_TEMPLATE, type InvitationMail } from './templates.ts';

/** Credential kind of the bearer token an acceptance answers (`cid` `invitation:<id>`). */
export const INVITATION_CREDENTIAL_KIND = 'invitation';
const VERBS = ['created', 'resent', 'revoked', 'accepted'] as const;

const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');

export const toInvitationView = (d: InvitationRecord): InvitationView => ({
  id: String(d._id), tenant_id: String(d.tenant_id), email: d.email, roles: [...(d.roles ?? [])], features: [...(d.features ?? [])],
  status: d.status ?? 'pending', expires_at: d.expires_at, invited_by: d.invited_by ? String(d.invited_by) : null, sent_count: d.sent_count ?? 1,
  accepted_at: d.accepted_at ?? null, accepted_user_id: d.accepted_user_id ? String(d.accepted_user_id) : null, revoked_at: d.revoked_at ?? null,
  created_at: d.created_at,
});

/**
 * Who may call each invitation operation: the one declaration its REST route and GraphQL field
 * both read. Managing invitations is for administrators (of their own tenant: the service scopes
 * the data); accepting needs only the link's token.
 */
export const INVITATION_PERMISSIONS = { create: 'admin', list: 'admin', resend: 'admin', revoke: 'admin', accept: 'public' } as const satisfies Permissions;

export interface InvitationDeps {
  Invitation: Model<InvitationDoc>;
  events: EventLog;
  tenancy: Tenancy;
  identity: IdentityService;
  memberships: MembershipService;
  mailer: MailerService;
  /** `INVITATION_TTL_HOURS`. */
  ttlHours: number;
  /** `INVITATION_LINK_URL`: the link is this plus `?token=`. */
  linkUrl: string;
  log: Logger;
}

export class InvitationService {
  /** The `invitations` collection as an outbox source of the event log. */
  readonly source: OutboxSource;

  constructor(private readonly deps: InvitationDeps) {
    this.source = { name: 'invitations', model: deps.Invitation, view: (d) => toInvitationView(d as unknown as InvitationRecord) as unknown as Doc };
  }

  /** Token binding: a token from an acceptance lives while its invitation stays accepted by that user. */
  async resolveCredential(id: string): Promise<{ user_id: string } | null> {
    if (!Types.ObjectId.isValid(id)) return null;
    const d = await this.deps.Invitation.findOne({ _id: id, status: 'accepted', accepted_user_id: { $ne: null } }, { accepted_user_id: 1 }).lean();
    return d?.accepted_user_id ? { user_id: String(d.accepted_user_id) } : null;
  }

  /**
   * Invite `email` into the actor's tenant: the e-mail goes out first, then the invitation is stored
   * (so a refused e-mail leaves nothing behind). Permission: {@link INVITATION_PERMISSIONS}.
   * @throws ValidationError for unknown roles; ConflictError when an active user of the tenant has the e-mail; AppError 503 MAIL_UNAVAILABLE
   */
  async create(actor: Actor, input: CreateInvitationInput): Promise<InvitationView> {
    const tenantId = writeTenantId(actor);
    const roles = [...new Set(input.roles ?? ['user'])];
    const unknown = await this.deps.identity.unknownRoles(tenantId, roles);
    if (unknown.length) throw new ValidationError(unknown.map((r) => ({ loc: ['body', 'roles', roles.indexOf(r)], msg: `Unknown role "${r}" in this tenant`, type: 'unknown_role' })));
    if ((await this.deps.identity.usersByEmail(input.email)).some((u) => u.tenant_id === tenantId))
      throw new ConflictError('A user with this email already exists in this tenant', { field: 'email' });
    this.deps.mailer.assertAvailable();
    const token = randomBytes(32).toString('base64url');
    const now = new Date();
    const doc = {
      _id: new Types.ObjectId(), tenant_id: new Types.ObjectId(tenantId), email: input.email, roles, features: [...new Set(input.features ?? [])],
      token_hash: hashToken(token), status: 'pending', expires_at: this.expiry(now), invited_by: isSystemActor(actor) ? null : new Types.ObjectId(actor.id),
      sent_count: 1, last_sent_at: now, accepted_at: null, accepted_user_id: null, revoked_at: null, version: 1, created_at: now, updated_at: now,
    } as InvitationRecord;
    await this.mail(actor, doc, token);
    const entry = this.stage('created', actor, doc, null);
    await this.deps.Invitation.collection.insertOne({ ...doc, [OUTBOX_FIELD]: this.deps.events.outbox.insert(entry) } as never);
    return this.done({ ...doc, [OUTBOX_FIELD]: [entry] } as InvitationRecord);
  }

  /** A page of the actor's tenant's invitations (every tenant's for system administrators), newest first. Permission: {@link INVITATION_PERMISSIONS}. */
  async list(actor: Actor, query: InvitationsQuery) {
    const filter: Doc = { ...this.deps.tenancy.filter(actor), ...(query.status ? { status: query.status } : {}) };
    const [items, total] = await Promise.all([
      this.deps.Invitation.find(filter, { [OUTBOX_FIELD]: 0 }).sort({ created_at: -1, _id: -1 }).skip((query.page - 1) * query.per_page).limit(query.per_page).lean<InvitationRecord[]>(),
      this.deps.Invitation.countDocuments(filter),
    ]);
    return pageOf(items.map(toInvitationView), total, query);
  }

  /**
   * Send a pending (or expired) invitation again with a new link, valid `INVITATION_TTL_HOURS`
   * from now; the old link stops working. Permission: {@link INVITATION_PERMISSIONS}.
   * @throws NotFoundError outside the actor's tenant; AppError 409 INVITATION_ACCEPTED / 410 INVITATION_REVOKED
   */
  async resend(actor: Actor, id: string): Promise<InvitationView> {
    const old = await this.owned(actor, id);
    if (old.status !== 'pending') throw stateError(old);
    this.deps.mailer.assertAvailable();
    const token = randomBytes(32).toString('base64url');
    const now = new Date();
    const set: Doc = { token_hash: hashToken(token), expires_at: this.expiry(now), sent_count: (old.sent_count ?? 1) + 1, last_sent_at: now, version: old.version + 1, updated_at: now };
    await this.mail(actor, old, token);
    return this.change(actor, old, set, 'resent');
  }

  /**
   * Permission: {@link INVITATION_PERMISSIONS}.
   * @throws NotFoundError outside the actor's tenant; AppError 409 INVITATION_ACCEPTED / 410 INVITATION_REVOKED
   */
  async revoke(actor: Actor, id: string): Promise<InvitationView> {
    const old = await this.owned(actor, id);
    if (old.status !== 'pending') throw stateError(old);
    const now = new Date();
    return this.change(actor, old, { status: 'revoked', revoked_at: now, version: old.version + 1, updated_at: now }, 'revoked');
  }

  /**
   * Accept with the link's token: the invitation is claimed by one conditional update (pending, not
   * expired, unchanged), then the membership is made: for `actor` when it is a signed-in person with
   * the invited e-mail, else for a new person. Answers a bearer token acting in the new membership.
   * @throws NotFoundError for an unknown token; AppError 409 INVITATION_ACCEPTED, 410 INVITATION_EXPIRED / INVITATION_REVOKED; ConflictError when already a member
   */
  async accept(actor: Actor | null, input: AcceptInvitationInput): Promise<AcceptedView> {
    const inv = await this.deps.Invitation.findOne({ token_hash: hashToken(input.token) }).lean<InvitationRecord>();
    if (!inv) throw new NotFoundError('invitation', undefined, 'No invitation has this link: it may have been sent again with a new one');
    const now = new Date();
    if (inv.status !== 'pending' || inv.expires_at <= now) throw stateError(inv, now);
    const tenantId = String(inv.tenant_id);
    const person = actor && !hasSystemScope(actor) && actor.email === inv.email ? await this.deps.memberships.personOfUser(actor.id) : null;
    if (person ? await this.deps.memberships.memberIn(person, tenantId) : (await this.deps.identity.usersByEmail(inv.email)).some((u) => u.tenant_id === tenantId))
      throw new ConflictError('A user with this email already exists in this tenant', { field: 'email' });

    const claim = { status: 'accepted', accepted_at: now, version: inv.version + 1, updated_at: now, [OUTBOX_FIELD]: this.deps.events.outbox.freeze(this.source, inv as unknown as Doc) };
    const claimed = await this.deps.Invitation.findOneAndUpdate(
      { _id: inv._id, version: inv.version, status: 'pending', expires_at: { $gt: now } }, { $set: claim }, { returnDocument: 'after' },
    ).lean<InvitationRecord>();
    if (!claimed) {
      const again = await this.deps.Invitation.findOne({ _id: inv._id }).lean<InvitationRecord>();
      throw again && again.status !== 'pending' ? stateError(again) : new ConflictError('The invitation changed meanwhile: use the newest link');
    }
    let user: Awaited<ReturnType<IdentityService['createUser']>>;
    try {
      user = await this.deps.identity.createUser(
        systemActor(tenantId),
        { email: inv.email, name: input.name ?? (actor && person ? actor.name : inv.email.split('@')[0]!), tenant_id: tenantId, roles: [...(inv.roles ?? [])], features: [...(inv.features ?? [])] },
        person ? { person_id: new Types.ObjectId(person) } : undefined,
      );
    } catch (err) {
      // Give the invitation back: nothing of this acceptance stays.
      await this.deps.Invitation.updateOne(
        { _id: inv._id, version: claimed.version, status: 'accepted' },
        { $set: { status: 'pending', accepted_at: null, version: claimed.version + 1, updated_at: new Date(), [OUTBOX_FIELD]: this.deps.events.outbox.freeze(this.source, claimed as unknown as Doc) } },
      );
      throw err;
    }
    const view = await this.change(actor ?? systemActor(tenantId), claimed, { accepted_user_id: new Types.ObjectId(user.id), version: claimed.version + 1, updated_at: new Date() }, 'accepted');
    const token = await this.deps.identity.issueToken(user as unknown as Actor, { kind: INVITATION_CREDENTIAL_KIND, id: view.id });
    requestOf(actor)?.log.info({ invitation_id: view.id, user_id: user.id, tenant_id: tenantId, known_person: !!person }, 'invitation accepted');
    return { user_id: user.id, tenant_id: tenantId, person_id: person ?? user.id, ...token };
  }

  private async change(actor: Actor, old: InvitationRecord, set: Doc, verb: (typeof VERBS)[number]): Promise<InvitationView> {
    const after = { ...old, ...set } as InvitationRecord;
    set[OUTBOX_FIELD] = this.deps.events.outbox.update(this.source, old as unknown as Doc, this.stage(verb, actor, after, old));
    const doc = await this.deps.Invitation.findOneAndUpdate({ _id: old._id, version: old.version }, { $set: set }, { returnDocument: 'after' }).lean<InvitationRecord>();
    if (!doc) throw new ConflictError('The invitation changed meanwhile: read it again');
    return this.done(doc);
  }

  private async done(doc: InvitationRecord): Promise<InvitationView> {
    await this.deps.events.committed(this.source, doc as unknown as Doc);
    return toInvitationView(doc);
  }

  private async owned(actor: Actor, id: string): Promise<InvitationRecord> {
    const doc = await this.deps.Invitation.findOne({ _id: id, ...this.deps.tenancy.filter(actor) }).lean<InvitationRecord>();
    if (!doc) throw new NotFoundError('invitation', id);
    return doc;
  }

  private expiry(now: Date): Date {
    return new Date(now.getTime() + this.deps.ttlHours * 3_600_000);
  }

  private async mail(actor: Actor, inv: InvitationRecord, token: string): Promise<void> {
    const tenant = (await this.deps.identity.listTenants(systemActor(String(inv.tenant_id)), { page: 1, per_page: 1 })).items[0];
    const url = new URL(this.deps.linkUrl);
    url.searchParams.set('token', token);
    // A link whose page is a hash route (`#/invitation`) takes the token after the hash.
    const link = url.hash ? `${this.deps.linkUrl}?token=${token}` : url.toString();
    const data: InvitationMail = { link, tenant_name: tenant?.name ?? '', invited_by: isSystemActor(actor) ? null : actor.name, expires_at: inv.expires_at, roles: [...(inv.roles ?? [])] };
    await this.deps.mailer.send(inv.email, INVITATION_TEMPLATE, data);
  }

  private stage(verb: (typeof VERBS)[number], actor: Actor, doc: InvitationRecord, old: InvitationRecord | null): OutboxEntry {
    const ip = requestOf(actor)?.ip ?? null;
    const entry = this.deps.events.stage(`invitation.${verb}`, {
      actor, tenant_id: String(doc.tenant_id), version: doc.version, previous: old ? (toInvitationView(old) as unknown as Doc) : null,
      meta: { resource: 'invitations', ip, audit: { operation: verb === 'created' ? 'insert' : 'update', resource: 'invitations', actor_name: isSystemActor(actor) ? null : actor.name ?? null, ip } },
    });
    return { ...entry, data: toInvitationView(doc) as unknown as Doc };
  }
}

/** The invitations plugin's codes in the error catalogue, each with its error. */
const accepted = () => new AppError(409, 'INVITATION_ACCEPTED', 'This invitation was already accepted: each link works once');
const revoked = () => new AppError(410, 'INVITATION_REVOKED', 'This invitation was revoked: ask the administrator for a new one');
const expired = () => new AppError(410, 'INVITATION_EXPIRED', 'This invitation has expired: ask the administrator to send it again');
export const invitationErrorCodes: ErrorCodes = {
  INVITATION_ACCEPTED: { example: accepted(), description: 'An invitation link used a second time (it is single-use), or resent or revoked after it was accepted.' },
  INVITATION_EXPIRED: { example: expired(), description: 'An invitation accepted after `INVITATION_TTL_HOURS`.' },
  INVITATION_REVOKED: { example: revoked(), description: 'An invitation accepted (or resent) after an administrator revoked it.' },
};

/** Why an invitation that is not pending (or has expired) is refused: 409 accepted, 410 revoked or expired. */
function stateError(inv: InvitationRecord, now = new Date()): AppError {
  if (inv.status === 'accepted') return accepted();
  if (inv.status === 'revoked') return revoked();
  if (inv.expires_at <= now) return expired();
  return new ConflictError('The invitation changed meanwhile: read it again');
}

export const invitationEventVerbs = VERBS;
