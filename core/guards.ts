/**
 * The guards every operation passes, whatever door it comes through: REST and GraphQL over HTTP
 * (Koa middleware: core/http/middleware.ts with the observation of core/observability/access-log.ts,
 * core/observability/tracing-http.ts, the idempotency layer) and GraphQL over WebSocket (plugins/events/realtime/http.ts, through {@link OperationGuards}).
 * Both use the same pieces from here: the rate-limit identity of a credential (one budget per key,
 * whatever the transport), the count of failed authentications, the access-log line and the
 * retry delay of a refusal. See docs/operations.md "Rate limiting" and docs/observability.md.
 */
import type { IncomingMessage } from 'node:http';
import { context, trace, SpanKind, SpanStatusCode, type Context, type Span } from '@opentelemetry/api';
import type { Actor } from './context.ts';
import { RateLimitedError } from './errors.ts';
import type { Logger } from './logger.ts';
import type { Metrics } from './observability/metrics.ts';
import { statusClass } from './observability/metrics.ts';
import type { AuthFailureLimiter, LimitDecision, RequestLimiter } from './rate-limit.ts';
import { API_KEY_PREFIX } from './authentication.ts';
import { traceIds, tracingEnabled } from './observability/tracing.ts';
import type { IdempotencyStore } from './idempotency.ts';

/** How an operation reached the server; named in its access-log line. */
export type Transport = 'http' | 'sse' | 'ws';

/** Rate-limit identity of an API key: a prefix of its hash, never the key (the Mongo store keeps the limiter's keys). */
export const apiKeyClient = (hash: string): string => `key:${hash.slice(0, 32)}`;
/** Rate-limit identity of a bearer token: tokens are minted freely from a key, so they share one budget per user. */
export const userClient = (userId: string): string => `user:${userId}`;

/**
 * The client address of a request outside Koa (a WebSocket's upgrade), as Koa's `ctx.ip` has it:
 * with TRUST_PROXY the first `X-Forwarded-For` address, else the socket's.
 */
export function clientIp(req: IncomingMessage, trustProxy: boolean): string | null {
  const forwarded = trustProxy ? req.headers['x-forwarded-for'] : undefined;
  const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim();
  return first || req.socket.remoteAddress || null;
}

/** Seconds a refused client waits (`Retry-After`, `retry_after`): at least 1. */
export const retryAfter = (d: LimitDecision): number => Math.max(1, Math.ceil(d.msBeforeNext / 1000));

/**
 * Counts one failed authentication against the client ip and the API key's prefix.
 * @returns the 429 to answer instead of the 401 when either is past `AUTH_FAILURE_LIMIT`, else null
 */
export async function authFailure(failures: AuthFailureLimiter, ip: string | null, apiKey: string | undefined): Promise<RateLimitedError | null> {
  const wait = await failures.fail(ip, apiKey ? `key:${apiKey.slice(0, API_KEY_PREFIX.length + 6)}` : null);
  return wait === null ? null : new RateLimitedError(wait);
}

/** One access-log line's facts. */
export interface AccessFacts {
  method: string;
  route: string;
  status: number;
  seconds: number;
  transport: Transport;
  requestId: string | undefined;
  actor: Actor | null | undefined;
  /** Facts of this transport only (a WebSocket operation's id, type and name). */
  extra?: Record<string, unknown>;
}

/** Writes one access-log line (`msg: "request"`). */
export type AccessWriter = (f: AccessFacts) => void;

/** The access-log writer at `level` (ACCESS_LOG_LEVEL); null when `silent` or below the logger's level. */
export function accessWriter(log: Logger, level: string): AccessWriter | null {
  if (level === 'silent' || !log.isLevelEnabled(level)) return null;
  const write = (log[level as 'info'] as Logger['info']).bind(log);
  return (f) => {
    const actor = f.actor;
    write({
      method: f.method, route: f.route, status: f.status, duration_ms: Math.round(f.seconds * 1e6) / 1e3, transport: f.transport,
      request_id: f.requestId, tenant_id: actor ? (actor.acting_tenant_id ?? actor.tenant_id) : null, actor_id: actor?.id ?? null,
      ...f.extra, ...traceIds(),
    }, 'request');
  };
}

/** The `method` label and access-log method of operations over WebSocket. */
export const WS_METHOD = 'WS';

/** One operation over a transport outside Koa, from its arrival to its end. */
export interface GuardedOperation {
  /** The operation's span, while tracing is on and it is sampled: its context is the parent of the operation's own spans. */
  readonly trace: Context | null;
  /** The operation's actor once authenticated (access-log line). */
  actor: Actor | null;
  /** Names the operation once parsed (span name and attributes, access-log line). */
  name(type: string, name: string | undefined): void;
  /** Ends it: metrics, the access-log line and the span, once (later calls do nothing). */
  end(status: number): void;
}

export interface OperationGuardsOptions {
  /** Null when the rate limiter is off (RATE_LIMIT_ENABLED=false). */
  limiter: RequestLimiter | null;
  /** RATE_LIMIT_MAX. */
  max: number;
  failures: AuthFailureLimiter;
  idempotency: IdempotencyStore;
  /** Null: metrics off (METRICS_ENABLED=false). */
  metrics: Metrics | null;
  access: AccessWriter | null;
  /** The path the operations are served on (`/graphql`): the metrics' and access log's route. */
  route: string;
  /** TRUST_PROXY: client addresses from `X-Forwarded-For`, as over HTTP. */
  trustProxy: boolean;
}

/**
 * The guards for operations that do not pass through Koa's middleware (graphql-ws): the same
 * limiter and keys, failure counter, idempotency store, metrics and access log as HTTP, each
 * operation accounted as one request.
 */
export class OperationGuards {
  readonly idempotency: IdempotencyStore;
  private readonly tracer = trace.getTracer('plugin-api-server');

  constructor(private readonly opts: OperationGuardsOptions) {
    this.idempotency = opts.idempotency;
  }

  /** The client address of an upgrade request, as HTTP requests have it. */
  ip(req: IncomingMessage): string | null {
    return clientIp(req, this.opts.trustProxy);
  }

  /** @see authFailure */
  authFailure(ip: string | null, apiKey: string | undefined): Promise<RateLimitedError | null> {
    return authFailure(this.opts.failures, ip, apiKey);
  }

  /**
   * Spends one request of `client`'s budget, the one its HTTP requests spend.
   * @throws RateLimitedError (429 RATE_LIMITED, `retry_after`) when the budget is spent
   */
  admit(client: string): void {
    if (!this.opts.limiter) return;
    const d = this.opts.limiter.consume(client, this.opts.max);
    if (!d.allowed) throw new RateLimitedError(retryAfter(d));
  }

  /** Starts accounting one operation: in flight now, timed, traced, logged at its end. */
  begin(transport: Transport, requestId: string, ip: string | null): GuardedOperation {
    const { metrics, access, route } = this.opts;
    const start = process.hrtime.bigint();
    if (metrics) metrics.requestsInFlight++;
    let span: Span | null = null;
    let traceContext: Context | null = null;
    if (tracingEnabled()) {
      span = this.tracer.startSpan(`${WS_METHOD} ${route}`, { kind: SpanKind.SERVER, attributes: { 'network.protocol.name': 'websocket', 'url.path': route, ...(ip ? { 'client.address': ip } : {}) } }, context.active());
      if (span.isRecording()) traceContext = trace.setSpan(context.active(), span);
    }
    let op: { type: string; name: string | undefined } | undefined;
    let ended = false;
    return {
      trace: traceContext,
      actor: null,
      name(type, name) {
        op = { type, name };
        if (!span?.isRecording()) return;
        span.updateName(`${WS_METHOD} ${route} ${type}${name ? ` ${name}` : ''}`);
        span.setAttributes({ 'graphql.operation.type': type, ...(name ? { 'graphql.operation.name': name } : {}) });
      },
      end(status) {
        if (ended) return;
        const actor = this.actor;
        ended = true;
        const seconds = Number(process.hrtime.bigint() - start) / 1e9;
        if (metrics) {
          metrics.requestsInFlight--;
          metrics.http.duration.observe({ method: WS_METHOD, route, status_class: statusClass(status) }, seconds);
        }
        const line = () => access?.({
          method: WS_METHOD, route, status, seconds, transport, requestId, actor,
          extra: { operation_type: op?.type ?? null, operation_name: op?.name ?? null },
        });
        if (traceContext) context.with(traceContext, line);
        else line();
        if (span) {
          span.setAttribute('http.response.status_code', status);
          if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
          span.end();
        }
      },
    };
  }
}

declare module './transport.ts' {
  interface TransportSetup {
    /** The guards HTTP requests pass (rate limit, failed authentications, idempotency, metrics, access log, tracing). */
    guards: OperationGuards;
  }
}
