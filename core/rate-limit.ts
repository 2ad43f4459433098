/**
 * Rate limiting: the contract between the kernel's pipeline (HTTP middleware, the guards of
 * GraphQL over WebSocket and event streams, metrics) and the core plugin `rate-limit`, which
 * provides the limiters as the services `requestLimiter` and `authFailures`. The kernel reads them
 * once at start-up; how counts are kept and shared between replicas is the plugin's
 * (plugins/rate-limit/, docs/operations.md "Rate limiting").
 */
/** The answer of `RequestLimiter.consume`, what the `RateLimit-*` headers say. */
export interface LimitDecision {
  allowed: boolean;
  /** Requests left in the window after this one (0 when refused). */
  remaining: number;
  /** Milliseconds until the window ends. */
  msBeforeNext: number;
}

/**
 * Fixed windows of `RATE_LIMIT_WINDOW_SECONDS` per key. Both calls answer synchronously from this
 * process's counts: the request path pays no promise and no database round trip.
 */
export interface RequestLimiter {
  /** Counts one request for `key` unless it is over `max` in its window (refused requests are not counted). */
  consume(key: string, max: number): LimitDecision;
  /** Requests left for `key` without counting one (for a budget consulted but not spent). */
  remaining(key: string, max: number): LimitDecision;
}

/**
 * Failed authentications, counted per client ip and per targeted identity (an API key's prefix,
 * an email), `AUTH_FAILURE_LIMIT` per window each. Only failures are counted and only failures are
 * refused: a valid credential always passes.
 *
 * Plugins that authenticate (e.g. passkeys) use it through `services.get('authFailures')`.
 * @example
 * const wait = await services.get('authFailures').fail(ip, `email:${email}`);
 * if (wait !== null) throw new RateLimitedError(wait);
 */
export interface AuthFailureLimiter {
  /** Told of every failure (metrics: `auth_failures_total`); `lockedOut` when the limit refused it. */
  onFailure?: (lockedOut: boolean) => void;
  /** Seconds until `ip` and `identity` may fail again, or null when neither is over the limit. */
  lockedOut(ip: string | null, identity?: string | null): Promise<number | null>;
  /**
   * Count one failed attempt against the ip and the identity. Returns the seconds to wait when
   * either is now over the limit (answer 429 instead of 401), else null.
   */
  fail(ip: string | null, identity?: string | null): Promise<number | null>;
}

