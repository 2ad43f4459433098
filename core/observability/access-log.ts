import type Koa from 'koa';
import type { Logger } from '../logger.ts';
import type { Metrics } from './metrics.ts';
import { UNMATCHED_ROUTE } from './metrics.ts';
import { accessWriter } from '../guards.ts';
import type { AppState, RequestObserver } from '../http/middleware.ts';

/** Paths of probes and scrapes: left out of the access log unless `ACCESS_LOG_HEALTH` is true. */
export const PROBE_PATHS = new Set(['/health', '/ready', '/metrics']);

type RoutedState = AppState & { route?: string };

/** Records the route template the dispatcher matched (`/projects/:id`), for metrics, logs and the server span's name (core/observability/tracing-http.ts). */
export function setRoute(ctx: Koa.Context, template: string): void {
  (ctx.state as RoutedState).route = template;
}

export interface ObserveOptions {
  /** Null: metrics off (METRICS_ENABLED=false). */
  metrics: Metrics | null;
  /** Told of every answer, whether Prometheus metrics are on or not (the console's time series). */
  answered?: (status: number, seconds: number) => void;
  log: Logger;
  /** pino level of access lines, or `silent` for none (ACCESS_LOG_LEVEL). */
  level: string;
  /** Log probes and scrapes too (ACCESS_LOG_HEALTH). */
  probes: boolean;
  /** The route template of a path, for requests refused before dispatch (401, 429, 414): null when none matches. */
  routeOf(path: string, method: string): string | null;
}

/**
 * What the request head (core/http/middleware.ts) runs around every request, in its own frame
 * rather than a middleware of its own: times every request for `http_request_duration_seconds`
 * (labelled by the route template, never the raw path: unmatched paths fold into `unmatched`),
 * counts requests in flight, and writes one access-log line per request once the answer (error
 * envelope included) is decided: method, route, status, duration, transport (`http`, or `sse` for
 * an event stream), request id, tenant, actor id, trace id (core/guards.ts writes it, as for
 * WebSocket operations). Null when there is nothing to observe.
 */
export function observeRequests(opts: ObserveOptions): RequestObserver | null {
  const { metrics, log } = opts;
  const write = accessWriter(log, opts.level);
  if (!metrics && !write && !opts.answered) return null;
  return {
    // performance.now(): a double, where hrtime.bigint() allocates two BigInts per request.
    start() {
      if (metrics) metrics.requestsInFlight++;
      return performance.now();
    },
    end(ctx, start) {
      const seconds = (performance.now() - start) / 1000;
      const state = ctx.state as RoutedState;
      const route = state.route ?? opts.routeOf(ctx.path, ctx.method) ?? UNMATCHED_ROUTE;
      // An error that escaped the envelope writer is still a 500 for the client.
      const status = ctx.status;
      if (metrics) {
        metrics.requestsInFlight--;
        metrics.observeRequest(ctx.method, route, status, seconds);
      }
      opts.answered?.(status, seconds);
      if (write && (opts.probes || !PROBE_PATHS.has(ctx.path))) {
        // An event stream (`GET /events/stream`, a GraphQL subscription over SSE) is its own transport.
        const transport = ctx.response.type === 'text/event-stream' ? 'sse' : 'http';
        write({ method: ctx.method, route, status, seconds, transport, requestId: state.ctx?.requestId, actor: state.actor });
      }
    },
  };
}
