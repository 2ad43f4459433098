import { expect } from 'vitest';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { App } from '../../core/kernel.ts';
import type { TestApp } from '../helpers/app.ts';

type Sample = MetricValue<string> & { metricName?: string };

/** Every series of the app's own registry, as prom-client reports them (collect callbacks run). */
export async function metricsJson(app: App): Promise<MetricObjectWithValues<Sample>[]> {
  return (await app.services.get('metrics').registry.getMetricsAsJSON()) as MetricObjectWithValues<Sample>[];
}

/** Samples of metric `name` whose labels include `labels` (histograms: their `_count` samples). */
export async function samples(app: App, name: string, labels: Record<string, string> = {}): Promise<Sample[]> {
  const m = (await metricsJson(app)).find((x) => x.name === name);
  if (!m) return [];
  const wanted = m.type === ('histogram' as never) ? `${name}_count` : undefined;
  return m.values.filter((v) => (!wanted || v.metricName === wanted) && Object.entries(labels).every(([k, val]) => String(v.labels[k]) === val));
}

/** Sum of the matching samples (a counter's total, a histogram's observation count). */
export async function total(app: App, name: string, labels: Record<string, string> = {}): Promise<number> {
  return (await samples(app, name, labels)).reduce((s, v) => s + v.value, 0);
}

const LINE = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? (-?[0-9.e+-]+|[+-]?Inf|NaN)$/i;

/**
 * The Prometheus text format, checked line by line: `# HELP` / `# TYPE` comments, then samples
 * `name{label="value",...} number` (NaN and Inf in any case, as Prometheus's float parser takes
 * them); every sample's metric has a TYPE. Returns the metric names.
 */
export function checkExposition(text: string): Set<string> {
  const typed = new Map<string, string>();
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    if (!line) continue;
    const t = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (t) {
      typed.set(t[1]!, t[2]!);
      names.add(t[1]!);
      continue;
    }
    if (line.startsWith('# HELP ')) continue;
    expect(line, 'a malformed sample line').toMatch(LINE);
    const name = line.split(/[{ ]/)[0]!;
    const base = typed.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    expect(typed.has(base), `sample ${name} has no # TYPE`).toBe(true);
  }
  return names;
}

/** GET /metrics on the app's main port (no credential but `token`). */
export async function scrape(t: TestApp, token?: string): Promise<{ status: number; text: string; type: string | null }> {
  const res = await fetch(`${t.url}/metrics`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') };
}
