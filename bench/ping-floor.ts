/**
 * `bare-floor` (bench/serve.ts): bare Koa serving `/ping/:id` with the least each feature the app
 * has on by default needs, written inline, one middleware: the request id (echoed or a random UUID,
 * in the answer's header and in an error's body); the API key's SHA-256 looked up in a map filled
 * from `api_keys` on first use (the app caches the resolved actor likewise) and a 401 without it;
 * the rate limit as a counter per key in memory and its three `RateLimit-*` headers; the route's
 * match and its `:id` validated by a zod schema; the error envelope; a Prometheus histogram
 * observation per answer with the app's labels. Not done: the access log (silent in the bench),
 * the limiter's shared store, tracing (off by default). What separates the app from this is the
 * cost of its generality (plugins, middleware frames, the router), not of its features.
 */
import { hash, randomUUID } from 'node:crypto';
import Koa from 'koa';
import mongoose from 'mongoose';
import { Histogram, Registry } from 'prom-client';
import { z } from 'zod';

export async function startPingFloor(uri: string, ping: unknown): Promise<number> {
  const conn = await mongoose.createConnection(uri).asPromise();
  const keys = conn.db!.collection('api_keys');
  const actors = new Map<string, { id: string } | null>();
  const tallies = new Map<string, { windowEnd: number; used: number }>();
  const MAX = 1_000_000_000;
  const WINDOW_MS = 60_000;
  const registry = new Registry();
  const duration = new Histogram({ name: 'http_request_duration_seconds', help: 'duration', labelNames: ['method', 'route', 'status_class'], registers: [registry] });
  const idParams = z.object({ id: z.string().regex(/^[0-9a-f]{24}$/) });
  const route = /^\/ping\/([^/]+)\/?$/i;
  const koa = new Koa();
  koa.use(async (ctx) => {
    const start = performance.now();
    const incoming = ctx.get('X-Request-Id');
    const requestId = incoming && /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    ctx.set('X-Request-Id', requestId);
    try {
      const key = ctx.get('X-API-Key');
      const h = key ? hash('sha256', key, 'hex') : '';
      let actor = actors.get(h);
      if (actor === undefined && h) {
        const doc = await keys.findOne({ key_hash: h, revoked_at: null });
        actors.set(h, (actor = doc ? { id: String(doc.user_id) } : null));
      }
      if (!actor) throw Object.assign(new Error('Authentication required'), { status: 401, code: 'AUTH_REQUIRED' });
      const now = Date.now();
      let t = tallies.get(h);
      if (!t || t.windowEnd <= now) tallies.set(h, (t = { windowEnd: now + WINDOW_MS, used: 0 }));
      t.used++;
      ctx.set('RateLimit-Limit', String(MAX));
      ctx.set('RateLimit-Remaining', String(MAX - t.used));
      ctx.set('RateLimit-Reset', String(Math.max(1, Math.ceil((t.windowEnd - now) / 1000))));
      const m = route.exec(ctx.path);
      if (!m) throw Object.assign(new Error('Route not found'), { status: 404, code: 'NOT_FOUND' });
      if (!idParams.safeParse({ id: m[1] }).success) throw Object.assign(new Error('Invalid input'), { status: 422, code: 'VALIDATION_ERROR' });
      ctx.body = ping;
    } catch (err) {
      const e = err as { status?: number; code?: string; message: string };
      ctx.status = e.status ?? 500;
      ctx.body = { error: { code: e.code ?? 'INTERNAL_ERROR', message: e.message, details: {} }, request_id: requestId };
    }
    duration.observe({ method: ctx.method, route: '/ping/:id', status_class: `${Math.floor(ctx.status / 100)}xx` }, (performance.now() - start) / 1000);
  });
  return new Promise((resolve) => {
    const server = koa.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });
}
