import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import Router from '@koa/router';
import type { AuthFailureLimiter, LimitDecision, RequestLimiter } from '../rate-limit.ts';
import { apiKeyClient, authFailure, retryAfter, userClient } from '../guards.ts';
import type { Config } from '../../config/index.ts';
import { AppError, BadRequestError, ErrorCode, NotFoundError, RateLimitedError } from '../errors.ts';
import { hasSystemScope, withRequest, type Actor, type RequestContext } from '../context.ts';
import type { Logger } from '../logger.ts';
import { hashKey, type Authenticator } from '../authentication.ts';
import { toAppError } from './map-error.ts';
import { settleUnreadBody } from './protocol.ts';
import type { RouteBudget, RouteDef } from './route.ts';

export interface AppState {
  ctx: RequestContext;
  actor: Actor | null;
  /** Set when a credential was presented but rejected; raised by routes that need a user. */
  authError: AppError | null;
  /** Rate-limit identity of an accepted credential (`key:<hash prefix>` or `user:<id>`). */
  credential?: string;
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** A request's {@link RequestContext}: one object per request, its child logger made on first use (most requests never log). */
class RequestScope implements RequestContext {
  actor: Actor | null = null;
  private child: Logger | undefined;
  constructor(readonly requestId: string, readonly ip: string | null, private readonly parent: Logger) {}
  get log(): Logger {
    return (this.child ??= this.parent.child({ request_id: this.requestId }));
  }
}

export interface RequestHeadOptions {
  /** Longest accepted request URL (414 past it). */
  maxUrlLength: number;
  /**
   * Called when no route answered (status 404 without a body); sets 404/405/501 and `Allow` the way
   * the router would (`router.allowedMethods()`), run only on misses instead of on every request.
   */
  unmatched(ctx: Koa.Context): Promise<unknown> | unknown;
  /** True while the server shuts down: answers then carry `Connection: close`. */
  draining(): boolean;
  /** Most bytes of an unread request body read and discarded after the answer (`BODY_DRAIN_LIMIT`). */
  maxDrainBytes: number;
  /** Told of every request and of its answer (metrics, access log: core/observability/access-log.ts). */
  observer?: RequestObserver | null;
}

/** Times one request and accounts for it once its answer is decided. */
export interface RequestObserver {
  /** The request arrived (counted in flight); returns its start time for `end`. */
  start(): number;
  /** Its answer (error envelope included) is decided: the duration, the metrics, the access-log line. */
  end(ctx: Koa.Context, start: number): void;
}

/**
 * The head of every request, in one middleware: each middleware is an async frame and a promise on
 * every request, so the request's observation (metrics, access log), the request id and context,
 * the URL length limit, the error envelope and the answer to unmatched routes share one. Runs
 * first (inside the request's span when tracing is on).
 *
 * - Request id (`X-Request-Id`, echoed when well-formed) and the per-request context.
 * - The one place that writes the error envelope. Unexpected errors are logged and masked.
 * - No route answered: 404 `NOT_FOUND`, or 405 `METHOD_NOT_ALLOWED` with `Allow` on a known path.
 * - Once the answer is decided, `observer.end` (after the envelope, whatever happened).
 */
export function requestHead(log: Logger, opts: RequestHeadOptions): Koa.Middleware {
  const observer = opts.observer ?? null;
  return async (ctx, next) => {
    const start = observer ? observer.start() : 0;
    try {
      // The raw header and `res.setHeader`: Koa's `get` and `set` allocate for each call.
      const incoming = ctx.req.headers['x-request-id'];
      const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
      ctx.res.setHeader('X-Request-Id', requestId);
      const rc = new RequestScope(requestId, ctx.ip || null, log);
      const state = ctx.state as AppState;
      state.ctx = rc;
      state.actor = null;
      state.authError = null;
      try {
        if (ctx.originalUrl.length > opts.maxUrlLength) {
          throw new AppError(414, ErrorCode.URI_TOO_LONG, `Request URL is longer than ${opts.maxUrlLength} characters`, { max_length: opts.maxUrlLength });
        }
        await next();
        // 405 also from a handler mounted for every method (GraphQL answers TRACE with a bare 405).
        if ((ctx.status === 404 && ctx.body == null) || ctx.status === 405) await unmatched(ctx, opts);
      } catch (err) {
        const appErr = toAppError(err);
        if (!appErr) rc.log.error({ err, method: ctx.method, path: ctx.path }, 'unhandled error');
        else if (appErr.status >= 500) rc.log.error({ err }, appErr.message);
        const e = appErr ?? new AppError(500, 'INTERNAL_ERROR', 'Internal server error');
        ctx.status = e.status;
        for (const [k, v] of Object.entries(e.headers ?? {})) ctx.set(k, v);
        ctx.body = { error: { code: e.code, message: e.message, details: e.details }, request_id: rc.requestId };
      }
      // While shutting down, answer in-flight requests with `Connection: close`: otherwise their
      // keep-alive connections stay open and close() waits for SHUTDOWN_TIMEOUT_MS.
      if (opts.draining()) ctx.set('Connection', 'close');
      // Answered before the body was read to its end (413, a corrupt compressed body): drain or close.
      if (!ctx.req.complete) settleUnreadBody(ctx.req, (name, value) => ctx.set(name, value), opts.maxDrainBytes);
    } finally {
      observer?.end(ctx, start);
    }
  };
}
/**
 * Nothing answered: an unknown path (404), or a known path with another method (405, `Allow` set by
 * the router). The router answers 501 to a method it does not implement (TRACE, PROPFIND, ...),
 * with `Allow` listing the methods of the path: that is a 405 on a known path, a 404 otherwise.
 */
async function unmatched(ctx: Koa.Context, opts: RequestHeadOptions): Promise<void> {
  if (ctx.status === 404) await opts.unmatched(ctx);
  if (ctx.status === 501) {
    if (!ctx.response.get('Allow')) throw new NotFoundError('route', undefined, 'Route not found');
    ctx.status = 405;
  }
  if (ctx.status === 405) {
    const err = new AppError(405, ErrorCode.METHOD_NOT_ALLOWED, `Method ${ctx.method} not allowed`, { allowed: ctx.response.get('Allow') });
    err.headers = { Allow: String(ctx.response.get('Allow')) };
    throw err;
  }
  if (ctx.status === 404 && ctx.body == null) throw new NotFoundError('route', undefined, 'Route not found');
}

/**
 * Resolves `X-API-Key` or `Authorization: Bearer`. A bad credential is remembered, not raised, so
 * public routes stay reachable; routes that need an actor raise it. System actors may pick a
 * tenant with `X-Tenant-Id`. Failed attempts are counted per client ip and per API key prefix
 * (`AuthFailureLimiter`): past `AUTH_FAILURE_LIMIT` per window, further failures answer 429
 * instead of 401. Only failures are refused: a valid credential always passes.
 */
export function authenticate(identity: Authenticator, failures: AuthFailureLimiter): Koa.Middleware {
  // Not async itself on the common paths (no credential, or an API key whose actor is cached):
  // an async frame and the lookup's promise would cost every request two promises.
  return (ctx, next) => {
    const apiKey = header(ctx, 'x-api-key');
    if (apiKey) {
      const hash = hashKey(apiKey);
      const cached = identity.cachedApiKey?.(hash);
      if (!cached) return resolve(ctx, next, apiKey, hash);
      const state = ctx.state as AppState;
      state.credential = apiKeyClient(hash);
      try {
        accept(ctx, state, cached);
      } catch (err) {
        return refuse(ctx, next, err, apiKey);
      }
      return next();
    }
    return ctx.req.headers.authorization ? resolve(ctx, next, '', '') : next();
  };

  async function resolve(ctx: Koa.Context, next: Koa.Next, apiKey: string, hash: string): Promise<void> {
    const state = ctx.state as AppState;
    try {
      let actor: Actor;
      if (apiKey) {
        actor = await identity.authenticateApiKey(apiKey, hash);
        state.credential = apiKeyClient(hash);
      } else {
        const m = /^Bearer\s+(\S+)$/i.exec(ctx.get('Authorization'));
        if (!m?.[1]) throw new AppError(401, 'AUTH_REQUIRED', 'Authorization must be "Bearer <token>"; an API key goes in the X-API-Key header instead');
        actor = await identity.authenticateToken(m[1]);
        state.credential = userClient(actor.id);
      }
      accept(ctx, state, actor);
    } catch (err) {
      return refuse(ctx, next, err, apiKey);
    }
    await next();
  }

  /** A 401 is remembered for the routes that need an actor (or refused past the failure limit); anything else is raised. */
  async function refuse(ctx: Koa.Context, next: Koa.Next, err: unknown, apiKey: string): Promise<void> {
    if (!(err instanceof AppError) || err.status !== 401) throw err;
    const refused = await authFailure(failures, ctx.ip, apiKey || undefined);
    if (refused) throw refused;
    (ctx.state as AppState).authError = err;
    await next();
  }
}

/** A request header as Koa's `ctx.get` has it ('' when absent), without its lower-casing of the name: `name` is lower case. */
const header = (ctx: Koa.Context, name: string): string => {
  const v = ctx.req.headers[name];
  return typeof v === 'string' ? v : '';
};

/** The request's actor: with `X-Tenant-Id` a system actor's acting tenant, and the request it came in with. */
function accept(ctx: Koa.Context, state: AppState, resolved: Actor): void {
  let actor = resolved;
  const asTenant = header(ctx, 'x-tenant-id');
  if (hasSystemScope(actor) && asTenant) {
    if (!/^[0-9a-fA-F]{24}$/.test(asTenant)) throw new BadRequestError('X-Tenant-Id must be an object id');
    // A copy: the resolved actor may be a shared cache entry.
    actor = { ...actor, acting_tenant_id: asTenant };
  }
  // Services read the request (id, ip, logger) from the actor they are given, never from ambient state.
  actor = withRequest(actor, state.ctx);
  state.actor = actor;
  state.ctx.actor = actor;
}

/** A route's own budget (`RouteDef.budget`) for a request, or null. */
export type RouteBudgetOf = (ctx: Koa.Context) => { key: string; max: number } | null;

/**
 * Matches requests to the routes that declare a `budget`. Its own small router, so other requests
 * pay one method comparison.
 */
export function routeBudgets(routes: readonly Pick<RouteDef, 'method' | 'path' | 'budget'>[]): RouteBudgetOf {
  const budgets = routes.filter((r): r is typeof r & { budget: RouteBudget } => !!r.budget);
  if (!budgets.length) return () => null;
  const router = new Router();
  budgets.forEach((r, i) => router.register(r.path, [r.method], () => undefined, { name: String(i) }));
  const methods = new Set<string>(budgets.map((r) => r.method));
  return (ctx) => {
    if (!methods.has(ctx.method)) return null;
    const layer = router.match(ctx.path, ctx.method).pathAndMethod[0];
    const budget = layer && budgets[Number(layer.name)]?.budget;
    if (!layer || !budget) return null;
    // Bounded: the value is client-chosen and becomes part of a stored key.
    const value = String(layer.params(ctx.path, layer.captures(ctx.path))[budget.param] ?? '').slice(0, 100);
    return { key: `${budget.name}:${value}`, max: budget.max };
  };
}

/**
 * Fixed-window limiter (`RequestLimiter`: counted in memory, shared by replicas through the store
 * every `RATE_LIMIT_SYNC_MS`): per credential (API key; bearer tokens per user) when authenticated,
 * else per client ip. Routes with a budget of their own (`RouteDef.budget`: webhook receivers) count
 * per route value and client instead, and spend the general budget only with 4xx answers. Adds
 * RateLimit-* headers. Operations over WebSocket spend the same budget under the same keys
 * (core/guards.ts).
 */
export function rateLimit(config: Config, limiter: RequestLimiter | null, exempt: (path: string) => boolean, budgetOf: RouteBudgetOf = () => null): Koa.Middleware {
  if (!limiter) return (_ctx, next) => next();
  const general = config.RATE_LIMIT_MAX;
  const generalText = String(general);
  // `res.setHeader`: Koa's `set` allocates arrays for each call.
  const answer = (ctx: Koa.Context, d: LimitDecision, max: number) => {
    const reset = retryAfter(d);
    const res = ctx.res;
    res.setHeader('RateLimit-Limit', max === general ? generalText : String(max));
    res.setHeader('RateLimit-Remaining', String(d.remaining));
    res.setHeader('RateLimit-Reset', String(reset));
    if (!d.allowed) throw new RateLimitedError(reset);
  };
  // Not async itself on the common path (the general budget only): an async frame costs every request a promise.
  return (ctx, next) => {
    if (exempt(ctx.path)) return next();
    const state = ctx.state as AppState;
    const client = state.actor && state.credential ? state.credential : `ip:${ctx.ip}`;
    const own = budgetOf(ctx);
    if (!own) {
      answer(ctx, limiter.consume(client, general), general);
      return next();
    }
    return withOwnBudget(ctx, next, client, own);
  };
  async function withOwnBudget(ctx: Koa.Context, next: Koa.Next, client: string, own: NonNullable<ReturnType<RouteBudgetOf>>): Promise<void> {
    const left = limiter!.remaining(client, general);
    if (!left.allowed) answer(ctx, left, general);
    answer(ctx, limiter!.consume(`${own.key}:${client}`, own.max), own.max);
    const spend = (status: number) => {
      if (status >= 400 && status < 500) limiter!.consume(client, general);
    };
    try {
      await next();
    } catch (err) {
      spend(toAppError(err)?.status ?? 500);
      throw err;
    }
    spend(ctx.status);
  }
}
