/**
 * The servers bench/observability.ts and bench/cpu.ts compare for the cost of metrics and tracing,
 * and the local OTLP/HTTP sink their spans go to (it accepts and drops them, so export costs what
 * it costs: serialization and the HTTP round trip, no collector).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startServer } from './seed.ts';

/**
 * `nometrics`: metrics and tracing off; `metrics`: metrics on, tracing off (the baseline of the
 * tracing pairs); `trace100` / `trace10`: metrics on, tracing with `parentbased_traceidratio` at 1
 * and 0.1, exported over OTLP/HTTP to the sink. The bench's default sides.
 */
export const OBSERVABILITY_SIDES = ['nometrics', 'metrics', 'trace100', 'trace10'] as const;
/**
 * Sides for taking the cost of tracing apart, on request: `als`: as `metrics`, plus one
 * AsyncLocalStorage enabled and every request run in it (bench/als-preload.ts), the context
 * propagation alone; `trace0`: tracing on with ratio 0, so every request takes the unsampled path
 * and nothing is ever recorded or exported.
 */
export const EXTRA_OBSERVABILITY_SIDES = ['als', 'trace0'] as const;
export type ObservabilitySide = (typeof OBSERVABILITY_SIDES)[number] | (typeof EXTRA_OBSERVABILITY_SIDES)[number];

export const isObservabilitySide = (s: string): s is ObservabilitySide =>
  (OBSERVABILITY_SIDES as readonly string[]).includes(s) || (EXTRA_OBSERVABILITY_SIDES as readonly string[]).includes(s);

const PRELOAD = new URL('../core/observability/tracing-preload.ts', import.meta.url).pathname;
const ALS_PRELOAD = new URL('./als-preload.ts', import.meta.url).pathname;

/** Starts a sink for OTLP/HTTP exports on a free local port; counts the export requests it received. */
export async function startOtlpSink(): Promise<{ url: string; received: () => number; close: () => void }> {
  let received = 0;
  const sink = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`, received: () => received, close: () => sink.close() };
}

/**
 * Starts the app server (bench/serve.ts, mode `app`: the defaults) as `side`. Every side runs with
 * the tracing preload (as `npm start` does); it starts the SDK only where tracing is requested.
 */
export function startObservabilitySide(side: ObservabilitySide, env: NodeJS.ProcessEnv, otlpUrl: string, nodeFlags: string[] = []) {
  const base = { ...env, METRICS_ENABLED: 'true', OTEL_TRACES_EXPORTER: 'none' };
  const tracing = (ratio: string) => ({
    ...base, OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio,
  });
  const ratio = { trace100: '1', trace10: '0.1', trace0: '0' } as const;
  const sideEnv = side === 'nometrics' ? { ...base, METRICS_ENABLED: 'false' } : side === 'metrics' || side === 'als' ? base : tracing(ratio[side]);
  const als = side === 'als' ? ['--import', ALS_PRELOAD] : [];
  return startServer(side === 'nometrics' ? 'app-nometrics' : 'app', sideEnv, [...nodeFlags, '--import', 'tsx', '--import', PRELOAD, ...als]);
}
