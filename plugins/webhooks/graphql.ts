/**
 * The GraphQL fragment of the webhooks plugin: `webhookEvents`, `webhookDeadLetter` and
 * `retryWebhookEvent`. Resolvers call the same service operations as REST, which require a system
 * administrator (anonymous 401, anyone else 403), and validate with the same zod schemas.
 */
import type { Builder } from '../../core/graphql.ts';
import { pageObject, parseInput, givenArgs, scopes } from '../../core/graphql.ts';
import { deadLetterQuery, listQuery, purgeQuery, retryParams, type PurgeResult, type RetryResult, type WebhookEventView } from './schemas.ts';
import { WEBHOOK_OPERATOR_PERMISSIONS, type WebhooksService } from './service.ts';
import { idParams } from '../../core/http/schemas.ts';
import { ENDPOINT_PERMISSIONS, type EndpointService } from './endpoints.ts';
import {
  createEndpointInput, deliveryListQuery, deliveryParams, endpointListQuery, updateEndpointInput,
  type AttemptView, type DeliveryView, type EndpointView, type EndpointWithSecret,
} from './schemas.ts';

export function webhooksGraphql(builder: Builder, svc: WebhooksService, retentionDays: number): void {
  const Event = builder.objectRef<WebhookEventView>('WebhookEvent');
  Event.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      provider: t.exposeString('provider', { nullable: false }),
      event_id: t.exposeString('event_id', { nullable: false }),
      event_type: t.exposeString('event_type'),
      delivery_id: t.exposeString('delivery_id'),
      payload: t.expose('payload', { type: 'JSON', nullable: false }),
      headers: t.expose('headers', { type: 'JSON', nullable: false }),
      status: t.exposeString('status', { nullable: false }),
      processed_at: t.expose('processed_at', { type: 'DateTime' }),
      error: t.exposeString('error'),
      retry_count: t.exposeInt('retry_count', { nullable: false }),
      is_duplicate: t.exposeBoolean('is_duplicate', { nullable: false }),
      attempts: t.exposeInt('attempts', { nullable: false }),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
      updated_at: t.expose('updated_at', { type: 'DateTime', nullable: false }),
    }),
  });
  const EventPage = pageObject(builder, 'WebhookEventPage', Event);
  const RetryResult = builder.objectRef<RetryResult>('WebhookRetryResult');
  RetryResult.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      event_id: t.exposeString('event_id', { nullable: false }),
      status: t.exposeString('status', { nullable: false }),
      error: t.exposeString('error'),
    }),
  });
  const PurgeResultRef = builder.objectRef<PurgeResult>('WebhookPurgeResult');
  PurgeResultRef.implement({
    fields: (t) => ({
      deleted_count: t.exposeInt('deleted_count', { nullable: false }),
      retention_days: t.exposeInt('retention_days', { nullable: false }),
      cutoff_date: t.expose('cutoff_date', { type: 'DateTime', nullable: false }),
    }),
  });
  // The operator permission is checked before the arguments are parsed, as REST does.
  builder.queryFields((t) => ({
    webhookEvents: t.withAuth(scopes(WEBHOOK_OPERATOR_PERMISSIONS.operator)).field({
      type: EventPage, nullable: false, description: 'Stored webhook events, as GET /webhooks/events (system administrators)',
      args: { provider: t.arg.string(), status: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => svc.operator(ctx.actor).list(parseInput(listQuery, givenArgs(a))),
    }),
    webhookDeadLetter: t.withAuth(scopes(WEBHOOK_OPERATOR_PERMISSIONS.operator)).field({
      type: EventPage, nullable: false, description: 'Failed webhook events, as GET /webhooks/dead-letter (system administrators)',
      args: { provider: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => svc.operator(ctx.actor).deadLetter(parseInput(deadLetterQuery, givenArgs(a))),
    }),
  }));
  builder.mutationFields((t) => ({
    retryWebhookEvent: t.withAuth(scopes(WEBHOOK_OPERATOR_PERMISSIONS.operator)).field({
      type: RetryResult, nullable: false, description: 'Re-run the handler of a failed event, as POST /webhooks/dead-letter/{event_id}/retry',
      args: { event_id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => svc.operator(ctx.actor).retry(parseInput(retryParams, a).event_id),
    }),
    purgeWebhookEvents: t.withAuth(scopes(WEBHOOK_OPERATOR_PERMISSIONS.operator)).field({
      type: PurgeResultRef, nullable: false,
      description: 'Delete processed events older than retention_days (default WEBHOOK_EVENT_RETENTION_DAYS), as DELETE /webhooks/events/purge (system administrators)',
      args: { retention_days: t.arg.int() },
      resolve: (_r, a, ctx) => svc.operator(ctx.actor).purge(parseInput(purgeQuery(retentionDays), givenArgs(a)).retention_days),
    }),
  }));
}

// --- outbound webhooks --------------------------------------------------------------------------

/**
 * GraphQL of outbound webhooks, the same service and errors as `/webhook-endpoints`:
 * `webhookEndpoints`, `webhookEndpoint`, `webhookDeliveries`, and the mutations
 * `createWebhookEndpoint`, `updateWebhookEndpoint`, `deleteWebhookEndpoint`,
 * `rotateWebhookEndpointSecret`, `testWebhookEndpoint`, `retryWebhookDelivery`.
 */
export function outboundWebhooksGraphql(builder: Builder, svc: EndpointService): void {
  const Endpoint = builder.objectRef<EndpointView>('WebhookEndpoint');
  Endpoint.implement({
    description: 'An outbound webhook endpoint of the tenant (its secret is never shown here)',
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      url: t.exposeString('url', { nullable: false }),
      description: t.exposeString('description'),
      event_types: t.exposeStringList('event_types', { nullable: false }),
      enabled: t.exposeBoolean('enabled', { nullable: false }),
      role: t.exposeString('role', { description: 'Deliveries carry only what this role may read (null: every event whole)' }),
      disabled_reason: t.exposeString('disabled_reason'),
      secret_rotated_at: t.expose('secret_rotated_at', { type: 'DateTime' }),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
      updated_at: t.expose('updated_at', { type: 'DateTime', nullable: false }),
    }),
  });
  const WithSecret = builder.objectRef<EndpointWithSecret>('WebhookEndpointWithSecret');
  WithSecret.implement({
    description: 'An endpoint and its signing secret, answered only by creation and rotation',
    fields: (t) => ({
      endpoint: t.field({ type: Endpoint, nullable: false, resolve: (e) => e }),
      secret: t.exposeString('secret', { nullable: false }),
    }),
  });
  const Attempt = builder.objectRef<AttemptView>('WebhookDeliveryAttempt');
  Attempt.implement({
    fields: (t) => ({
      status: t.exposeInt('status', { description: 'HTTP status of the response; null when none came' }),
      duration_ms: t.exposeInt('duration_ms', { nullable: false }),
      error: t.exposeString('error'),
      response_excerpt: t.exposeString('response_excerpt'),
      attempted_at: t.expose('attempted_at', { type: 'DateTime', nullable: false }),
    }),
  });
  const Delivery = builder.objectRef<DeliveryView>('WebhookDelivery');
  Delivery.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      endpoint_id: t.exposeID('endpoint_id', { nullable: false }),
      event_id: t.exposeString('event_id', { nullable: false }),
      event_type: t.exposeString('event_type', { nullable: false }),
      status: t.exposeString('status', { nullable: false }),
      attempts: t.exposeInt('attempts', { nullable: false }),
      last_attempt: t.field({ type: Attempt, resolve: (d) => d.last_attempt }),
      attempt_log: t.field({ type: [Attempt], nullable: false, description: 'Every recorded attempt, oldest first: the last 20 (older ones are dropped)', resolve: (d) => d.attempt_log }),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
      next_attempt_at: t.expose('next_attempt_at', { type: 'DateTime' }),
    }),
  });
  const EndpointPage = pageObject(builder, 'WebhookEndpointPage', Endpoint);
  const DeliveryPage = pageObject(builder, 'WebhookDeliveryPage', Delivery);
  const id = (a: { id: string | number }) => parseInput(idParams, { id: String(a.id) }).id;

  builder.queryFields((t) => ({
    webhookEndpoints: t.withAuth(scopes(ENDPOINT_PERMISSIONS.list)).field({
      type: EndpointPage, nullable: false, description: "The tenant's webhook endpoints, as GET /webhook-endpoints (administrators)",
      args: { page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => svc.list(ctx.actor, parseInput(endpointListQuery, givenArgs(a))),
    }),
    webhookEndpoint: t.withAuth(scopes(ENDPOINT_PERMISSIONS.get)).field({
      type: Endpoint, nullable: false, description: 'One webhook endpoint of the tenant',
      args: { id: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => svc.get(ctx.actor, id(a)),
    }),
    webhookDeliveries: t.withAuth(scopes(ENDPOINT_PERMISSIONS.deliveries)).field({
      type: DeliveryPage, nullable: false, description: "An endpoint's deliveries, newest first",
      args: { endpoint_id: t.arg.id({ required: true }), status: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, { endpoint_id, ...a }, ctx) => svc.deliveries(ctx.actor, id({ id: endpoint_id }), parseInput(deliveryListQuery, givenArgs(a))),
    }),
  }));
  builder.mutationFields((t) => ({
    createWebhookEndpoint: t.withAuth(scopes(ENDPOINT_PERMISSIONS.create)).field({
      type: WithSecret, nullable: false, description: 'Create an endpoint; the answer holds its secret, shown only this once',
      args: { url: t.arg.string({ required: true }), event_types: t.arg.stringList({ required: true }), description: t.arg.string(), enabled: t.arg.boolean(), role: t.arg.string() },
      resolve: (_r, a, ctx) => svc.create(ctx.actor, parseInput(createEndpointInput, givenArgs(a))),
    }),
    updateWebhookEndpoint: t.withAuth(scopes(ENDPOINT_PERMISSIONS.update)).field({
      type: Endpoint, nullable: false, description: 'Change the url, event types, description, enabled flag or role (role: null clears it)',
      args: { id: t.arg.id({ required: true }), url: t.arg.string(), event_types: t.arg.stringList(), description: t.arg.string(), enabled: t.arg.boolean(), role: t.arg.string() },
      // An explicit `role: null` clears the role, as `{"role": null}` does over REST; other nulls mean "unchanged".
      resolve: (_r, { id: raw, ...a }, ctx) =>
        svc.update(ctx.actor, id({ id: raw }), parseInput(updateEndpointInput, { ...givenArgs(a), ...(a.role === null ? { role: null } : {}) })),
    }),
    deleteWebhookEndpoint: t.withAuth(scopes(ENDPOINT_PERMISSIONS.remove)).field({
      type: 'Boolean', nullable: false, description: 'Delete an endpoint and its deliveries',
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_r, a, ctx) => {
        await svc.remove(ctx.actor, id(a));
        return true;
      },
    }),
    rotateWebhookEndpointSecret: t.withAuth(scopes(ENDPOINT_PERMISSIONS.rotateSecret)).field({
      type: WithSecret, nullable: false, description: 'Replace the signing secret (the old one signs too during the overlap)',
      args: { id: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => svc.rotateSecret(ctx.actor, id(a)),
    }),
    testWebhookEndpoint: t.withAuth(scopes(ENDPOINT_PERMISSIONS.test)).field({
      type: Delivery, nullable: false, description: 'Send a ping event to this endpoint only, now',
      args: { id: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => svc.test(ctx.actor, id(a)),
    }),
    retryWebhookDelivery: t.withAuth(scopes(ENDPOINT_PERMISSIONS.retry)).field({
      type: Delivery, nullable: false, description: 'Send a delivery again now',
      args: { endpoint_id: t.arg.id({ required: true }), delivery_id: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => {
        const p = parseInput(deliveryParams, { id: String(a.endpoint_id), delivery_id: String(a.delivery_id) });
        return svc.retry(ctx.actor, p.id, p.delivery_id);
      },
    }),
  }));
}
