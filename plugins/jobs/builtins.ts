import { z } from 'zod';
import type { Connection } from 'mongoose';
import type { Config } from '../../config/index.ts';
import type { JobDefinition } from '../../core/plugin.ts';
import { identityModels } from '../../core/identity/models.ts';
import type { JobsService } from './service.ts';

const DAY_MS = 86_400_000;
const days = (what: string) => z.object({ days: z.number().int().min(1).optional().describe(what) });

/**
 * The jobs plugin's own maintenance jobs (spec document 3, built-in jobs; `cleanup_audit_log`
 * comes from the audit plugin, `purge_soft_deleted` from resources).
 */
export function builtinJobs(svc: JobsService, config: Config, db: Connection): JobDefinition[] {
  return [
    {
      name: 'cleanup_expired_tokens',
      description: 'Delete dead credentials: API keys revoked, or whose user was deleted, more than JOBS_REVOKED_KEY_RETENTION_DAYS ago (bearer tokens are stateless and expire by themselves)',
      timeout: 300,
      params: days('Override JOBS_REVOKED_KEY_RETENTION_DAYS'),
      async run(ctx, params) {
        const cutoff = new Date(Date.now() - (params.days ?? config.JOBS_REVOKED_KEY_RETENTION_DAYS) * DAY_MS);
        const { ApiKey, User } = identityModels(db);
        const revoked = await ApiKey.deleteMany({ revoked_at: { $ne: null, $lt: cutoff } });
        const goneUsers = await User.find({ is_deleted: true, deleted_at: { $lt: cutoff } }, { _id: 1 }).lean();
        const orphaned = goneUsers.length ? await ApiKey.deleteMany({ user_id: { $in: goneUsers.map((u) => u._id) } }) : { deletedCount: 0 };
        ctx.log(`deleted ${revoked.deletedCount} revoked API keys and ${orphaned.deletedCount} keys of deleted users (before ${cutoff.toISOString()})`);
        return { revoked_keys_deleted: revoked.deletedCount, deleted_user_keys_deleted: orphaned.deletedCount, cutoff_date: cutoff.toISOString() };
      },
    } satisfies JobDefinition<ReturnType<typeof days>>,
    {
      name: 'cleanup_job_runs',
      description: 'Delete finished job runs older than JOBS_CLEANUP_DAYS',
      timeout: 300,
      params: days('Override JOBS_CLEANUP_DAYS'),
      async run(ctx, params) {
        const res = await svc.purgeRuns(params.days ?? config.JOBS_CLEANUP_DAYS);
        ctx.log(`deleted ${res.deleted_count} job runs created before ${res.cutoff_date.toISOString()}`);
        return { deleted_count: res.deleted_count, cutoff_date: res.cutoff_date.toISOString() };
      },
    } satisfies JobDefinition<ReturnType<typeof days>>,
    {
      name: 'calculate_next_schedules',
      description: 'Recompute next_run_at of every enabled schedule',
      timeout: 120,
      async run(ctx) {
        const res = await svc.recomputeNextRuns();
        ctx.log(`recomputed ${res.updated} schedules`);
        return res;
      },
    },
  ] as JobDefinition[];
}
