/**
 * `npx tsx bench/spans.ts [path]`: the spans one request produces with tracing at 100% (default:
 * `GET /projects/:id` on the bench database, server as bench/serve.ts `app` runs it), printed as a
 * tree with each span's kind and attribute count. An in-memory exporter records them; the SDK starts
 * before the app's modules load, as core/observability/tracing-preload.ts does.
 */
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { startTracing } from '../core/observability/tracing-sdk.ts';
import { corePlugins } from '../builtin-plugins.ts';

const exporter = new InMemorySpanExporter();
const stopTracing = startTracing({
  OTEL_SERVICE_NAME: 'spans', OTEL_TRACES_SAMPLER: 'parentbased_always_on', OTEL_TRACES_SAMPLER_ARG: 1, OTEL_GRAPHQL_RESOLVER_SPANS: false,
  OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_TRACES_EXPORTER: undefined,
}, new SimpleSpanProcessor(exporter));

const log = (s: string) => process.stdout.write(`${s}\n`);
const { seed } = await import('./seed.ts');
const { loadConfig } = await import('../config/index.ts');
const { builtinPlugins } = await import('../builtin-plugins.ts');
const { createApp } = await import('../core/kernel.ts');

const { mem, MONGODB_URI, key, sample } = await seed(100, log);
const app = await createApp({ corePlugins: corePlugins(), config: loadConfig({ ...process.env, MONGODB_URI, LOG_LEVEL: 'silent', RATE_LIMIT_MAX: '1000000000', METRICS_ENABLED: 'true' }), plugins: builtinPlugins() });
const port = await app.listen(0, '127.0.0.1');
const path = process.argv[2] ?? `/projects/${String(sample._id)}`;
const get = async () => {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { 'X-API-Key': key } });
  await res.text();
  return res.status;
};
for (let i = 0; i < 5; i++) await get();
await new Promise((r) => setTimeout(r, 300));
exporter.reset();
const status = await get();
await new Promise((r) => setTimeout(r, 300));
const spans = exporter.getFinishedSpans();
log(`GET ${path}: ${status}, ${spans.length} spans`);
const children = (id: string | undefined) => spans.filter((s) => s.parentSpanContext?.spanId === id);
const ids = new Set(spans.map((s) => s.spanContext().spanId));
const show = (s: ReadableSpan, depth: number) => {
  log(`${'  '.repeat(depth + 1)}${s.name}  [${SpanKind[s.kind]}, ${Object.keys(s.attributes).length} attributes, ${s.instrumentationScope.name}]`);
  for (const c of children(s.spanContext().spanId)) show(c, depth + 1);
};
for (const root of spans.filter((s) => !s.parentSpanContext || !ids.has(s.parentSpanContext.spanId))) show(root, 0);
await app.close();
await stopTracing();
await mem?.stop();
process.exit(0);
