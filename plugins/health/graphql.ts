import type { Builder } from '../../core/graphql.ts';
import { scopes } from '../../core/graphql.ts';
import type { HealthReport } from '../../core/health.ts';
import { HEALTH_PERMISSIONS, type HealthService } from './service.ts';

/** `Query.health`: the detailed report, as `GET /admin/health/detailed`. */
export function healthGraphql(builder: Builder, health: HealthService): void {
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
      resolve: () => health.detailed(),
    }),
  );
}
