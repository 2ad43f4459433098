/**
 * The jobs plugin's Prometheus series (docs/observability.md, "The series"), on the app's registry
 * (`services.get('metrics')`): registered when the plugin sets up, so they exist (at zero) whenever
 * jobs are on and are absent otherwise.
 */
import type { Model } from 'mongoose';
import { BACKGROUND_BUCKETS, type Metrics } from '../../core/observability/metrics.ts';

/** What a run document tells the metrics (a subset of `JobRunRecord`). */
export interface RunTimes {
  job_name: string;
  status?: string;
  created_at?: Date | null;
  started_at?: Date | null;
  duration_ms?: number | null;
}

const seconds = (ms: number) => ms / 1000;

/** The instrumentation points of the jobs engine: one call each. */
export interface JobMetrics {
  /** A run was claimed by a worker: counts it and its wait since it was queued. */
  started(run: RunTimes): void;
  /** A run finished (`completed` or `failed`). */
  finished(run: RunTimes): void;
}

/**
 * Registers the jobs series. `runs` (the `job_runs` model) feeds the `job_runs` gauge: pending and
 * running runs counted at scrape time (one aggregation over the status index), right across
 * replicas, where an in-memory count would only see this one.
 */
export function jobMetrics(metrics: Metrics, runs: Model<never>): JobMetrics {
  const started = metrics.counter({ name: 'job_runs_started_total', help: 'Job runs a worker of this process started, by job', labelNames: ['job_name'] });
  const completed = metrics.counter({ name: 'job_runs_completed_total', help: 'Job runs finished successfully, by job', labelNames: ['job_name'] });
  const failed = metrics.counter({ name: 'job_runs_failed_total', help: 'Job runs finished failed (after their last attempt), by job', labelNames: ['job_name'] });
  const duration = metrics.histogram({ name: 'job_run_duration_seconds', help: 'Job runs: start to finish, by job and status', labelNames: ['job_name', 'status'], buckets: BACKGROUND_BUCKETS });
  const queueLag = metrics.histogram({ name: 'job_queue_lag_seconds', help: 'Job runs: wait from due (queued) to started, by job', labelNames: ['job_name'], buckets: BACKGROUND_BUCKETS });
  metrics.gauge({
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
  return {
    started(run) {
      started.inc({ job_name: run.job_name });
      if (run.created_at && run.started_at) queueLag.observe({ job_name: run.job_name }, Math.max(0, seconds(+run.started_at - +run.created_at)));
    },
    finished(run) {
      const job_name = run.job_name;
      if (run.status === 'completed') completed.inc({ job_name });
      else failed.inc({ job_name });
      if (run.duration_ms != null) duration.observe({ job_name, status: run.status ?? 'failed' }, seconds(run.duration_ms));
    },
  };
}
