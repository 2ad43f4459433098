/**
 * The webhooks plugin. This file only wires: the model (model.ts), the zod inputs and views
 * (schemas.ts), the receiver and operator logic (service.ts), the verifiers and presets, and the
 * GraphQL fragment (graphql.ts) come from their own files.
 */
import type { z } from 'zod';
import type { Actor } from '../../core/context.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { pageHeaderDocs, setPageHeaders, type Page } from '../../lib/page.ts';
import { notRemoved } from '../events/public/outbox.ts';
import { webhookEndpointModel, webhookEventModel } from './model.ts';
import {
  deadLetterQuery, eventView, listQuery, listResponse, providerParams, purgeQuery, purgeResponse, receiveResponse, retryParams, retryResponse,
  webhooksOptions, type WebhookEventContext, type WebhookEventView,
} from './schemas.ts';
import { WEBHOOK_EVENT_FAILED, WEBHOOK_EVENT_RECOVERED, WEBHOOK_OPERATOR_PERMISSIONS, WebhooksService, type WebhookRegistry } from './service.ts';
import { outboundWebhooksGraphql, webhooksGraphql } from './graphql.ts';
import { createOutbound } from './outbound.ts';
import { outboundRoutes } from './rest.ts';
import { inboundMetrics } from './metrics.ts';

export type { WebhookRegistry } from './service.ts';
export type { WebhookEventContext, WebhookHandler, ProviderRegistrationInput } from './schemas.ts';
export { webhooksOptions } from './schemas.ts';
export type { WebhookVerifier } from './verifiers.ts';

declare module '../../core/services.ts' {
  interface Services {
    webhooks: WebhookRegistry;
  }
}

declare module '../../core/hooks.ts' {
  interface HookEvents {
    /**
     * A delivery to a provider declared in `WEBHOOK_PROVIDERS` was verified and stored. Subscribers
     * run one after another, awaited, inside the provider's handler: a throw marks the event
     * `failed` (dead-letter queue) and a redelivery or retry runs every subscriber again.
     */
    WEBHOOK_RECEIVED: { payload: Record<string, unknown>; event: WebhookEventContext };
  }
}

/**
 * Inbound webhooks: the `webhooks` service other plugins register providers on,
 * the public receiver `POST /webhooks/{provider}` and the operator endpoints (system
 * administrators). Providers may also be declared in `WEBHOOK_PROVIDERS`; they emit
 * `WEBHOOK_RECEIVED`. With `WEBHOOKS_ENABLED` false the service still accepts (and validates)
 * registrations, but no route or GraphQL field exists.
 */
export const webhooksPlugin = definePlugin({
  name: 'webhooks',
  enabledBy: 'WEBHOOKS_ENABLED',
  options: webhooksOptions,
  setup({ db, config, options, services, hooks, log, tenancy }) {
    const svc = new WebhooksService(webhookEventModel(db), { leaseMs: options.lease_seconds * 1000, log, events: services.get('events') });
    services.provide('webhooks', svc);
    for (const { name, ...p } of config.WEBHOOK_PROVIDERS) {
      svc.register({ ...p, provider: name, handler: (payload, event) => hooks.dispatch('WEBHOOK_RECEIVED', { payload, event }) });
    }
    if (!config.WEBHOOKS_ENABLED) return {};
    const inbound = inboundMetrics(services.get('metrics'), webhookEventModel(db) as never);
    const tags = ['webhooks'];
    const identity = services.get('identity');
    const outbound = createOutbound({
      db, config, tenancy, events: services.get('events'), log, metrics: services.get('metrics'),
      eventAccess: () => services.maybe('eventAccess'), unknownRoles: (t, r) => identity.unknownRoles(t, r),
    });
    identity.registerRoleHolder('webhook endpoints', async (t, role) => !!(await webhookEndpointModel(db).exists({ tenant_id: t, role, ...notRemoved })));
    services.get('events').addSource(svc.source);

    return {
      routes: [
        // Static paths first: `/webhooks/events` must never be read as a provider named "events" (GET vs POST keeps them apart too).
        listRoute('/webhooks/events', 'List received webhook events', listQuery, (actor, q) => svc.operator(actor).list(q)),
        listRoute('/webhooks/dead-letter', 'List failed webhook events (dead-letter queue)', deadLetterQuery, (actor, q) => svc.operator(actor).deadLetter(q)),
        defineRoute({
          method: 'POST', path: '/webhooks/dead-letter/:event_id/retry', tags, auth: WEBHOOK_OPERATOR_PERMISSIONS.operator, summary: 'Re-run the handler of a failed event',
          description: '`event_id` is the stored event id, or the provider\'s event id when exactly one event has it.',
          params: retryParams, response: retryResponse, docs: { errors: [404, 409] },
          handler: ({ actor: actor, params }) => svc.operator(actor).retry(params.event_id),
        }),
        defineRoute({
          method: 'DELETE', path: '/webhooks/events/purge', tags, auth: WEBHOOK_OPERATOR_PERMISSIONS.operator, summary: 'Delete processed events older than N days',
          query: purgeQuery(config.WEBHOOK_EVENT_RETENTION_DAYS), response: purgeResponse,
          handler: ({ actor: actor, query }) => svc.operator(actor).purge(query.retention_days),
        }),
        defineRoute({
          method: 'POST', path: '/webhooks/:provider', tags, auth: 'public', rawBody: true, summary: 'Receive a webhook delivery',
          // Providers deliver in bursts from a few addresses: a budget per provider and client (docs/operations.md).
          budget: { param: 'provider', name: 'webhook', max: config.WEBHOOK_RATE_LIMIT_MAX },
          description: 'Verifies the signature over the raw body, deduplicates by (provider, event id), stores the event and runs its handler. A handler failure answers 500 `{status: failed}` so the provider redelivers.',
          params: providerParams, response: receiveResponse, docs: { errors: [401, 404, 413], responses: { 500: { description: 'The handler failed: `{status: failed}`, the provider redelivers.', schema: receiveResponse }, 503: { description: 'Another delivery of the event is being handled: `{status: processing}`.', schema: receiveResponse } } },
          handler: async ({ params, body, ctx }) => {
            const res = await inbound.delivery(params.provider, () => svc.receive(params.provider, body as unknown as Buffer, ctx.req.headers));
            ctx.status = res.status;
            ctx.body = res.body;
          },
        }),
        ...outboundRoutes(outbound.endpoints),
      ],
      graphql: (builder) => {
        webhooksGraphql(builder, svc, config.WEBHOOK_EVENT_RETENTION_DAYS);
        outboundWebhooksGraphql(builder, outbound.endpoints);
      },
      eventTypes: [
        ...outbound.eventTypes,
        { name: WEBHOOK_EVENT_FAILED, description: 'An inbound webhook event reached the dead-letter queue (its handler failed); data is the event without its signature header', data: eventView },
        { name: WEBHOOK_EVENT_RECOVERED, description: 'A failed inbound webhook event was handled on a redelivery or a retry, so it left the dead-letter queue; data is the event without its signature header', data: eventView },
      ],
      eventConsumers: [outbound.consumer],
      ready: () => outbound.start(),
      close: () => outbound.stop(),
    };
  },
});

/** A system-admin list of events, with the offset-pagination headers. */
function listRoute<Q extends z.ZodType>(
  path: string, summary: string, query: Q, list: (actor: Actor, q: z.output<Q>) => Promise<Page<WebhookEventView>>,
) {
  return defineRoute({
    method: 'GET', path, tags: ['webhooks'], auth: WEBHOOK_OPERATOR_PERMISSIONS.operator, summary, query, response: listResponse,
    docs: { responseHeaders: pageHeaderDocs('Matching events') },
    handler: async ({ actor: actor, query: q, ctx }) => setPageHeaders(ctx, await list(actor, q as z.output<Q>)),
  });
}

export default webhooksPlugin;
