import type { Builder, BuilderTypes } from '../../core/graphql.ts';
import { cursorsObject, givenArgs, parseInput, scopes } from '../../core/graphql.ts';
import { EVENT_PERMISSIONS, type EventLog, type EventPage } from './service.ts';
import type { EventRecord } from './public/contributions.ts';
import type { EventTypeView } from './catalogue.ts';
import { eventListQuery } from './schemas.ts';

/** The GraphQL object of an event, for fragments that return events (realtime subscriptions). */
export type EventRef = PothosSchemaTypes.ObjectRef<PothosSchemaTypes.ExtendDefaultTypes<BuilderTypes>, EventRecord>;

/** GraphQL: `events` (cursor pages, newest first) and `eventTypes` (the catalogue). Returns the `Event` object. */
export function eventsGraphql(builder: Builder, events: EventLog): EventRef {
  const Event = builder.objectRef<EventRecord>('Event');
  Event.implement({
    description: 'One event of the durable event log',
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      type: t.exposeString('type', { nullable: false }),
      tenant_id: t.exposeString('tenant_id'),
      created_at: t.field({ type: 'DateTime', nullable: false, resolve: (e) => e.created_at }),
      data: t.field({ type: 'JSON', nullable: false, resolve: (e) => e.data }),
      actor: t.exposeString('actor', { description: 'User id of the actor; null for the system' }),
      request_id: t.exposeString('request_id'),
    }),
  });
  const Cursors = cursorsObject(builder, 'EventCursors');
  const Page = builder.objectRef<EventPage>('EventPage');
  Page.implement({
    fields: (t) => ({
      items: t.field({ type: [Event], nullable: false, resolve: (p) => p.items }),
      cursors: t.field({ type: Cursors, nullable: false, resolve: (p) => p.cursors }),
    }),
  });
  const Type = builder.objectRef<EventTypeView>('EventType');
  Type.implement({
    fields: (t) => ({
      name: t.exposeString('name', { nullable: false }),
      description: t.exposeString('description', { nullable: false }),
      plugin: t.exposeString('plugin', { nullable: false }),
      schema: t.field({ type: 'JSON', nullable: false, description: 'JSON Schema of data', resolve: (v) => v.schema }),
      outbound: t.exposeBoolean('outbound', { nullable: false, description: 'Whether webhook endpoints may subscribe to it' }),
    }),
  });
  builder.queryFields((t) => ({
    events: t.withAuth(scopes(EVENT_PERMISSIONS.list)).field({
      type: Page, nullable: false, description: "The tenant's events, newest first (administrators)",
      args: { type: t.arg.string(), limit: t.arg.int(), cursor: t.arg.string(), direction: t.arg.string() },
      resolve: (_r, args, ctx) => events.list(ctx.actor, parseInput(eventListQuery, givenArgs(args), ['args'])),
    }),
    eventTypes: t.withAuth(scopes(EVENT_PERMISSIONS.types)).field({
      type: [Type], nullable: false, description: 'The event catalogue',
      resolve: () => events.types(),
    }),
  }));
  return Event;
}
