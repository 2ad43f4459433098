/** What the outbound sender (delivery.ts) is built from, and what the fan-out hands it. */
import type { Logger } from '../../core/logger.ts';
import type { EventLog } from '../events/index.ts';
import type { EventRecord } from '../events/public/contributions.ts';
import type { OutboundMetrics } from './metrics.ts';
import type { WebhookDeliveryModel, WebhookDeliveryRecord, WebhookEndpointModel, WebhookEndpointRecord } from './model.ts';
import type { EndpointHealth } from './recorder.ts';
import type { Resolver } from './ssrf.ts';
import type { Transport } from './transport.ts';

export interface SenderSettings {
  /** Delay in seconds before each attempt (index 0: the first, counted from the delivery's creation). */
  schedule: readonly number[];
  timeoutMs: number;
  pollMs: number;
  allowedHosts: readonly string[];
  /** Refuse `http:` URLs (production). */
  httpsOnly: boolean;
  /** Deliveries one process sends at once. */
  concurrency: number;
  /** Deliveries of one endpoint one process sends at once (its share of `concurrency`). */
  endpointConcurrency: number;
}

export interface SenderDeps {
  deliveries: WebhookDeliveryModel;
  endpoints: WebhookEndpointModel;
  events: EventLog;
  health: EndpointHealth;
  settings: SenderSettings;
  log: Logger;
  /** Every attempt counts in the outbound series (by outcome, and the delay of a success). */
  metrics: OutboundMetrics;
  /** Resolves endpoint hosts before each attempt. @default dns.lookup (all addresses) */
  resolver: Resolver;
  /** @default httpTransport */
  transport?: Transport;
  /** The event as the endpoint may receive it (its role's read rules); null: not readable by it. */
  view(endpoint: WebhookEndpointRecord, event: EventRecord): EventRecord | null | Promise<EventRecord | null>;
}

/** A delivery this process just created, with its endpoint and event as the fan-out read them. */
export interface FreshDelivery {
  d: WebhookDeliveryRecord;
  endpoint: WebhookEndpointRecord;
  event: EventRecord;
}

/** A claimed delivery waiting for a slot, with its endpoint (null: gone) and event (undefined: the attempt reads it). */
export interface Ready {
  d: WebhookDeliveryRecord;
  endpoint: WebhookEndpointRecord | null;
  event?: EventRecord | undefined;
}
