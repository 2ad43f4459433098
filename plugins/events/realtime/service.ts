import { Types, type Model } from 'mongoose';
import { AppError, AuthRequiredError, BadRequestError, GoneError, NotFoundError, ValidationError } from '../../../core/errors.ts';
import type { Actor } from '../../../core/context.ts';
import type { Logger } from '../../../core/logger.ts';
import type { Tenancy } from '../../../core/tenancy.ts';
import type { EventCatalogue } from '../catalogue.ts';
import { toRecord } from '../public/contributions.ts';
import type { EventRecord } from '../public/contributions.ts';
import type { EventDoc } from '../public/outbox.ts';
import { Channel } from './channel.ts';
import type { EventTail } from './tail.ts';
import type { EventVisibility } from './visibility.ts';
import { RESOURCE_VERBS } from '../public/access.ts';
import { authenticatePresented, presentedOf, type CredentialCheck, type LiveSession, type SessionRegistry } from './sessions.ts';
import type { ActorContext } from '../../../core/graphql.ts';
import type { LiveSource, LiveSubscriptions, StreamEnd } from '../public/live.ts';
import { settled } from './live.ts';
import type { PresentedCredential } from '../../../core/transport.ts';
import type { FanoutCounts } from './yoga.ts';

/** Which events a stream wants, besides what its actor may see. */
/**
 * A live event stream. `ready` resolves once the process's tail delivers to it every event
 * committed from then on: a transport tells its client the stream is open only after it, so an
 * event written once the client saw "open" is never taken for one committed before the stream.
 */
export type LiveStream = Channel<EventRecord> & { ready: Promise<void> };

export interface StreamFilter {
  /** Exact event types; absent or empty for all. */
  types?: readonly string[] | null;
  /** A further test on each event (e.g. one document's id). */
  match?: (e: EventRecord) => boolean;
}

/** Where a resumed stream starts: after this event, in committed order. */
export interface ResumePoint {
  id: string;
  committed_at: Date;
}

export interface RealtimeDeps {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  events: Model<any>;
  tail: EventTail;
  sessions: SessionRegistry;
  visibility: EventVisibility;
  catalogue: EventCatalogue;
  identity: CredentialCheck;
  tenancy: Tenancy;
  retentionDays: number;
  /** Events a subscriber may have waiting before its stream ends. */
  maxQueue: number;
  log: Logger;
}

const EVENT_ID = /^evt_([0-9a-f]{24})$/;
const REPLAY_PAGE = 500;
/** How long a resumed stream remembers the ids it replayed, to drop their late live copies. */
const REPLAYED_MEMORY_MS = 30_000;
/** Stream ended by the server because its reader fell too far behind; it may resume from its last id. */
const tooSlow = (max: number) => new AppError(503, 'SERVICE_UNAVAILABLE', `The stream fell more than ${max} events behind; reconnect with Last-Event-ID`, { max_queue: max });

/**
 * Realtime delivery of the event log: live streams of the events an actor may see (one shared
 * tail, filtered per subscriber in memory), resumable from an event id, each bound to a live
 * session that ends when its credential does. REST (`GET /events/stream`) and GraphQL
 * subscriptions both use it; nothing here knows Koa or GraphQL.
 */
export class RealtimeService implements LiveSubscriptions {
  /** Executions of subscription events, shared among subscribers of one document, variables and visibility (shared.ts). */
  readonly fanout: FanoutCounts = { executions: 0, reused: 0, groups: 0, serialized: 0, frames: 0 };

  constructor(private readonly deps: RealtimeDeps) {}

  /** The rule of `visible` (docs/realtime.md "Who sees what"). */
  get visibility(): EventVisibility {
    return this.deps.visibility;
  }

  /**
   * Opens a session for a stream from the credential it presented.
   * @throws AuthRequiredError when no credential was presented, or it is rejected
   */
  async open(presented: PresentedCredential, actor?: Actor | null): Promise<LiveSession> {
    const who = actor ?? (await authenticatePresented(this.deps.identity, presented));
    if (!who) throw new AuthRequiredError();
    return this.deps.sessions.open(who, presented);
  }

  /**
   * A session for a subscription: its actor (401 without one) and the credential it came with (the
   * WebSocket's `connection_init`, or the headers of a GraphQL-over-SSE request), re-checked while it runs.
   */
  session(ctx: ActorContext): Promise<LiveSession> {
    return this.open(ctx.presented ?? presentedOf((h) => ctx.koa?.get(h) || undefined), ctx.actor);
  }

  /** {@link LiveSubscriptions.subscribe}: `source` under the caller's session, ended with it. */
  async subscribe<T>(ctx: ActorContext, source: LiveSource<T>): Promise<AsyncIterableIterator<T | StreamEnd>> {
    return settled(this.guard(await this.session(ctx), source));
  }

  /** Ends every open stream (shutdown): each says why, and clients reconnect elsewhere. */
  endAll(): void {
    this.deps.sessions.closeAll(new AppError(503, 'SERVICE_UNAVAILABLE', 'Server shutting down; reconnect'));
  }

  /** Counts for metrics and the bench: tail listeners, open sessions, the tail's polls and database queries, GraphQL executions of events. */
  stats(): { listeners: number; sessions: number; tail_polls: number; tail_queries: number } & FanoutCounts {
    return { listeners: this.deps.tail.size, sessions: this.deps.sessions.size, tail_polls: this.deps.tail.polls, tail_queries: this.deps.tail.queries, ...this.fanout };
  }

  /** @throws ValidationError (loc `[source, field]`) for a type that is not in the catalogue */
  checkTypes(types: readonly string[] | null | undefined, loc: (string | number)[]): void {
    const unknown = (types ?? []).filter((t) => !this.deps.catalogue.has(t));
    if (unknown.length) {
      throw new ValidationError(unknown.map((t) => ({ loc, msg: `Unknown event type "${t}"; known types: ${this.deps.catalogue.names().join(', ')}`, type: 'enum' })));
    }
  }

  /**
   * The event types of one resource (`<resource>.created|updated|deleted|restored`, and the draft events, in the
   * catalogue), after checking the actor passes the resource's guards, as a read would.
   * @throws NotFoundError for a resource without events; AccessDeniedError from its guards
   */
  resourceTypes(actor: Actor, resource: string): string[] {
    const types = RESOURCE_VERBS.map((v) => `${resource}.${v}`).filter((t) => this.deps.catalogue.has(t));
    if (!types.length) throw new NotFoundError('resource', resource, `Resource "${resource}" has no events`);
    // A failed feature or attribute guard refuses the subscription, as it refuses the read.
    this.deps.visibility.requireResource(resource, actor);
    return types;
  }

  /**
   * Where a stream resumes after `lastEventId`: the event's commit time when the log still has it;
   * for an id the log does not have, its embedded time when that is within retention.
   * @throws BadRequestError for a malformed id; GoneError when it is older than the log keeps
   */
  async resumePoint(lastEventId: string): Promise<ResumePoint> {
    const m = EVENT_ID.exec(lastEventId);
    if (!m) throw new BadRequestError('Last-Event-ID must be an event id (evt_ and 24 hexadecimal digits)', { last_event_id: lastEventId.slice(0, 100) });
    const doc = await this.deps.events.findOne({ _id: lastEventId }, { committed_at: 1 }).lean<{ committed_at: Date }>();
    if (doc) return { id: lastEventId, committed_at: doc.committed_at };
    const at = new Types.ObjectId(m[1]).getTimestamp();
    const days = this.deps.retentionDays;
    if (at.getTime() < Date.now() - days * 86_400_000) {
      throw new GoneError(`Event ${lastEventId} is older than the event log keeps (${days} days): read the current state, then stream without Last-Event-ID`, { last_event_id: lastEventId, retention_days: days });
    }
    return { id: lastEventId, committed_at: at };
  }

  /**
   * The events `session`'s actor may see that match `filter`: those after `after` first (from the
   * log, in committed order), then live ones as they commit, without duplicates. Ends with the
   * session's reason when its credential ends, or with a 503 when the reader falls `maxQueue` behind.
   */
  stream(session: LiveSession, filter: StreamFilter, after?: ResumePoint | null): LiveStream {
    const types = filter.types?.length ? new Set(filter.types) : null;
    const accepts = (e: EventRecord) => (!types || types.has(e.type)) && (!filter.match || filter.match(e)) && this.deps.visibility.visible(session.actor, e);
    let stop = () => undefined as void;
    const onAbort = () => channel.fail(session.reason);
    const channel = new Channel<EventRecord>(() => {
      stop();
      session.signal.removeEventListener('abort', onAbort);
      session.end();
    });
    session.signal.addEventListener('abort', onAbort, { once: true });
    let held: EventRecord[] | null = after ? [] : null;
    const replayed = new Set<string>();
    const push = (e: EventRecord) => {
      channel.push(e);
      if (channel.length + masking > this.deps.maxQueue) channel.fail(tooSlow(this.deps.maxQueue));
    };
    // Events under access rules are masked asynchronously; each waits for the one before it, so the
    // stream keeps committed order. Events needing no mask go straight through when none is waiting.
    let masking = 0;
    let last: Promise<void> | null = null;
    const offer = (e: EventRecord) => {
      const view = this.deps.visibility.view(session.actor, e);
      if (!(view instanceof Promise) && !last) return push(view);
      masking++;
      const next: Promise<void> = (last ?? Promise.resolve()).then(() => view).then((v) => {
        masking--;
        if (last === next) last = null;
        if (v && !channel.closed) push(v);
      });
      last = next;
      next.catch((err: unknown) => channel.fail(err));
      if (masking > this.deps.maxQueue) channel.fail(tooSlow(this.deps.maxQueue));
    };
    const listener = (events: EventRecord[]) => {
      for (const e of events) {
        if (!accepts(e) || replayed.has(e.id)) continue;
        if (held) held.push(e);
        else offer(e);
      }
    };
    let markReady = () => undefined as void;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    void (async () => {
      const remove = await this.deps.tail.listen(listener);
      markReady();
      if (channel.closed) return remove();
      stop = remove;
      if (!after) return;
      for await (const e of this.replay(session, types, after)) {
        if (channel.closed) return;
        if (!accepts(e)) continue;
        replayed.add(e.id);
        offer(e);
      }
      const waiting = held ?? [];
      held = null;
      for (const e of waiting) if (!replayed.has(e.id)) offer(e);
      // The tail hands out an event at most its look-back window after it commits; later, no live
      // event can repeat a replayed one.
      setTimeout(() => replayed.clear(), REPLAYED_MEMORY_MS).unref();
    })().catch((err: unknown) => {
      markReady();
      this.deps.log.warn({ err }, 'realtime stream failed');
      channel.fail(err);
    });
    return Object.assign(channel, { ready });
  }

  /**
   * Any async source (a job run's log, new audit entries) bound to a session: it ends with the
   * session's reason when the credential ends, and its `signal` aborts when the reader leaves.
   * `current()` is the actor as last re-checked (roles and features may have changed since).
   */
  guard<T>(session: LiveSession, source: (actor: Actor, signal: AbortSignal, current: () => Actor) => AsyncIterable<T>): AsyncIterableIterator<T> {
    const controller = new AbortController();
    const onAbort = () => channel.fail(session.reason);
    const channel = new Channel<T>(() => {
      controller.abort();
      session.signal.removeEventListener('abort', onAbort);
      session.end();
    });
    session.signal.addEventListener('abort', onAbort, { once: true });
    void (async () => {
      for await (const value of source(session.actor, controller.signal, () => session.actor)) {
        if (channel.closed) return;
        channel.push(value);
        if (channel.length > this.deps.maxQueue) channel.fail(tooSlow(this.deps.maxQueue));
      }
      channel.close();
    })().catch((err: unknown) => channel.fail(err));
    return channel;
  }

  /** Events after `from` in committed order, in pages, narrowed in the query to the actor's tenant and the types. */
  private async *replay(session: LiveSession, types: Set<string> | null, from: ResumePoint): AsyncGenerator<EventRecord> {
    let cursor = from;
    const base = { ...this.tenantTerm(session.actor), ...(types ? { type: { $in: [...types] } } : {}) };
    for (;;) {
      const page = await this.deps.events
        .find({ $and: [base, { $or: [{ committed_at: { $gt: cursor.committed_at } }, { committed_at: cursor.committed_at, _id: { $gt: cursor.id } }] }] }, { previous: 0, meta: 0, source: 0 })
        .sort({ committed_at: 1, _id: 1 })
        .limit(REPLAY_PAGE)
        .lean<EventDoc[]>();
      for (const d of page) yield toRecord(d);
      const last = page[page.length - 1];
      if (page.length < REPLAY_PAGE || !last) return;
      cursor = { id: last._id, committed_at: last.committed_at };
    }
  }

  /**
   * The tenant term of the replay query (each event is still checked in memory): the actor's
   * tenant, plus the types of resources it may read across tenants (not tenant-scoped).
   */
  private tenantTerm(actor: Actor): Record<string, unknown> {
    const f = this.deps.tenancy.filter(actor);
    if (!Object.keys(f).length) return {};
    const shared = this.deps.catalogue.names().filter((t) => {
      const r = this.deps.visibility.resourceOf(t, actor);
      return !!r?.filter && !('tenant_id' in r.filter);
    });
    return shared.length ? { $or: [f, { type: { $in: shared } }] } : f;
  }
}
