import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { AuthFailureLimiter } from '../../core/rate-limit.ts';

/**
 * The `authFailures` service: failed authentications counted with the exact limiter of store.ts,
 * so every replica shares them with `RATE_LIMIT_STORE=mongo`. Only failures are counted and only
 * failures are refused, so nobody can lock a user out by failing on purpose from a shared ip.
 * Without a limiter (`RATE_LIMIT_ENABLED=false`) nothing is refused; failures are still reported.
 */
export class AuthFailureCounter implements AuthFailureLimiter {
  onFailure?: (lockedOut: boolean) => void;

  constructor(private readonly limiter: RateLimiterAbstract | null) {}

  async lockedOut(ip: string | null, identity?: string | null): Promise<number | null> {
    if (!this.limiter) return null;
    const seen = await Promise.all(this.keys(ip, identity).map((k) => this.limiter!.get(k)));
    return this.wait(seen);
  }

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
