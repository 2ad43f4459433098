import type { EventDoc } from './public/outbox.ts';

/**
 * A durable sink: code that must see every event of a change at least once and whose effect is
 * idempotent by event id (e.g. audit entries keyed by their event). It runs inside the relay, in the
 * same batch, before the outboxes are cleared; if it throws, the batch is retried.
 */
export interface EventSink {
  name: string;
  types: string[] | '*';
  write(events: EventDoc[]): Promise<void>;
}
