import type Koa from 'koa';
import { context, propagation, trace, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import { PROBE_PATHS } from './access-log.ts';

type TracedState = { route?: string };

/**
 * The server span of each request, mounted outermost while tracing is on (in place of the HTTP
 * instrumentation's incoming side, whose per-request work cost more than the rest of a cheap
 * request whether or not it was sampled, docs/observability.md "Overhead"). It continues the
 * caller's trace (`traceparent` through the global propagator), makes the span active for the whole
 * middleware chain (access log, database, GraphQL and our own spans sit beneath it), and ends it
 * when the answer is sent: named `METHOD /route/:template` (`http.route`) once a route matched,
 * with the status code, an error status for 5xx. Unsampled requests get a non-recording span (its
 * context still carries the sampling decision to child spans and outgoing `traceparent`) and no
 * attribute work.
 */
export function traceRequests(): Koa.Middleware {
  const tracer = trace.getTracer('plugin-api-server');
  return (ctx, next) => {
    // Probes and scrapes make no traces.
    if (PROBE_PATHS.has(ctx.path)) return next();
    const method = ctx.method;
    const parent = propagation.extract(ROOT_CONTEXT, ctx.req.headers);
    // No attributes at the start: the samplers here do not read them, and the SDK would copy and
    // check them for every request, sampled or not.
    const span = tracer.startSpan(method, { kind: SpanKind.SERVER }, parent);
    if (span.isRecording()) started(span, ctx);
    return context.with(trace.setSpan(parent, span), next);
  };
}

/** Sets the attributes known at the start; ends the span once the answer is sent or the connection closed. */
function started(span: Span, ctx: Koa.Context): void {
  const req = ctx.req;
  span.setAttributes({
    'http.request.method': ctx.method,
    'url.path': ctx.path,
    'url.scheme': ctx.protocol,
    'server.address': ctx.hostname,
    'network.protocol.version': req.httpVersion,
    'client.address': ctx.ip,
    ...(req.headers['user-agent'] ? { 'user_agent.original': req.headers['user-agent'] } : {}),
  });
  ctx.res.once('close', () => {
    const route = (ctx.state as TracedState).route;
    if (route) {
      span.updateName(`${ctx.method} ${route}`);
      span.setAttribute('http.route', route);
    }
    const status = ctx.res.statusCode;
    span.setAttribute('http.response.status_code', status);
    // Server spans are errors for 5xx only: a 4xx is the client's mistake, answered correctly.
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  });
}
