import type { Actor } from './context.ts';
import { scopedTenantId } from './context.ts';
import { tenantFilter, accessFilter, type AccessPolicy, type Filter } from './access.ts';

/**
 * The app's tenant policy, decided once from `MULTI_TENANT_ENABLED` and handed to every plugin as
 * `ctx.tenancy`. Every read, count, update and delete of tenant-scoped data takes its tenant term
 * from here, so the setting means the same in every plugin: on, non-system actors are confined to
 * their tenant; off, the deployment is treated as one tenant and no filter adds a tenant term.
 * Writes still stamp `tenant_id` either way (see docs/auth.md "Single-tenant deployments").
 */
export class Tenancy {
  constructor(
    /** `MULTI_TENANT_ENABLED`. */
    readonly enabled: boolean,
  ) {}

  /** The tenant filter of a read or write: `{[field]: tenant}` or `{}` (all tenants / setting off). */
  filter(actor: Actor, field = 'tenant_id'): Filter {
    return tenantFilter(actor, this.enabled, field);
  }

  /** Tenant filter plus feature and attribute rules (403 when a rule rejects the actor). */
  access(actor: Actor, policy: AccessPolicy): Filter {
    return accessFilter(actor, policy, this.enabled);
  }

  /** The tenant the actor is confined to, or null for all tenants (system scope, or the setting off). */
  scope(actor: Actor): string | null {
    return this.enabled ? scopedTenantId(actor) : null;
  }
}
