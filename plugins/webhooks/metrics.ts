/**
 * The webhooks plugin's Prometheus series (docs/observability.md, "The series"), on the app's
 * registry (`services.get('metrics')`): registered when the plugin sets up with `WEBHOOKS_ENABLED`,
 * so they exist (at zero) whenever webhooks are on and are absent otherwise.
 */
import type { Counter, Histogram } from 'prom-client';
import type { Model } from 'mongoose';
import { BACKGROUND_BUCKETS, BoundedLabel, type Metrics } from '../../core/observability/metrics.ts';

/** Outcome of one outbound webhook delivery attempt. */
export type OutboundOutcome = 'success' | 'failure' | 'timeout' | 'error';

/**
 * Outbound webhooks (the sender and the endpoint service move these). `attempts` by outcome,
 * `delay`: from the event to its delivery, `disabled`: endpoints switched off after repeated failures.
 */
export interface OutboundMetrics {
  attempts: Counter<'outcome'>;
  delay: Histogram;
  disabled: Counter;
}

/** Registers the outbound series. */
export function outboundMetrics(metrics: Metrics): OutboundMetrics {
  return {
    attempts: metrics.counter({ name: 'outbound_webhook_attempts_total', help: 'Outbound webhook delivery attempts, by outcome (success, failure, timeout, error)', labelNames: ['outcome'] }),
    delay: metrics.histogram({ name: 'outbound_webhook_delivery_delay_seconds', help: 'Outbound webhooks: from the event to its successful delivery', buckets: BACKGROUND_BUCKETS }),
    disabled: metrics.counter({ name: 'outbound_webhook_endpoints_disabled_total', help: 'Outbound webhook endpoints disabled after repeated failures' }),
  };
}

/** The inbound receiver's instrumentation point. */
export interface InboundMetrics {
  /**
   * Records an inbound delivery: `outcome` is the receiver's answer (`ok`, `failed`,
   * `already_processed`, `processing`) or, when it threw, `rejected_<status>` (401 signature, 400
   * body, 422 event id); unknown providers fold into `unknown`, providers past 50 into `other`.
   */
  delivery<R extends { body: { status: string } }>(provider: string, receive: () => Promise<R>): Promise<R>;
}

/**
 * Registers the inbound series: deliveries by provider and outcome, and the dead-letter size
 * (failed events of `events`, the inbound event model) counted at scrape time by provider.
 */
export function inboundMetrics(metrics: Metrics, events: Model<never>): InboundMetrics {
  const deliveries = metrics.counter({ name: 'webhook_deliveries_total', help: 'Inbound webhook deliveries, by provider and outcome', labelNames: ['provider', 'outcome'] });
  const providers = new BoundedLabel(50);
  metrics.gauge({
    name: 'webhook_dead_letter_size', help: 'Inbound webhook events in the dead-letter queue (handler failed), by provider', labelNames: ['provider'],
    async collect() {
      const rows = await events.aggregate<{ _id: string; n: number }>([{ $match: { status: 'failed' } }, { $group: { _id: '$provider', n: { $sum: 1 } } }]);
      this.reset();
      for (const r of rows) this.set({ provider: r._id }, r.n);
    },
  });
  return {
    async delivery(provider, receive) {
      try {
        const res = await receive();
        deliveries.inc({ provider: providers.value(provider), outcome: res.body.status });
        return res;
      } catch (err) {
        const status = (err as { status?: number }).status ?? 500;
        deliveries.inc({ provider: status === 404 ? 'unknown' : providers.value(provider), outcome: `rejected_${status}` });
        throw err;
      }
    },
  };
}
