import type { Actor } from '../../../core/context.ts';

/**
 * What the jobs plugin offers other plugins, as `services.maybe('jobs')` (absent when
 * `JOBS_ENABLED` is off: run the work inline then).
 */
export interface JobRunner {
  /**
   * Queue a run of a registered job as `actor`. Resolves once the run document exists (`pending`).
   * @throws NotFoundError for an unknown job, ValidationError when params fail its schema.
   */
  trigger(name: string, params: Record<string, unknown>, opts: { actor: Actor; tenant_id?: string | null }): Promise<{ run_id: string; status: string }>;
}

declare module '../../../core/services.ts' {
  interface Services {
    /** Provided by the jobs plugin when `JOBS_ENABLED` is on; use `services.maybe('jobs')`. */
    jobs: JobRunner;
  }
}
