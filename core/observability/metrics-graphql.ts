import { GraphQLError, Kind, type DocumentNode, type OperationDefinitionNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Metrics } from './metrics.ts';

/** graphql-armor's refusals carry no `details.limit`: named from their message. */
const ARMOR_LIMITS: [RegExp, string][] = [
  [/token/i, 'tokens'], [/depth/i, 'depth'], [/alias/i, 'aliases'], [/directive/i, 'directives'], [/cost/i, 'cost'],
];

const limitOf = (e: GraphQLError): string | null => {
  const ext = e.extensions;
  if (ext.code !== 'BAD_REQUEST' || (ext.http as { status?: number } | undefined)?.status !== 400) return null;
  const named = (ext.details as { limit?: unknown } | undefined)?.limit;
  if (typeof named === 'string') return named;
  return ARMOR_LIMITS.find(([re]) => re.test(e.message))?.[1] ?? 'other';
};

/**
 * Yoga plugin: counts executed operations by type and name (names bounded by
 * `metrics.operationNames`, anonymous ones as `anonymous`), errors of answers by code, and
 * refusals by the cost and depth limits (core/graphql-limits.ts) by limit.
 */
export function observeGraphQL(metrics: Metrics): Plugin {
  return {
    onExecute({ args }) {
      const op = (args.document as DocumentNode).definitions.find((d): d is OperationDefinitionNode =>
        d.kind === Kind.OPERATION_DEFINITION && (!args.operationName || d.name?.value === args.operationName));
      if (!op) return;
      const name = op.name?.value;
      metrics.graphql.operations.inc({ type: op.operation, name: name ? metrics.operationNames.value(name) : 'anonymous' });
    },
    onResultProcess({ result }) {
      if (Array.isArray(result) || !('errors' in result) || !result.errors?.length) return;
      let refused: string | null = null;
      for (const e of result.errors) {
        const err = e instanceof GraphQLError ? e : null;
        const code = err?.extensions.code;
        metrics.graphql.errors.inc({ code: typeof code === 'string' ? code : 'UNKNOWN' });
        refused ??= err ? limitOf(err) : null;
      }
      if (refused) metrics.graphql.refusals.inc({ limit: refused });
    },
  };
}
