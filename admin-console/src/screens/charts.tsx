/**
 * The plots (administrators), drawn with uPlot: this module and uPlot are their own chunk, loaded
 * with the overview and the pages that plot (a job, an endpoint, payments), never on first load.
 * Data: `metricsOverview` and the pages' `jobSeries`, `webhookEndpointSeries`, `paymentSeries`
 * (the server's per-minute series).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { run } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { ErrorBox, Loading, useAsync } from '../ui.tsx';

const MetricsOverview = graphql(`
  query MetricsOverview($range: String!) {
    metricsOverview(range: $range) {
      range step_seconds t requests_per_second error_rate latency_p50_ms latency_p95_ms
      deliveries_succeeded deliveries_failed delivery_delay_p95_ms job_runs { name values } job_duration_p95_ms events { name values }
    }
  }
`);
type O = ResultOf<typeof MetricsOverview>['metricsOverview'];
type Values = readonly (number | null)[];

const token = (name: string) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
const total = (v: Values) => v.reduce<number>((n, x) => n + (x ?? 0), 0);
const max = (v: Values) => v.reduce<number>((n, x) => Math.max(n, x ?? 0), 0);
const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2));
/** Whether a line has a value with no value on either side: drawn as a dot, since a line needs two. */
const lonely = (v: Values) => v.some((x, i) => x != null && v[i - 1] == null && v[i + 1] == null);

/** One uPlot chart in a figure, with its summary in words (what a screen reader gets). */
function Chart({ title, t, lines, summary, unit }: { title: string; t: readonly number[]; lines: { label: string; values: Values }[]; summary: string; unit?: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current!;
    const axis = { stroke: token('--muted'), grid: { stroke: token('--line'), width: 1 }, ticks: { stroke: token('--line'), width: 1 } };
    const plot = new uPlot(
      {
        width: Math.max(280, el.clientWidth),
        height: 180,
        // uPlot's legend toggles series on a click that no key reaches: the caption names the lines instead.
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        series: [{}, ...lines.map((l, i) => ({ label: l.label, stroke: token(`--chart-${(i % 5) + 1}`), width: 2, spanGaps: false, points: { show: lonely(l.values), size: 7 }, value: (_u: uPlot, v: number | null) => (v == null ? '–' : `${fmt(v)}${unit ?? ''}`) }))],
        axes: [axis, { ...axis, size: 50 }],
      },
      [t as number[], ...lines.map((l) => l.values as (number | null)[])],
      el,
    );
    return () => plot.destroy();
  }, [t, lines]);
  return (
    <figure class="chart" aria-label={title}>
      <figcaption><strong>{title}</strong> <span class="muted">{summary}</span> <span class="muted">({lines.map((l) => l.label).join(', ')})</span></figcaption>
      <div ref={box} aria-hidden="true" />
    </figure>
  );
}

function Charts({ o }: { o: O }) {
  const charts = [];
  if (o.requests_per_second && o.error_rate) {
    const rps = o.requests_per_second;
    charts.push(<Chart key="rps" title="Requests per second" t={o.t} lines={[{ label: 'requests/s', values: rps }]} summary={`peak ${fmt(max(rps))}/s`} />);
    charts.push(<Chart key="err" title="Error rate (5xx)" t={o.t} lines={[{ label: 'errors', values: o.error_rate.map((v) => (v == null ? null : v * 100)) }]} unit="%" summary={`peak ${fmt(max(o.error_rate) * 100)}%`} />);
  }
  if (o.latency_p50_ms && o.latency_p95_ms) {
    charts.push(<Chart key="lat" title="Latency" t={o.t} unit=" ms" lines={[{ label: 'p50', values: o.latency_p50_ms }, { label: 'p95', values: o.latency_p95_ms }]} summary={`p95 peak ${fmt(max(o.latency_p95_ms))} ms`} />);
  }
  charts.push(<Chart key="dl" title="Outbound deliveries" t={o.t} lines={[{ label: 'succeeded', values: o.deliveries_succeeded }, { label: 'failed', values: o.deliveries_failed }]} summary={`${total(o.deliveries_succeeded)} succeeded, ${total(o.deliveries_failed)} failed`} />);
  charts.push(<Chart key="dd" title="Delivery delay (p95)" t={o.t} unit=" ms" lines={[{ label: 'p95', values: o.delivery_delay_p95_ms }]} summary={`peak ${fmt(max(o.delivery_delay_p95_ms))} ms`} />);
  charts.push(<Chart key="jobs" title="Job runs" t={o.t} lines={o.job_runs.length ? o.job_runs.map((l) => ({ label: l.name, values: l.values })) : [{ label: 'runs', values: o.t.map(() => 0) }]} summary={o.job_runs.map((l) => `${total(l.values)} ${l.name}`).join(', ') || 'none'} />);
  charts.push(<Chart key="jd" title="Job duration (p95)" t={o.t} unit=" ms" lines={[{ label: 'p95', values: o.job_duration_p95_ms }]} summary={`peak ${fmt(max(o.job_duration_p95_ms))} ms`} />);
  const top = [...o.events].sort((a, b) => total(b.values) - total(a.values)).slice(0, 5);
  charts.push(<Chart key="ev" title="Events per type" t={o.t} lines={top.length ? top.map((l) => ({ label: l.name, values: l.values })) : [{ label: 'events', values: o.t.map(() => 0) }]} summary={top.map((l) => `${total(l.values)} ${l.name}`).join(', ') || 'none'} />);
  return <div class="charts" data-testid="charts">{charts}</div>;
}

/** The plots section: the last hour or the last day. */
export default function Plots() {
  const [range, setRange] = useState<'hour' | 'day'>('hour');
  const data = useAsync(() => run(MetricsOverview, { range }).then((r) => r.metricsOverview), [range]);
  return (
    <section aria-labelledby="h-plots">
      <h2 id="h-plots">Activity</h2>
      <div class="tabs" role="group" aria-label="Range">
        {(['hour', 'day'] as const).map((r) => (
          <button key={r} type="button" aria-pressed={range === r ? 'true' : 'false'} onClick={() => setRange(r)}>Last {r}</button>
        ))}
      </div>
      <Loading when={data.loading} />
      <ErrorBox error={data.error} />
      {data.data && <Charts o={data.data} />}
    </section>
  );
}

const JobSeries = graphql(`query JobSeries($job: String!, $range: String!) { jobSeries(job: $job, range: $range) { t runs { name values } duration_p50_ms duration_p95_ms } }`);
const EndpointSeries = graphql(`query EndpointSeries($id: String!, $range: String!) { webhookEndpointSeries(endpoint_id: $id, range: $range) { t succeeded failed success_rate delay_p50_ms delay_p95_ms } }`);
const PaymentSeries = graphql(`query PaymentSeries($days: Int) { paymentSeries(days: $days) { t statuses { name values } } }`);

/** What a page plots: a job's runs, an endpoint's deliveries, or payments per status per day. */
export type PagePlotProps = { kind: 'job'; job: string } | { kind: 'endpoint'; id: string } | { kind: 'payments' };
const zeros = (t: readonly number[]) => t.map(() => 0);

async function pageCharts(p: PagePlotProps, range: 'hour' | 'day') {
  if (p.kind === 'job') {
    const o = (await run(JobSeries, { job: p.job, range })).jobSeries;
    const runs = o.runs.length ? o.runs.map((l) => ({ label: l.name, values: l.values })) : [{ label: 'runs', values: zeros(o.t) }];
    return [
      <Chart key="dur" title={`Run duration of ${p.job}`} t={o.t} unit=" ms" lines={[{ label: 'p50', values: o.duration_p50_ms }, { label: 'p95', values: o.duration_p95_ms }]} summary={`p95 peak ${fmt(max(o.duration_p95_ms))} ms`} />,
      <Chart key="runs" title={`Runs of ${p.job}`} t={o.t} lines={runs} summary={o.runs.map((l) => `${total(l.values)} ${l.name}`).join(', ') || 'none finished'} />,
    ];
  }
  if (p.kind === 'endpoint') {
    const o = (await run(EndpointSeries, { id: p.id, range })).webhookEndpointSeries;
    const ok = total(o.succeeded);
    const all = ok + total(o.failed);
    return [
      <Chart key="rate" title="Success rate" t={o.t} unit="%" lines={[{ label: 'succeeded', values: o.success_rate.map((v) => (v == null ? null : v * 100)) }]} summary={all ? `${fmt((ok / all) * 100)}% of ${all} attempts` : 'no attempts'} />,
      <Chart key="delay" title="Delivery delay" t={o.t} unit=" ms" lines={[{ label: 'p50', values: o.delay_p50_ms }, { label: 'p95', values: o.delay_p95_ms }]} summary={`p95 peak ${fmt(max(o.delay_p95_ms))} ms`} />,
    ];
  }
  const o = (await run(PaymentSeries, { days: 7 })).paymentSeries;
  const lines = o.statuses.length ? o.statuses.map((l) => ({ label: l.name, values: l.values })) : [{ label: 'payments', values: zeros(o.t) }];
  return [<Chart key="pay" title="Payments per status per day" t={o.t} lines={lines} summary={o.statuses.map((l) => `${total(l.values)} ${l.name}`).join(', ') || 'none'} />];
}

/** A page's plots, with the last hour or day for a job or an endpoint (payments: the last 7 days). */
export function PagePlot(p: PagePlotProps) {
  const [range, setRange] = useState<'hour' | 'day'>('hour');
  const key = p.kind === 'job' ? p.job : p.kind === 'endpoint' ? p.id : '';
  const data = useAsync(() => pageCharts(p, range), [p.kind, key, range]);
  return (
    <div class="page-plot" data-testid="page-plot">
      {p.kind !== 'payments' && (
        <div class="tabs" role="group" aria-label="Range">
          {(['hour', 'day'] as const).map((r) => (
            <button key={r} type="button" aria-pressed={range === r ? 'true' : 'false'} onClick={() => setRange(r)}>Last {r}</button>
          ))}
        </div>
      )}
      <Loading when={data.loading} />
      <ErrorBox error={data.error} />
      {data.data && <div class="charts" data-testid="charts">{data.data}</div>}
    </div>
  );
}
