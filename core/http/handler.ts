import type Koa from 'koa';
import getRawBody from 'raw-body';
import { UnsupportedMediaTypeError } from '../errors.ts';
import { checkAuth, validateInputs, type RouteDef } from './route.ts';
import type { AppState } from './middleware.ts';

/**
 * The middleware the kernel registers for one REST route: the route's `auth` and `features`
 * guards, its inputs validated, its handler called, the answer set (`status`, or 204 without a
 * body). Not async itself: a handler that answers synchronously costs no promise of its own; one
 * that returns a promise (or any thenable, e.g. a query) is awaited as before.
 */
export function routeHandler(route: RouteDef, bodyLimit: string): Koa.Middleware {
  const typed = !!(route.body ?? route.docs?.body);
  const status = route.status ?? 200;
  const answer = (ctx: Koa.Context, result: unknown) => {
    if (result !== undefined) {
      ctx.status = status;
      ctx.body = result;
    } else if (ctx.body === undefined) ctx.status = 204;
  };
  const call = (ctx: Koa.Context, args: Record<string, unknown>) => {
    const state = ctx.state as AppState;
    args.actor = state.actor;
    args.ctx = ctx;
    const result = route.handler(args as never);
    if (typeof (result as PromiseLike<unknown> | null)?.then === 'function') return Promise.resolve(result).then((r) => answer(ctx, r));
    answer(ctx, result);
    return undefined;
  };
  if (route.rawBody) {
    const inputs = { ...route, body: undefined };
    return async (ctx) => {
      guard(ctx);
      // raw-body raises 413 (entity.too.large) past the limit, mapped like the JSON parser's.
      const raw = await getRawBody(ctx.req, { limit: bodyLimit, length: ctx.get('Content-Length') || undefined });
      const args = validateInputs(inputs, { params: ctx.params, query: ctx.query, body: undefined });
      args.body = raw;
      await call(ctx, args);
    };
  }
  return (ctx) => {
    guard(ctx);
    return call(ctx, validateInputs(route, { params: ctx.params, query: ctx.query, body: ctx.request.body }));
  };

  function guard(ctx: Koa.Context): void {
    const state = ctx.state as AppState;
    checkAuth(route, state.actor, state.authError);
    // A non-empty body of another type was skipped by the JSON parser: say so rather than validate `{}`.
    if (typed && (ctx.request.length ?? (ctx.get('Transfer-Encoding') ? 1 : 0)) > 0 && !ctx.request.is('json', '+json')) {
      throw new UnsupportedMediaTypeError();
    }
  }
}
