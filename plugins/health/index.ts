import { definePlugin, type Plugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { HEALTH_PERMISSIONS, HealthService } from './service.ts';
import { healthGraphql } from './graphql.ts';
import { detailedResponse, livenessResponse, readinessResponse } from './schemas.ts';

/** Core plugin: `/health`, `/ready`, `/admin/health/detailed`, `Query.health` and the `database` check. */
export const healthPlugin: Plugin = definePlugin({
  name: 'health',
  setup({ db, config, log, services }) {
    const health = new HealthService(db, services.get('healthChecks'), config.HEALTH_CHECK_TIMEOUT_MS, (name, status, err) =>
      log.warn({ check: name, status, err }, 'health check not ok'),
    );
    return {
      health: { database: health.ping },
      graphql: (builder) => healthGraphql(builder, health),
      routes: [
        defineRoute({
          method: 'GET', path: '/health', auth: HEALTH_PERMISSIONS.liveness, rateLimitExempt: true, tags: ['health'], summary: 'Liveness', response: livenessResponse,
          handler: () => ({ status: 'ok' as const }),
        }),
        defineRoute({
          method: 'GET', path: '/ready', auth: HEALTH_PERMISSIONS.readiness, rateLimitExempt: true, tags: ['health'],
          summary: 'Readiness: 200 when the database answers, 503 SERVICE_UNAVAILABLE otherwise',
          response: readinessResponse,
          handler: () => health.ready(),
        }),
        defineRoute({
          method: 'GET', path: '/admin/health/detailed', auth: HEALTH_PERMISSIONS.detailed, tags: ['health'],
          summary: 'Runs every registered health check in parallel',
          response: detailedResponse,
          handler: () => health.detailed(),
        }),
      ],
    };
  },
});
