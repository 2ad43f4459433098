import { createSourceEventStream, execute, getOperationAST, Kind, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Actor } from '../context.ts';
import type { GraphQLContext } from '../graphql.ts';

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
}

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
 * result is one object, so a transport can also serialize it once (http.ts).
 */
export function shareSubscriptionResults(opts: SharingOptions): Plugin {
  const groups = new Map<string, Group>();

  const subscribeShared = async (args: ExecutionArgs, key: string) => {
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) return source;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { members: 0, results: new WeakMap() }));
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
    const it = source[Symbol.asyncIterator]();
    const stop = async (): Promise<IteratorResult<ExecutionResult>> => {
      leave();
      await it.return?.();
      return { value: undefined, done: true };
    };
    // A plain iterator (as `settled`): `return()` reaches the source at once, even while a `next()` waits.
    const mapped: AsyncIterableIterator<ExecutionResult> = {
      async next() {
        let step: IteratorResult<unknown>;
        try {
          step = await it.next();
        } catch (err) {
          leave();
          throw err;
        }
        if (step.done) {
          leave();
          return { value: undefined, done: true };
        }
        return { value: await resultOf(step.value), done: false };
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
