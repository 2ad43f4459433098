/**
 * Live GraphQL subscriptions bound to the caller's credential: the contract between the realtime
 * part of the events plugin (which provides `services.get('realtime')`) and any plugin with a
 * subscription of its own (a job run's log, new audit entries).
 */
import type { Actor } from '../../../core/context.ts';
import type { ActorContext } from '../../../core/graphql.ts';

/**
 * The end of a stream the server decided (credential revoked or expired, reader too slow),
 * passed as the last value so that its resolver raises it: the subscriber gets a GraphQL error
 * with its code in `extensions` (as every resolver error), then completion, on both transports.
 */
export class StreamEnd {
  constructor(readonly error: unknown) {}
}

/** The resolver of a live subscription: the value itself, or its end raised. */
export function unsettle<T>(v: T | StreamEnd): T {
  if (v instanceof StreamEnd) throw v.error;
  return v;
}

/** A source of values for one subscriber: stops when `signal` aborts; `current()` is the actor as re-checked now. */
export type LiveSource<T> = (actor: Actor, signal: AbortSignal, current: () => Actor) => AsyncIterable<T>;

export interface LiveSubscriptions {
  /**
   * A subscription over `source` that ends when the caller's credential ends. Check what must be
   * checked (visibility, role) before calling it, so refusals come as the subscription's error
   * rather than mid-stream. Resolve each value with {@link unsettle}.
   * @example subscribe: async (_r, a, ctx) => realtime.subscribe(ctx, (actor, signal) => svc.watch(actor, a.id, signal))
   */
  subscribe<T>(ctx: ActorContext, source: LiveSource<T>): Promise<AsyncIterableIterator<T | StreamEnd>>;
}
