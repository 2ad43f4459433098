import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ConsoleSpanExporter, ParentBasedSampler, SimpleSpanProcessor, TraceIdRatioBasedSampler,
  type Sampler, type SpanExporter, type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { KoaInstrumentation } from '@opentelemetry/instrumentation-koa';
import { GraphQLInstrumentation } from '@opentelemetry/instrumentation-graphql';
import { MongoDBInstrumentation } from '@opentelemetry/instrumentation-mongodb';
import type { Span } from '@opentelemetry/api';
import type { Config } from '../../config/index.ts';
import { markTracingEnabled } from './tracing.ts';

/** The tracing settings of `Config`. */
export type TracingSettings = Pick<Config,
  'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_TRACES_EXPORTER' | 'OTEL_SERVICE_NAME' | 'OTEL_TRACES_SAMPLER' | 'OTEL_TRACES_SAMPLER_ARG' | 'OTEL_GRAPHQL_RESOLVER_SPANS'>;

function sampler(s: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(s.OTEL_TRACES_SAMPLER_ARG);
  switch (s.OTEL_TRACES_SAMPLER) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return ratio;
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: ratio });
    default: return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

function exporter(s: TracingSettings): SpanExporter {
  if (s.OTEL_TRACES_EXPORTER === 'console') return new ConsoleSpanExporter();
  const base = s.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/$/, '');
  return new OTLPTraceExporter(base ? { url: `${base}/v1/traces` } : {});
}

/**
 * The MongoDB instrumentation, skipping commands whose request is not sampled. The official one
 * skips only when there is no parent span at all (`requireParentSpan`); under an unsampled parent it
 * still serializes the command for `db.query.text` and starts a span the sampler then drops: about
 * half of what tracing at 10% added to a get-one (docs/observability.md "Overhead"). A
 * child of an unsampled parent is never sampled under the parent-based samplers, so nothing recorded
 * changes. `_checkSkipInstrumentation` is the instrumentation's own hook for that decision (private in
 * its typings, so replaced on the instance): an upgrade that renames it brings the cost back,
 * not a behaviour change.
 */
function mongoDBInstrumentation(): MongoDBInstrumentation {
  const mongo = new MongoDBInstrumentation({ enhancedDatabaseReporting: false });
  (mongo as unknown as { _checkSkipInstrumentation(parent: Span | undefined): boolean })._checkSkipInstrumentation = (parent) => !parent?.isRecording();
  return mongo;
}

/**
 * The official instrumentations, configured for this server. The server span is not the HTTP
 * instrumentation's: core/observability/tracing-http.ts opens it in the Koa chain (its incoming side cost more
 * per request than the rest of a cheap read, sampled or not); the HTTP instrumentation keeps its
 * outgoing side (client spans of `node:http` requests, `traceparent` on them).
 */
export function instrumentations(s: Pick<TracingSettings, 'OTEL_GRAPHQL_RESOLVER_SPANS'>) {
  return [
    new HttpInstrumentation({ disableIncomingRequestInstrumentation: true }),
    // Spans for the layers of a @koa/router a plugin mounts itself (the kernel dispatches its own
    // routes: their span is the server span above). Middleware layers are left unwrapped (no cost).
    new KoaInstrumentation({ ignoreLayersType: ['middleware' as never] }),
    new GraphQLInstrumentation({
      ignoreResolveSpans: !s.OTEL_GRAPHQL_RESOLVER_SPANS,
      ignoreTrivialResolveSpans: true,
      mergeItems: true,
      depth: s.OTEL_GRAPHQL_RESOLVER_SPANS ? 5 : 0,
    }),
    mongoDBInstrumentation(),
  ];
}

/**
 * Starts the OpenTelemetry SDK for this process: the http (outgoing), koa, graphql and mongodb
 * instrumentations, the configured sampler and exporter (`processor` replaces the exporter: tests
 * pass an in-memory one). Must run before the instrumented modules are first loaded: from
 * core/observability/tracing-preload.ts (`--import`), see docs/observability.md. Resolves to a shutdown function
 * that flushes pending spans.
 */
export function startTracing(s: TracingSettings, processor?: SpanProcessor): () => Promise<void> {
  const sdk = new NodeSDK({
    serviceName: s.OTEL_SERVICE_NAME,
    sampler: sampler(s),
    spanProcessors: [processor ?? (s.OTEL_TRACES_EXPORTER === 'console' ? new SimpleSpanProcessor(exporter(s)) : new BatchSpanProcessor(exporter(s)))],
    instrumentations: instrumentations(s),
    // Metrics are Prometheus's (core/observability/metrics.ts); no OTel metric or log exporters.
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  markTracingEnabled(true);
  return async () => {
    markTracingEnabled(false);
    await sdk.shutdown();
  };
}
