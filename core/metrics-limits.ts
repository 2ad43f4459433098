import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Metrics } from './metrics.ts';

/** The request rate limiter, counting refusals (a rejection with `RateLimiterRes`) into `rate_limit_refusals_total`. */
export function countRefusals(limiter: RateLimiterAbstract | null, metrics: Metrics): RateLimiterAbstract | null {
  if (!limiter) return null;
  const counted = Object.create(limiter) as RateLimiterAbstract;
  counted.consume = async (...args: Parameters<RateLimiterAbstract['consume']>) => {
    try {
      return await limiter.consume(...args);
    } catch (rejected) {
      if (rejected instanceof RateLimiterRes) metrics.auth.rateLimited.inc();
      throw rejected;
    }
  };
  return counted;
}
