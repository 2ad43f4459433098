/** One attempt's request: the event as the endpoint may read it, signed, to checked addresses. */
import type { EventLog } from '../events/index.ts';
import type { EventRecord } from '../events/public/contributions.ts';
import { systemActor } from '../../core/context.ts';
import type { WebhookDeliveryRecord, WebhookEndpointRecord } from './model.ts';
import { checkedAddresses, UnsafeUrlError, type Resolver, type ResolvedAddress } from './ssrf.ts';
import { activeSecrets, signedHeaders } from './signing.ts';
import type { Transport, TransportResult } from './transport.ts';

/** What posting an event needs of the sender. */
export interface PostDeps {
  events: EventLog;
  settings: { timeoutMs: number; allowedHosts: readonly string[]; httpsOnly: boolean };
  resolver: Resolver;
  view(endpoint: WebhookEndpointRecord, event: EventRecord): EventRecord | null | Promise<EventRecord | null>;
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
  const result = await transport({ url, addresses, headers, body, timeoutMs: deps.settings.timeoutMs });
  return { result, eventAt: event.created_at };
}
