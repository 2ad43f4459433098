/** How outbound deliveries are shown (REST, GraphQL and the `webhook_delivery.*` events alike). */
import type { WebhookDeliveryRecord } from './model.ts';
import type { AttemptView, DeliveryView } from './schemas.ts';

/** An attempt as stored (`last_attempt`, an entry of `attempt_log`): optional fields may be missing. */
type StoredAttempt = Pick<AttemptView, 'duration_ms' | 'attempted_at'> & Partial<Pick<AttemptView, 'status' | 'error' | 'response_excerpt'>>;

const attemptViewOf = (a: StoredAttempt): AttemptView => ({
  status: a.status ?? null,
  duration_ms: a.duration_ms,
  error: a.error ?? null,
  response_excerpt: a.response_excerpt ?? null,
  attempted_at: a.attempted_at,
});

/** A delivery as the API shows it (no lease, no outbox). */
export const deliveryViewOf = (d: WebhookDeliveryRecord): DeliveryView => ({
  id: String(d._id),
  endpoint_id: String(d.endpoint_id),
  event_id: d.event_id,
  event_type: d.event_type,
  status: d.status,
  attempts: d.attempts,
  last_attempt: d.last_attempt ? attemptViewOf(d.last_attempt) : null,
  attempt_log: ((d.attempt_log ?? []) as StoredAttempt[]).map(attemptViewOf),
  created_at: d.created_at,
  next_attempt_at: d.next_attempt_at ?? null,
});

