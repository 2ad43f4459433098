/**
 * The GraphQL fragment of the webhooks plugin: `webhookEvents`, `webhookDeadLetter` and
 * `retryWebhookEvent`. Resolvers call the same service operations as REST, which require a system
 * administrator (anonymous 401, anyone else 403), and validate with the same zod schemas.
 */
import type { Builder } from '../../core/graphql.ts';
import { pageObject, parseInput, requireUser, givenArgs } from '../../core/graphql.ts';
import { deadLetterQuery, listQuery, retryParams, type RetryResult, type WebhookEventView } from './schemas.ts';
import type { WebhooksService } from './service.ts';

export function webhooksGraphql(builder: Builder, svc: WebhooksService): void {
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
  // `svc.operator(actor)` checks the role before the arguments are parsed, as REST does.
  builder.queryFields((t) => ({
    webhookEvents: t.field({
      type: EventPage, nullable: false, description: 'Stored webhook events, as GET /webhooks/events (system administrators)',
      args: { provider: t.arg.string(), status: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => svc.operator(requireUser(ctx)).list(parseInput(listQuery, givenArgs(a))),
    }),
    webhookDeadLetter: t.field({
      type: EventPage, nullable: false, description: 'Failed webhook events, as GET /webhooks/dead-letter (system administrators)',
      args: { provider: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => svc.operator(requireUser(ctx)).deadLetter(parseInput(deadLetterQuery, givenArgs(a))),
    }),
  }));
  builder.mutationFields((t) => ({
    retryWebhookEvent: t.field({
      type: RetryResult, nullable: false, description: 'Re-run the handler of a failed event, as POST /webhooks/dead-letter/{event_id}/retry',
      args: { event_id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => svc.operator(requireUser(ctx)).retry(parseInput(retryParams, a).event_id),
    }),
  }));
}
