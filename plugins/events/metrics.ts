/**
 * The events plugin's Prometheus series (docs/observability.md, "The series"), on the app's
 * registry (`services.get('metrics')`). The events plugin is a core plugin: the series always exists.
 */
import type { Metrics } from '../../core/observability/metrics.ts';

/** How far each durable event consumer is behind the log (`EventLog.lag()`, ms by consumer), read at scrape time. */
export function eventMetrics(metrics: Metrics, lag: () => Promise<Record<string, number>>): void {
  metrics.gauge({
    name: 'event_consumer_lag_seconds', help: 'Durable event consumers: how far their position is behind the newest committed event, by consumer', labelNames: ['consumer'],
    async collect() {
      const out = await lag();
      this.reset();
      for (const [consumer, ms] of Object.entries(out)) this.set({ consumer }, ms / 1000);
    },
  });
}
