import { context, trace, SpanKind, SpanStatusCode, type Link, type Span, type SpanOptions } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * Tracing helpers the kernel and plugins call. Everything here is a no-op until the SDK is started
 * (core/observability/tracing-sdk.ts, from the preload core/observability/tracing-preload.ts): then spans go to the exporter.
 * See docs/observability.md for the span tree.
 */

const TRACER = 'plugin-api-server';
// W3C trace context on its own: a delivery carries `traceparent` even when no global propagator
// was registered (tracing off, or another propagator configured).
const w3c = new W3CTraceContextPropagator();
let enabled = false;

/** Called by the SDK start-up: from now on `traced()` records spans. */
export function markTracingEnabled(on: boolean): void {
  enabled = on;
}

export const tracingEnabled = (): boolean => enabled;

/**
 * Runs `fn` inside a span named `name` (a child of the active span, if any), ending it when `fn`
 * settles; a throw marks the span as an error and is re-thrown. Without tracing, or under a span
 * that is not recording (an unsampled request), it just calls `fn` (no span).
 * @example await traced('audit.flush', () => write(batch), { attributes: { 'audit.entries': batch.length } })
 */
export function traced<T>(name: string, fn: (span?: Span) => Promise<T>, opts: SpanOptions = {}): Promise<T> {
  if (!enabled) return fn();
  // Under an unsampled request the span would not be recorded (parent-based sampling): skip its
  // start, context switch and end, which every request would otherwise pay at 10% sampling.
  if (!opts.root && trace.getSpan(context.active())?.isRecording() === false) return fn();
  return trace.getTracer(TRACER).startActiveSpan(name, { kind: SpanKind.INTERNAL, ...opts }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      throw err;
    } finally {
      span.end();
    }
  });
}

/** The active span's W3C `traceparent` header value, or undefined when no span is recording. */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  w3c.inject(context.active(), carrier, { set: (c, k, v) => void (c[k] = v) });
  return carrier.traceparent;
}

/**
 * Adds `traceparent` (and `tracestate`) of the active span to outgoing headers, so the receiver
 * continues this trace. Returns the same object. Nothing is added when no span is active.
 * @example await fetch(url, { method: 'POST', headers: injectTraceHeaders({ 'Content-Type': 'application/json' }), body })
 */
export function injectTraceHeaders<H extends Record<string, string>>(headers: H): H {
  w3c.inject(context.active(), headers, { set: (c, k, v) => void ((c as Record<string, string>)[k] = v) });
  return headers;
}

/** A span link to the trace a stored `traceparent` names (a job run to the request that queued it). */
export function linkTo(traceparent: string | null | undefined): Link[] {
  if (!traceparent) return [];
  const ctx = w3c.extract(context.active(), { traceparent }, { get: (c, k) => c[k as 'traceparent'], keys: (c) => Object.keys(c) });
  const sc = trace.getSpanContext(ctx);
  return sc && trace.isSpanContextValid(sc) ? [{ context: sc, attributes: { 'link.kind': 'triggered_by' } }] : [];
}

/** `trace_id` and `span_id` of the active span, for log lines; empty when none is recording. */
export function traceIds(): { trace_id?: string; span_id?: string } {
  if (!enabled) return {};
  const sc = trace.getSpan(context.active())?.spanContext();
  return sc && trace.isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}
