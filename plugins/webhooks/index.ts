import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { webhookEventModel } from './model.ts';
import {
  deadLetterQuery, listQuery, listResponse, providerParams, purgeQuery, purgeResponse, receiveResponse, retryParams, retryResponse,
  type WebhookEventContext,
} from './schemas.ts';
import { WebhooksService, type WebhookRegistry } from './service.ts';
import { webhooksGraphql } from './graphql.ts';

export type { WebhookRegistry } from './service.ts';
export type { WebhookEventContext, WebhookHandler, ProviderRegistrationInput } from './schemas.ts';
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

/** Options of the webhooks plugin: `webhooksPlugin.configure({ ... })`. */
export const webhooksOptions = z.object({
  /** How long a claimed event may stay `processing` before a redelivery or a retry takes it over (crash recovery). */
  lease_seconds: z.number().int().min(1).max(86_400).default(300),
});

/**
 * Inbound webhooks (spec document 2): the `webhooks` service other plugins register providers on,
 * the public receiver `POST /webhooks/{provider}` and the operator endpoints (system
 * administrators). Providers may also be declared in `WEBHOOK_PROVIDERS`; they emit
 * `WEBHOOK_RECEIVED`. With `WEBHOOKS_ENABLED` false the service still accepts (and validates)
 * registrations, but no route or GraphQL field exists.
 */
export const webhooksPlugin = definePlugin({
  name: 'webhooks',
  options: webhooksOptions,
  setup({ db, config, options, services, hooks, log }) {
    const svc = new WebhooksService(webhookEventModel(db), { leaseMs: options.lease_seconds * 1000, log });
    services.provide('webhooks', svc);
    for (const { name, ...p } of config.WEBHOOK_PROVIDERS) {
      svc.register({ ...p, provider: name, handler: (payload, event) => hooks.dispatch('WEBHOOK_RECEIVED', { payload, event }) });
    }
    if (!config.WEBHOOKS_ENABLED) return {};
    services.get('metrics').watchDeadLetter(webhookEventModel(db) as never);
    const tags = ['webhooks'];

    return {
      routes: [
        // Static paths first: `/webhooks/events` must never be read as a provider named "events" (GET vs POST keeps them apart too).
        listRoute('/webhooks/events', 'List received webhook events', listQuery, (q) => svc.list(q)),
        listRoute('/webhooks/dead-letter', 'List failed webhook events (dead-letter queue)', deadLetterQuery, (q) => svc.deadLetter(q)),
        defineRoute({
          method: 'POST', path: '/webhooks/dead-letter/:event_id/retry', tags, auth: 'system', summary: 'Re-run the handler of a failed event',
          description: '`event_id` is the stored event id, or the provider\'s event id when exactly one event has it.',
          params: retryParams, response: retryResponse, docs: { errors: [404, 409] },
          handler: ({ params }) => svc.retry(params.event_id),
        }),
        defineRoute({
          method: 'DELETE', path: '/webhooks/events/purge', tags, auth: 'system', summary: 'Delete processed events older than N days',
          query: purgeQuery(config.WEBHOOK_EVENT_RETENTION_DAYS), response: purgeResponse,
          handler: ({ query }) => svc.purge(query.retention_days),
        }),
        defineRoute({
          method: 'POST', path: '/webhooks/:provider', tags, auth: 'public', rawBody: true, summary: 'Receive a webhook delivery',
          description: 'Verifies the signature over the raw body, deduplicates by (provider, event id), stores the event and runs its handler. A handler failure answers 500 `{status: failed}` so the provider redelivers.',
          params: providerParams, response: receiveResponse, docs: { errors: [401, 404, 413] },
          handler: async ({ params, body, ctx }) => {
            const res = await services.get('metrics').webhookDelivery(params.provider, () => svc.receive(params.provider, body as unknown as Buffer, ctx.req.headers));
            ctx.status = res.status;
            ctx.body = res.body;
          },
        }),
      ],
      graphql: (builder) => webhooksGraphql(builder, svc),
    };
  },
});

interface EventPage {
  total: number;
  page: number;
  per_page: number;
  total_pages: number;
}

/** A system-admin list of events with the offset-pagination headers of spec document 1. */
function listRoute<Q extends z.ZodType>(path: string, summary: string, query: Q, list: (q: z.output<Q>) => Promise<EventPage>) {
  return defineRoute({
    method: 'GET', path, tags: ['webhooks'], auth: 'system', summary, query, response: listResponse,
    docs: { responseHeaders: { 'X-Total-Count': 'Matching events', 'X-Page': 'Page', 'X-Per-Page': 'Page size', 'X-Total-Pages': 'Pages' } },
    handler: async ({ query: q, ctx }) => {
      const res = await list(q as z.output<Q>);
      ctx.set('X-Total-Count', String(res.total));
      ctx.set('X-Page', String(res.page));
      ctx.set('X-Per-Page', String(res.per_page));
      ctx.set('X-Total-Pages', String(res.total_pages));
      return res;
    },
  });
}

export default webhooksPlugin;
