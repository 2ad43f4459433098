import { expect } from 'vitest';
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import type { TestApp } from '../helpers/app.ts';

/** One sample as the tests read it: a counter's or gauge's value, or a histogram's observation count. */
export type Sample = { labels: Record<string, string>; value: number };

/**
 * Every metric family of a scrape of `GET /metrics`, parsed by `parse-prometheus-text-format`
 * (a widely used parser whose output follows prom2json's): the tests read what Prometheus reads,
 * through HTTP, not the registry's own view of itself. That parser merges every labelled series of
 * a histogram into one (its `flattenMetrics` keeps a single bucket map), so histograms are handed to
 * it as untyped: its `<name>_bucket`, `<name>_sum` and `<name>_count` lines then parse as families
 * of their own with their labels intact.
 */
export async function scrapeFamilies(t: TestApp): Promise<ParsedFamily[]> {
  const res = await scrape(t);
  expect(res.status, 'GET /metrics').toBe(200);
  return parsePrometheusTextFormat(res.text.replace(/^# TYPE (\S+) histogram$/gm, '# TYPE $1 untyped'));
}

/** Samples of metric `name` whose labels include `labels` (histograms: their `_count` series), from a scrape. */
export async function samples(t: TestApp, name: string, labels: Record<string, string> = {}): Promise<Sample[]> {
  const families = await scrapeFamilies(t);
  // An untyped histogram's series alternate `_bucket`, `_sum`, `_count`, so each `_count` line is a family of its own.
  const counts = families.filter((f) => f.name === `${name}_count`);
  return (counts.length ? counts : families.filter((f) => f.name === name))
    .flatMap((f) => f.metrics)
    .map((m) => ({ labels: m.labels ?? {}, value: Number(m.value) }))
    .filter((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v));
}

/** Sum of the matching samples (a counter's total, a histogram's observation count). */
export async function total(t: TestApp, name: string, labels: Record<string, string> = {}): Promise<number> {
  return (await samples(t, name, labels)).reduce((s, v) => s + v.value, 0);
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
