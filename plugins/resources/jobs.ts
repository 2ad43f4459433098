/** The resources plugin's jobs: the soft-delete purge, the versions age limit, the scheduled publish of drafts. */
import { z } from 'zod';
import type { JobDefinition } from '../../core/plugin.ts';
import type { ResourceRegistry } from './registry.ts';
import type { Versions } from './versions/service.ts';
import { purgeVersionsJob } from './versions/setup.ts';
import { publishDraftsJob } from './drafts/setup.ts';

/** Each runs as its run's actor: a per-tenant run acts on its tenant only. */
export const resourceJobs = (registry: ResourceRegistry, versions: Versions): JobDefinition[] => [
  {
    name: 'purge_soft_deleted',
    description: 'Permanently removes documents soft-deleted longer ago than SOFT_DELETE_RETENTION_DAYS',
    timeout: 600,
    params: z.object({ days: z.number().int().min(1).optional().describe('Override SOFT_DELETE_RETENTION_DAYS') }),
    run: async (ctx, params: { days?: number | undefined }) => registry.purgeSoftDeleted(ctx.actor, params.days),
  },
  purgeVersionsJob(registry, versions),
  publishDraftsJob(registry),
];
