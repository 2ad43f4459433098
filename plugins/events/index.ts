import { definePlugin, type Plugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { EVENT_PERMISSIONS, EventLog } from './service.ts';
import { eventsGraphql } from './graphql.ts';
import { eventIdParams, eventListQuery, eventPageView, eventTypesView, eventView, pingData } from './schemas.ts';
import { createRealtime } from './realtime/index.ts';
import { registerContributions } from './catalogue.ts';
import { viewUnderAccess } from './public/access.ts';
import { eventMetrics } from './metrics.ts';

export type { EventTypeView } from './catalogue.ts';
export type { EventSink } from './sink.ts';
export type { EventLog } from './service.ts';

declare module '../../core/services.ts' {
  interface Services {
    /** The durable event log (a core plugin, always on): stage events with changes, append, consume. */
    events: EventLog;
  }
}

/**
 * Core plugin: the event log service, `GET /events`, `GET /events/{id}`, `GET /events/types`,
 * and GraphQL `events` / `eventTypes`; realtime delivery (plugins/events/realtime: `GET /events/stream`,
 * subscriptions `events` and `resourceChanged`). Every plugin's `eventTypes` and `eventConsumers`
 * contributions (public/contributions.ts) are registered here once every plugin is set up.
 */
export const eventsPlugin: Plugin = definePlugin({
  name: 'events',
  setup({ db, config, services, tenancy, log, kernel }) {
    const events = new EventLog(db, tenancy, {
      flushMs: config.EVENTS_RELAY_INTERVAL_MS,
      maxBatch: 500,
      sweepMs: 1000,
      sweepAgeMs: 5000,
      lateSweepAgeMs: 600_000,
      retentionMs: config.EVENTS_RETENTION_DAYS * 86_400_000,
      pollMs: config.EVENTS_POLL_INTERVAL_MS,
      lookbackMs: 2000,
      leaseMs: 30_000,
      batch: 200,
      retentionDays: config.EVENTS_RETENTION_DAYS,
      cursorSecret: config.CURSOR_HMAC_SECRET,
      queryTimeoutMs: config.QUERY_TIMEOUT_MS,
    }, log);
    services.provide('events', events);
    eventMetrics(services.get('metrics'), () => events.lag());
    // Resource events are filtered by the resource's own guards, when the resources plugin is on.
    const realtime = createRealtime({
      db, config, events, identity: services.get('authentication'), tenancy, log,
      resourceScope: (name, actor) => services.maybe('resources')?.get(name)?.scope(actor, { includeDeleted: true }),
      eventAccess: () => services.maybe('eventAccess'),
    });
    services.provide('realtime', realtime.service);
    // The listing applies the access rules the stream applies (resource events masked or withheld).
    events.useViewer((actor, e) => viewUnderAccess(services.maybe('eventAccess'), actor, e));
    events.catalogue.register({ name: 'ping', description: 'A test event, sent on request (e.g. POST /webhook-endpoints/{id}/test)', data: pingData }, 'events');
    return {
      routes: [
        defineRoute({
          method: 'GET', path: '/events', auth: EVENT_PERMISSIONS.list, tags: ['events'], query: eventListQuery, response: eventPageView,
          summary: "The tenant's events, newest first, in cursor pages ({items, cursors})",
          handler: ({ actor, query }) => events.list(actor, query),
        }),
        defineRoute({
          method: 'GET', path: '/events/types', auth: EVENT_PERMISSIONS.types, tags: ['events'], response: eventTypesView,
          summary: 'The event catalogue: every type with the JSON Schema of its data',
          handler: () => ({ items: events.types() }),
        }),
        // Before `/events/:id`, which would otherwise take `stream` for an id.
        ...realtime.routes(),
        defineRoute({
          method: 'GET', path: '/events/:id', auth: EVENT_PERMISSIONS.get, tags: ['events'], params: eventIdParams, response: eventView,
          summary: 'One event of the tenant',
          handler: ({ actor, params }) => events.get(actor, params.id),
        }),
      ],
      graphql: (b) => realtime.graphql(b, eventsGraphql(b, events)),
      transport: realtime.transport,
      ready: () => {
        registerContributions(events, kernel.contributions());
        events.start();
      },
      close: async () => {
        await realtime.close();
        await events.close();
      },
    };
  },
});
