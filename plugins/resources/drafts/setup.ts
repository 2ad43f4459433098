/** The scheduled publish of drafts (`publish_at`): the job and the call behind it. */
import type { Actor } from '../../../core/context.ts';
import type { JobDefinition } from '../../../core/plugin.ts';
import type { ResourceRegistry } from '../registry.ts';
import { publishDue } from './service.ts';

export { draftRoutes } from './rest.ts';
export { draftsReadRows } from './service.ts';

/** Every drafts resource's due drafts, published in the actor's scope. */
export async function publishDueDrafts(registry: ResourceRegistry, actor: Actor, now = new Date()): Promise<{ published: number; conflicts: number }> {
  const total = { published: 0, conflicts: 0 };
  for (const svc of registry.list()) {
    const r = await publishDue(svc, actor, now);
    total.published += r.published;
    total.conflicts += r.conflicts;
  }
  return total;
}

/** `publish_drafts`: publishes the drafts whose `publish_at` has come, as the run's actor; schedule it (e.g. every minute). */
export const publishDraftsJob = (registry: ResourceRegistry): JobDefinition => ({
  name: 'publish_drafts',
  description: 'Publishes the drafts whose publish_at has come (each once, whatever the number of replicas)',
  timeout: 600,
  run: async (ctx) => publishDueDrafts(registry, ctx.actor),
});
