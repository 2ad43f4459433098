/**
 * The audit plugin's Prometheus series (docs/observability.md, "The series"), on the app's
 * registry (`services.get('metrics')`): registered when the plugin sets up, so they exist (at
 * zero) whenever audit is on and are absent otherwise.
 */
import { LATENCY_BUCKETS, type Metrics } from '../../core/observability/metrics.ts';

/** Times one batch write and counts its entries (written, or lost when the write failed). */
export type ObserveFlush = <T>(entries: number, write: () => Promise<T>) => Promise<T>;

/** Registers the audit series; returns the batch writer's instrumentation point. */
export function auditMetrics(metrics: Metrics): ObserveFlush {
  const flushDuration = metrics.histogram({ name: 'audit_flush_duration_seconds', help: 'Audit log: time of one batch write', buckets: LATENCY_BUCKETS });
  const written = metrics.counter({ name: 'audit_entries_written_total', help: 'Audit entries written to the database' });
  const lost = metrics.counter({ name: 'audit_entries_lost_total', help: 'Audit entries whose batch write failed (logged, not retried)' });
  return async (entries, write) => {
    const end = flushDuration.startTimer();
    try {
      const out = await write();
      written.inc(entries);
      return out;
    } catch (err) {
      lost.inc(entries);
      throw err;
    } finally {
      end();
    }
  };
}
