import type { JobRunContext } from '../../core/plugin.ts';
import { systemActor } from '../../core/context.ts';
import type { IdentityService } from '../identity/index.ts';
import { FINISHED, type JobRunRecord } from './model.ts';
import type { RunLauncher } from './runs.ts';
import { sleep } from './store.ts';

/** An attempt that must not be retried (invalid result or parameters, a chain or fan-out whose part failed). */
export class FinalError extends Error {}

/** The body of a coordinating run: starts child runs and waits for them. */
export type Coordinator = (run: JobRunRecord, ctx: JobRunContext) => Promise<unknown>;

/**
 * A coordinator's `ctx.progress` that writes only when (current, total) changed since its last
 * call: a poll that finds nothing new adds no log line (a long run would otherwise fill its log
 * with identical lines and lose the real ones past MAX_LOG_LINES).
 */
export function progressOnChange(ctx: JobRunContext): (current: number, total: number, message?: string) => Promise<void> {
  let last: string | undefined;
  return async (current, total, message) => {
    const key = `${current}/${total}`;
    if (key === last) return;
    last = key;
    await ctx.progress(current, total, message);
  };
}

/** Every tenant's id, read page by page from the identity service. */
export async function tenantIds(identity: Pick<IdentityService, 'listTenants'>): Promise<string[]> {
  const ids: string[] = [];
  for (let page = 1; ; page++) {
    const res = await identity.listTenants(systemActor(), { page, per_page: 500 });
    ids.push(...res.items.map((t) => String(t.id)));
    if (ids.length >= res.total || !res.items.length) return ids;
  }
}

/**
 * A per-tenant job: one child run per tenant, each as that tenant's system actor; one tenant's
 * failure leaves the others running. The parent fails afterwards naming the failed tenants.
 */
export function fanoutCoordinator(launcher: RunLauncher, tenants: () => Promise<string[]>, pollMs: number): Coordinator {
  return async (run, ctx) => {
    const job = launcher.jobs.get(run.job_name);
    if (!job) throw new FinalError(`Job "${run.job_name}" is no longer registered`);
    const ids = await tenants();
    for (const t of ids) {
      await launcher.create({
        job_name: run.job_name, job_type: run.job_type, parameters: run.parameters, tenant_id: t, origin: { parent: run },
        limits: { max_attempts: job.max_attempts, timeout_seconds: job.timeout }, dedupe_key: `${String(run._id)}:tenant:${t}`,
      });
    }
    ctx.log(`started one run per tenant (${ids.length})`);
    const report = progressOnChange(ctx);
    for (;;) {
      const children = await launcher.store.children(run._id);
      const done = children.filter((c) => FINISHED.includes(c.status));
      await report(done.length, children.length, `${done.length} of ${children.length} tenants done`);
      if (done.length === children.length) {
        const failed = children.filter((c) => c.status !== 'completed');
        const result = { tenants: children.length, completed: children.length - failed.length, failed: failed.length, failed_tenants: failed.map((c) => String(c.tenant_id)) };
        if (failed.length) throw new FinalError(`${failed.length} of ${children.length} tenants failed: ${failed.map((c) => `${String(c.tenant_id)} (${c.error ?? c.status})`).join(', ')}`);
        return result;
      }
      await sleep(pollMs, ctx.signal);
      if (ctx.signal.aborted) throw ctx.signal.reason as Error;
    }
  };
}
