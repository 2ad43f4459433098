import type { Connection } from 'mongoose';
import type { Config } from '../../../config/index.ts';
import type { Logger } from '../../../core/logger.ts';
import type { Tenancy } from '../../../core/tenancy.ts';
import type { Builder } from '../../../core/graphql.ts';
import type { RouteDef } from '../../../core/http/route.ts';
import type { EventLog } from '../service.ts';
import type { EventRef } from '../graphql.ts';
import { eventModel } from '../model.ts';
import { EventTail } from './tail.ts';
import { EventVisibility, type ResourceScope } from './visibility.ts';
import type { EventAccess } from '../public/access.ts';
import { SessionRegistry, type CredentialCheck } from './sessions.ts';
import { RealtimeService } from './service.ts';
import { realtimeRoutes } from './routes.ts';
import { realtimeGraphql } from './graphql.ts';
import { attachGraphqlWs } from './http.ts';
import { shareSubscriptionResults } from './yoga.ts';
import type { GraphqlTransport } from '../../../core/transport.ts';

export { attachGraphqlWs } from './http.ts';
export { shareSubscriptionResults, SHARED_RESULTS } from './yoga.ts';
export type { RealtimeService } from './service.ts';

declare module '../../../core/services.ts' {
  interface Services {
    /** Realtime streams of the event log and live sources bound to a credential (a core plugin, always on). */
    realtime: RealtimeService;
  }
}

export interface RealtimeSetup {
  db: Connection;
  config: Config;
  events: EventLog;
  identity: CredentialCheck;
  tenancy: Tenancy;
  resourceScope: ResourceScope;
  /** Consulted per event (plugins set up after this one may provide it). */
  eventAccess: () => EventAccess | undefined;
  log: Logger;
}

/**
 * The realtime part of the core events plugin: one tail of the log per process (fed at once by
 * this process's relay), the session registry, `GET /events/stream` and the GraphQL subscriptions
 * `events` and `resourceChanged`. Its `transport` puts GraphQL over WebSocket on the kernel's
 * HTTP server and shares subscription results in its Yoga. See docs/realtime.md.
 */
export function createRealtime(s: RealtimeSetup) {
  const pollMs = s.config.EVENTS_POLL_INTERVAL_MS;
  const tail = new EventTail(eventModel(s.db), { pollMs, lookbackMs: 2000, batch: 1000 }, s.log.child({ part: 'realtime' }));
  s.events.onStored((docs) => tail.push(docs));
  const sessions = new SessionRegistry(s.identity, pollMs, s.log);
  const service = new RealtimeService({
    events: eventModel(s.db), tail, sessions, identity: s.identity, tenancy: s.tenancy,
    visibility: new EventVisibility(s.tenancy, s.resourceScope, s.eventAccess),
    catalogue: s.events.catalogue, retentionDays: s.config.EVENTS_RETENTION_DAYS, maxQueue: s.config.REALTIME_MAX_QUEUE, log: s.log,
  });
  return {
    service,
    tail,
    routes: (): RouteDef[] => realtimeRoutes(service, { keepAliveMs: s.config.REALTIME_KEEPALIVE_MS, log: s.log }),
    graphql: (builder: Builder, Event: EventRef) => realtimeGraphql(builder, service, Event),
    transport: {
      // Subscriptions of one document, variables and visibility execute each event once (shared.ts).
      yogaPlugins: () => [shareSubscriptionResults({ visibilityKey: (a) => service.visibility.key(a), counts: service.fanout })],
      attach: (server, t) => attachGraphqlWs(server, { ...t, identity: t.authentication }),
      drain: () => service.endAll(),
    } satisfies GraphqlTransport,
    /** Ends every stream (shutdown): clients are told to reconnect, elsewhere. */
    async close(): Promise<void> {
      service.endAll();
      await tail.close();
    },
  };
}
