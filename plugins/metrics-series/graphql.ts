import type { Builder } from '../../core/graphql.ts';
import { givenArgs, parseInput, scopes } from '../../core/graphql.ts';
import { hasSystemScope, scopedTenantId, type Actor } from '../../core/context.ts';
import { SERIES_PERMISSIONS, type Line, type Overview, type SeriesService } from './service.ts';
import { endpointSeriesArgs, jobSeriesArgs, overviewArgs, paymentSeriesArgs } from './schemas.ts';
import { PAGE_SERIES_PERMISSIONS, type EndpointSeries, type JobSeries, type PageSeries, type PaymentSeries } from './pages.ts';

const lineRefOf = (builder: Builder) => builder.objectRef<Line>('MetricsLine');

/**
 * `metricsOverview(range)`: the console overview's plots. Administrators only; a tenant
 * administrator gets their tenant's series, a system administrator every tenant's added up (or the
 * tenant of `X-Tenant-Id`) and the system-wide ones (requests, errors, latency).
 */
export function seriesGraphql(builder: Builder, series: SeriesService, pages: PageSeries): void {
  const LineRef = lineRefOf(builder);
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
  pageSeriesGraphql(builder, pages, LineRef);
  builder.queryFields((t) => ({
    metricsOverview: t.withAuth(scopes(SERIES_PERMISSIONS.overview)).field({
      type: OverviewRef, nullable: false, args: { range: t.arg.string({ required: true, description: '`hour` or `day`' }) },
      description: 'Plots of the last hour or day (administrators): your tenant\'s series; system administrators also the system-wide ones',
      resolve: (_r, a, ctx) => {
        const { range } = parseInput(overviewArgs, a);
        return series.overview(range, scopedTenantId(ctx.actor) ?? undefined, hasSystemScope(ctx.actor));
      },
    }),
  }));
}

/** The caller's tenant, or every tenant (undefined) for a system administrator's own view. */
const tenantOf = (actor: Actor) => scopedTenantId(actor) ?? undefined;

/**
 * `jobSeries`, `webhookEndpointSeries` and `paymentSeries`: the plots of the job, endpoint and
 * payments pages. Administrators only; a tenant administrator reads their tenant's numbers, a
 * system administrator every tenant's added up (or the tenant of `X-Tenant-Id`).
 */
function pageSeriesGraphql(builder: Builder, pages: PageSeries, LineRef: ReturnType<typeof lineRefOf>): void {
  const JobRef = builder.objectRef<JobSeries>('JobSeries');
  JobRef.implement({
    description: "A job's finished runs over the last hour (1-minute steps) or day (5-minute steps); one value per step of `t`",
    fields: (t) => ({
      range: t.exposeString('range', { nullable: false }),
      step_seconds: t.exposeInt('step_seconds', { nullable: false }),
      t: t.field({ type: ['Float'], nullable: false, description: "Each step's start (unix seconds)", resolve: (o) => o.t }),
      runs: t.field({ type: [LineRef], nullable: false, description: 'Runs finished, by status', resolve: (o) => o.runs }),
      duration_p50_ms: t.field({ type: ['Float'], nullable: { list: false, items: true }, description: 'Median run duration, ms', resolve: (o) => o.duration_p50_ms }),
      duration_p95_ms: t.field({ type: ['Float'], nullable: { list: false, items: true }, description: '95th percentile run duration, ms', resolve: (o) => o.duration_p95_ms }),
    }),
  });
  const EndpointRef = builder.objectRef<EndpointSeries>('WebhookEndpointSeries');
  EndpointRef.implement({
    description: "An outbound endpoint's delivery attempts over the last hour or day; one value per step of `t`",
    fields: (t) => {
      const list = (resolve: (o: EndpointSeries) => (number | null)[], description: string) =>
        t.field({ type: ['Float'], nullable: { list: false, items: true }, description, resolve });
      return {
        range: t.exposeString('range', { nullable: false }),
        step_seconds: t.exposeInt('step_seconds', { nullable: false }),
        t: t.field({ type: ['Float'], nullable: false, description: "Each step's start (unix seconds)", resolve: (o) => o.t }),
        succeeded: list((o) => o.succeeded, 'Attempts that got a 2xx'),
        failed: list((o) => o.failed, 'Attempts that failed'),
        success_rate: list((o) => o.success_rate, 'Share of attempts that succeeded, 0 to 1 (null: no attempt)'),
        delay_p50_ms: list((o) => o.delay_p50_ms, 'Median from a delivery created to delivered, ms'),
        delay_p95_ms: list((o) => o.delay_p95_ms, '95th percentile from a delivery created to delivered, ms'),
      };
    },
  });
  const PaymentRef = builder.objectRef<PaymentSeries>('PaymentSeries');
  PaymentRef.implement({
    description: 'Payments that reached each status, per UTC day (today last)',
    fields: (t) => ({
      days: t.exposeInt('days', { nullable: false }),
      t: t.field({ type: ['Float'], nullable: false, description: "Each day's start (unix seconds)", resolve: (o) => o.t }),
      statuses: t.field({ type: [LineRef], nullable: false, description: 'Payments per status (`pending`: created)', resolve: (o) => o.statuses }),
    }),
  });
  builder.queryFields((t) => ({
    jobSeries: t.withAuth(scopes(PAGE_SERIES_PERMISSIONS.job)).field({
      type: JobRef, nullable: false, description: "A job's runs by status and duration (administrators; your tenant's runs)",
      args: { job: t.arg.string({ required: true }), range: t.arg.string({ required: true, description: '`hour` or `day`' }) },
      resolve: (_r, a, ctx) => {
        const { job, range } = parseInput(jobSeriesArgs, a);
        return pages.job(job, range, tenantOf(ctx.actor));
      },
    }),
    webhookEndpointSeries: t.withAuth(scopes(PAGE_SERIES_PERMISSIONS.endpoint)).field({
      type: EndpointRef, nullable: false, description: "An outbound endpoint's success rate and delay (administrators; your tenant's deliveries)",
      args: { endpoint_id: t.arg.string({ required: true }), range: t.arg.string({ required: true, description: '`hour` or `day`' }) },
      resolve: (_r, a, ctx) => {
        const { endpoint_id, range } = parseInput(endpointSeriesArgs, a);
        return pages.endpoint(endpoint_id, range, tenantOf(ctx.actor));
      },
    }),
    paymentSeries: t.withAuth(scopes(PAGE_SERIES_PERMISSIONS.payments)).field({
      type: PaymentRef, nullable: false, description: "Payments per status per day (administrators; your tenant's payments)",
      args: { days: t.arg.int({ description: '1 to 90, default 7 (days older than METRICS_SERIES_RETENTION_DAYS are zero)' }) },
      resolve: (_r, a, ctx) => {
        const { days } = parseInput(paymentSeriesArgs, givenArgs(a));
        return pages.payments(days, tenantOf(ctx.actor));
      },
    }),
  }));
}
