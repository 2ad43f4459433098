import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type CounterConfiguration, type GaugeConfiguration, type HistogramConfiguration } from 'prom-client';
import type { Model } from 'mongoose';

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

const seconds = (ms: number) => ms / 1000;

/** What a jobs run document tells the metrics (a subset of the jobs plugin's `JobRunRecord`). */
export interface RunTimes {
  job_name: string;
  status?: string;
  created_at?: Date | null;
  started_at?: Date | null;
  duration_ms?: number | null;
}

/** Outcome of one outbound webhook delivery attempt. */
export type OutboundOutcome = 'success' | 'failure' | 'timeout' | 'error';

/**
 * One app's Prometheus metrics: its own `Registry` (several apps in one process never share
 * series), the series of the kernel and the built-in plugins, and helpers plugins call at their
 * instrumentation points (each a single call). Served as `GET /metrics` (core/observability/metrics-http.ts).
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

  readonly jobs = {
    started: this.counter({ name: 'job_runs_started_total', help: 'Job runs a worker of this process started, by job', labelNames: ['job_name'] }),
    completed: this.counter({ name: 'job_runs_completed_total', help: 'Job runs finished successfully, by job', labelNames: ['job_name'] }),
    failed: this.counter({ name: 'job_runs_failed_total', help: 'Job runs finished failed (after their last attempt), by job', labelNames: ['job_name'] }),
    duration: this.histogram({ name: 'job_run_duration_seconds', help: 'Job runs: start to finish, by job and status', labelNames: ['job_name', 'status'], buckets: BACKGROUND_BUCKETS }),
    queueLag: this.histogram({ name: 'job_queue_lag_seconds', help: 'Job runs: wait from due (queued) to started, by job', labelNames: ['job_name'], buckets: BACKGROUND_BUCKETS }),
  };

  readonly webhooks = {
    deliveries: this.counter({ name: 'webhook_deliveries_total', help: 'Inbound webhook deliveries, by provider and outcome', labelNames: ['provider', 'outcome'] }),
  };

  /**
   * Outbound webhooks (the sender calls these). `attempts` by outcome, `delay`: from the event to
   * its delivery, `disabled`: endpoints switched off after repeated failures.
   */
  readonly outbound = {
    attempts: this.counter({ name: 'outbound_webhook_attempts_total', help: 'Outbound webhook delivery attempts, by outcome (success, failure, timeout, error)', labelNames: ['outcome'] }),
    delay: this.histogram({ name: 'outbound_webhook_delivery_delay_seconds', help: 'Outbound webhooks: from the event to its successful delivery', buckets: BACKGROUND_BUCKETS }),
    disabled: this.counter({ name: 'outbound_webhook_endpoints_disabled_total', help: 'Outbound webhook endpoints disabled after repeated failures' }),
  };

  readonly audit = {
    flushDuration: this.histogram({ name: 'audit_flush_duration_seconds', help: 'Audit log: time of one batch write', buckets: LATENCY_BUCKETS }),
    written: this.counter({ name: 'audit_entries_written_total', help: 'Audit entries written to the database' }),
    lost: this.counter({ name: 'audit_entries_lost_total', help: 'Audit entries whose batch write failed (logged, not retried)' }),
  };

  /** Operation names kept per app before `other`. */
  readonly operationNames = new BoundedLabel(100);
  private readonly providerNames = new BoundedLabel(50);

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

  /** A job run was claimed by a worker: counts it and its wait since it was queued. */
  jobStarted(run: RunTimes): void {
    this.jobs.started.inc({ job_name: run.job_name });
    if (run.created_at && run.started_at) this.jobs.queueLag.observe({ job_name: run.job_name }, Math.max(0, seconds(+run.started_at - +run.created_at)));
  }

  /** A job run finished (`completed` or `failed`). */
  jobFinished(run: RunTimes): void {
    const job_name = run.job_name;
    if (run.status === 'completed') this.jobs.completed.inc({ job_name });
    else this.jobs.failed.inc({ job_name });
    if (run.duration_ms != null) this.jobs.duration.observe({ job_name, status: run.status ?? 'failed' }, seconds(run.duration_ms));
  }

  /**
   * Pending and running job runs, counted from `job_runs` at scrape time (one aggregation over the
   * status index): right across replicas, where an in-memory count would only see this one.
   */
  watchJobQueue(runs: Model<never>): void {
    this.gauge({
      name: 'job_runs', help: 'Job runs pending or running now (all replicas), by job and status', labelNames: ['job_name', 'status'],
      async collect() {
        const rows = await runs.aggregate<{ _id: { job_name: string; status: string }; n: number }>([
          { $match: { status: { $in: ['pending', 'running'] } } },
          { $group: { _id: { job_name: '$job_name', status: '$status' }, n: { $sum: 1 } } },
        ]);
        this.reset();
        for (const r of rows) this.set({ job_name: r._id.job_name, status: r._id.status }, r.n);
      },
    });
  }

  /**
   * Records an inbound delivery: `outcome` is the receiver's answer (`ok`, `failed`,
   * `already_processed`, `processing`) or, when it threw, `rejected_<status>` (401 signature, 400
   * body, 422 event id); unknown providers fold into `unknown`.
   */
  async webhookDelivery<R extends { body: { status: string } }>(provider: string, receive: () => Promise<R>): Promise<R> {
    try {
      const res = await receive();
      this.webhooks.deliveries.inc({ provider: this.providerNames.value(provider), outcome: res.body.status });
      return res;
    } catch (err) {
      const status = (err as { status?: number }).status ?? 500;
      this.webhooks.deliveries.inc({ provider: status === 404 ? 'unknown' : this.providerNames.value(provider), outcome: `rejected_${status}` });
      throw err;
    }
  }

  /** Failed inbound webhook events (the dead-letter queue), counted at scrape time by provider. */
  watchDeadLetter(events: Model<never>): void {
    this.gauge({
      name: 'webhook_dead_letter_size', help: 'Inbound webhook events in the dead-letter queue (handler failed), by provider', labelNames: ['provider'],
      async collect() {
        const rows = await events.aggregate<{ _id: string; n: number }>([{ $match: { status: 'failed' } }, { $group: { _id: '$provider', n: { $sum: 1 } } }]);
        this.reset();
        for (const r of rows) this.set({ provider: r._id }, r.n);
      },
    });
  }

  /** Times one audit batch write and counts its entries. */
  async auditFlush<T>(entries: number, write: () => Promise<T>): Promise<T> {
    const end = this.audit.flushDuration.startTimer();
    try {
      const out = await write();
      this.audit.written.inc(entries);
      return out;
    } catch (err) {
      this.audit.lost.inc(entries);
      throw err;
    } finally {
      end();
    }
  }

  /** How far each durable event consumer is behind the log (`EventLog.lag()`), at scrape time. */
  watchEventLag(lag: () => Promise<Record<string, number>>): void {
    this.gauge({
      name: 'event_consumer_lag_seconds', help: 'Durable event consumers: how far their position is behind the newest committed event, by consumer', labelNames: ['consumer'],
      async collect() {
        const out = await lag();
        this.reset();
        for (const [consumer, ms] of Object.entries(out)) this.set({ consumer }, seconds(ms));
      },
    });
  }
}
