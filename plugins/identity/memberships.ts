/**
 * Memberships: a person (`people`) holds one users document per tenant they belong to, each with
 * its own roles, features, attributes and API keys. The users document stays the actor, so every
 * tenant check works on it unchanged; this module answers the questions about the person behind
 * it (its memberships, which one a sign-in acts in). No Koa or GraphQL here.
 */
import { Types } from 'mongoose';
import type { Logger } from '../../core/logger.ts';
import { LIVE, toAuthUser, type UserRecord } from './authentication.ts';
import { ensurePerson, type IdentityModels } from './model.ts';

/** One membership as `GET /auth/me` and GraphQL `myMemberships` show it. */
export interface MembershipView {
  user_id: string;
  tenant_id: string;
  tenant_name: string | null;
  roles: string[];
  features: string[];
}

/** What a sign-in by a person's own credential acts as. */
export type MembershipChoice =
  | { kind: 'member'; user: ReturnType<typeof toAuthUser> }
  /** Several memberships and no tenant named: the tenants to choose from. */
  | { kind: 'choose'; tenants: { id: string; name: string | null }[] }
  /** No active membership (in the tenant named): refused like an unknown credential. */
  | { kind: 'none' };

/** Comment on the membership queries, so a trace (or a test counting credential lookups) tells them apart. */
const COMMENT = 'memberships';

/** The person of a users document: its `person_id`, or itself for one not migrated yet. */
export const personOf = (u: { _id: Types.ObjectId | string; person_id?: Types.ObjectId | string | null }): string => String(u.person_id ?? u._id);

/** The users documents of one person (including one not migrated yet, whose person is itself). */
const ofPerson = (personId: string) => {
  const id = new Types.ObjectId(personId);
  return { $or: [{ person_id: id }, { _id: id, person_id: null }] };
};

/**
 * Gives every users document without a person its own person (same id as the user). Idempotent
 * and safe from several processes at once: the person is an upsert of a fixed id, and the user's
 * `person_id` a conditional update of users still without one. Nobody is merged by e-mail.
 * @returns how many users this run linked
 */
export async function migratePeople(models: IdentityModels, log: Logger): Promise<number> {
  let linked = 0;
  const cursor = models.User.collection.find({ person_id: null }, { projection: { _id: 1 } });
  for await (const u of cursor) {
    await ensurePerson(models.Person.collection, u._id as Types.ObjectId);
    const res = await models.User.collection.updateOne({ _id: u._id, person_id: null }, { $set: { person_id: u._id } });
    linked += res.modifiedCount;
  }
  if (linked) log.info({ linked }, 'users: each existing user became the membership of a person of its own');
  return linked;
}

/** The `memberships` service: a person's memberships and the tenant a personal sign-in acts in. */
export class MembershipService {
  constructor(private readonly models: IdentityModels) {}

  /** The person behind a live users document, or null. */
  async personOfUser(userId: string): Promise<string | null> {
    if (!Types.ObjectId.isValid(userId)) return null;
    const u = await this.models.User.findOne({ _id: userId, ...LIVE }, { person_id: 1 }).comment(COMMENT).lean();
    return u ? personOf(u) : null;
  }

  /** The active, live memberships of the person behind `userId`, oldest first, with their tenant's name. */
  async membershipsOf(userId: string): Promise<MembershipView[]> {
    const person = await this.personOfUser(userId);
    if (!person) return [];
    const users = await this.activeOf(person);
    const tenants = await this.models.Tenant.find({ _id: { $in: users.map((u) => u.tenant_id) } }, { name: 1 }).comment(COMMENT).lean();
    const names = new Map(tenants.map((t) => [String(t._id), t.name]));
    return users.map((u) => ({
      user_id: String(u._id), tenant_id: String(u.tenant_id), tenant_name: names.get(String(u.tenant_id)) ?? null,
      roles: [...(u.roles ?? [])], features: [...(u.features ?? [])],
    }));
  }

  /** Ids of every live users document of the person behind `userId` (active or not): what is personal spans them. */
  async siblingIds(userId: string): Promise<string[]> {
    const person = await this.personOfUser(userId);
    if (!person) return [];
    const users = await this.models.User.find({ ...ofPerson(person), ...LIVE }, { _id: 1 }).lean();
    return users.map((u) => String(u._id));
  }

  /**
   * The membership a sign-in with a personal credential (a passkey registered by `ownerId`) acts
   * in: the one in `tenantId` when given, else the only one. The credential's owner must be a live
   * users document with this e-mail (trimmed, case-insensitive).
   */
  async choose(ownerId: string, email: string, tenantId: string | null): Promise<MembershipChoice> {
    if (!Types.ObjectId.isValid(ownerId)) return { kind: 'none' };
    const owner = await this.models.User.findOne({ _id: ownerId, email: email.trim().toLowerCase(), ...LIVE }, { person_id: 1 }).lean();
    if (!owner) return { kind: 'none' };
    const users = await this.activeOf(personOf(owner));
    if (tenantId) {
      const u = users.find((m) => String(m.tenant_id) === tenantId);
      return u ? { kind: 'member', user: toAuthUser(u) } : { kind: 'none' };
    }
    if (users.length === 1) return { kind: 'member', user: toAuthUser(users[0]!) };
    if (!users.length) return { kind: 'none' };
    const tenants = await this.models.Tenant.find({ _id: { $in: users.map((u) => u.tenant_id) } }, { name: 1 }).lean();
    const names = new Map(tenants.map((t) => [String(t._id), t.name]));
    return { kind: 'choose', tenants: users.map((u) => ({ id: String(u.tenant_id), name: names.get(String(u.tenant_id)) ?? null })) };
  }

  /** A live users document of the person in `tenantId` (active or not), for invitations: the person is already a member. */
  async memberIn(personId: string, tenantId: string): Promise<string | null> {
    const u = await this.models.User.findOne({ ...ofPerson(personId), tenant_id: new Types.ObjectId(tenantId), ...LIVE }, { _id: 1 }).lean();
    return u ? String(u._id) : null;
  }

  /** Another live membership of the person of `userId` (which may be deleted already), oldest first; null when none is left. */
  async heirOf(userId: string): Promise<{ user_id: string; tenant_id: string } | null> {
    if (!Types.ObjectId.isValid(userId)) return null;
    const u = await this.models.User.findOne({ _id: userId }, { person_id: 1 }).lean();
    if (!u) return null;
    const heir = await this.models.User.findOne({ ...ofPerson(personOf(u)), _id: { $ne: u._id }, ...LIVE }, { tenant_id: 1 }).sort({ _id: 1 }).lean();
    return heir ? { user_id: String(heir._id), tenant_id: String(heir.tenant_id) } : null;
  }

  private async activeOf(personId: string): Promise<UserRecord[]> {
    return await this.models.User.find({ ...ofPerson(personId), is_active: true, ...LIVE }).sort({ _id: 1 }).limit(500).comment(COMMENT).lean() as UserRecord[];
  }
}
