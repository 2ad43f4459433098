import type { Connection } from 'mongoose';
import { RateLimiterMemory, RateLimiterMongo, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../../config/index.ts';

/**
 * A fixed-window limiter of `points` per `RATE_LIMIT_WINDOW_SECONDS` (rate-limiter-flexible),
 * exact: every count is one atomic `findOneAndUpdate` on the shared store. Used for the rare,
 * security-relevant counters (failed authentications). With `RATE_LIMIT_STORE=mongo` the counters
 * live in the collection `collection` of the app's database, so every replica shares them (a TTL
 * index drops expired windows). If the database fails, counting falls back to this process's
 * memory (the library's insurance limiter) rather than refusing requests. `memory` is for one process.
 */
export async function createLimiter(config: Config, conn: Connection, collection: string, points: number): Promise<RateLimiterAbstract> {
  const duration = config.RATE_LIMIT_WINDOW_SECONDS;
  const memory = new RateLimiterMemory({ points, duration, keyPrefix: collection });
  if (config.RATE_LIMIT_STORE === 'memory') return memory;
  const mongo = mongoLimiter(conn, collection, points, duration, memory);
  await mongo.createIndexes();
  return mongo;
}

export function mongoLimiter(conn: Connection, collection: string, points: number, duration: number, insuranceLimiter?: RateLimiterAbstract): RateLimiterMongo {
  return new RateLimiterMongo({
    storeClient: conn.db, tableName: collection, keyPrefix: collection, points, duration, insuranceLimiter,
    // Built by the caller and awaited, not in the background where a failure would only reach console.error.
    disableIndexesCreation: true,
  });
}
