/**
 * The filter clauses of a list query: field filters (`<field>` equality and `<field>__<op>`),
 * tag filters and the `q` word search, each turned into a MongoDB clause that is safe to run, or
 * a 400 `BAD_REQUEST`. Called by `parseListArgs` (query.ts).
 */
import { Types } from 'mongoose';
import type { Filter } from '../../core/access.ts';
import type { ListArgs } from './params.ts';
import { QueryParamError, RESERVED_PARAMS } from './params.ts';
import type { QueryLimits, ResourceQueryInfo } from './query-types.ts';
import { checkRegex, escapeRegex } from './regex.ts';
import { HEX24, checkPath, isSafePath } from './where.ts';

/** The filter suffixes of `<field>__<op>` (also listed by GraphQL `resourceTypes`). */
export const FILTER_OPERATORS = ['gt', 'gte', 'lt', 'lte', 'ne', 'in', 'nin', 'exists', 'regex'] as const;
const SUFFIX_OPS = new Set<string>(FILTER_OPERATORS);

const INT_LIKE = /^-?\d+$/;
// A decimal point or an exponent is required, so that long digit-only strings (e.g. a 24-digit
// object id) are not turned into imprecise floats.
const FLOAT_LIKE = /^-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)$/;

export const given = <T>(v: T | null | undefined): v is T => v !== undefined && v !== null;

export function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** A list argument: an array (items may themselves be comma-separated) or one comma-separated string. */
export function listOf(v: readonly unknown[] | string): string[] {
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

/** Query-string equality coercion: booleans, null, integers, decimals, object ids, else the string (first match wins). */
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

export function buildParamFilter(params: Record<string, unknown>, resource: ResourceQueryInfo, lim: QueryLimits): Filter {
  const byField = new Map<string, { eq?: { value: unknown }; ops: Filter }>();
  for (const [key, raw] of Object.entries(params)) {
    if (RESERVED_PARAMS.has(key)) throw new QueryParamError(`'${key}' is a list parameter, not a filter`, key);
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
      if (op !== null && !SUFFIX_OPS.has(op)) throw new QueryParamError(`Unknown filter operator '${op}'`, key);
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
          throw new QueryParamError(`${op} accepts at most ${lim.maxInItems} values`, key);
        }
        entry.ops[`$${op}`] = items.map(operand);
        break;
      }
      case 'exists': {
        const text = textOf(raw);
        if (text !== 'true' && text !== 'false') throw new QueryParamError('exists must be true or false', key);
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

export function buildTagClauses(args: ListArgs, resource: ResourceQueryInfo, lim: QueryLimits): Filter[] {
  const clauses: Filter[] = [];
  for (const op of ['in', 'all', 'nin'] as const) {
    const param = `tags__${op}`;
    const raw = args[`tags_${op}`];
    if (!given(raw)) continue;
    if (!resource.hasTags) throw new QueryParamError(`Tag filters are not supported by ${resource.name}`, param);
    const tags = listOf(raw);
    if (tags.length > lim.maxInItems) throw new QueryParamError(`${param} accepts at most ${lim.maxInItems} tags`, param);
    clauses.push({ tags: { [`$${op}`]: tags } });
  }
  return clauses;
}

export function buildSearchClauses(raw: string, resource: ResourceQueryInfo, lim: QueryLimits): Filter[] {
  if (resource.searchableFields.length === 0) {
    throw new QueryParamError('Search is not enabled for this resource', 'q');
  }
  if (raw.length > lim.maxQLength) throw new QueryParamError(`q must be at most ${lim.maxQLength} characters`, 'q');
  const words = raw.trim().split(/\s+/).filter((w) => w.length > 0);
  return words.map((word) => ({
    $or: resource.searchableFields.map((f) => ({ [f]: { $regex: `(^|\\s)${escapeRegex(word)}`, $options: 'i' } })),
  }));
}
/**
 * A filter value the field's type cannot hold, found by the database driver when the query runs
 * (`amount__gte=abc` on a number), as the 400 naming its parameter (`where` when no field filter
 * holds it); any other error is returned unchanged.
 */
export function nameCastParam(err: unknown, filters: Readonly<Record<string, unknown>>): unknown {
  if (!err || typeof err !== 'object') return err;
  const e = err as { name?: string; path?: unknown; value?: unknown; kind?: unknown; message?: string };
  const keys = Object.keys(filters).filter((k) => !RESERVED_PARAMS.has(k));
  if (e.name === 'CastError' && typeof e.path === 'string') {
    const field = e.path;
    const value = String(e.value);
    const ofField = keys.filter((k) => k === field || k.startsWith(`${field}__`));
    const holding = ofField.filter((k) => textOf(filters[k]).split(',').map((s) => s.trim()).includes(value));
    const param = holding[0] ?? ofField[0] ?? 'where';
    const kind = typeof e.kind === 'string' ? e.kind.toLowerCase() : 'value';
    return new QueryParamError(`'${value}' is not a valid ${kind} for field '${field}'`, param, 'cast_error');
  }
  // Query casting of an operator the field type lacks (`budget__regex=1` on a number; `__regex`
  // also sets `$options`, which is the one the driver names).
  const m = (e.name === 'MongooseError' || e.name === 'Error') && /^Can't use \$(\w+)/.exec(e.message ?? '');
  if (!m) return err;
  const op = m[1] === 'options' ? 'regex' : m[1]!;
  const key = keys.find((k) => k.endsWith(`__${op}`));
  if (!key) return new QueryParamError(e.message!, 'where', 'invalid_operator');
  return new QueryParamError(`Operator '${op}' cannot be used on field '${key.slice(0, -op.length - 2)}'`, key, 'invalid_operator');
}
