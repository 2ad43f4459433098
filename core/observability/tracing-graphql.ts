import { createRequire } from 'node:module';
import { trace, SpanStatusCode } from '@opentelemetry/api';
import type { Plugin } from 'graphql-yoga';
import type * as GraphQL from 'graphql';

const require = createRequire(import.meta.url);

/**
 * Yoga plugin, mounted only while tracing is on, that lets the graphql instrumentation see every
 * operation:
 * - execute: Yoga's default executor (@graphql-tools/executor) is not graphql-js's `execute`, which
 *   the instrumentation patches; with tracing on the operation runs on graphql-js's `execute`
 *   (read from the module at call time, so the patched one), giving the `graphql.execute` span and,
 *   when `OTEL_GRAPHQL_RESOLVER_SPANS` is true, one span per resolver.
 * - parse: the token limit (core/graphql-limits.ts) parses with its own token-counting parser, not
 *   `graphql.parse`, so this plugin opens the `graphql.parse` span itself.
 * `graphql.validate` comes from the instrumentation unchanged.
 */
export function traceGraphQL(): Plugin {
  const tracer = trace.getTracer('plugin-api-server');
  return {
    onParse() {
      const span = tracer.startSpan('graphql.parse');
      return ({ result }) => {
        if (result instanceof Error) span.setStatus({ code: SpanStatusCode.ERROR, message: result.message });
        span.end();
      };
    },
    onExecute({ setExecuteFn }) {
      setExecuteFn((args) => (require('graphql') as typeof GraphQL).execute(args as never));
    },
  };
}
