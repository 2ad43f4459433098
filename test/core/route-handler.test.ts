import { describe, expect, it } from 'vitest';
import type Koa from 'koa';
import { z } from 'zod';
import { routeHandler } from '../../core/http/handler.ts';
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import { AuthRequiredError, ValidationError } from '../../core/errors.ts';

/** The part of a Koa context a route's middleware reads and writes. */
function fakeCtx(params: Record<string, string> = { id: 'a1' }) {
  return {
    state: { actor: null, authError: null },
    params,
    query: {},
    request: { body: undefined, length: undefined, is: () => false },
    get: () => '',
    body: undefined as unknown,
    status: 404,
  };
}

const run = (route: RouteDef, ctx: ReturnType<typeof fakeCtx>) => routeHandler(route, '1mb')(ctx as unknown as Koa.Context, () => Promise.resolve());
const params = z.object({ id: z.string().regex(/^a\d$/) });

describe('a REST route\'s middleware (core/http/handler.ts)', () => {
  it('answers a synchronous handler without a promise, with the validated params', () => {
    const ctx = fakeCtx();
    const out = run(defineRoute({ method: 'GET', path: '/x/:id', auth: 'public', params, handler: ({ params: p }) => ({ id: p.id }) }), ctx);
    expect(out).toBeUndefined();
    expect(ctx.status).toBe(200);
    expect(ctx.body).toEqual({ id: 'a1' });
  });

  it('awaits a handler\'s promise, or any thenable, and sets the route\'s status', async () => {
    const ctx = fakeCtx();
    await run(defineRoute({ method: 'POST', path: '/x/:id', auth: 'public', status: 201, handler: async () => ({ made: true }) }), ctx);
    expect([ctx.status, ctx.body]).toEqual([201, { made: true }]);
    const thenable = { then: (resolve: (v: unknown) => void) => resolve({ from: 'thenable' }) };
    const ctx2 = fakeCtx();
    await run(defineRoute({ method: 'GET', path: '/x/:id', auth: 'public', handler: () => thenable }), ctx2);
    expect([ctx2.status, ctx2.body]).toEqual([200, { from: 'thenable' }]);
  });

  it('answers 204 when the handler returns nothing and set no body', async () => {
    const ctx = fakeCtx();
    await run(defineRoute({ method: 'DELETE', path: '/x/:id', auth: 'public', handler: async () => undefined }), ctx);
    expect(ctx.status).toBe(204);
  });

  it('refuses before the handler runs: invalid params (422), no actor on a user route (401)', () => {
    let called = false;
    const handler = () => {
      called = true;
      return {};
    };
    expect(() => run(defineRoute({ method: 'GET', path: '/x/:id', auth: 'public', params, handler }), fakeCtx({ id: 'zz' }))).toThrow(ValidationError);
    expect(() => run(defineRoute({ method: 'GET', path: '/x/:id', auth: 'user', handler }), fakeCtx())).toThrow(AuthRequiredError);
    expect(called).toBe(false);
  });

  it('passes a handler\'s rejection on', async () => {
    const ctx = fakeCtx();
    await expect(run(defineRoute({ method: 'GET', path: '/x/:id', auth: 'public', handler: () => Promise.reject(new Error('boom')) }), ctx)).rejects.toThrow('boom');
  });
});
