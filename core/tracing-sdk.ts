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
import type { Config } from '../config/index.ts';
import { markTracingEnabled } from './tracing.ts';

/** The tracing settings of `Config`. */
export type TracingSettings = Pick<Config,
  'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_TRACES_EXPORTER' | 'OTEL_SERVICE_NAME' | 'OTEL_TRACES_SAMPLER' | 'OTEL_TRACES_SAMPLER_ARG' | 'OTEL_GRAPHQL_RESOLVER_SPANS'>;

/** Probes and scrapes make no traces. */
const UNTRACED = new Set(['/health', '/ready', '/metrics']);

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

/** The official instrumentations, configured for this server. */
export function instrumentations(s: Pick<TracingSettings, 'OTEL_GRAPHQL_RESOLVER_SPANS'>) {
  return [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (req) => UNTRACED.has((req.url ?? '').split('?')[0] ?? ''),
    }),
    // Per-middleware spans would be five frames of noise on every request; the server span is
    // named by route template in core/access-log.ts instead.
    new KoaInstrumentation({ ignoreLayersType: ['middleware' as never] }),
    new GraphQLInstrumentation({
      ignoreResolveSpans: !s.OTEL_GRAPHQL_RESOLVER_SPANS,
      ignoreTrivialResolveSpans: true,
      mergeItems: true,
      depth: s.OTEL_GRAPHQL_RESOLVER_SPANS ? 5 : 0,
    }),
    new MongoDBInstrumentation({ enhancedDatabaseReporting: false }),
  ];
}

/**
 * Starts the OpenTelemetry SDK for this process: the http, koa, graphql and mongodb
 * instrumentations, the configured sampler and exporter (`processor` replaces the exporter: tests
 * pass an in-memory one). Must run before the instrumented modules are first loaded: from
 * core/tracing-preload.ts (`--import`), see docs/observability.md. Resolves to a shutdown function
 * that flushes pending spans.
 */
export function startTracing(s: TracingSettings, processor?: SpanProcessor): () => Promise<void> {
  const sdk = new NodeSDK({
    serviceName: s.OTEL_SERVICE_NAME,
    sampler: sampler(s),
    spanProcessors: [processor ?? (s.OTEL_TRACES_EXPORTER === 'console' ? new SimpleSpanProcessor(exporter(s)) : new BatchSpanProcessor(exporter(s)))],
    instrumentations: instrumentations(s),
    // Metrics are Prometheus's (core/metrics.ts); no OTel metric or log exporters.
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
