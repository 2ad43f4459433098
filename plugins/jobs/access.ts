import { hasSystemScope, type Actor } from '../../core/context.ts';
import { NotFoundError } from '../../core/errors.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { JobRegistry, RegisteredJob } from './registry.ts';

/**
 * What an administrator reaches in the jobs plugin (docs/jobs.md "Roles"): a tenant administrator
 * its tenant and per-tenant jobs only. Who may call each operation is declared with it
 * (`JOB_PERMISSIONS`, `SCHEDULE_PERMISSIONS`, `CHAIN_PERMISSIONS`).
 */
export class JobAccess {
  constructor(
    readonly tenancy: Tenancy,
    private readonly jobs: JobRegistry,
  ) {}

  /** An administrator's tenant scope: the tenant the actor is confined to, null for all tenants. */
  scope(actor: Actor): string | null {
    return this.tenancy.scope(actor);
  }

  /** The tenant filter of an administrator's reads and writes. */
  filter(actor: Actor, field = 'tenant_id'): Record<string, unknown> {
    return this.tenancy.filter(actor, field);
  }

  /** A tenant administrator (as opposed to a system administrator) confined to a tenant. */
  isTenantAdmin(actor: Actor): boolean {
    return !!this.scope(actor) && !hasSystemScope(actor);
  }

  /** The jobs the actor may see and run: every job with system scope, per-tenant jobs in a tenant. */
  visibleJobs(actor: Actor): RegisteredJob[] {
    const tenantAdmin = this.isTenantAdmin(actor);
    return this.jobs.all().filter((j) => !tenantAdmin || j.per_tenant);
  }

  /** A job the actor may see and run; 404 (not 403) for any other name. */
  visibleJob(actor: Actor, name: string): RegisteredJob {
    const tenantAdmin = this.isTenantAdmin(actor);
    const j = this.jobs.get(name);
    if (!j || (tenantAdmin && !j.per_tenant)) throw new NotFoundError('job', name, `Job "${name}" is not registered`);
    return j;
  }
}
