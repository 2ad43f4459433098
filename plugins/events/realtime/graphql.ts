import type { Builder } from '../../../core/graphql.ts';
import { scopes } from '../../../core/graphql.ts';
import type { EventRef } from '../graphql.ts';
import type { EventRecord } from '../public/contributions.ts';
import type { RealtimeService } from './service.ts';
import { EVENT_PERMISSIONS } from '../service.ts';
import { settled } from './live.ts';
import { unsettle, type StreamEnd } from '../public/live.ts';
import { SHARED_RESULTS } from './yoga.ts';

/**
 * GraphQL subscriptions of the event log: `events(types)` and `resourceChanged(resource, id)`,
 * each event filtered for its subscriber exactly as `GET /events/stream` filters it.
 */
export function realtimeGraphql(builder: Builder, realtime: RealtimeService, Event: EventRef): void {
  builder.subscriptionType({ description: 'Live events, over GraphQL over SSE or graphql-ws on the same /graphql path' });
  builder.subscriptionFields((t) => ({
    events: t.withAuth(scopes(EVENT_PERMISSIONS.stream)).field({
      type: Event, nullable: false,
      description: "Events of the caller's tenant as they are committed, those the caller may read (docs/realtime.md)",
      args: { types: t.arg.stringList({ required: false, description: 'Exact event types; all when absent' }) },
      // Each result depends on the event and the caller's visibility only: executed once per group.
      extensions: { [SHARED_RESULTS]: true },
      subscribe: async (_r, args, ctx) => {
        realtime.checkTypes(args.types, ['args', 'types']);
        const events = realtime.stream(await realtime.session(ctx), { types: args.types });
        await events.ready;
        return settled(events);
      },
      resolve: (e: EventRecord | StreamEnd) => unsettle(e),
    }),
    resourceChanged: t.withAuth(scopes(EVENT_PERMISSIONS.resourceChanged)).field({
      type: Event, nullable: false,
      description: "A resource's created, updated, deleted and restored events (and draft_saved, published, unpublished with drafts), optionally of one document",
      args: { resource: t.arg.string({ required: true }), id: t.arg.id({ required: false }) },
      extensions: { [SHARED_RESULTS]: true },
      subscribe: async (_r, args, ctx) => {
        const types = realtime.resourceTypes(ctx.actor, args.resource);
        const id = args.id ? String(args.id) : null;
        const match = id ? (e: EventRecord) => String(e.data.id ?? e.data._id ?? '') === id : undefined;
        const events = realtime.stream(await realtime.session(ctx), { types, ...(match ? { match } : {}) });
        await events.ready;
        return settled(events);
      },
      resolve: (e: EventRecord | StreamEnd) => unsettle(e),
    }),
  }));
}
