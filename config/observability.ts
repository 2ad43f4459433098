import { z } from 'zod';
import { bool } from './fields.ts';

/**
 * Settings of logs, metrics and traces (docs/observability.md), spread into the config schema of `config/index.ts`.
 * Names are the environment variable names.
 */
export const observabilitySettings = {
  /** Serve Prometheus metrics at `GET /metrics`. In production it needs `METRICS_PORT` or `METRICS_TOKEN`. @default true */
  METRICS_ENABLED: bool(true),
  /** Serve `/metrics` on this port only (a port only Prometheus reaches), not on `PORT`; 0 = any free port. Unset = main port. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Bearer token `/metrics` requires (`Authorization: Bearer <token>`), on either port. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** Keep the console's time series (requests, latency, deliveries, job runs, events per minute in `metric_minutes`). @default true */
  METRICS_SERIES_ENABLED: bool(true),
  /** Days a minute of the console's time series is kept (a TTL index removes older ones). @default 7 */
  METRICS_SERIES_RETENTION_DAYS: z.coerce.number().int().min(1).max(400).default(7),
  /** How often each process adds its counts to the shared minute documents (ms). @default 5000 */
  METRICS_SERIES_FLUSH_MS: z.coerce.number().int().min(50).max(60_000).default(5000),
  /** Level of the one access-log line per request; `silent` turns access logs off. @default 'info' */
  ACCESS_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Log `/health`, `/ready` and `/metrics` requests too. @default false */
  ACCESS_LOG_HEALTH: bool(false),
  /** OTLP/HTTP collector base URL (`/v1/traces` is appended); setting it turns tracing on. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  /** `otlp`, `console` or `none`; setting it (other than `none`) turns tracing on. */
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'console', 'none']).optional(),
  /** Service name of every span. @default 'plugin-api-server' */
  OTEL_SERVICE_NAME: z.string().min(1).default('plugin-api-server'),
  /** OpenTelemetry sampler. @default 'parentbased_always_on' */
  OTEL_TRACES_SAMPLER: z.enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).default('parentbased_always_on'),
  /** Ratio of the `*traceidratio` samplers, 0 to 1. @default 1 */
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).default(1),
  /** One span per GraphQL resolver (trivial property resolvers excepted); off, only parse, validate and execute. @default false */
  OTEL_GRAPHQL_RESOLVER_SPANS: bool(false),
};
