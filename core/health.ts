import { withTimeout } from './timeout.ts';
import { PluginError } from './plugin-error.ts';

/**
 * A health check: resolve (or return `true`) when healthy. Return `false` or throw a
 * `HealthCheckFailure` to report `failed`; any other exception reports `error`; exceeding
 * `HEALTH_CHECK_TIMEOUT_MS` reports `timeout`.
 */
export type HealthCheck = () => Promise<unknown> | unknown;

/** Throw this from a health check to report `failed` rather than `error`. */
export class HealthCheckFailure extends Error {
  override name = 'HealthCheckFailure';
}

export type CheckStatus = 'ok' | 'failed' | 'timeout' | 'error';
export interface HealthReport {
  status: 'ok' | 'degraded';
  checks: Record<string, { status: CheckStatus; duration_ms: number }>;
}

export class HealthRegistry {
  private readonly checks = new Map<string, { plugin: string; fn: HealthCheck }>();

  register(name: string, fn: HealthCheck, plugin: string): void {
    const existing = this.checks.get(name);
    if (existing) throw new PluginError(`Health check "${name}" registered by "${plugin}" is already registered by "${existing.plugin}"`);
    this.checks.set(name, { plugin, fn });
  }

  names(): string[] {
    return [...this.checks.keys()];
  }

  /** Runs every check in parallel, each bounded by `timeoutMs`. */
  async run(timeoutMs: number, onProblem: (name: string, status: CheckStatus, err: unknown) => void): Promise<HealthReport> {
    const entries = await Promise.all(
      [...this.checks].map(async ([name, { fn }]) => {
        const started = performance.now();
        const status = await runOne(fn, timeoutMs).then(
          (s) => {
            if (s === 'failed') onProblem(name, s, null);
            return s;
          },
          (err: unknown) => {
            const s: CheckStatus = err === TIMEOUT ? 'timeout' : err instanceof HealthCheckFailure ? 'failed' : 'error';
            onProblem(name, s, err);
            return s;
          },
        );
        const took = Math.round(performance.now() - started);
        // Node's timers run on the loop's cached clock and may fire a millisecond before a fresh
        // performance.now() says the timeout elapsed: a check that timed out took at least the timeout.
        return [name, { status, duration_ms: status === 'timeout' ? Math.max(took, timeoutMs) : took }] as const;
      }),
    );
    const checks = Object.fromEntries(entries);
    return { status: entries.every(([, c]) => c.status === 'ok') ? 'ok' : 'degraded', checks };
  }
}

const TIMEOUT = Symbol('timeout');

async function runOne(fn: HealthCheck, timeoutMs: number): Promise<CheckStatus> {
  const result = await withTimeout(Promise.resolve().then(fn), timeoutMs, TIMEOUT);
  return result === false || result instanceof Error ? 'failed' : 'ok';
}
