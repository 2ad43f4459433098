import { ServiceUnavailableError } from './errors.ts';
import { definePlugin, type Plugin } from './plugin.ts';
import { z } from 'zod';
import { defineRoute } from './http/route.ts';
import { HEALTH_PERMISSIONS, type HealthReport } from './health.ts';
import { scopes } from './graphql.ts';
import { withTimeout } from './timeout.ts';

/** Core plugin: `/health`, `/ready`, `/admin/health/detailed`, and the `database` check. */
export const healthPlugin: Plugin = definePlugin({
    name: 'health',
    setup({ db, config, log, services }) {
      const registry = services.get('healthChecks');
      const ping = async () => {
        if (db.readyState !== 1 || !db.db) throw new Error('database not connected');
        await db.db.admin().ping();
      };
      const detailed = () =>
        registry.run(config.HEALTH_CHECK_TIMEOUT_MS, (name, status, err) => log.warn({ check: name, status, err }, 'health check not ok'));
      return {
        health: { database: ping },
        graphql: (builder) => {
          type Check = { name: string; status: string; duration_ms: number };
          const HealthCheck = builder.objectRef<Check>('HealthCheck').implement({
            fields: (t) => ({
              name: t.exposeString('name', { nullable: false }),
              status: t.exposeString('status', { nullable: false, description: 'ok, failed, timeout or error' }),
              duration_ms: t.exposeInt('duration_ms', { nullable: false }),
            }),
          });
          const Health = builder.objectRef<HealthReport>('HealthReport').implement({
            description: 'Every registered health check, run in parallel (as GET /admin/health/detailed)',
            fields: (t) => ({
              status: t.exposeString('status', { nullable: false, description: 'ok when every check is ok, else degraded' }),
              checks: t.field({
                type: [HealthCheck], nullable: false,
                resolve: (r) => Object.entries(r.checks).map(([name, c]) => ({ name, ...c })),
              }),
            }),
          });
          builder.queryField('health', (t) =>
            t.withAuth(scopes(HEALTH_PERMISSIONS.detailed)).field({
              type: Health, nullable: false, description: 'Detailed health (administrators), as GET /admin/health/detailed',
              resolve: () => detailed(),
            }),
          );
        },
        routes: [
          defineRoute({
            method: 'GET', path: '/health', auth: HEALTH_PERMISSIONS.live, rateLimitExempt: true, tags: ['health'], summary: 'Liveness', response: z.object({ status: z.literal('ok') }),
            handler: () => ({ status: 'ok' }),
          }),
          defineRoute({
            method: 'GET', path: '/ready', auth: HEALTH_PERMISSIONS.ready, rateLimitExempt: true, tags: ['health'],
            summary: 'Readiness: 200 when the database answers, 503 SERVICE_UNAVAILABLE otherwise',
            response: z.object({ status: z.literal('ready'), checks: z.record(z.string(), z.string()) }),
            async handler() {
              try {
                await withTimeout(ping(), Math.min(config.HEALTH_CHECK_TIMEOUT_MS, 2000));
              } catch {
                throw new ServiceUnavailableError('Not ready', { checks: { database: 'unavailable' } });
              }
              return { status: 'ready', checks: { database: 'ok' } };
            },
          }),
          defineRoute({
            method: 'GET', path: '/admin/health/detailed', auth: HEALTH_PERMISSIONS.detailed, tags: ['health'],
            summary: 'Runs every registered health check in parallel',
            response: z.object({
              status: z.enum(['ok', 'degraded']),
              checks: z.record(z.string(), z.object({ status: z.enum(['ok', 'failed', 'timeout', 'error']), duration_ms: z.number().int() })),
            }),
            handler: () => detailed(),
          }),
        ],
      };
    },
});
