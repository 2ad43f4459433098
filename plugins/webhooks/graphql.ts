import type { Builder, GraphQLContext } from '../../core/graphql.ts';
import { parseInput, requireUser, givenArgs } from '../../core/graphql.ts';
import { hasSystemScope, type AuthUser } from '../../core/context.ts';
import { AccessDeniedError } from '../../core/errors.ts';
import { deadLetterQuery, listQuery, retryParams, type WebhookEventView } from './schemas.ts';
import type { WebhooksService } from './service.ts';

/** Same rule as `auth: 'system'` on the REST routes: anonymous 401, anyone but a system administrator 403. */
function requireSystem(ctx: GraphQLContext): AuthUser {
  const user = requireUser(ctx);
  if (!hasSystemScope(user)) throw new AccessDeniedError('System administrator required');
  return user;
}

/** GraphQL fragment: `webhookEvents`, `webhookDeadLetter`, `retryWebhookEvent` (system administrators only). */
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
  type Page = { items: WebhookEventView[]; total: number; page: number; per_page: number; total_pages: number };
  const EventPage = builder.objectRef<Page>('WebhookEventPage');
  EventPage.implement({
    fields: (t) => ({
      items: t.expose('items', { type: [Event], nullable: false }),
      total: t.exposeInt('total', { nullable: false }),
      page: t.exposeInt('page', { nullable: false }),
      per_page: t.exposeInt('per_page', { nullable: false }),
      total_pages: t.exposeInt('total_pages', { nullable: false }),
    }),
  });
  type Retry = { id: string; event_id: string; status: string; error: string | null };
  const RetryResult = builder.objectRef<Retry>('WebhookRetryResult');
  RetryResult.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      event_id: t.exposeString('event_id', { nullable: false }),
      status: t.exposeString('status', { nullable: false }),
      error: t.exposeString('error'),
    }),
  });
  builder.queryFields((t) => ({
    webhookEvents: t.field({
      type: EventPage, nullable: false, description: 'Stored webhook events, as GET /webhooks/events (system administrators)',
      args: { provider: t.arg.string(), status: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => {
        requireSystem(ctx);
        return svc.list(parseInput(listQuery, givenArgs(a)));
      },
    }),
    webhookDeadLetter: t.field({
      type: EventPage, nullable: false, description: 'Failed webhook events, as GET /webhooks/dead-letter (system administrators)',
      args: { provider: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => {
        requireSystem(ctx);
        return svc.deadLetter(parseInput(deadLetterQuery, givenArgs(a)));
      },
    }),
  }));
  builder.mutationFields((t) => ({
    retryWebhookEvent: t.field({
      type: RetryResult, nullable: false, description: 'Re-run the handler of a failed event, as POST /webhooks/dead-letter/{event_id}/retry',
      args: { event_id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => {
        requireSystem(ctx);
        return svc.retry(parseInput(retryParams, a).event_id);
      },
    }),
  }));
}
