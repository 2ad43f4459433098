import type { HealthRegistry } from './health.ts';
import type { Authenticator } from './authentication.ts';
import type { AuthFailureLimiter, RequestLimiter } from './rate-limit.ts';

/**
 * Services plugins expose to each other. Plugins add entries by declaration merging:
 *
 * @example
 * declare module '../../core/services.ts' {
 *   interface Services { audit: AuditLogger }
 * }
 * ctx.services.provide('audit', logger);
 * ctx.services.get('audit').flush()
 */
export interface Services {
  /** Provided by the identity plugin: credentials to actors, for the kernel's transports. */
  authentication: Authenticator;
  /** Provided by the rate-limit plugin: failed-authentication counters (per ip and per identity) for every plugin that authenticates. */
  authFailures: AuthFailureLimiter;
  /** Provided by the kernel: every plugin's `health` checks, by name (the health plugin serves them). */
  healthChecks: HealthRegistry;
  /** Provided by the rate-limit plugin when `RATE_LIMIT_ENABLED` is on; use `services.maybe('requestLimiter')`. */
  requestLimiter: RequestLimiter;
}

export class ServiceRegistry {
  private readonly items = new Map<string, unknown>();

  provide<K extends keyof Services>(name: K, service: Services[K]): void {
    if (this.items.has(name as string)) throw new Error(`Service "${String(name)}" is already provided`);
    this.items.set(name as string, service);
  }

  /** @throws when no enabled plugin provides it: declare it in `dependsOn` or use `maybe()`. */
  get<K extends keyof Services>(name: K): Services[K] {
    if (!this.items.has(name as string)) throw new Error(`Service "${String(name)}" is not provided by any enabled plugin`);
    return this.items.get(name as string) as Services[K];
  }

  maybe<K extends keyof Services>(name: K): Services[K] | undefined {
    return this.items.get(name as string) as Services[K] | undefined;
  }

  has(name: keyof Services): boolean {
    return this.items.has(name as string);
  }
}
