import type { ActorContext, Builder } from '../graphql.ts';
import { scopes } from '../graphql.ts';
import type { Actor } from '../context.ts';
import type { EventRef } from '../events/graphql.ts';
import type { EventRecord } from '../event-contributions.ts';
import type { RealtimeService } from './service.ts';
import { EVENT_PERMISSIONS } from '../events/service.ts';
import { presentedOf, type LiveSession } from './sessions.ts';
import { SHARED_RESULTS } from './shared.ts';

/**
 * A session for a subscription: its actor (401 without one) and the credential it came with (the
 * WebSocket's `connection_init`, or the headers of a GraphQL-over-SSE request), re-checked while it runs.
 */
export function openSession(realtime: RealtimeService, ctx: ActorContext): Promise<LiveSession> {
  return realtime.open(ctx.presented ?? presentedOf((h) => ctx.koa?.get(h) || undefined), ctx.actor);
}

/**
 * The end of a stream the server decided (credential revoked or expired, reader too slow),
 * passed as the last value so that its resolver raises it: the subscriber gets a GraphQL error
 * with its code in `extensions` (as every resolver error), then completion, on both transports.
 */
export class StreamEnd {
  constructor(readonly error: unknown) {}
}

/**
 * `source`, with a thrown end turned into a last {@link StreamEnd} value. A plain iterator, not an
 * async generator: `return()` must reach `source` at once while a `next()` waits (a generator
 * would queue it behind that `next()`, keeping a departed subscriber until the next event).
 */
export function settled<T>(source: AsyncIterableIterator<T> & { drain?(): T[] }): AsyncIterableIterator<T | StreamEnd> & { drain(): T[] } {
  let finished = false;
  const stop = async (): Promise<IteratorResult<T | StreamEnd>> => {
    finished = true;
    await source.return?.();
    return { value: undefined, done: true };
  };
  return {
    async next() {
      if (finished) return { value: undefined, done: true };
      try {
        return await source.next();
      } catch (err) {
        void stop();
        return { value: new StreamEnd(err), done: false };
      }
    },
    /** The values waiting now, without waiting (a channel's batch): a reader sends them together. */
    drain: () => (finished ? [] : (source.drain?.() ?? [])),
    return: stop,
    throw: stop,
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** The resolver of a settled subscription: the value itself, or its end raised. */
export function unsettle<T>(v: T | StreamEnd): T {
  if (v instanceof StreamEnd) throw v.error;
  return v;
}

/**
 * A subscription over any source (a run's log, new audit entries) that ends when the caller's
 * credential ends. Check what must be checked (visibility, role) before calling it, so refusals
 * come as the subscription's error rather than mid-stream.
 * @example subscribe: async (_r, a, ctx) => liveSubscription(realtime, ctx, (actor, signal) => svc.watch(actor, a.id, signal))
 */
export async function liveSubscription<T>(realtime: RealtimeService, ctx: ActorContext, source: (actor: Actor, signal: AbortSignal, current: () => Actor) => AsyncIterable<T>): Promise<AsyncIterableIterator<T | StreamEnd>> {
  return settled(realtime.guard(await openSession(realtime, ctx), source));
}

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
        const events = realtime.stream(await openSession(realtime, ctx), { types: args.types });
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
        const events = realtime.stream(await openSession(realtime, ctx), { types, ...(match ? { match } : {}) });
        await events.ready;
        return settled(events);
      },
      resolve: (e: EventRecord | StreamEnd) => unsettle(e),
    }),
  }));
}
