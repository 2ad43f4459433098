import { z } from 'zod';
import type { Config } from '../../config/index.ts';
import type { JobDefinition } from '../../core/plugin.ts';
import type { IdentityService } from '../identity/index.ts';
import type { JobsService } from './service.ts';
import type { ScheduleService } from './schedules.ts';

const DAY_MS = 86_400_000;
const days = (what: string) => z.object({ days: z.number().int().min(1).optional().describe(what) });

/**
 * The jobs plugin's own maintenance jobs (`cleanup_audit_log` comes from the audit plugin,
 * `purge_soft_deleted` from resources). Each deletes within the run's
 * actor (`ctx.actor`): every tenant for a run without a tenant, one tenant for a per-tenant run.
 */
export function builtinJobs(svc: JobsService, schedules: ScheduleService, config: Config, identity: IdentityService): JobDefinition[] {
  return [
    {
      name: 'cleanup_expired_tokens',
      description: 'Delete dead credentials: API keys revoked, or whose user was deleted, more than REVOKED_API_KEY_RETENTION_DAYS ago (bearer tokens are stateless and expire by themselves)',
      timeout: 300,
      params: days('Override REVOKED_API_KEY_RETENTION_DAYS'),
      async run(ctx, params) {
        const cutoff = new Date(Date.now() - (params.days ?? config.REVOKED_API_KEY_RETENTION_DAYS) * DAY_MS);
        // As the run's actor: a per-tenant run deletes its tenant's keys only.
        const res = await identity.purgeDeadApiKeys(ctx.actor, cutoff);
        ctx.log(`deleted ${res.revoked_keys_deleted} revoked API keys and ${res.deleted_user_keys_deleted} keys of deleted users (before ${cutoff.toISOString()})`);
        return { ...res, cutoff_date: cutoff.toISOString() };
      },
    } satisfies JobDefinition<ReturnType<typeof days>>,
    {
      name: 'cleanup_job_runs',
      description: 'Delete finished job runs older than JOB_RUN_RETENTION_DAYS',
      timeout: 300,
      params: days('Override JOB_RUN_RETENTION_DAYS'),
      async run(ctx, params) {
        const res = await svc.purgeRuns(ctx.actor, params.days ?? config.JOB_RUN_RETENTION_DAYS);
        ctx.log(`deleted ${res.deleted_count} job runs created before ${res.cutoff_date.toISOString()}`);
        return { deleted_count: res.deleted_count, cutoff_date: res.cutoff_date.toISOString() };
      },
    } satisfies JobDefinition<ReturnType<typeof days>>,
    {
      name: 'calculate_next_schedules',
      description: 'Recompute next_run_at of every enabled schedule',
      timeout: 120,
      async run(ctx) {
        const res = await schedules.recomputeNextRuns();
        ctx.log(`recomputed ${res.updated} schedules`);
        return res;
      },
    },
  ] as JobDefinition[];
}
