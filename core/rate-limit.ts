import type { Connection } from 'mongoose';
import { RateLimiterMemory, RateLimiterMongo, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../config/index.ts';

/**
 * A fixed-window limiter of `points` per `RATE_LIMIT_WINDOW_SECONDS` (rate-limiter-flexible).
 * With `RATE_LIMIT_STORE=mongo` the counters live in the collection `collection` of the app's
 * database, so every replica shares them (one atomic `findOneAndUpdate` per count; a TTL index
 * drops expired windows). If the database fails, counting falls back to this process's memory
 * (the library's insurance limiter) rather than refusing requests. `memory` is for one process.
 */
export async function createLimiter(config: Config, conn: Connection, collection: string, points: number): Promise<RateLimiterAbstract> {
  const duration = config.RATE_LIMIT_WINDOW_SECONDS;
  const memory = new RateLimiterMemory({ points, duration, keyPrefix: collection });
  if (config.RATE_LIMIT_STORE === 'memory') return memory;
  const mongo = new RateLimiterMongo({
    storeClient: conn.db, tableName: collection, keyPrefix: collection, points, duration, insuranceLimiter: memory,
    // Built here and awaited, not in the background where a failure would only reach console.error.
    disableIndexesCreation: true,
  });
  await mongo.createIndexes();
  return mongo;
}

/**
 * Failed authentications, counted per client ip and per targeted identity (an API key's prefix,
 * an email), `AUTH_FAILURE_LIMIT` per window each. Only failures are counted and only failures are
 * refused: a valid credential always passes, so nobody can lock a user out by failing on purpose
 * from a shared ip. Shared across replicas with the Mongo store.
 *
 * Other plugins that authenticate (e.g. passkeys) use it through `services.get('authFailures')`.
 * @example
 * const wait = await services.get('authFailures').fail(ip, `email:${email}`);
 * if (wait !== null) throw new RateLimitedError(wait);
 */
export class AuthFailureLimiter {
  /** Told of every failure (metrics: `auth_failures_total`); `lockedOut` when the limit refused it. */
  onFailure?: (lockedOut: boolean) => void;

  constructor(private readonly limiter: RateLimiterAbstract | null) {}

  /** Seconds until `ip` and `identity` may fail again, or null when neither is over the limit. */
  async lockedOut(ip: string | null, identity?: string | null): Promise<number | null> {
    if (!this.limiter) return null;
    const seen = await Promise.all(this.keys(ip, identity).map((k) => this.limiter!.get(k)));
    return this.wait(seen);
  }

  /**
   * Count one failed attempt against the ip and the identity. Returns the seconds to wait when
   * either is now over the limit (answer 429 instead of 401), else null.
   */
  async fail(ip: string | null, identity?: string | null): Promise<number | null> {
    if (!this.limiter) {
      this.onFailure?.(false);
      return null;
    }
    const seen = await Promise.all(this.keys(ip, identity).map((k) => this.limiter!.penalty(k, 1)));
    const wait = this.wait(seen);
    this.onFailure?.(wait !== null);
    return wait;
  }

  private keys(ip: string | null, identity?: string | null): string[] {
    return [...(ip ? [`ip:${ip}`] : []), ...(identity ? [`id:${identity.toLowerCase()}`] : [])];
  }

  private wait(seen: ({ consumedPoints: number; msBeforeNext: number } | null)[]): number | null {
    const over = seen.filter((r) => r && r.consumedPoints > this.limiter!.points);
    if (!over.length) return null;
    return Math.max(1, ...over.map((r) => Math.ceil(r!.msBeforeNext / 1000)));
  }
}
