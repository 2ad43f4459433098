import { createSourceEventStream, execute, getOperationAST, Kind, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Actor } from '../../../core/context.ts';
import type { GraphQLContext } from '../../../core/graphql.ts';
import type { FrameSink } from '../../../core/transport.ts';

/**
 * Extension of a subscription field whose results may be shared: each result depends only on the
 * event it yields (the same object for every subscriber, handed out by the tail), the operation's
 * document and variables, and what the caller may see (its visibility key), never on who else asked.
 * `events` and `resourceChanged` are such fields (the `Event` object reads the event only).
 */
export const SHARED_RESULTS = 'realtimeSharedResults';

/** Counters of the sharing, for metrics, tests and bench/realtime.ts. */
export interface FanoutCounts {
  /** GraphQL executions of subscription events (one per event per group when shared). */
  executions: number;
  /** Results handed to a subscriber without executing (another member of its group had). */
  reused: number;
  /** Groups now open (subscriptions with the same document, variables and visibility key). */
  groups: number;
  /** Results serialized for graphql-ws `next` frames written by their group (one per event per group). */
  serialized: number;
  /** `next` frames written by a group straight to its members' sockets. */
  frames: number;
}

export interface SharingOptions {
  /** Actors with the same key see the same events and the same fields of them (EventVisibility.key). */
  visibilityKey(actor: Actor): string;
  counts: FanoutCounts;
}

/** Results of one group, by source event: the first member to reach an event executes it, the others reuse the result. */
interface Group {
  members: number;
  results: WeakMap<object, ExecutionResult | Promise<ExecutionResult>>;
  /** The JSON of each result without errors, made once for every member's `next` message. */
  json: WeakMap<object, Buffer>;
}

/** A source of values, possibly with the values already waiting (a `settled` channel). */
type Source = AsyncIterator<unknown> & { drain?(): unknown[] };

const isPromise = <T>(v: T | Promise<T>): v is Promise<T> => !!v && typeof (v as { then?: unknown }).then === 'function';

const isAsyncIterable = (v: unknown): v is AsyncIterable<unknown> => !!v && typeof v === 'object' && Symbol.asyncIterator in v;

/**
 * The group of a subscription, or null when it may not share: every root field must be marked
 * {@link SHARED_RESULTS} and the caller authenticated. The key holds the query text, the operation
 * name, the variables and the caller's visibility key, so subscribers of other tenants, or failing
 * other guards, never share a result.
 */
function groupKey(args: ExecutionArgs, opts: SharingOptions): string | null {
  const actor = (args.contextValue as GraphQLContext | undefined)?.actor;
  const body = args.document.loc?.source.body;
  if (!actor || !body) return null;
  const op = getOperationAST(args.document, args.operationName);
  const fields = args.schema.getSubscriptionType()?.getFields();
  if (op?.operation !== 'subscription' || !fields) return null;
  for (const s of op.selectionSet.selections) {
    if (s.kind !== Kind.FIELD) return null;
    if (s.name.value !== '__typename' && !fields[s.name.value]?.extensions?.[SHARED_RESULTS]) return null;
  }
  return JSON.stringify([body, args.operationName ?? null, args.variableValues ?? null, opts.visibilityKey(actor)]);
}

/**
 * Yoga (envelop) plugin that shares subscription results: subscriptions with the same document,
 * variables and visibility key form a group, and each event is executed once per group rather than
 * once per subscriber (graphql-js runs the selection set for each). Each subscriber keeps its own
 * source stream (its session, its per-event filter with its current rights, its end), so what
 * reaches it is unchanged; only the result of an event it receives is computed once. The shared
 * result is one object, so a transport can also serialize it once (http.ts). Over graphql-ws (a
 * {@link FrameSink} in the context), the group also writes each member's `next` frame itself: one
 * JSON payload per event per group, only the subscription id differs, without graphql-ws's and
 * envelop's per-message promises; results with errors and a stream's end still take their path.
 */
export function shareSubscriptionResults(opts: SharingOptions): Plugin {
  const groups = new Map<string, Group>();

  const subscribeShared = async (args: ExecutionArgs, key: string) => {
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) return source;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { members: 0, results: new WeakMap(), json: new WeakMap() }));
    group.members++;
    opts.counts.groups = groups.size;
    const joined = group;
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      if (--joined.members === 0 && groups.get(key) === joined) groups.delete(key);
      opts.counts.groups = groups.size;
    };
    const resultOf = (payload: unknown): ExecutionResult | Promise<ExecutionResult> => {
      // A value of this subscriber only (a StreamEnd, a primitive) is never found again: no entry.
      const shareable = !!payload && typeof payload === 'object';
      const known = shareable ? joined.results.get(payload) : undefined;
      if (known) {
        opts.counts.reused++;
        return known;
      }
      opts.counts.executions++;
      const result = execute({ ...args, rootValue: payload });
      if (shareable) joined.results.set(payload, result);
      return result;
    };
    const jsonOf = (result: ExecutionResult): Buffer => {
      let json = joined.json.get(result);
      if (json === undefined) {
        opts.counts.serialized++;
        joined.json.set(result, (json = Buffer.from(JSON.stringify(result))));
      }
      return json;
    };
    const it: Source = source[Symbol.asyncIterator]();
    const stop = async (): Promise<IteratorResult<ExecutionResult>> => {
      leave();
      wake?.();
      await it.return?.();
      return { value: undefined, done: true };
    };
    const step = async (): Promise<IteratorResult<unknown>> => {
      try {
        const s = await it.next();
        if (s.done) leave();
        return s;
      } catch (err) {
        leave();
        throw err;
      }
    };
    const sink = (args.contextValue as GraphQLContext | undefined)?.frames;
    /** Values taken from the source (a batch), written up to `at`. */
    let waiting: unknown[] = [];
    let at = 0;
    let wake: (() => void) | undefined;
    /**
     * graphql-ws's next value, when the subscription has a {@link FrameSink}: every result without
     * errors is written by the group itself, one frame per value (the group's payload JSON, this
     * subscription's id), and this resolves only with what must take graphql-ws's own path (a
     * result with errors, a stream's end) or at the end. It starts with graphql-ws's first `next()`,
     * once the subscription is registered; `return()` stops it at once.
     */
    const direct = async (frames: FrameSink): Promise<IteratorResult<ExecutionResult>> => {
      for (;;) {
        if (left) return { value: undefined, done: true };
        if (at === waiting.length) {
          const s = await step();
          if (s.done || left) return { value: undefined, done: true };
          waiting = [s.value, ...(it.drain?.() ?? [])];
          at = 0;
        }
        const payloads: Buffer[] = [];
        let other: ExecutionResult | undefined;
        while (at < waiting.length && !other) {
          const value = waiting[at++];
          const pending = resultOf(value);
          const result = isPromise(pending) ? await pending : pending;
          if (left) return { value: undefined, done: true };
          // A stream's end or a failed resolver: graphql-ws's path (error masking, request ids).
          if (!value || typeof value !== 'object' || result.errors?.length) other = result;
          else payloads.push(jsonOf(result));
        }
        if (payloads.length) {
          opts.counts.frames += payloads.length;
          const written = frames.next(payloads);
          if (written) {
            await new Promise<void>((resolve) => {
              wake = resolve;
              void written.then(resolve, resolve);
            });
            wake = undefined;
            if (left) return { value: undefined, done: true };
          }
        }
        if (other) return { value: other, done: false };
      }
    };
    // A plain iterator (as `settled`): `return()` reaches the source at once, even while a `next()` waits.
    const mapped: AsyncIterableIterator<ExecutionResult> = {
      async next() {
        if (sink) return direct(sink);
        const s = await step();
        if (s.done) return { value: undefined, done: true };
        return { value: await resultOf(s.value), done: false };
      },
      return: stop,
      throw: stop,
      [Symbol.asyncIterator]() {
        return this;
      },
    };
    return mapped;
  };

  return {
    onSubscribe({ args, setSubscribeFn }) {
      const key = groupKey(args as ExecutionArgs, opts);
      if (key) setSubscribeFn((a) => subscribeShared(a as ExecutionArgs, key));
    },
  };
}
