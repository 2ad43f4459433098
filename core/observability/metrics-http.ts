import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import type Koa from 'koa';
import { AppError, ErrorCode } from '../errors.ts';
import type { Metrics } from './metrics.ts';
import { setRoute } from './access-log.ts';

export const METRICS_PATH = '/metrics';

const tokenMatches = (header: string | undefined, token: string): boolean => {
  const m = /^Bearer\s+(\S+)$/i.exec(header ?? '');
  if (!m?.[1]) return false;
  const a = Buffer.from(m[1]);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
};

/**
 * `GET /metrics` on the main port, mounted right after the request head (so refusals get the
 * error envelope) and before authentication and rate limiting (Prometheus presents no API key).
 * With `token` set, anything but `Authorization: Bearer <token>` is 401 `AUTH_REQUIRED`.
 */
export function metricsRoute(metrics: Metrics, token: string | undefined): Koa.Middleware {
  // Not async itself: every other request passes through, and an async frame costs each a promise.
  return (ctx, next) => (ctx.path !== METRICS_PATH || (ctx.method !== 'GET' && ctx.method !== 'HEAD') ? next() : serve(ctx));
  async function serve(ctx: Koa.Context): Promise<void> {
    setRoute(ctx, METRICS_PATH);
    if (token && !tokenMatches(ctx.get('Authorization'), token)) {
      const err = new AppError(401, ErrorCode.AUTH_REQUIRED, 'A valid metrics token is required (Authorization: Bearer <METRICS_TOKEN>)');
      err.headers = { 'WWW-Authenticate': 'Bearer realm="metrics"' };
      throw err;
    }
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.text();
  }
}

/**
 * The separate metrics listener (`METRICS_PORT`): only `GET /metrics`, plain text answers, no
 * API; with `token` set it is required there too. Resolves to the bound port.
 */
export function listenMetrics(metrics: Metrics, port: number, host: string, token: string | undefined): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== METRICS_PATH || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not found: only GET /metrics is served on this port\n');
      return;
    }
    if (token && !tokenMatches(req.headers.authorization, token)) {
      res.writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': 'Bearer realm="metrics"' }).end('A valid metrics token is required\n');
      return;
    }
    metrics.text().then(
      (text) => res.writeHead(200, { 'Content-Type': metrics.registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      () => res.writeHead(500, { 'Content-Type': 'text/plain' }).end('metrics collection failed\n'),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve({ server, port: (server.address() as AddressInfo).port }));
  });
}
