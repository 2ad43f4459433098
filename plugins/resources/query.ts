/**
 * Checking of list parameters (filters, sort, projection, populate, pagination). Pure: turns list
 * arguments into a {@link ParsedListQuery} whose `filter` is safe to hand to MongoDB, or throws an
 * `QueryParamError` (400 `BAD_REQUEST` naming the parameter). It never throws anything else for
 * any input.
 *
 * Two entry points feed one core: {@link parseListArgs} takes structured arguments (GraphQL),
 * {@link parseListQuery} reads a REST query string into the same structure first.
 */
import type { Filter } from '../../core/access.ts';
import { buildParamFilter, buildSearchClauses, buildTagClauses, given, listOf, splitList } from './filters.ts';
import { PageSizeError, QueryParamError, readListQuery, type ListArgs, type RawQuery } from './params.ts';
import { checkPath, isPlainObject, validateWhere } from './where.ts';
import { DEFAULT_QUERY_LIMITS, type QueryLimits, type ResourceQueryInfo } from './query-types.ts';

export type { ListArgs, RawQuery } from './params.ts';
export { DEFAULT_QUERY_LIMITS, queryLimitsSchema, type QueryLimits, type ResourceQueryInfo } from './query-types.ts';

/**
 * Ordered sort fields with direction. Always ends with an `['_id', dir]` tiebreaker whose
 * direction is that of the last field, unless `_id` is already one of the fields.
 */
import type { SortSpec } from '../../lib/cursor.ts';
export type { SortSpec };

export interface ParsedListQuery {
  mode: 'offset' | 'cursor';
  /** Offset mode page (default 1). Filled in both modes. */
  page: number;
  /** Offset mode page size (default: resource default). Filled in both modes. */
  perPage: number;
  /** Cursor mode page size (default `limits.defaultLimit`). Filled in both modes. */
  limit: number;
  /** Raw, still unverified cursor token; null on the first page (also for an empty `cursor=`). */
  cursor: string | null;
  direction: 'next' | 'prev';
  sort: SortSpec;
  /** Projection; null = all fields. `_id` is always included when non-null. */
  fields: string[] | null;
  /** MongoDB filter built from where + equality + suffix operators + q + tags. */
  filter: Record<string, unknown>;
  includeDeleted: boolean;
  populate: string[];
}


/**
 * Parse the query string of a list request: reads each parameter into {@link ListArgs}
 * (`readListQuery`), then {@link parseListArgs}.
 *
 * Decisions where the product rules are silent: every present parameter is validated even when the
 * selected mode ignores it (e.g. `limit` next to `page`); comma-separated lists are trimmed and
 * empty items dropped; an empty `cursor=` selects cursor mode on its first page; `q` on a resource
 * without search fields is a 400 even when empty.
 *
 * @throws QueryParamError (400) for any malformed parameter; PageSizeError (422) for `per_page`
 *   above `resource.maxPageSize` or `limit` above its ceiling.
 */
export function parseListQuery(query: RawQuery, resource: ResourceQueryInfo, limits?: Partial<QueryLimits>): ParsedListQuery {
  return parseListArgs(readListQuery(query), resource, limits);
}

/**
 * Parse structured list arguments (GraphQL, or REST via {@link parseListQuery}). Same rules and
 * errors as the query string: `page`, `per_page` and `limit` must be integers >= 1, list items are
 * trimmed and may be comma-separated, filter values follow the query-string coercion when they are
 * strings and keep their JSON type otherwise.
 *
 * @throws QueryParamError (400) for any malformed argument; PageSizeError (422) for `per_page`
 *   above `resource.maxPageSize` or `limit` above its ceiling.
 */
export function parseListArgs(args: ListArgs, resource: ResourceQueryInfo, limits?: Partial<QueryLimits>): ParsedListQuery {
  const lim: QueryLimits = { ...DEFAULT_QUERY_LIMITS, ...limits };
  const page = given(args.page) ? positiveInt(args.page, 'page') : 1;
  const perPage = given(args.per_page) ? positiveInt(args.per_page, 'per_page') : resource.defaultPageSize;
  if (perPage > resource.maxPageSize) {
    throw new PageSizeError('per_page', resource.maxPageSize);
  }
  const limit = given(args.limit) ? positiveInt(args.limit, 'limit') : Math.min(lim.defaultLimit, lim.maxLimit);
  if (limit > lim.maxLimit) throw new PageSizeError('limit', lim.maxLimit);

  const mode: ParsedListQuery['mode'] = given(args.cursor) || (given(args.limit) && !given(args.page)) ? 'cursor' : 'offset';
  const cursor = args.cursor || null;

  const direction = args.direction ?? 'next';
  if (direction !== 'next' && direction !== 'prev') {
    throw new QueryParamError("direction must be 'next' or 'prev'", 'direction');
  }
  const includeDeleted = args.include_deleted === true;

  const sort = given(args.sort) ? parseSort(args.sort, resource) : sortFrom(resource.defaultSort, resource, true);
  const fields = given(args.fields) ? parseFields(listOf(args.fields), resource) : null;
  const populate = given(args.populate) ? parsePopulate(listOf(args.populate), resource, lim) : [];

  let where: Filter = {};
  if (given(args.where)) where = validateWhere(typeof args.where === 'string' ? parseWhereText(args.where, lim) : args.where, resource, lim);

  if (given(args.filter) && !isPlainObject(args.filter)) throw new QueryParamError('filter must be an object', 'filter');
  const paramFilter = buildParamFilter(args.filter ?? {}, resource, lim);
  const tagClauses = buildTagClauses(args, resource, lim);
  const searchClauses = given(args.q) ? buildSearchClauses(args.q, resource, lim) : [];

  // The query parameter wins over `where` for the same top-level field; tag filters set `tags`.
  const overridden = new Set(Object.keys(paramFilter));
  if (tagClauses.length > 0) overridden.add('tags');
  const filter: Filter = {};
  for (const [k, v] of Object.entries(where)) if (!overridden.has(k)) filter[k] = v;
  Object.assign(filter, paramFilter);

  const extra: Filter[] = [...searchClauses];
  if (tagClauses.length === 1 && !('tags' in filter)) Object.assign(filter, tagClauses[0]);
  else extra.push(...tagClauses);
  if (extra.length > 0) {
    const existing = Array.isArray(filter.$and) ? (filter.$and as Filter[]) : [];
    filter.$and = [...existing, ...extra];
  }

  return { mode, page, perPage, limit, cursor, direction, sort, fields, filter, includeDeleted, populate };
}

/** `where` given as JSON text (REST, or a GraphQL string argument). */
function parseWhereText(raw: string, lim: QueryLimits): unknown {
  if (raw.length > lim.maxWhereBytes) {
    throw new QueryParamError(`where must be at most ${lim.maxWhereBytes} characters`, 'where');
  }
  try {
    return JSON.parse(raw);
  } catch {
    throw new QueryParamError('where is not valid JSON', 'where');
  }
}

/**
 * Parse a sort expression (`-created_at,name`): `-` descending, `+` or nothing ascending. Every
 * field must be filterable and appear once; an `_id` tiebreaker with the direction of the last
 * field is appended unless `_id` is already present.
 *
 * @throws BadRequestError on an unknown/private field, a duplicate, or an empty expression.
 */
export function parseSort(expr: string, resource: ResourceQueryInfo): SortSpec {
  return sortFrom(expr, resource, false);
}

function sortFrom(expr: string, resource: ResourceQueryInfo, isDefault: boolean): SortSpec {
  const spec: SortSpec = [];
  const seen = new Set<string>();
  for (const item of splitList(expr)) {
    let dir: 1 | -1 = 1;
    let field = item;
    if (item.startsWith('-')) {
      dir = -1;
      field = item.slice(1).trim();
    } else if (item.startsWith('+')) {
      field = item.slice(1).trim();
    }
    checkPath(field, resource, 'sort', `Unknown sort field '${field}'`);
    if (resource.isSortable && !resource.isSortable(field)) throw new QueryParamError(`Cannot sort on '${field}': it is not a single-valued field`, 'sort');
    if (seen.has(field)) throw new QueryParamError(`Sort field '${field}' given more than once`, 'sort');
    seen.add(field);
    spec.push([field, dir]);
  }
  if (spec.length === 0) {
    // A resource configured without a default sort still gets a stable order.
    if (isDefault) return [['_id', 1]];
    throw new QueryParamError('sort must name at least one field', 'sort');
  }
  if (!seen.has('_id')) spec.push(['_id', spec[spec.length - 1]![1]]);
  return spec;
}

// ---------------------------------------------------------------------------------------------
// Arguments

function positiveInt(n: number, param: string): number {
  if (!Number.isSafeInteger(n) || n < 1) throw new QueryParamError(`${param} must be an integer >= 1`, param);
  return n;
}

function parseFields(items: string[], resource: ResourceQueryInfo): string[] {
  if (items.length === 0) throw new QueryParamError('fields must name at least one field', 'fields');
  for (const f of items) checkPath(f, resource, 'fields', `Unknown field '${f}' in fields`);
  const unique = [...new Set(['_id', ...items])];
  // MongoDB rejects a projection naming both a path and one of its sub-paths ("path collision");
  // the parent already includes the child, so the child is dropped.
  return unique.filter((f) => !unique.some((other) => other !== f && f.startsWith(`${other}.`)));
}

function parsePopulate(list: string[], resource: ResourceQueryInfo, lim: QueryLimits): string[] {
  const items = [...new Set(list)];
  for (const p of items) {
    if (!resource.populatable.includes(p)) throw new QueryParamError(`Field '${p}' cannot be populated`, 'populate');
  }
  if (items.length > lim.maxPopulate) {
    throw new QueryParamError(`populate accepts at most ${lim.maxPopulate} fields`, 'populate');
  }
  return items;
}

