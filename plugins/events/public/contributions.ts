/**
 * What a plugin contributes to the event log (`PluginContribution.eventTypes` / `eventConsumers`),
 * and the event as consumers see it. The events plugin reads every plugin's contribution
 * (`KernelView.contributions()`) once every plugin is set up, and registers them before the log starts.
 */
import type { z } from 'zod';
import type { EventDoc } from './outbox.ts';

declare module '../../../core/plugin.ts' {
  interface PluginContribution {
    /**
     * Event types this plugin emits, the one place it declares them (name, description, zod schema of
     * `data`); a function is evaluated after every `setup()`. They make up the catalogue of
     * `GET /events/types`; a duplicate name fails start-up.
     */
    eventTypes?: EventTypeDefinition[] | (() => EventTypeDefinition[]);
    /** Durable consumers of the event log (at least once delivery, effect once; see docs/events.md). */
    eventConsumers?: EventConsumer[];
  }
}

/** A JSON Schema object, as `/events/types` and `/openapi.json` show it. */
export type JsonSchema = Record<string, unknown>;

/**
 * An event type of the catalogue. Plugins declare theirs in one place (their `eventTypes`
 * contribution); the resources plugin declares four per resource.
 *
 * @example { name: 'invoice.paid', description: 'An invoice was paid', data: invoiceView }
 */
export interface EventTypeDefinition {
  /** `<thing>.<what happened>`, lower case, e.g. `projects.created`, `payment.completed`. */
  name: string;
  description: string;
  /** Shape of `data`: a zod schema, or a JSON Schema where none exists in zod (generated resources). */
  data: z.ZodType | JsonSchema;
  /**
   * Whether webhook endpoints may subscribe to it. `false` for events about outbound deliveries
   * themselves, which would otherwise make deliveries about deliveries without end.
   * @default true
   */
  outbound?: boolean;
}

/**
 * A durable consumer of the event log, declared by a plugin (`eventConsumers` contribution). It
 * receives every matching event committed after it was first registered, at least once, across
 * replicas and restarts; its effect happens once because each (consumer, event) is claimed once.
 * A handler that throws is retried with backoff, up to `max_attempts`.
 */
export interface EventConsumer {
  /** Unique across plugins; the claim and position records are keyed by it. */
  name: string;
  /** Event types to receive; `*` for all. */
  types: string[] | '*';
  /** Handles one event. Throw to have it retried later. */
  handle(event: EventRecord): Promise<void>;
  /**
   * Optional: of a batch of events, the ids this consumer acts on, decided from their heads (no
   * `data`: they are read in full only once selected and claimed). The others are passed over with
   * no claim, no `handle` and no write, and the consumer's position moves past them. For a consumer
   * that acts on few events (the webhook fan-out, where a tenant has endpoints), this saves a claim
   * and a `done` mark per event. Decide from each head and from state as it was when the event
   * happened, so every replica decides alike. If it throws, the poll is retried.
   */
  select?(events: EventHead[]): Promise<ReadonlySet<string>>;
  /** @default 10 */
  max_attempts?: number;
}

/** An event as consumers and the API see it. */
export interface EventRecord {
  id: string;
  type: string;
  tenant_id: string | null;
  created_at: Date;
  data: Record<string, unknown>;
  actor: string | null;
  request_id: string | null;
}

/** An event without its object: what a consumer's `select` decides from. */
export type EventHead = Omit<EventRecord, 'data'>;

/** The fields of a stored event a head is made of. */
export type HeadDoc = Pick<EventDoc, '_id' | 'type' | 'tenant_id' | 'created_at' | 'actor' | 'request_id'>;

/** A stored event's head, as consumers' `select` sees it. */
export const toHead = (e: HeadDoc): EventHead => ({
  id: e._id,
  type: e.type,
  tenant_id: e.tenant_id ? String(e.tenant_id) : null,
  created_at: e.created_at,
  actor: e.actor,
  request_id: e.request_id,
});

/** A stored event as consumers and listeners of stored batches see it. */
export const toRecord = (e: HeadDoc & Pick<EventDoc, 'data'>): EventRecord => ({ ...toHead(e), data: e.data });
