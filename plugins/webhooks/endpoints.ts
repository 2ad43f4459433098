/**
 * Outbound webhook endpoints of a tenant: create, list, change, delete, rotate the secret, send a
 * test ping, list and retry deliveries. Tenant administrators manage their tenant's endpoints;
 * system administrators act for one tenant with `X-Tenant-Id` (or see all without it).
 */
import { Types } from 'mongoose';
import { AppError, ConflictError, ErrorCode, NotFoundError, ValidationError } from '../../core/errors.ts';
import { isSystemActor, systemActor, writeTenantId, type Actor } from '../../core/context.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { OutboundMetrics } from './metrics.ts';
import { DocumentChanges, notRemoved, OUTBOX_FIELD, type OutboxSource } from '../events/public/outbox.ts';
import type { EventLog } from '../events/index.ts';
import { pageOf, type Page } from '../../lib/page.ts';
import type { WebhookDeliveryModel, WebhookDeliveryRecord, WebhookEndpointModel, WebhookEndpointRecord } from './model.ts';
import type {
  CreateEndpointInput, DeliveryListQuery, DeliveryView, EndpointListQuery, EndpointView, EndpointWithSecret, UpdateEndpointInput,
} from './schemas.ts';
import { checkedAddresses, UnsafeUrlError, type Resolver } from './ssrf.ts';
import { newSecret } from './signing.ts';
import type { DeliverySender, EndpointHealth } from './delivery.ts';
import { deliveryViewOf } from './views.ts';

/** Resource name of endpoint changes (their events' `meta.resource`, audit entries). */
export const ENDPOINTS_RESOURCE = 'webhook_endpoints';
/** Event appended when the server disables a failing endpoint. */
export const ENDPOINT_DISABLED_EVENT = 'webhook_endpoint.disabled';
/** The events of an administrator's changes of an endpoint (its object never holds a secret). */
export const ENDPOINT_CHANGE_EVENTS = { created: 'webhook_endpoint.created', updated: 'webhook_endpoint.updated', deleted: 'webhook_endpoint.deleted' } as const;

export interface EndpointSettings {
  allowedHosts: readonly string[];
  /** Production: endpoint URLs must be https. */
  httpsOnly: boolean;
  /** How long the previous secret still signs after a rotation. */
  rotationOverlapMs: number;
  /** An endpoint whose every attempt failed for this long is disabled. */
  disableAfterMs: number;
}

export interface EndpointServiceDeps {
  endpoints: WebhookEndpointModel;
  deliveries: WebhookDeliveryModel;
  events: EventLog;
  tenancy: Tenancy;
  sender: DeliverySender;
  resolver: Resolver;
  settings: EndpointSettings;
  /** Counts endpoints disabled for failing (`outbound_webhook_endpoints_disabled_total`). */
  metrics: OutboundMetrics;
  /** The names among `roles` that are neither built in nor roles of the tenant. */
  unknownRoles(tenantId: string, roles: readonly string[]): Promise<string[]>;
}

/** An endpoint as the API shows it (no secret). */
export const endpointViewOf = (d: WebhookEndpointRecord): EndpointView => ({
  id: String(d._id),
  url: d.url,
  description: d.description ?? null,
  event_types: [...d.event_types],
  enabled: d.enabled,
  role: d.role ?? null,
  disabled_reason: d.disabled_reason ?? null,
  secret_rotated_at: d.secret_rotated_at ?? null,
  created_at: d.created_at,
  updated_at: d.updated_at,
});

/** The endpoint service behind REST and GraphQL; also the sender's `EndpointHealth` (disables failing endpoints). */
/**
 * Who may call each endpoint operation (tenant administrators, within their tenant): the one
 * declaration its REST route and GraphQL field read.
 */
export const ENDPOINT_PERMISSIONS = {
  list: 'admin', get: 'admin', create: 'admin', update: 'admin', remove: 'admin', rotateSecret: 'admin', test: 'admin', deliveries: 'admin', retry: 'admin',
} as const satisfies Permissions;

export class EndpointService implements EndpointHealth {
  /** `webhook_endpoints` as an outbox source of the event log (the `webhook_endpoint.disabled` event). */
  readonly source: OutboxSource;
  /** Administrators' changes: each write carries its `webhook_endpoint.*` event (and audit entry). */
  private readonly changes: DocumentChanges;

  constructor(private readonly deps: EndpointServiceDeps) {
    this.source = { name: ENDPOINTS_RESOURCE, model: deps.endpoints, view: (d) => endpointViewOf(d as unknown as WebhookEndpointRecord) as unknown as Doc };
    this.changes = new DocumentChanges(() => deps.events, this.source, ENDPOINT_CHANGE_EVENTS);
  }

  /** The actor's tenant's endpoints, newest first. */
  async list(actor: Actor, q: EndpointListQuery): Promise<Page<EndpointView>> {
    const filter = { ...this.deps.tenancy.filter(actor), ...notRemoved };
    const [rows, total] = await Promise.all([
      this.deps.endpoints.find(filter).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<WebhookEndpointRecord[]>(),
      this.deps.endpoints.countDocuments(filter),
    ]);
    return pageOf(rows.map(endpointViewOf), total, q);
  }

  /** @throws NotFoundError outside the actor's tenant */
  async get(actor: Actor, id: string): Promise<EndpointView> {
    return endpointViewOf(await this.find(actor, id));
  }

  /**
   * Creates an endpoint with a new secret, answered this once.
   * @throws ValidationError for an unknown event type (naming the known ones) or a refused URL
   */
  async create(actor: Actor, input: CreateEndpointInput): Promise<EndpointWithSecret> {
    this.checkTypes(input.event_types);
    await this.checkUrl(input.url);
    const tenantId = writeTenantId(actor);
    if (input.role) await this.checkRole(tenantId, input.role);
    const now = new Date();
    const secret = newSecret();
    const draft = new this.deps.endpoints({
      tenant_id: new Types.ObjectId(tenantId),
      url: input.url,
      description: input.description ?? null,
      event_types: input.event_types,
      enabled: input.enabled,
      role: input.role ?? null,
      secrets: [{ value: secret, expires_at: null }],
      created_by: isSystemActor(actor) ? null : new Types.ObjectId(actor.id),
      created_at: now,
      updated_at: now,
    });
    draft.set(this.changes.insert(this.changes.entry('created', actor, null, draft.toObject() as WebhookEndpointRecord)));
    const record = (await draft.save()).toObject() as WebhookEndpointRecord;
    await this.changes.committed(record as unknown as Doc);
    return { ...endpointViewOf(record), secret };
  }

  /** Changes the given fields; enabling an endpoint clears why it was disabled. */
  async update(actor: Actor, id: string, input: UpdateEndpointInput): Promise<EndpointView> {
    const old = await this.find(actor, id);
    if (input.event_types) this.checkTypes(input.event_types);
    if (input.url !== undefined && input.url !== old.url) await this.checkUrl(input.url);
    if (input.role) await this.checkRole(String(old.tenant_id), input.role);
    const set: Doc = { updated_at: new Date() };
    for (const k of ['url', 'event_types', 'description', 'enabled', 'role'] as const) if (input[k] !== undefined) set[k] = input[k];
    if (input.enabled === true) Object.assign(set, { disabled_reason: null, failing_since: null });
    if (input.enabled === false) set.disabled_reason = null;
    return this.write(actor, old, set);
  }

  /** Deletes the endpoint and its deliveries. */
  async remove(actor: Actor, id: string): Promise<void> {
    const old = await this.find(actor, id);
    // Disabled as well: the sender sends nothing more to the tombstone while the relay removes it.
    const { $set, $push } = this.changes.remove(this.changes.entry('deleted', actor, old, old));
    const tomb = await this.deps.endpoints
      .findOneAndUpdate({ _id: old._id, tenant_id: old.tenant_id, ...notRemoved }, { $set: { ...$set, enabled: false }, $push }, { returnDocument: 'after' })
      .lean<WebhookEndpointRecord>();
    if (!tomb) throw new NotFoundError('webhook endpoint', id);
    this.deps.sender.endpointCache.forget(old._id);
    await this.changes.committed(tomb as unknown as Doc);
    await this.deps.deliveries.deleteMany({ tenant_id: old.tenant_id, endpoint_id: old._id });
  }

  /**
   * A new secret, answered this once. The previous one keeps signing (a second signature in
   * `webhook-signature`) for the rotation overlap; older ones stop at once.
   */
  async rotateSecret(actor: Actor, id: string): Promise<EndpointWithSecret> {
    const old = await this.find(actor, id);
    const now = new Date();
    const secret = newSecret();
    const current = old.secrets.find((s) => !s.expires_at) ?? old.secrets[0];
    const overlap = this.deps.settings.rotationOverlapMs;
    const secrets = [{ value: secret, expires_at: null }, ...(current && overlap > 0 ? [{ value: current.value, expires_at: new Date(now.getTime() + overlap) }] : [])];
    const view = await this.write(actor, old, { secrets, secret_rotated_at: now, updated_at: now });
    return { ...view, secret };
  }

  /** Sends a `ping` event to this endpoint only, now; answers the delivery after its first attempt. */
  async test(actor: Actor, id: string): Promise<DeliveryView> {
    const endpoint = await this.find(actor, id);
    const event = await this.deps.events.append('ping', {
      actor,
      tenant_id: endpoint.tenant_id,
      data: { message: 'Test event sent by POST /webhook-endpoints/{id}/test', endpoint_id: id },
    });
    const claimed = await this.deps.sender.createClaimed({ tenant_id: endpoint.tenant_id, endpoint_id: endpoint._id, event_id: event.id, event_type: event.type });
    return this.attemptNow(claimed, id);
  }

  /** The endpoint's deliveries, newest first. */
  async deliveries(actor: Actor, id: string, q: DeliveryListQuery): Promise<Page<DeliveryView>> {
    const endpoint = await this.find(actor, id);
    const filter = { tenant_id: endpoint.tenant_id, endpoint_id: endpoint._id, ...(q.status ? { status: q.status } : {}) };
    const [rows, total] = await Promise.all([
      this.deps.deliveries.find(filter).sort({ created_at: -1, _id: -1 }).skip((q.page - 1) * q.per_page).limit(q.per_page).lean<WebhookDeliveryRecord[]>(),
      this.deps.deliveries.countDocuments(filter),
    ]);
    return pageOf(rows.map(deliveryViewOf), total, q);
  }

  /**
   * Sends a delivery again now, whatever its status; answers it after the attempt.
   * @throws ConflictError while another attempt of it is under way
   */
  async retry(actor: Actor, id: string, deliveryId: string): Promise<DeliveryView> {
    const endpoint = await this.find(actor, id);
    const exists = await this.deps.deliveries.exists({ _id: deliveryId, tenant_id: endpoint.tenant_id, endpoint_id: endpoint._id });
    if (!exists) throw new NotFoundError('webhook delivery', deliveryId);
    const claimed = await this.deps.sender.claim({ _id: new Types.ObjectId(deliveryId), endpoint_id: endpoint._id });
    if (!claimed) throw new ConflictError('The delivery is being sent right now; try again in a moment');
    return this.attemptNow(claimed, deliveryId);
  }

  // --- endpoint health (called by the sender) ---------------------------------------------------

  /** Successful attempts: ends the failing period of each endpoint (one conditional write for all). */
  async succeeded(endpointIds: Types.ObjectId[]): Promise<void> {
    if (!endpointIds.length) return;
    await this.deps.endpoints.updateMany({ _id: { $in: endpointIds }, failing_since: { $ne: null } }, { $set: { failing_since: null } });
  }

  /** A failed attempt: starts the failing period, and disables the endpoint once it lasted long enough. */
  async failed(endpointId: Types.ObjectId, at: Date): Promise<void> {
    await this.deps.endpoints.updateOne({ _id: endpointId, failing_since: null }, { $set: { failing_since: at } });
    const after = this.deps.settings.disableAfterMs;
    const since = new Date(at.getTime() - after);
    const hours = +(after / 3_600_000).toFixed(6);
    const reason = `Every delivery attempt failed for ${hours} hour${hours === 1 ? '' : 's'}`;
    const due = { _id: endpointId, enabled: true, failing_since: { $lte: since } };
    const old = await this.deps.endpoints.findOne(due).lean<WebhookEndpointRecord>();
    if (!old) return;
    const set = { enabled: false, disabled_reason: reason, updated_at: at };
    const actor = systemActor(String(old.tenant_id));
    // The event travels in the endpoint's outbox, written by the disabling update itself, with its
    // objects frozen (endpoints have no version): it exists if and only if the endpoint was disabled,
    // and its audit entry (an update by the system) comes with it.
    const entry = this.changes.entry('updated', actor, old, { ...old, ...set } as WebhookEndpointRecord, { type: ENDPOINT_DISABLED_EVENT });
    // Conditional on the endpoint as read: of several processes failing at once, one disables and tells.
    const doc = await this.deps.endpoints
      .findOneAndUpdate({ ...due, updated_at: old.updated_at }, { $set: set, $push: { [OUTBOX_FIELD]: entry } }, { returnDocument: 'after' })
      .lean<WebhookEndpointRecord>();
    if (!doc) return;
    this.deps.sender.endpointCache.forget(endpointId);
    this.deps.metrics.disabled.inc();
    await this.deps.events.committed(this.source, doc as unknown as Doc);
  }

  // --- helpers ----------------------------------------------------------------------------------

  private async attemptNow(claimed: WebhookDeliveryRecord, id: string): Promise<DeliveryView> {
    const done = await this.deps.sender.attempt(claimed, true);
    if (!done) throw new NotFoundError('webhook delivery', id);
    return deliveryViewOf(done);
  }

  /** An endpoint of the actor's tenant. @throws NotFoundError elsewhere */
  private async find(actor: Actor, id: string): Promise<WebhookEndpointRecord> {
    const doc = await this.deps.endpoints.findOne({ _id: id, ...this.deps.tenancy.filter(actor), ...notRemoved }).lean<WebhookEndpointRecord>();
    if (!doc) throw new NotFoundError('webhook endpoint', id);
    return doc;
  }

  private async write(actor: Actor, old: WebhookEndpointRecord, set: Doc): Promise<EndpointView> {
    const entry = this.changes.entry('updated', actor, old, { ...old, ...set } as WebhookEndpointRecord);
    const doc = await this.deps.endpoints
      .findOneAndUpdate({ _id: old._id, tenant_id: old.tenant_id, ...notRemoved }, { $set: set, $push: this.changes.push(entry) }, { returnDocument: 'after' })
      .lean<WebhookEndpointRecord>();
    if (!doc) throw new NotFoundError('webhook endpoint', String(old._id));
    // The sender's copy is stale: its next batch reads the endpoint again (a rotated secret, a disable).
    this.deps.sender.endpointCache.forget(old._id);
    await this.changes.committed(doc as unknown as Doc);
    return endpointViewOf(doc);
  }

  private checkTypes(types: readonly string[]): void {
    const catalogue = this.deps.events.catalogue;
    const errors = types.flatMap((t, i) => {
      if (t === '*' || catalogue.outbound(t)) return [];
      return [{ loc: ['body', 'event_types', i], msg: catalogue.has(t) ? `"${t}" is never sent to webhook endpoints` : `Unknown event type "${t}"`, type: 'enum' }];
    });
    if (!errors.length) return;
    const known = catalogue.names().filter((n) => catalogue.outbound(n));
    throw new AppError(422, ErrorCode.VALIDATION_ERROR, `Unknown event type; known types: ${known.join(', ')} (or * for all)`, { errors, known_types: known });
  }

  /** @throws ValidationError on `role` when it is neither built in nor a role of the endpoint's tenant */
  private async checkRole(tenantId: string, role: string): Promise<void> {
    if (!(await this.deps.unknownRoles(tenantId, [role])).length) return;
    throw new ValidationError([{ loc: ['body', 'role'], msg: `Unknown role "${role}" in this tenant`, type: 'unknown_role' }]);
  }

  /** @throws ValidationError on `url` for a refused scheme or address */
  private async checkUrl(raw: string): Promise<void> {
    const url = new URL(raw);
    const refuse = (msg: string) => new ValidationError([{ loc: ['body', 'url'], msg, type: 'unsafe_url' }]);
    if (this.deps.settings.httpsOnly && url.protocol !== 'https:') throw refuse('must use https');
    try {
      await checkedAddresses(url, { allowedHosts: this.deps.settings.allowedHosts, resolver: this.deps.resolver });
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw refuse(`refused: ${err.message}`);
      throw err;
    }
  }
}
