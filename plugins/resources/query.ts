/**
 * List parameters (spec 01, "List query parameters" through "Pagination"). Pure: turns list
 * arguments into a {@link ParsedListQuery} whose `filter` is safe to hand to MongoDB, or throws an
 * `AppError` (400 `BAD_REQUEST`, or 422 `VALIDATION_ERROR` for `per_page` above the resource
 * ceiling). It never throws anything else for any input.
 *
 * Two entry points feed one core: {@link parseListArgs} takes structured arguments (GraphQL),
 * {@link parseListQuery} reads a REST query string into the same structure first.
 */
import { Types } from 'mongoose';
import { z } from 'zod';
import { BadRequestError, ValidationError } from '../../core/errors.ts';
import type { Filter } from '../../core/identity/guards.ts';
import { checkRegex, escapeRegex } from './regex.ts';
import { HEX24, checkPath, isPlainObject, isSafePath, validateWhere } from './where.ts';

const limit = (min: 0 | 1) => (min ? z.number().int().positive() : z.number().int().nonnegative());

/** Abuse limits for list queries. Every value is a hard ceiling; exceeding one is a 400. */
export const queryLimitsSchema = z.object({
  /** Maximum JSON nesting depth of `where`; the top-level object is depth 1 and every object or array adds one. */
  maxWhereDepth: limit(1),
  /** Maximum length of `where` in characters of JSON. */
  maxWhereBytes: limit(1),
  /** Maximum number of object keys plus array items in `where`, counted over all levels. */
  maxWhereNodes: limit(1),
  /** Maximum length of a `$regex` / `__regex` pattern. */
  maxRegexLength: limit(1),
  /** Ceiling of `limit` in cursor mode (400 above it). */
  maxLimit: limit(1),
  /** `limit` used in cursor mode when the client sends none. */
  defaultLimit: limit(1),
  /** Maximum number of relation fields in `populate`. */
  maxPopulate: limit(0),
  /** Maximum number of items of an `in` / `nin` / `$all` list (and of each tag filter). */
  maxInItems: limit(1),
  /** Maximum length of `q`. */
  maxQLength: limit(1),
});
export type QueryLimits = z.infer<typeof queryLimitsSchema>;

export const DEFAULT_QUERY_LIMITS: QueryLimits = Object.freeze({
  maxWhereDepth: 6,
  maxWhereBytes: 8192,
  maxWhereNodes: 200,
  maxRegexLength: 256,
  maxLimit: 100,
  defaultLimit: 25,
  maxPopulate: 5,
  maxInItems: 200,
  maxQLength: 256,
});

/** What the query parser needs to know about a resource. */
export interface ResourceQueryInfo {
  name: string;
  /**
   * true when a client may filter/sort/project on this dotted path (exposed scalar/array/object
   * field, `_id`, base fields like created_at). Private fields and paths that traverse a relation
   * (e.g. `project_id.secret`) return false.
   */
  isFilterable(path: string): boolean;
  /**
   * true when the path may be sorted on (optional; defaults to `isFilterable`). Arrays and free-form
   * objects must return false: keyset cursors compare single values, and an array's sort key
   * differs by direction, so cursor pages would skip rows.
   */
  isSortable?(path: string): boolean;
  /** Fields searched by `q`; empty disables search (400 on `q`). */
  searchableFields: string[];
  /** Sort expression used when `sort` is absent, e.g. `-created_at`. */
  defaultSort: string;
  /** `per_page` when absent (typically 25). */
  defaultPageSize: number;
  /** Ceiling of `per_page` (typically 100); above it is a 422. */
  maxPageSize: number;
  /** The model has a `tags` array field, enabling `tags__in`, `tags__all`, `tags__nin`. */
  hasTags: boolean;
  /** Relation fields allowed in `populate`. */
  populatable: string[];
}

/**
 * Ordered sort fields with direction. Always ends with an `['_id', dir]` tiebreaker whose
 * direction is that of the last field, unless `_id` is already one of the fields.
 */
import type { SortSpec } from '../../core/cursor.ts';
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

/** A REST query object as Koa parses it (a repeated parameter is an array). */
export type RawQuery = Record<string, string | string[] | undefined>;

/**
 * Structured list arguments, as GraphQL receives them. Absent and null mean "not given".
 * Lists may also be given as comma-separated strings; `where` as an object or as JSON text.
 */
export interface ListArgs {
  page?: number | null;
  per_page?: number | null;
  limit?: number | null;
  /** Present (even empty) selects cursor mode. */
  cursor?: string | null;
  direction?: string | null;
  sort?: string | null;
  fields?: readonly string[] | string | null;
  populate?: readonly string[] | string | null;
  include_deleted?: boolean | null;
  q?: string | null;
  where?: unknown;
  /** `<field>` equality and `<field>__<op>` filters; a null value is an equality on null. */
  filter?: Record<string, unknown> | null;
  tags_in?: readonly string[] | string | null;
  tags_all?: readonly string[] | string | null;
  tags_nin?: readonly string[] | string | null;
}

/** Query parameter names that are never field filters. */
const RESERVED = new Set([
  'page', 'per_page', 'cursor', 'limit', 'direction', 'sort', 'fields', 'where', 'q', 'include_deleted', 'populate', 'tags__in', 'tags__all', 'tags__nin',
]);

const SUFFIX_OPS = new Set(['gt', 'gte', 'lt', 'lte', 'ne', 'in', 'nin', 'exists', 'regex']);

const INT_LIKE = /^-?\d+$/;
// A decimal point or an exponent is required, so that long digit-only strings (e.g. a 24-digit
// object id) are not turned into imprecise floats.
const FLOAT_LIKE = /^-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)$/;
const POSITIVE_INT = /^\d+$/;

const given = <T>(v: T | null | undefined): v is T => v !== undefined && v !== null;

/**
 * Parse the query string of a list request: reads each parameter into {@link ListArgs}, then
 * {@link parseListArgs}.
 *
 * Decisions beyond the spec: every present parameter is validated even when the selected mode
 * ignores it (e.g. `limit` next to `page`); comma-separated lists are trimmed and empty items
 * dropped; an empty `cursor=` selects cursor mode on its first page; `q` on a resource without
 * search fields is a 400 even when empty.
 *
 * @throws BadRequestError (400) for any malformed parameter; ValidationError (422) for `per_page`
 *   above `resource.maxPageSize`.
 */
export function parseListQuery(query: RawQuery, resource: ResourceQueryInfo, limits?: Partial<QueryLimits>): ParsedListQuery {
  const lim: QueryLimits = { ...DEFAULT_QUERY_LIMITS, ...limits };
  const args: ListArgs = {};
  // No prototype: a `__proto__` parameter must stay a key (and be refused as a field), not a prototype.
  const filter = Object.create(null) as Record<string, string>;
  for (const key of Object.keys(query)) {
    const value = query[key];
    if (value === undefined) continue;
    if (Array.isArray(value)) throw new BadRequestError(`Query parameter '${key}' given more than once`, { param: key });
    if (typeof value !== 'string') throw new BadRequestError(`Query parameter '${key}' is malformed`, { param: key });
    switch (key) {
      case 'page':
      case 'per_page':
      case 'limit':
        args[key] = POSITIVE_INT.test(value) ? Number(value) : NaN;
        break;
      case 'include_deleted':
        if (value === 'true' || value === '1') args.include_deleted = true;
        else if (value === 'false' || value === '0') args.include_deleted = false;
        else throw new BadRequestError('include_deleted must be true, false, 1 or 0', { param: 'include_deleted' });
        break;
      case 'tags__in':
      case 'tags__all':
      case 'tags__nin':
        args[key === 'tags__in' ? 'tags_in' : key === 'tags__all' ? 'tags_all' : 'tags_nin'] = value;
        break;
      case 'cursor':
      case 'direction':
      case 'sort':
      case 'fields':
      case 'populate':
      case 'q':
      case 'where':
        args[key] = value;
        break;
      default:
        filter[key] = value;
    }
  }
  args.filter = filter;
  return parseListArgs(args, resource, lim);
}

/**
 * Parse structured list arguments (GraphQL, or REST via {@link parseListQuery}). Same rules and
 * errors as the query string: `page`, `per_page` and `limit` must be integers >= 1, list items are
 * trimmed and may be comma-separated, filter values follow the query-string coercion when they are
 * strings and keep their JSON type otherwise.
 *
 * @throws BadRequestError (400) for any malformed argument; ValidationError (422) for `per_page`
 *   above `resource.maxPageSize`.
 */
export function parseListArgs(args: ListArgs, resource: ResourceQueryInfo, limits?: Partial<QueryLimits>): ParsedListQuery {
  const lim: QueryLimits = { ...DEFAULT_QUERY_LIMITS, ...limits };
  const page = given(args.page) ? positiveInt(args.page, 'page') : 1;
  const perPage = given(args.per_page) ? positiveInt(args.per_page, 'per_page') : resource.defaultPageSize;
  if (perPage > resource.maxPageSize) {
    throw new ValidationError([
      { loc: ['query', 'per_page'], msg: `per_page must be at most ${resource.maxPageSize}`, type: 'too_big' },
    ]);
  }
  const limit = given(args.limit) ? positiveInt(args.limit, 'limit') : Math.min(lim.defaultLimit, lim.maxLimit);
  if (limit > lim.maxLimit) throw new BadRequestError(`limit must be at most ${lim.maxLimit}`, { param: 'limit' });

  const mode: ParsedListQuery['mode'] = given(args.cursor) || (given(args.limit) && !given(args.page)) ? 'cursor' : 'offset';
  const cursor = args.cursor || null;

  const direction = args.direction ?? 'next';
  if (direction !== 'next' && direction !== 'prev') {
    throw new BadRequestError("direction must be 'next' or 'prev'", { param: 'direction' });
  }
  const includeDeleted = args.include_deleted === true;

  const sort = given(args.sort) ? parseSort(args.sort, resource) : sortFrom(resource.defaultSort, resource, true);
  const fields = given(args.fields) ? parseFields(listOf(args.fields), resource) : null;
  const populate = given(args.populate) ? parsePopulate(listOf(args.populate), resource, lim) : [];

  let where: Filter = {};
  if (given(args.where)) where = validateWhere(typeof args.where === 'string' ? parseWhereText(args.where, lim) : args.where, resource, lim);

  if (given(args.filter) && !isPlainObject(args.filter)) throw new BadRequestError('filter must be an object', { param: 'filter' });
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
    throw new BadRequestError(`where must be at most ${lim.maxWhereBytes} characters`, { param: 'where' });
  }
  try {
    return JSON.parse(raw);
  } catch {
    throw new BadRequestError('where is not valid JSON', { param: 'where' });
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
    if (resource.isSortable && !resource.isSortable(field)) throw new BadRequestError(`Cannot sort on '${field}': it is not a single-valued field`, { param: 'sort' });
    if (seen.has(field)) throw new BadRequestError(`Sort field '${field}' given more than once`, { param: 'sort' });
    seen.add(field);
    spec.push([field, dir]);
  }
  if (spec.length === 0) {
    // A resource configured without a default sort still gets a stable order.
    if (isDefault) return [['_id', 1]];
    throw new BadRequestError('sort must name at least one field', { param: 'sort' });
  }
  if (!seen.has('_id')) spec.push(['_id', spec[spec.length - 1]![1]]);
  return spec;
}

// ---------------------------------------------------------------------------------------------
// Arguments

function positiveInt(n: number, param: string): number {
  if (!Number.isSafeInteger(n) || n < 1) throw new BadRequestError(`${param} must be an integer >= 1`, { param });
  return n;
}

function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** A list argument: an array (items may themselves be comma-separated) or one comma-separated string. */
function listOf(v: readonly unknown[] | string): string[] {
  return typeof v === 'string' ? splitList(v) : v.flatMap((x) => splitList(String(x)));
}

/** The query-string form of a structured filter value (lists comma-joined), for string-typed operators. */
function textOf(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === null) return 'null';
  if (Array.isArray(v)) return v.map(String).join(',');
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

/** A filter operand: strings follow the query-string coercion, JSON scalars keep their type. */
function operand(v: unknown): unknown {
  if (v === null || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))) return v;
  return coerce(textOf(v));
}

function parseFields(items: string[], resource: ResourceQueryInfo): string[] {
  if (items.length === 0) throw new BadRequestError('fields must name at least one field', { param: 'fields' });
  for (const f of items) checkPath(f, resource, 'fields', `Unknown field '${f}' in fields`);
  const unique = [...new Set(['_id', ...items])];
  // MongoDB rejects a projection naming both a path and one of its sub-paths ("path collision");
  // the parent already includes the child, so the child is dropped.
  return unique.filter((f) => !unique.some((other) => other !== f && f.startsWith(`${other}.`)));
}

function parsePopulate(list: string[], resource: ResourceQueryInfo, lim: QueryLimits): string[] {
  const items = [...new Set(list)];
  for (const p of items) {
    if (!resource.populatable.includes(p)) throw new BadRequestError(`Field '${p}' cannot be populated`, { param: 'populate' });
  }
  if (items.length > lim.maxPopulate) {
    throw new BadRequestError(`populate accepts at most ${lim.maxPopulate} fields`, { param: 'populate' });
  }
  return items;
}

/** Query-string equality coercion, in the spec's order of recognition. */
function coerce(raw: string): unknown {
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  if (raw === 'null' || raw === 'none') return null;
  if (INT_LIKE.test(raw)) {
    const n = Number(raw);
    if (Number.isSafeInteger(n)) return n;
  }
  if (FLOAT_LIKE.test(raw)) {
    const n = Number(raw);
    if (Number.isFinite(n)) return n;
  }
  if (HEX24.test(raw)) return new Types.ObjectId(raw);
  return raw;
}

function buildParamFilter(params: Record<string, unknown>, resource: ResourceQueryInfo, lim: QueryLimits): Filter {
  const byField = new Map<string, { eq?: { value: unknown }; ops: Filter }>();
  for (const [key, raw] of Object.entries(params)) {
    if (RESERVED.has(key)) throw new BadRequestError(`'${key}' is a list parameter, not a filter`, { param: key });
    let field = key;
    let op: string | null = null;
    // A key that is itself a field is an equality filter even if it contains `__`.
    if (!(isSafePath(key) && resource.isFilterable(key))) {
      const idx = key.lastIndexOf('__');
      if (idx >= 0) {
        field = key.slice(0, idx);
        op = key.slice(idx + 2);
      }
      checkPath(field, resource, key, `Unknown filter field '${field}'`);
      if (op !== null && !SUFFIX_OPS.has(op)) throw new BadRequestError(`Unknown filter operator '${op}'`, { param: key });
    }
    let entry = byField.get(field);
    if (!entry) {
      entry = { ops: {} };
      byField.set(field, entry);
    }
    if (op === null) {
      entry.eq = { value: operand(raw) };
      continue;
    }
    switch (op) {
      case 'in':
      case 'nin': {
        const items = Array.isArray(raw) ? raw.flatMap((v) => (typeof v === 'string' ? splitList(v) : [v])) : splitList(textOf(raw));
        if (items.length > lim.maxInItems) {
          throw new BadRequestError(`${op} accepts at most ${lim.maxInItems} values`, { param: key });
        }
        entry.ops[`$${op}`] = items.map(operand);
        break;
      }
      case 'exists': {
        const text = textOf(raw);
        if (text !== 'true' && text !== 'false') throw new BadRequestError('exists must be true or false', { param: key });
        entry.ops.$exists = text === 'true';
        break;
      }
      case 'regex': {
        const pattern = textOf(raw);
        checkRegex(pattern, 'i', lim.maxRegexLength, key);
        entry.ops.$regex = pattern;
        entry.ops.$options = 'i';
        break;
      }
      default:
        entry.ops[`$${op}`] = operand(raw);
    }
  }
  const filter: Filter = {};
  for (const [field, { eq, ops }] of byField) {
    if (Object.keys(ops).length === 0) filter[field] = eq!.value;
    else filter[field] = eq ? { $eq: eq.value, ...ops } : ops;
  }
  return filter;
}

function buildTagClauses(args: ListArgs, resource: ResourceQueryInfo, lim: QueryLimits): Filter[] {
  const clauses: Filter[] = [];
  for (const op of ['in', 'all', 'nin'] as const) {
    const param = `tags__${op}`;
    const raw = args[`tags_${op}`];
    if (!given(raw)) continue;
    if (!resource.hasTags) throw new BadRequestError(`Tag filters are not supported by ${resource.name}`, { param });
    const tags = listOf(raw);
    if (tags.length > lim.maxInItems) throw new BadRequestError(`${param} accepts at most ${lim.maxInItems} tags`, { param });
    clauses.push({ tags: { [`$${op}`]: tags } });
  }
  return clauses;
}

function buildSearchClauses(raw: string, resource: ResourceQueryInfo, lim: QueryLimits): Filter[] {
  if (resource.searchableFields.length === 0) {
    throw new BadRequestError('Search is not enabled for this resource', { param: 'q' });
  }
  if (raw.length > lim.maxQLength) throw new BadRequestError(`q must be at most ${lim.maxQLength} characters`, { param: 'q' });
  const words = raw.trim().split(/\s+/).filter((w) => w.length > 0);
  return words.map((word) => ({
    $or: resource.searchableFields.map((f) => ({ [f]: { $regex: `(^|\\s)${escapeRegex(word)}`, $options: 'i' } })),
  }));
}
