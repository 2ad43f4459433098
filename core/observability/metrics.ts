import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type CounterConfiguration, type GaugeConfiguration, type HistogramConfiguration } from 'prom-client';

declare module '../services.ts' {
  interface Services {
    /** This app's Prometheus series (core/observability/metrics.ts); plugins add their own with `counter()` / `gauge()` / `histogram()`. */
    metrics: Metrics;
  }
}

/** Buckets of request-sized work (seconds): 5 ms to 10 s. */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Buckets of background work and waits (seconds): 10 ms to 1 h. */
export const BACKGROUND_BUCKETS = [0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600];
/** Label value of requests no route matched (every unknown path folds into it). */
export const UNMATCHED_ROUTE = 'unmatched';
/** Label value of names past a label's budget (`BoundedLabel`). */
export const OTHER = 'other';

/**
 * A label fed by client-chosen values (GraphQL operation names, webhook providers): the first
 * `max` distinct values keep their name, later ones fold into `other`, so a client cannot grow
 * the number of series.
 */
export class BoundedLabel {
  private readonly seen = new Set<string>();
  constructor(private readonly max: number) {}
  value(name: string): string {
    if (this.seen.has(name)) return name;
    if (this.seen.size >= this.max) return OTHER;
    this.seen.add(name);
    return name;
  }
}

/** `200` → `2xx`. */
export const statusClass = (status: number): string => `${Math.floor(status / 100)}xx`;

/**
 * One app's Prometheus metrics: its own `Registry` (several apps in one process never share
 * series), the kernel's own series (HTTP, GraphQL, authentication, rate limiting, MongoDB) and the
 * generic `counter()` / `gauge()` / `histogram()` plugins register theirs with, when they set up
 * (e.g. plugins/jobs/metrics.ts): a plugin's series exist exactly when the plugin is on. Served as `GET /metrics` (core/observability/metrics-http.ts).
 *
 * Series names and their meaning: docs/observability.md.
 */
export class Metrics {
  readonly registry = new Registry();
  /** The port `/metrics` is served on when `METRICS_PORT` is set (0 there = the port picked at listen). */
  port?: number;
  private readonly series = new Map<string, Counter | Gauge | Histogram>();

  private readonly answerListeners: ((status: number, seconds: number) => void)[] = [];

  /** HTTP requests being answered now: counted by core/observability/access-log.ts, read by the gauge at scrape time (no series update per request). */
  requestsInFlight = 0;

  readonly http = {
    duration: this.histogram({ name: 'http_request_duration_seconds', help: 'HTTP requests: time to the answer, by method, route template and status class', labelNames: ['method', 'route', 'status_class'], buckets: LATENCY_BUCKETS }),
    inFlight: this.scraped('http_requests_in_flight', 'HTTP requests being answered now', () => this.requestsInFlight),
  };

  readonly auth = {
    failures: this.counter({ name: 'auth_failures_total', help: 'Failed authentications (rejected API keys, tokens, passkeys), by whether the failure limit refused it', labelNames: ['locked_out'] }),
    rateLimited: this.counter({ name: 'rate_limit_refusals_total', help: 'Requests refused by the request rate limiter (429)' }),
  };

  readonly graphql = {
    operations: this.counter({ name: 'graphql_operations_total', help: 'GraphQL operations executed, by type and operation name (anonymous and names past the budget fold)', labelNames: ['type', 'name'] }),
    errors: this.counter({ name: 'graphql_errors_total', help: 'GraphQL errors in answers, by error code', labelNames: ['code'] }),
    refusals: this.counter({ name: 'graphql_limit_refusals_total', help: 'GraphQL requests refused by a cost or depth limit before any resolver ran, by limit', labelNames: ['limit'] }),
  };


  /** Operation names kept per app before `other`. */
  readonly operationNames = new BoundedLabel(100);

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 20 });
  }

  /** The series `name`, created on first call (a second call with the same name returns it). */
  counter<L extends string>(cfg: CounterConfiguration<L>): Counter<L> {
    return this.define(cfg.name, () => new Counter({ ...cfg, registers: [this.registry] }));
  }
  gauge<L extends string>(cfg: GaugeConfiguration<L>): Gauge<L> {
    return this.define(cfg.name, () => new Gauge({ ...cfg, registers: [this.registry] }));
  }
  histogram<L extends string>(cfg: HistogramConfiguration<L>): Histogram<L> {
    return this.define(cfg.name, () => new Histogram({ ...cfg, registers: [this.registry] }));
  }
  private define<M extends Counter<never> | Gauge<never> | Histogram<never>>(name: string, make: () => M): M {
    const found = this.series.get(name);
    if (found) return found as unknown as M;
    const m = make();
    this.series.set(name, m as never);
    return m;
  }

  /** A gauge without labels whose value `read` gives at scrape time. */
  private scraped(name: string, help: string, read: () => number): Gauge {
    return this.gauge({ name, help, collect() { this.set(read()); } });
  }

  /** The Prometheus text exposition of every series. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  // ----- instrumentation points (one call each) ------------------------------------------------

  /** Calls `listener` with every HTTP answer's status and duration (also with METRICS_ENABLED=false): the console's time series (plugins/metrics-series). */
  onRequest(listener: (status: number, seconds: number) => void): void {
    this.answerListeners.push(listener);
  }

  /** `http_request_duration_seconds` children by route, method and status class: labels hashed once per series, not per request. */
  private readonly durationBy = new Map<string, Map<string, { observe(seconds: number): void }[]>>();

  /**
   * Observes one HTTP request's duration in `http_request_duration_seconds` (core/observability/access-log.ts).
   * The series' children are kept per route template, method and status class: all three are
   * bounded (templates and `unmatched`, the methods Node's parser accepts, 1xx–9xx).
   */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    let byMethod = this.durationBy.get(route);
    if (!byMethod) this.durationBy.set(route, (byMethod = new Map()));
    let byClass = byMethod.get(method);
    if (!byClass) byMethod.set(method, (byClass = []));
    const cls = Math.floor(status / 100);
    (byClass[cls] ??= this.http.duration.labels(method, route, statusClass(status))).observe(seconds);
  }

  /** An HTTP request was answered (core/observability/access-log.ts). */
  answered(status: number, seconds: number): void {
    for (const l of this.answerListeners) l(status, seconds);
  }
}
