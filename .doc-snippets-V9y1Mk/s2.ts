import { definePlugin, z } from 'plugin-api-server';

export const reportsPlugin = definePlugin({
  name: 'reports',
  dependsOn: ['resources'],
  setup: ({ services }) => ({
    jobs: [{
      name: 'monthly_report',                 // unique, snake_case
      description: 'Build the monthly report', // default ''
      timeout: 600,                           // seconds per attempt, default 3600
      max_attempts: 3,                        // tries including the first, default 3; 1 = no retry
      per_tenant: true,                       // run once per tenant (see below), default false
      params: z.object({ month: z.string().regex(/^\d{4}-\d{2}$/).describe('YYYY-MM') }),
      async run(ctx, { month }) {
        const items = await services.get('resources').get('projects')!.list(ctx.actor, {});
        for (const [i, p] of items.items.entries()) {
          if (ctx.signal.aborted) throw ctx.signal.reason;   // cancel or timeout
          await ctx.progress(i + 1, items.items.length, `project ${p.name}`);
        }
        ctx.log(`report for ${month} in tenant ${ctx.tenant_id}`);
        return { projects: items.items.length };   // JSON only: stored as the run's result
      },
    }],
  }),
});
export {};
