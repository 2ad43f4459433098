import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesPlugin } from '@escape.tech/graphql-armor-max-directives';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import { costLimitPlugin } from '@escape.tech/graphql-armor-cost-limit';
import {
  GraphQLError, Kind, getNamedType, validate, isObjectType, isInterfaceType,
  type DocumentNode, type FieldNode, type FragmentDefinitionNode, type GraphQLField, type GraphQLOutputType, type SelectionSetNode, type ValidationContext, type ValidationRule,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Config } from '../config/index.ts';
import { ErrorCode } from './errors.ts';

/** Arguments that set how many items a list field returns; a list costs its page size. */
const PAGE_SIZE_ARGS = ['per_page', 'limit'];

/**
 * A GraphQL error in the envelope's GraphQL form: `code: BAD_REQUEST`, HTTP 400, before any
 * resolver runs. `spec: false` keeps the 400 even for `application/json` clients, where Yoga
 * answers ordinary validation errors with 200 (GraphQL over HTTP).
 */
function badRequest(message: string, details: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(message, {
    extensions: { code: ErrorCode.BAD_REQUEST, status: 400, details, http: { status: 400, spec: false } },
  });
}

const isLimitError = (e: { extensions?: Record<string, unknown> }): boolean =>
  e.extensions?.code === ErrorCode.BAD_REQUEST && (e.extensions.http as { status?: number } | undefined)?.status === 400;

/** Depth of a JSON value, counted without recursion (so 20,000 levels cannot overflow the stack). */
function jsonDepth(value: unknown, stopAt: number): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const depth = d + 1;
    if (depth > max) max = depth;
    if (max > stopAt) return max;
    for (const child of Object.values(v as Record<string, unknown>)) stack.push([child, depth]);
  }
  return max;
}

/**
 * Fields of the operation's root selection, fragments followed, without recursion into fields.
 * Used to count mutation fields (aliases included).
 */
function rootFields(set: SelectionSetNode, fragments: Record<string, FragmentDefinitionNode>, seen = new Set<string>()): FieldNode[] {
  const out: FieldNode[] = [];
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) out.push(sel);
    else if (sel.kind === Kind.INLINE_FRAGMENT) out.push(...rootFields(sel.selectionSet, fragments, seen));
    else if (!seen.has(sel.name.value)) {
      seen.add(sel.name.value);
      const frag = fragments[sel.name.value];
      if (frag) out.push(...rootFields(frag.selectionSet, fragments, seen));
    }
  }
  return out;
}

/** At most `max` mutation fields per request (each alias counts): a document cannot outrun the bulk cap. */
const maxMutationFieldsRule = (max: number): ValidationRule => (context) => ({
  OperationDefinition(op) {
    if (op.operation !== 'mutation') return;
    const fragments = Object.fromEntries(context.getDocument().definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]));
    const count = rootFields(op.selectionSet, fragments).length;
    if (count > max) context.reportError(badRequest(`Too many mutation fields: ${count}, at most ${max} per request`, { limit: 'mutation_fields', max, found: count }));
  },
});

/**
 * The list budget graphql-armor's cost limit lacks: every field with a page-size argument
 * (`per_page`, `limit`) multiplies what it selects by that page size (the variable's value, or
 * `assumed` when absent), and the request's total may not exceed `max`. So 1000 aliases of
 * `projects(per_page: 100)` cost 100,000, while a dashboard of a few lists fits easily.
 */
const listItemsRule = (max: number, assumed: number, variables: Record<string, unknown>): ValidationRule => (context: ValidationContext) => {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of context.getDocument().definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const pageSize = (node: FieldNode, def: GraphQLField<unknown, unknown> | undefined): number | null => {
    const argDefs = def?.args.filter((a) => PAGE_SIZE_ARGS.includes(a.name)) ?? [];
    if (!argDefs.length) return null;
    for (const arg of node.arguments ?? []) {
      if (!PAGE_SIZE_ARGS.includes(arg.name.value)) continue;
      const v = arg.value.kind === Kind.INT ? Number(arg.value.value) : arg.value.kind === Kind.VARIABLE ? Number(variables[arg.value.name.value]) : NaN;
      if (Number.isFinite(v) && v > 0) return v;
    }
    return assumed;
  };
  // Items a selection set may return, per unit of its parent; `budget` stops the walk early.
  const cost = (set: SelectionSetNode, type: GraphQLOutputType, depth: number, seen: Set<string>): number => {
    if (depth > 64) return 0; // max depth rejects this separately
    const named = getNamedType(type);
    let total = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.INLINE_FRAGMENT) total += cost(sel.selectionSet, type, depth, seen);
      else if (sel.kind === Kind.FRAGMENT_SPREAD) {
        const frag = fragments.get(sel.name.value);
        if (frag && !seen.has(frag.name.value)) total += cost(frag.selectionSet, type, depth, new Set([...seen, frag.name.value]));
      } else if (sel.selectionSet && (isObjectType(named) || isInterfaceType(named))) {
        const def = named.getFields()[sel.name.value];
        if (!def) continue;
        const size = pageSize(sel, def);
        const inner = cost(sel.selectionSet, def.type, depth + 1, seen);
        total += size === null ? inner : size * Math.max(1, inner);
      }
      if (total > max) return total;
    }
    return total;
  };
  return {
    OperationDefinition(op) {
      const root = op.operation === 'mutation' ? context.getSchema().getMutationType() : op.operation === 'subscription' ? context.getSchema().getSubscriptionType() : context.getSchema().getQueryType();
      if (!root) return;
      const total = cost(op.selectionSet, root, 0, new Set());
      if (total > max) context.reportError(badRequest(`Query too expensive: its lists may return ${total} items, at most ${max} per request`, { limit: 'list_items', max, found: total }));
    },
  };
};

/**
 * The variables-depth limit (`GRAPHQL_MAX_INPUT_DEPTH`), checked before anything recurses over
 * them. Yoga runs it for HTTP (`onParams`); GraphQL over WebSocket, which Yoga does not parse, calls it itself.
 * @throws GraphQLError BAD_REQUEST (400) past the limit
 */
export function checkVariablesDepth(variables: unknown, max: number): void {
  if (jsonDepth(variables ?? null, max) > max) throw badRequest(`Variables nested too deep: more than ${max} levels`, { limit: 'input_depth', max });
}

/**
 * Cost limits of `/graphql`, all checked before any resolver runs, each answering 400
 * `BAD_REQUEST` (settings `GRAPHQL_*`, docs/operations.md): graphql-armor's maximum aliases,
 * depth, tokens (parser-level, so deep query text never reaches a recursive descent), directives
 * and structural cost; plus the page-size list budget, the mutation-field cap and a depth limit on
 * variables (checked iteratively before anything recurses over them).
 */
export function graphqlLimitPlugins(config: Config): Plugin[] {
  // Armor's rejections become BAD_REQUEST (HTTP 400): reported on the validation context, or
  // thrown from the parser (the token cap has no context), instead of armor's plain error.
  const onReject = [
    (ctx: ValidationContext | null, err: GraphQLError) => {
      const e = badRequest(err.message.replace(/^Syntax Error: /, ''));
      if (!ctx) throw e;
      ctx.reportError(e);
    },
  ];
  const armor = { onReject, propagateOnRejection: false, exposeLimits: true };
  const listBudgetOf = new WeakMap<DocumentNode, readonly GraphQLError[]>();
  return [
    maxTokensPlugin({ n: config.GRAPHQL_MAX_TOKENS, ...armor }),
    maxAliasesPlugin({ n: config.GRAPHQL_MAX_ALIASES, ...armor }),
    maxDepthPlugin({ n: config.GRAPHQL_MAX_DEPTH, ignoreIntrospection: true, flattenFragments: true, ...armor }),
    maxDirectivesPlugin({ n: config.GRAPHQL_MAX_DIRECTIVES, ...armor }),
    costLimitPlugin({ maxCost: config.GRAPHQL_MAX_COST, ignoreIntrospection: true, ...armor }),
    {
      onParams({ params }) {
        checkVariablesDepth(params.variables, config.GRAPHQL_MAX_INPUT_DEPTH);
      },
      // Yoga marks parse errors as GraphQL-over-HTTP "spec" errors, which `application/json`
      // clients get with 200; a limit is a 400 for every client, so say it on the whole result.
      onResultProcess({ result, setResult }) {
        if (Array.isArray(result) || !('errors' in result) || !result.errors?.some(isLimitError)) return;
        setResult({ ...result, extensions: { ...result.extensions, http: { status: 400 } } });
      },
      onValidate({ addValidationRule }) {
        addValidationRule(maxMutationFieldsRule(config.GRAPHQL_MAX_MUTATION_FIELDS));
      },
      // The list budget depends on variable values, so it runs per execution (validation results
      // are cached per document), still before any resolver.
      // A document without variables has one answer, kept with the (cached, shared) document.
      onExecute({ args, setResultAndStopExecution }) {
        const document = args.document as DocumentNode;
        const fixed = !document.definitions.some((d) => d.kind === Kind.OPERATION_DEFINITION && d.variableDefinitions?.length);
        let errors = fixed ? listBudgetOf.get(document) : undefined;
        if (!errors) {
          const rule = listItemsRule(config.GRAPHQL_MAX_LIST_ITEMS, config.GRAPHQL_ASSUMED_PAGE_SIZE, args.variableValues ?? {});
          errors = validate(args.schema, document, [rule]);
          if (fixed) listBudgetOf.set(document, errors);
        }
        if (errors.length) setResultAndStopExecution({ errors });
      },
    },
  ];
}
