import { ServiceUnavailableError } from './errors.ts';
import { definePlugin, type Plugin } from './plugin.ts';
import { z } from 'zod';
import { defineRoute } from './http/route.ts';
import type { HealthRegistry } from './health.ts';
import { withTimeout } from './timeout.ts';

/** Core plugin: `/health`, `/ready`, `/admin/health/detailed`, and the `database` check. */
export const healthPlugin = (registry: HealthRegistry): Plugin =>
  definePlugin({
    name: 'health',
    setup({ db, config, log }) {
      const ping = async () => {
        if (db.readyState !== 1 || !db.db) throw new Error('database not connected');
        await db.db.admin().ping();
      };
      return {
        health: { database: ping },
        routes: [
          defineRoute({
            method: 'GET', path: '/health', auth: 'public', rateLimitExempt: true, tags: ['health'], summary: 'Liveness', response: z.object({ status: z.literal('ok') }),
            handler: () => ({ status: 'ok' }),
          }),
          defineRoute({
            method: 'GET', path: '/ready', auth: 'public', rateLimitExempt: true, tags: ['health'],
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
            method: 'GET', path: '/admin/health/detailed', auth: 'admin', tags: ['health'],
            summary: 'Runs every registered health check in parallel',
            response: z.object({
              status: z.enum(['ok', 'degraded']),
              checks: z.record(z.string(), z.object({ status: z.enum(['ok', 'failed', 'timeout', 'error']), duration_ms: z.number().int() })),
            }),
            handler: () =>
              registry.run(config.HEALTH_CHECK_TIMEOUT_MS, (name, status, err) => log.warn({ check: name, status, err }, 'health check not ok')),
          }),
        ],
      };
    },
  });
