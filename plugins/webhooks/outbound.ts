/**
 * Outbound webhooks, assembled: the endpoint service, the sender every process runs, the durable
 * consumer of the event log that fans each event out into deliveries, and the event type this
 * part declares. `index.ts` wires what this returns when `WEBHOOKS_ENABLED` is on.
 */
import { Types, type Connection } from 'mongoose';
import type { Config } from '../../config/index.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { Logger } from '../../core/logger.ts';
import type { Metrics } from '../../core/observability/metrics.ts';
import { outboundMetrics } from './metrics.ts';
import { toRecord, type EventConsumer, type EventHead, type EventRecord, type EventTypeDefinition } from '../events/public/contributions.ts';
import type { EventDoc } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import { webhookDeliveryModel, webhookEndpointModel, type WebhookDeliveryModel, type WebhookEndpointModel, type WebhookEndpointRecord } from './model.ts';
import { deliveryView, endpointView } from './schemas.ts';
import { DELIVERY_FAILED_EVENT, DELIVERY_SUCCEEDED_EVENT, DeliverySender } from './delivery.ts';
import type { Transport } from './transport.ts';
import { ENDPOINT_CHANGE_EVENTS, ENDPOINT_DISABLED_EVENT, EndpointService } from './endpoints.ts';
import { systemResolver, type Resolver } from './ssrf.ts';
import { ROLES } from '../../core/access.ts';
import { endpointView as roleView, type RoleHolder } from './roles.ts';
import type { EventAccess } from '../events/public/access.ts';

export interface OutboundDeps {
  db: Connection;
  config: Config;
  tenancy: Tenancy;
  events: EventLog;
  log: Logger;
  /** The app's metrics: the outbound series (metrics.ts) are registered on it, moved by the sender and the endpoint service. */
  metrics: Metrics;
  /** @default dns.lookup with all addresses */
  resolver?: Resolver;
  /** @default node's http/https client */
  transport?: Transport;
  /** Access rules for endpoints that name a role (provided by the access plugin, when on). @default none: every event whole */
  eventAccess?: () => EventAccess | undefined;
  /** The names among `roles` that are neither built in nor roles of the tenant (validates an endpoint's role). @default built-in roles only */
  unknownRoles?: (tenantId: string, roles: readonly string[]) => Promise<string[]>;
}

export interface Outbound {
  endpoints: EndpointService;
  sender: DeliverySender;
  consumer: EventConsumer;
  eventTypes: EventTypeDefinition[];
  start(): void;
  stop(): Promise<void>;
}

/** Name of the fan-out consumer (its claims and position in the event log are kept under it). */
export const FANOUT_CONSUMER = 'webhooks.outbound-fanout';

/** The events the outbound part writes itself (an endpoint's changes, each delivery attempt). */
export const OUTBOUND_EVENT_TYPES: EventTypeDefinition[] = [
  // Not sent to endpoints either (`outbound: false`): an endpoint subscribed to `*` would receive its
  // own registration, and each change of the delivery set-up would be delivered through it.
  { name: ENDPOINT_CHANGE_EVENTS.created, description: 'An administrator created a webhook endpoint; data is the endpoint, never its secret (never sent to webhook endpoints)', data: endpointView, outbound: false },
  { name: ENDPOINT_CHANGE_EVENTS.updated, description: 'An administrator changed a webhook endpoint or rotated its secret; data is the endpoint after the change, never a secret (never sent to webhook endpoints)', data: endpointView, outbound: false },
  { name: ENDPOINT_CHANGE_EVENTS.deleted, description: 'An administrator deleted a webhook endpoint and its deliveries; data is the endpoint as it was, never its secret (never sent to webhook endpoints)', data: endpointView, outbound: false },
  { name: ENDPOINT_DISABLED_EVENT, description: 'The server disabled a webhook endpoint whose deliveries kept failing', data: endpointView },
  // Never sent to endpoints (`outbound: false`): a delivery of them would make another event, and so on.
  { name: DELIVERY_SUCCEEDED_EVENT, description: 'An attempt of an outbound delivery got a 2xx answer; data is the delivery with its attempts (never sent to webhook endpoints)', data: deliveryView, outbound: false },
  { name: DELIVERY_FAILED_EVENT, description: 'An attempt of an outbound delivery failed (it is retried per the schedule, or left failed); data is the delivery with its attempts (never sent to webhook endpoints)', data: deliveryView, outbound: false },
];

/** Builds the outbound part on `deps.db`; nothing runs until `start()` (and the kernel starts the consumer). */
export function createOutbound(deps: OutboundDeps): Outbound {
  const { config } = deps;
  const resolver = deps.resolver ?? systemResolver;
  const access = () => deps.eventAccess?.();
  const unknownRoles = deps.unknownRoles ?? ((_t: string, roles: readonly string[]) => Promise.resolve(roles.filter((r) => !(ROLES as readonly string[]).includes(r))));
  const endpointModel = webhookEndpointModel(deps.db);
  const deliveryModel = webhookDeliveryModel(deps.db);
  const metrics = outboundMetrics(deps.metrics);
  const httpsOnly = config.NODE_ENV === 'production';
  const allowedHosts = config.WEBHOOK_ENDPOINTS_ALLOWED_HOSTS.map((h) => h.toLowerCase().replace(/^\[(.*)\]$/, '$1'));
  // The sender reports endpoint health to the endpoint service, which needs the sender: bound late.
  let endpoints: EndpointService | null = null;
  const sender = new DeliverySender({
    deliveries: deliveryModel,
    endpoints: endpointModel,
    events: deps.events,
    health: { succeeded: (ids) => endpoints!.succeeded(ids), failed: (id, at) => endpoints!.failed(id, at) },
    settings: {
      schedule: config.WEBHOOK_DELIVERY_RETRY_SCHEDULE,
      timeoutMs: config.WEBHOOK_DELIVERY_TIMEOUT_MS,
      pollMs: config.WEBHOOK_DELIVERY_POLL_INTERVAL_MS,
      allowedHosts,
      httpsOnly,
      concurrency: config.WEBHOOK_DELIVERY_CONCURRENCY,
      endpointConcurrency: Math.min(config.WEBHOOK_DELIVERY_ENDPOINT_CONCURRENCY, config.WEBHOOK_DELIVERY_CONCURRENCY),
    },
    log: deps.log.child({ component: 'webhook-sender' }),
    metrics,
    resolver,
    view: (endpoint, event) => roleView(access(), endpoint, event),
    ...(deps.transport ? { transport: deps.transport } : {}),
  });
  endpoints = new EndpointService({
    endpoints: endpointModel,
    deliveries: deliveryModel,
    events: deps.events,
    tenancy: deps.tenancy,
    sender,
    resolver,
    metrics,
    unknownRoles,
    settings: {
      allowedHosts,
      httpsOnly,
      rotationOverlapMs: config.WEBHOOK_SECRET_ROTATION_OVERLAP_SECONDS * 1000,
      disableAfterMs: config.WEBHOOK_ENDPOINT_DISABLE_AFTER_HOURS * 3_600_000,
    },
  });
  deps.events.addSource(endpoints.source);
  deps.events.addSource(sender.source);
  const outbound = (event: EventHead) => deps.events.catalogue.outbound(event.type);
  // An endpoint whose role may not read the event's row gets no delivery of it.
  const readable = async (event: EventRecord, to: (RoleHolder & { _id: Types.ObjectId })[]) =>
    (await Promise.all(to.map(async (e) => ((await roleView(access(), e, event)) ? e._id : null)))).filter((id): id is Types.ObjectId => id !== null);
  const consumer: EventConsumer = {
    name: FANOUT_CONSUMER,
    types: '*',
    // Most events have no endpoint to go to, and those this process stored were fanned out as they
    // were stored: one query per batch finds the others, and only they are claimed.
    select: (events) => notFannedOut(endpointModel, deliveryModel, events.filter(outbound)),
    handle: async (event) => {
      const to = outbound(event) ? await targets(endpointModel, event) : null;
      if (!to) return;
      if (await sender.create(event, to.tenant, await readable(event, to.endpoints))) sender.wake();
    },
  };
  let started = false;
  /**
   * The events this process stores are fanned out at once, a stored batch with one read of their
   * endpoints and one insert, and their deliveries handed to this process's sender (no wait for a
   * poll, no search). The durable consumer stays the guarantee: if this fails or the process dies
   * first, it creates them (the unique index makes a second fan-out harmless).
   */
  const fanOutStored = async (docs: EventDoc[]) => {
    const events = docs.map(toRecord).filter((e) => outbound(e) && e.tenant_id && !(e.type === 'ping' && e.data.endpoint_id));
    if (!events.length || !started) return;
    const tenants = [...new Set(events.map((e) => e.tenant_id!))].map((t) => new Types.ObjectId(t));
    const rows = await endpointModel.find({ tenant_id: { $in: tenants }, enabled: true }).lean<WebhookEndpointRecord[]>();
    const items = await Promise.all(events.map(async (event) => {
      const to = rows.filter((r) => String(r.tenant_id) === event.tenant_id && subscribed(r, event));
      return { event, tenantId: new Types.ObjectId(event.tenant_id!), endpointIds: await readable(event, to) };
    }));
    const created = await sender.createMany(items, true);
    const byEndpoint = new Map(rows.map((r) => [String(r._id), r]));
    const byEvent = new Map(events.map((e) => [e.id, e]));
    sender.offer(created.map((d) => ({ d, endpoint: byEndpoint.get(String(d.endpoint_id))!, event: byEvent.get(d.event_id)! })));
  };
  deps.events.onStored((docs) => {
    fanOutStored(docs).catch((err) => deps.log.warn({ err }, 'webhook fan-out of stored events failed; the durable consumer makes it'));
  });
  return {
    endpoints,
    sender,
    consumer,
    eventTypes: OUTBOUND_EVENT_TYPES,
    start: () => {
      started = true;
      sender.start();
    },
    stop: () => {
      started = false;
      return sender.stop();
    },
  };
}

/** Is `endpoint` subscribed to `event` (its type or `*`), and did it exist when the event happened? */
const subscribed = (endpoint: { event_types: string[]; created_at: Date }, event: EventHead) =>
  (endpoint.event_types.includes(event.type) || endpoint.event_types.includes('*')) && endpoint.created_at <= event.created_at;

/**
 * The endpoints an event goes to: the enabled endpoints of its tenant subscribed to its type (or
 * `*`) that existed when it happened. An event of no tenant goes nowhere; a test ping (`ping` with
 * `endpoint_id`) is sent by its request alone, to its endpoint alone. (Types declared
 * `outbound: false` never get here.)
 */
async function targets(model: WebhookEndpointModel, event: EventRecord): Promise<{ tenant: Types.ObjectId; endpoints: (RoleHolder & { _id: Types.ObjectId })[] } | null> {
  if (!event.tenant_id || (event.type === 'ping' && event.data.endpoint_id)) return null;
  const tenant = new Types.ObjectId(event.tenant_id);
  const rows = await model
    .find({ tenant_id: tenant, enabled: true, event_types: { $in: [event.type, '*'] }, created_at: { $lte: event.created_at } }, { _id: 1, tenant_id: 1, role: 1 })
    .lean<{ _id: Types.ObjectId; tenant_id: Types.ObjectId; role?: string | null }[]>();
  return { tenant, endpoints: rows };
}

/**
 * The ids of the events that may have a target (as {@link targets} decides) and lack a delivery to
 * one of them, from one query for the endpoints of all their tenants and one for the deliveries of
 * those events. An event with a delivery to each target was fanned out already (by the process that
 * stored it): passed over, on every replica alike. A test ping may be among those returned (its
 * `data` is not read here): `targets` then sends it nowhere.
 */
async function notFannedOut(model: WebhookEndpointModel, deliveries: WebhookDeliveryModel, events: EventHead[]): Promise<Set<string>> {
  const candidates = events.filter((e): e is EventHead & { tenant_id: string } => !!e.tenant_id);
  if (!candidates.length) return new Set();
  const tenants = [...new Set(candidates.map((e) => e.tenant_id))].map((t) => new Types.ObjectId(t));
  const rows = await model
    .find({ tenant_id: { $in: tenants }, enabled: true }, { tenant_id: 1, event_types: 1, created_at: 1 })
    .lean<{ _id: Types.ObjectId; tenant_id: Types.ObjectId; event_types: string[]; created_at: Date }[]>();
  const expected = new Map<string, string[]>();
  for (const e of candidates) {
    const to = rows.filter((r) => String(r.tenant_id) === e.tenant_id && subscribed(r, e)).map((r) => String(r._id));
    if (to.length) expected.set(e.id, to);
  }
  if (!expected.size) return new Set();
  const made = await deliveries
    .find({ endpoint_id: { $in: [...new Set([...expected.values()].flat())].map((id) => new Types.ObjectId(id)) }, event_id: { $in: [...expected.keys()] } }, { endpoint_id: 1, event_id: 1 })
    .lean<{ endpoint_id: Types.ObjectId; event_id: string }[]>();
  const have = new Set(made.map((d) => `${String(d.endpoint_id)} ${d.event_id}`));
  return new Set([...expected].filter(([id, to]) => !to.every((ep) => have.has(`${ep} ${id}`))).map(([id]) => id));
}
