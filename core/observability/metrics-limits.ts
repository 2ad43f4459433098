import type { RequestLimiter } from '../rate-limit.ts';
import type { Metrics } from './metrics.ts';

/** The request rate limiter, counting refusals into `rate_limit_refusals_total`. */
export function countRefusals(limiter: RequestLimiter | null, metrics: Metrics): RequestLimiter | null {
  if (!limiter) return null;
  const consume = limiter.consume.bind(limiter);
  limiter.consume = (key, max) => {
    const decision = consume(key, max);
    if (!decision.allowed) metrics.auth.rateLimited.inc();
    return decision;
  };
  return limiter;
}
