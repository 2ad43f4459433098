/** One attempt's request: the event as the endpoint may read it, signed, to checked addresses; and what to record of it. */
import type { Agent } from 'node:http';
import type { EventLog } from '../events/index.ts';
import type { EventRecord } from '../events/public/contributions.ts';
import { systemActor } from '../../core/context.ts';
import type { WebhookDeliveryRecord, WebhookEndpointRecord } from './model.ts';
import { checkedAddresses, UnsafeUrlError, type Resolver, type ResolvedAddress } from './ssrf.ts';
import { activeSecrets, signedHeaders } from './signing.ts';
import type { Transport, TransportResult } from './transport.ts';
import type { OutboundMetrics, OutboundOutcome } from './metrics.ts';
import type { Outcome } from './recorder.ts';

/** What posting an event needs of the sender. */
export interface PostDeps {
  events: EventLog;
  settings: { timeoutMs: number; allowedHosts: readonly string[]; httpsOnly: boolean; schedule: readonly number[] };
  metrics: OutboundMetrics;
  resolver: Resolver;
  view(endpoint: WebhookEndpointRecord, event: EventRecord): EventRecord | null | Promise<EventRecord | null>;
  /** The keep-alive agent for the checked addresses of a URL (agents.ts); none: a new connection. */
  agentFor?: (url: URL, addresses: ResolvedAddress[]) => Agent;
}

/** Posts the delivery's event (`known`: as the fan-out just read it); `eventAt`: when the event happened (null when it is gone). */
export async function postEvent(deps: PostDeps, transport: Transport, endpoint: WebhookEndpointRecord, d: WebhookDeliveryRecord, known?: EventRecord): Promise<{ result: TransportResult; eventAt: Date | null }> {
  const refused = (error: string, eventAt: Date | null = null) => ({ result: { status: null, excerpt: null, error }, eventAt });
  let stored: EventRecord;
  try {
    stored = known ?? (await deps.events.get(systemActor(), d.event_id));
  } catch {
    return refused(`event ${d.event_id} is no longer in the event log`);
  }
  // The role's rules as they are now: changed since the fan-out, they may no longer let it read the row.
  const event = await deps.view(endpoint, stored);
  if (!event) return refused('not sent: the endpoint\'s role may not read this row', stored.created_at);
  const url = new URL(endpoint.url);
  if (deps.settings.httpsOnly && url.protocol !== 'https:') return refused('refused: the URL must use https', event.created_at);
  let addresses: ResolvedAddress[];
  try {
    addresses = await checkedAddresses(url, { allowedHosts: deps.settings.allowedHosts, resolver: deps.resolver });
  } catch (err) {
    if (err instanceof UnsafeUrlError) return refused(`refused: ${err.message}`, event.created_at);
    throw err;
  }
  const body = JSON.stringify({ id: event.id, type: event.type, timestamp: event.created_at.toISOString(), data: event.data });
  const headers = signedHeaders(activeSecrets(endpoint.secrets, new Date()), event.id, new Date(), body);
  const agent = deps.agentFor?.(url, addresses);
  const result = await transport({ url, addresses, headers, body, timeoutMs: deps.settings.timeoutMs, ...(agent ? { agent } : {}) });
  return { result, eventAt: event.created_at };
}

/**
 * One attempt of a claimed delivery: sends it (unless its endpoint is disabled) and says what to
 * record; `ok` null: not sent. `manual` (retry by hand, test): a failure of a delivery that was not
 * pending leaves it `failed` instead of re-entering the schedule, and a disabled endpoint is still sent to.
 */
export async function attemptOutcome(deps: PostDeps, transport: Transport, d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord, manual: boolean, event?: EventRecord): Promise<{ set: Outcome; ok: boolean | null }> {
  if (!endpoint.enabled && !manual) {
    const last_attempt = { status: null, duration_ms: 0, error: 'not sent: the endpoint is disabled', response_excerpt: null, attempted_at: new Date() };
    return { set: { status: 'failed', next_attempt_at: null, last_attempt }, ok: null };
  }
  const started = Date.now();
  const { result, eventAt } = await postEvent(deps, transport, endpoint, d, event).catch((err: Error) => ({ result: { status: null, excerpt: null, error: err.message } as TransportResult, eventAt: null }));
  const at = new Date();
  const ok = result.status !== null && result.status >= 200 && result.status <= 299;
  measure(deps.metrics, result, ok, eventAt, at);
  const attempts = d.attempts + 1;
  const delay = deps.settings.schedule[attempts];
  const retry = !ok && delay !== undefined && (!manual || d.status === 'pending');
  const last_attempt = { status: result.status, duration_ms: at.getTime() - started, error: result.error, response_excerpt: result.excerpt, attempted_at: at };
  return {
    set: { status: ok ? 'delivered' : retry ? 'pending' : 'failed', attempts, last_attempt, next_attempt_at: retry ? new Date(at.getTime() + delay * 1000) : null },
    ok,
  };
}

/** One attempt in the outbound series: its outcome, and for a success the delay since the event. */
function measure(metrics: OutboundMetrics, result: TransportResult, ok: boolean, eventAt: Date | null, at: Date): void {
  const outcome: OutboundOutcome = ok ? 'success' : result.status !== null ? 'failure' : result.timedOut ? 'timeout' : 'error';
  metrics.attempts.inc({ outcome });
  if (ok && eventAt) metrics.delay.observe(Math.max(0, at.getTime() - eventAt.getTime()) / 1000);
}
