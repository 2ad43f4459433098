import type { Connection } from 'mongoose';
import type { Permissions } from '../../core/permissions.ts';
import type { HealthRegistry, HealthReport } from '../../core/health.ts';
import { ServiceUnavailableError } from '../../core/errors.ts';
import { withTimeout } from '../../core/timeout.ts';

/** Who may read each health operation (REST route and GraphQL field read the same entry). */
export const HEALTH_PERMISSIONS = { liveness: 'public', readiness: 'public', detailed: 'admin' } as const satisfies Permissions;

/** Liveness, readiness (the database answers) and the detailed report of every registered check. */
export class HealthService {
  constructor(
    private readonly db: Connection,
    private readonly registry: HealthRegistry,
    private readonly timeoutMs: number,
    private readonly onProblem: (name: string, status: string, err: unknown) => void,
  ) {}

  /** The `database` check: the connection is open and the server answers a ping. */
  readonly ping = async (): Promise<void> => {
    if (this.db.readyState !== 1 || !this.db.db) throw new Error('database not connected');
    await this.db.db.admin().ping();
  };

  /** @throws ServiceUnavailableError (503) when the database does not answer within the bound */
  async ready(): Promise<{ status: 'ready'; checks: Record<string, string> }> {
    try {
      await withTimeout(this.ping(), Math.min(this.timeoutMs, 2000));
    } catch {
      throw new ServiceUnavailableError('Not ready', { checks: { database: 'unavailable' } });
    }
    return { status: 'ready', checks: { database: 'ok' } };
  }

  /** Runs every registered check in parallel, each bounded by `HEALTH_CHECK_TIMEOUT_MS`. */
  detailed(): Promise<HealthReport> {
    return this.registry.run(this.timeoutMs, this.onProblem);
  }
}
