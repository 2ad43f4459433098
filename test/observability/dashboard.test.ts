import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { checkExposition, scrape } from './helpers.ts';

const dashboard = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../docs/observability/grafana-dashboard.json'), 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
};

/** PromQL functions, aggregations and keywords: every other identifier in a query is a metric name. */
const PROMQL = new Set(['sum', 'max', 'min', 'avg', 'count', 'rate', 'increase', 'irate', 'histogram_quantile', 'by', 'without', 'on', 'ignoring', 'and', 'or', 'unless', 'label_replace', 'topk', 'bottomk', 'abs', 'clamp_min', 'delta', 'deriv']);

/** Metric names a PromQL expression reads: label matchers, groupings, ranges and strings removed first. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(\\.|[^"\\])*"/g, '')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '');
  return (bare.match(/[a-zA-Z_:][a-zA-Z0-9_:]*/g) ?? []).filter((w) => !PROMQL.has(w) && !/^\d/.test(w));
}

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, jobsPlugin, webhooksPlugin], config: { JOBS_ENABLED: 'true', WEBHOOKS_ENABLED: 'true' } });
});
afterAll(() => t?.close());

describe('docs/observability/grafana-dashboard.json', () => {
  it('has the panels the runbook refers to', () => {
    const titles = dashboard.panels.map((p) => p.title.toLowerCase()).join(' | ');
    for (const want of ['request rate', 'p99', 'error', 'job queue lag', 'failures', 'webhook', 'dead-letter', 'audit flushes', 'mongodb pool']) expect(titles).toContain(want);
  });

  it('every query names only metrics this server exports', async () => {
    // Every series of the app, including those with no sample yet (histogram samples by suffix).
    const exported = checkExposition((await scrape(t)).text);
    const known = (n: string) => exported.has(n) || exported.has(n.replace(/_(bucket|sum|count)$/, ''));
    const used = dashboard.panels.flatMap((p) => p.targets.flatMap((q) => metricNames(q.expr).map((m) => ({ panel: p.title, metric: m }))));
    expect(used.length).toBeGreaterThan(15);
    expect(used.filter((u) => !known(u.metric))).toEqual([]);
  });

  it('the query parser finds metric names and nothing else', () => {
    expect(metricNames('histogram_quantile(0.99, sum by (le, route) (rate(http_request_duration_seconds_bucket{job=~"$job", x="a{b}"}[5m])))')).toEqual(['http_request_duration_seconds_bucket']);
  });
});
