import type { Builder } from '../../core/graphql.ts';
import { parseInput, requireAdmin } from '../../core/graphql.ts';
import { hasSystemScope, scopedTenantId } from '../../core/context.ts';
import type { Line, Overview, SeriesService } from './service.ts';
import { overviewArgs } from './schemas.ts';

/**
 * `metricsOverview(range)`: the console overview's plots. Administrators only; a tenant
 * administrator gets their tenant's series, a system administrator every tenant's added up (or the
 * tenant of `X-Tenant-Id`) and the system-wide ones (requests, errors, latency).
 */
export function seriesGraphql(builder: Builder, series: SeriesService): void {
  const LineRef = builder.objectRef<Line>('MetricsLine');
  LineRef.implement({
    fields: (t) => ({
      name: t.exposeString('name', { nullable: false }),
      values: t.field({ type: ['Float'], nullable: { list: false, items: true }, resolve: (l) => l.values }),
    }),
  });
  const OverviewRef = builder.objectRef<Overview>('MetricsOverview');
  OverviewRef.implement({
    description: 'Aligned series of the last hour (1-minute steps) or day (5-minute steps); each list has one value per step of `t`',
    fields: (t) => {
      const floats = (key: keyof Overview, description: string, nullable = false) =>
        t.field({ type: ['Float'], nullable: { list: nullable, items: true }, description, resolve: (o) => o[key] as (number | null)[] });
      return {
      range: t.exposeString('range', { nullable: false }),
      step_seconds: t.exposeInt('step_seconds', { nullable: false }),
      t: t.field({ type: ['Float'], nullable: false, description: "Each step's start (unix seconds)", resolve: (o) => o.t }),
      requests_per_second: floats('requests_per_second', 'HTTP requests per second (system administrators; null otherwise)', true),
      error_rate: floats('error_rate', 'Share of 5xx answers, 0 to 1 (system administrators)', true),
      latency_p50_ms: floats('latency_p50_ms', 'Median answer time in ms (system administrators)', true),
      latency_p95_ms: floats('latency_p95_ms', '95th percentile answer time in ms (system administrators)', true),
      deliveries_succeeded: floats('deliveries_succeeded', 'Outbound webhook attempts that got a 2xx'),
      deliveries_failed: floats('deliveries_failed', 'Outbound webhook attempts that failed'),
      delivery_delay_p95_ms: floats('delivery_delay_p95_ms', '95th percentile from a delivery created to delivered, ms'),
      job_runs: t.field({ type: [LineRef], nullable: false, description: 'Job runs finished, by status', resolve: (o) => o.job_runs }),
      job_duration_p95_ms: floats('job_duration_p95_ms', '95th percentile job run duration, ms'),
      events: t.field({ type: [LineRef], nullable: false, description: 'Events stored, by type', resolve: (o) => o.events }),
      };
    },
  });
  builder.queryFields((t) => ({
    metricsOverview: t.field({
      type: OverviewRef, nullable: false, args: { range: t.arg.string({ required: true, description: '`hour` or `day`' }) },
      description: 'Plots of the last hour or day (administrators): your tenant\'s series; system administrators also the system-wide ones',
      resolve: (_r, a, ctx) => {
        const actor = requireAdmin(ctx);
        const { range } = parseInput(overviewArgs, a);
        return series.overview(range, scopedTenantId(actor) ?? undefined, hasSystemScope(actor));
      },
    }),
  }));
}
