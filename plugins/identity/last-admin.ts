import { randomUUID } from 'node:crypto';
import { Types, type Model } from 'mongoose';
import { ConflictError } from '../../core/errors.ts';
import { LIVE } from './authentication.ts';
import type { AdminLockDoc, UserDoc } from './model.ts';

/** How long a held lock counts: a process that dies holding it blocks its tenant's changes this long at most. */
const LEASE_MS = 10_000;
/** A waiter gives up after two leases: the lock was taken over and over again in the meantime. */
const WAIT_MS = 2 * LEASE_MS;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A user as the rule sees it: whether it is one of its tenant's active administrators. */
export interface AdminCandidate { _id: Types.ObjectId | string; tenant_id: Types.ObjectId | string; roles?: readonly string[] | null; is_active?: boolean | null }

export const isActiveAdmin = (u: AdminCandidate): boolean => u.is_active !== false && !!u.roles?.includes('admin');

/**
 * Keeps at least one active administrator in every tenant. Counting the others and then writing
 * is two steps, and the database has no transactions, so two requests each taking away one of the
 * last two administrators would both count one other and both succeed. Every change that takes an
 * administrator away therefore runs under a per-tenant lock: a lease document in `admin_locks`
 * taken with one conditional upsert (held: the upsert's insert hits the unique `_id`). Changes that
 * add administrators need no lock: they can only make the count larger.
 */
export class LastAdminGuard {
  constructor(private readonly users: Model<UserDoc>, private readonly locks: Model<AdminLockDoc>) {}

  /**
   * Runs `write` (which takes `user` away as an administrator) unless `user` is the last active
   * administrator of its tenant.
   * @throws ConflictError (409, `details.reason: "last_admin"`) and nothing is written
   */
  async takingAway<T>(user: AdminCandidate, write: () => Promise<T>): Promise<T> {
    const tenant = String(user.tenant_id);
    const token = await this.acquire(tenant);
    try {
      const others = await this.users.countDocuments({
        tenant_id: new Types.ObjectId(tenant), roles: 'admin', is_active: { $ne: false }, _id: { $ne: new Types.ObjectId(String(user._id)) }, ...LIVE,
      });
      if (others === 0) throw new ConflictError('This is the last active administrator of its tenant: make another user an administrator first', { reason: 'last_admin' });
      return await write();
    } finally {
      await this.locks.deleteOne({ _id: tenant, token }).catch(() => undefined);
    }
  }

  private async acquire(tenant: string): Promise<string> {
    const token = randomUUID();
    const giveUp = Date.now() + WAIT_MS;
    for (let wait = 5; ; wait = Math.min(wait * 2, 200)) {
      const now = new Date();
      try {
        await this.locks.updateOne({ _id: tenant, until: { $lt: now } }, { $set: { token, until: new Date(now.getTime() + LEASE_MS) } }, { upsert: true });
        return token;
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err;
      }
      if (Date.now() > giveUp) throw new ConflictError('Another change of this tenant\'s administrators is under way: try again', { reason: 'busy' });
      await sleep(wait);
    }
  }
}
