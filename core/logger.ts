import { pino, type Logger as PinoLogger } from 'pino';
import { traceIds } from './observability/tracing.ts';

export type Logger = PinoLogger;

/** Structured JSON logs (pino): fast, and the de-facto standard for Node services. Lines carry `trace_id`/`span_id` while a span is active. */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({
    level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // trace_id and span_id of the active span (when tracing is on), to join a log line to its trace.
    mixin: traceIds,
  }, destination);
}
