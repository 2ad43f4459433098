/** The `purge_versions` job: the age limit of versioned resources (`versions.max_age_days`). No Koa or GraphQL here. */
import { Types } from 'mongoose';
import type { Actor } from '../../../core/context.ts';
import { requireRole } from '../../../core/access.ts';
import type { ResourceService } from '../service.ts';
import type { TenantTerm, VersionStore } from './store.ts';

/**
 * Drops, in every resource with `versions.max_age_days`, the versions older than that many days,
 * within the actor's tenant scope (`systemActor()` every tenant, `systemActor(tenantId)` that one).
 * The first version of each document stays until the document is purged.
 * @throws AccessDeniedError for a non-system actor (nothing deleted)
 */
export async function purgeVersions(services: ResourceService[], store: VersionStore, actor: Actor): Promise<{ deleted_count: number; resources: Record<string, number> }> {
  requireRole(actor, 'system');
  const resources: Record<string, number> = {};
  for (const svc of services) {
    const days = svc.def.versions?.max_age_days;
    if (!days) continue;
    const tenant = svc.def.tenant_scoped ? svc.deps.tenancy.scope(actor) : null;
    const scope: TenantTerm = tenant ? { tenant_id: new Types.ObjectId(tenant) } : {};
    resources[svc.def.name] = await store.purgeOlderThan(scope, svc.def.name, days);
  }
  return { deleted_count: Object.values(resources).reduce((a, b) => a + b, 0), resources };
}
