/**
 * Parsing and validation of list query parameters (spec 01, "List query parameters" through
 * "Pagination"). Pure: turns the raw query object into a {@link ParsedListQuery} whose `filter` is
 * safe to hand to MongoDB, or throws an `AppError` (400 `BAD_REQUEST`, or 422 `VALIDATION_ERROR`
 * for `per_page` above the resource ceiling). It never throws anything else for any input.
 */
import { Types } from 'mongoose';
import { BadRequestError, ValidationError } from '../../core/errors.ts';

/** Abuse limits for list queries. Every value is a hard ceiling; exceeding one is a 400. */
export interface QueryLimits {
  /** Maximum JSON nesting depth of `where`; the top-level object is depth 1 and every object or array adds one. */
  maxWhereDepth: number;
  /** Maximum length of `where` in characters of JSON. */
  maxWhereBytes: number;
  /** Maximum number of object keys plus array items in `where`, counted over all levels. */
  maxWhereNodes: number;
  /** Maximum length of a `$regex` / `__regex` pattern. */
  maxRegexLength: number;
  /** Ceiling of `limit` in cursor mode (400 above it). */
  maxLimit: number;
  /** `limit` used in cursor mode when the client sends none. */
  defaultLimit: number;
  /** Maximum number of relation fields in `populate`. */
  maxPopulate: number;
  /** Maximum number of items of an `in` / `nin` / `$all` list (and of each tag filter). */
  maxInItems: number;
  /** Maximum length of `q`. */
  maxQLength: number;
}

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
export type SortSpec = Array<[field: string, dir: 1 | -1]>;

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

/** Query parameter names that are never field filters. */
const RESERVED = new Set([
  'page',
  'per_page',
  'cursor',
  'limit',
  'direction',
  'sort',
  'fields',
  'where',
  'q',
  'include_deleted',
  'populate',
  'tags__in',
  'tags__all',
  'tags__nin',
]);

const SUFFIX_OPS = new Set(['gt', 'gte', 'lt', 'lte', 'ne', 'in', 'nin', 'exists', 'regex']);

/** Every operator accepted inside `where`, at any depth. */
export const WHERE_OPERATORS: readonly string[] = Object.freeze([
  '$and',
  '$or',
  '$nor',
  '$not',
  '$eq',
  '$ne',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$in',
  '$nin',
  '$exists',
  '$regex',
  '$options',
  '$all',
  '$elemMatch',
  '$size',
]);
const WHERE_OPERATOR_SET = new Set(WHERE_OPERATORS);
const LOGICAL_OPS = new Set(['$and', '$or', '$nor']);

/** Keys that could reach an object's prototype if a consumer ever merges the filter naively. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

const HEX24 = /^[0-9a-fA-F]{24}$/;
const INT_LIKE = /^-?\d+$/;
// A decimal point or an exponent is required, so that long digit-only strings (e.g. a 24-digit
// object id) are not turned into imprecise floats.
const FLOAT_LIKE = /^-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)$/;
const POSITIVE_INT = /^\d+$/;
const INT32_MAX = 2 ** 31 - 1;
const REGEX_OPTIONS = /^[imsx]*$/;

type Filter = Record<string, unknown>;
type RawQuery = Record<string, string | string[] | undefined>;

/** Escape every regular-expression metacharacter so `s` matches literally (JS and PCRE). */
export function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Parse the query string of a list request.
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
  const params = new Map<string, string>();
  for (const key of Object.keys(query)) {
    const value = query[key];
    if (value === undefined) continue;
    if (Array.isArray(value)) throw new BadRequestError(`Query parameter '${key}' given more than once`, { param: key });
    if (typeof value !== 'string') throw new BadRequestError(`Query parameter '${key}' is malformed`, { param: key });
    params.set(key, value);
  }

  const page = params.has('page') ? positiveInt(params.get('page')!, 'page') : 1;
  const perPage = params.has('per_page') ? positiveInt(params.get('per_page')!, 'per_page') : resource.defaultPageSize;
  if (perPage > resource.maxPageSize) {
    throw new ValidationError([
      { loc: ['query', 'per_page'], msg: `per_page must be at most ${resource.maxPageSize}`, type: 'too_big' },
    ]);
  }
  const limit = params.has('limit') ? positiveInt(params.get('limit')!, 'limit') : Math.min(lim.defaultLimit, lim.maxLimit);
  if (limit > lim.maxLimit) throw new BadRequestError(`limit must be at most ${lim.maxLimit}`, { param: 'limit' });

  const mode: ParsedListQuery['mode'] = params.has('cursor') || (params.has('limit') && !params.has('page')) ? 'cursor' : 'offset';
  const cursor = params.get('cursor') || null;

  const rawDirection = params.get('direction') ?? 'next';
  if (rawDirection !== 'next' && rawDirection !== 'prev') {
    throw new BadRequestError("direction must be 'next' or 'prev'", { param: 'direction' });
  }

  const rawDeleted = params.get('include_deleted');
  let includeDeleted = false;
  if (rawDeleted !== undefined) {
    if (rawDeleted === 'true' || rawDeleted === '1') includeDeleted = true;
    else if (rawDeleted !== 'false' && rawDeleted !== '0') {
      throw new BadRequestError('include_deleted must be true, false, 1 or 0', { param: 'include_deleted' });
    }
  }

  const sort = params.has('sort') ? parseSort(params.get('sort')!, resource) : sortFrom(resource.defaultSort, resource, true);
  const fields = params.has('fields') ? parseFields(params.get('fields')!, resource) : null;
  const populate = params.has('populate') ? parsePopulate(params.get('populate')!, resource, lim) : [];

  let where: Filter = {};
  if (params.has('where')) {
    const raw = params.get('where')!;
    if (raw.length > lim.maxWhereBytes) {
      throw new BadRequestError(`where must be at most ${lim.maxWhereBytes} characters`, { param: 'where' });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new BadRequestError('where is not valid JSON', { param: 'where' });
    }
    where = validateWhere(parsed, resource, lim);
  }

  const paramFilter = buildParamFilter(params, resource, lim);
  const tagClauses = buildTagClauses(params, resource, lim);
  const searchClauses = params.has('q') ? buildSearchClauses(params.get('q')!, resource, lim) : [];

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

  return { mode, page, perPage, limit, cursor, direction: rawDirection, sort, fields, filter, includeDeleted, populate };
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

/**
 * Validate a parsed `where` value and return a sanitized copy that is safe to pass to MongoDB.
 *
 * Grammar (anything else is a 400):
 * - a filter is a plain object whose keys are `$and` / `$or` / `$nor` (non-empty arrays of
 *   filters) or filterable dotted field paths;
 * - a field's value is a scalar (string, finite number, boolean, null), an array of scalars, or a
 *   non-empty operator object using only {@link WHERE_OPERATORS}; embedded-document literals are
 *   rejected (use dotted paths) so that equality on a whole sub-document cannot probe private
 *   sub-fields;
 * - `$elemMatch` takes either an operator object or a filter whose keys are paths relative to the
 *   array element (checked as `<field>.<key>`); `$not` takes an operator object; `$options` needs
 *   a sibling `$regex` and only the flags `imsx`; `$size` a non-negative integer; `$exists` a boolean.
 *
 * Object-id conversion: a 24-hex string is converted to an ObjectId when it is the value (directly,
 * in an array, or as the operand of a comparison / `$in` / `$nin` / `$all`) of `_id`, `tenant_id` or
 * any path whose name ends in `_id`. Other 24-hex strings stay strings.
 *
 * Limits: JSON nesting depth (objects and arrays each add a level), total node count (object keys
 * plus array items), JSON length, regex length, `$in`/`$nin`/`$all` items. Keys `__proto__`,
 * `constructor` and `prototype` are rejected at every level and as path segments.
 *
 * `$regex` must compile in JavaScript and avoid the constructs the database's PCRE2 rejects or reads
 * differently (unknown letter escapes, `\C`, references to missing groups, empty or POSIX classes,
 * `{,n}`, unbounded lookbehind, `#` comments with the `x` option), so a bad pattern is a 400 here
 * rather than a database error later.
 *
 * @throws BadRequestError (400) for anything outside the grammar or the limits.
 */
export function validateWhere(value: unknown, resource: ResourceQueryInfo, limits: QueryLimits): Record<string, unknown> {
  if (!isPlainObject(value)) throw new BadRequestError('where must be a JSON object', { param: 'where' });
  const counter = { nodes: 0 };
  checkStructure(value, 1, limits, counter);
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    json = undefined;
  }
  if (json === undefined || json.length > limits.maxWhereBytes) {
    throw new BadRequestError(`where must be at most ${limits.maxWhereBytes} characters of JSON`, { param: 'where' });
  }
  return new WhereWalker(resource, limits).filter(value, '');
}

// ---------------------------------------------------------------------------------------------
// Query parameters

function positiveInt(raw: string, param: string): number {
  const n = POSITIVE_INT.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new BadRequestError(`${param} must be an integer >= 1`, { param });
  return n;
}

function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/**
 * Structural checks shared by every client-supplied path: non-empty segments, no operator-like
 * (`$`) segment, no prototype keys, and the resource must expose it.
 */
function checkPath(path: string, resource: ResourceQueryInfo, param: string, message: string): void {
  if (!isSafePath(path) || !resource.isFilterable(path)) throw new BadRequestError(message, { param });
}

function isSafePath(path: string): boolean {
  if (path.length === 0 || path.includes('\0')) return false;
  return path.split('.').every((seg) => seg.length > 0 && !seg.startsWith('$') && !FORBIDDEN_KEYS.has(seg));
}

function parseFields(raw: string, resource: ResourceQueryInfo): string[] {
  const items = splitList(raw);
  if (items.length === 0) throw new BadRequestError('fields must name at least one field', { param: 'fields' });
  for (const f of items) checkPath(f, resource, 'fields', `Unknown field '${f}' in fields`);
  const unique = [...new Set(['_id', ...items])];
  // MongoDB rejects a projection naming both a path and one of its sub-paths ("path collision");
  // the parent already includes the child, so the child is dropped.
  return unique.filter((f) => !unique.some((other) => other !== f && f.startsWith(`${other}.`)));
}

function parsePopulate(raw: string, resource: ResourceQueryInfo, lim: QueryLimits): string[] {
  const items = [...new Set(splitList(raw))];
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

function checkRegex(pattern: string, options: string, limits: QueryLimits, param: string): void {
  if (pattern.length > limits.maxRegexLength) {
    throw new BadRequestError(`Regular expression longer than ${limits.maxRegexLength} characters`, { param });
  }
  // With the `x` option the database ignores white space; JavaScript has no such flag, so the
  // pattern is checked the way the database will read it.
  const effective = options.includes('x') ? stripExtended(pattern) : pattern;
  if (effective === null) {
    throw new BadRequestError('Invalid regular expression: # comments and white space after ( are not supported with the x option', { param });
  }
  try {
    new RegExp(effective);
  } catch {
    throw new BadRequestError('Invalid regular expression', { param });
  }
  const problem = pcreProblem(effective);
  if (problem !== null) throw new BadRequestError(`Invalid regular expression: ${problem}`, { param });
}

const EXTENDED_SPACE = /[ \t\n\v\f\r\u0085\u200e\u200f\u2028\u2029]/;

/**
 * The pattern as PCRE2 reads it in extended mode: unescaped white space outside classes removed.
 * null for what is refused in extended mode: a `#` comment, or white space between `(` and `?`
 * (PCRE2 rejects that, but the stripped pattern would hide it).
 */
function stripExtended(p: string): string | null {
  let out = '';
  let afterGroupOpen = false;
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    // Comments are refused rather than stripped: how the database checks their text cannot be
    // reproduced here, and a query-string pattern has no use for them.
    if (ch === '#') return null;
    if (EXTENDED_SPACE.test(ch)) {
      if (afterGroupOpen && /^\s*\?/.test(p.slice(i))) return null;
      continue;
    }
    afterGroupOpen = ch === '(';
    if (ch === '\\') {
      out += p.slice(i, i + 2);
      i++;
    } else if (ch === '[') {
      const end = classEnd(p, i);
      out += p.slice(i, end + 1);
      i = end;
    } else {
      out += ch;
    }
  }
  return out;
}

/** Letter escapes PCRE2 accepts without an argument (others are errors there, literals in JS). */
const PCRE_LETTER_ESCAPES = new Set('aAbBdDeEfGhHnNQErRsStvVwWXzZ');
/** Escapes PCRE2 rejects inside a character class. */
const PCRE_NOT_IN_CLASS = new Set('ABGNRXZz');
const CLASS_ESCAPES = 'dDwWsShHvVpP';
const PCRE_ASSERTIONS = new Set('AbBGKzZ');
/** Unicode properties accepted in `\p{...}`: general categories, `Any`, `L&` and common scripts. */
const UNICODE_PROPERTIES = new Set([
  ...'C Cc Cf Cn Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk Sm So Z Zl Zp Zs'.split(' '),
  ...'Any L& Arabic Armenian Bengali Cyrillic Devanagari Georgian Greek Han Hangul Hebrew Hiragana Katakana Latin Thai'.split(' '),
]);

/**
 * The database evaluates `$regex` with PCRE2, which rejects some patterns that JavaScript accepts
 * (unknown letter escapes, empty classes, references to missing groups, huge or unbounded
 * lookbehind quantifiers...). Those would surface as a database error (500) instead of a 400, so
 * the common cases are caught here. `\C` is refused outright: it matches a single code unit and
 * can split UTF-8 characters. Returns a reason, or null when the pattern looks portable.
 */
function pcreProblem(p: string): string | null {
  const groups = scanGroups(p);
  for (const m of p.matchAll(/\{(\d+)(?:,(\d*))?\}/g)) {
    if (Number(m[1]) > 65535 || Number(m[2] ?? 0) > 65535) return 'quantifier too large';
  }
  // A literal in JavaScript, a quantifier in recent PCRE2.
  if (/\{,\d+\}/.test(p)) return 'write {0,n} instead of {,n}';
  let lookbehindDepth = -1;
  let depth = 0;
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    if (ch === '\\') {
      const problem = escapeProblem(p, i, false, groups);
      if (problem !== null) return problem;
      i++;
    } else if (ch === '[') {
      const end = classEnd(p, i);
      const body = p.slice(p[i + 1] === '^' ? i + 2 : i + 1, end);
      if (body.length === 0) return 'empty character class';
      // PCRE2 reads `[:alpha:]` as a POSIX class (and `[:x:]` outside a class as an error) where
      // JavaScript sees ordinary characters, so class boundaries would differ.
      if (/^([:.=]).*\1$/s.test(body) || /\[[:.=]/.test(body)) return 'POSIX classes are not supported; use \\d, \\w or \\s';
      for (let j = 0; j < body.length; j++) {
        if (body[j] !== '\\') continue;
        const problem = escapeProblem(body, j, true, groups);
        if (problem !== null) return problem;
        const next = body[j + 1] ?? '';
        if (CLASS_ESCAPES.includes(next) && (body[j - 1] === '-' || (body[j + 2] === '-' && j + 3 < body.length))) {
          return 'invalid range in character class';
        }
        j++;
      }
      i = end;
    } else if (ch === '(') {
      depth++;
      if (lookbehindDepth < 0 && (p.startsWith('(?<=', i) || p.startsWith('(?<!', i))) lookbehindDepth = depth;
    } else if (ch === ')') {
      if (depth === lookbehindDepth) lookbehindDepth = -1;
      depth--;
    } else if (lookbehindDepth >= 0 && (ch === '*' || ch === '+' || (ch === '{' && /^\{\d*,\}/.test(p.slice(i))))) {
      return 'lookbehind of unbounded length';
    }
  }
  return null;
}

function escapeProblem(p: string, i: number, inClass: boolean, groups: { count: number; names: Set<string> }): string | null {
  const next = p[i + 1] ?? '';
  const after = p[i + 2] ?? '';
  if (/[1-9]/.test(next) && !inClass) return Number(next) > groups.count ? 'reference to a non-existent group' : null;
  if (!/[A-Za-z]/.test(next)) return null;
  let ok = PCRE_LETTER_ESCAPES.has(next);
  if (next === 'N') ok = after !== '{';
  if (next === 'c') ok = /[A-Za-z]/.test(after);
  if (next === 'x') ok = /[0-9A-Fa-f]/.test(after);
  if (next === 'p' || next === 'P') {
    const name = /^\{\^?([A-Za-z&]+)\}/.exec(p.slice(i + 2))?.[1];
    ok = name !== undefined && UNICODE_PROPERTIES.has(name);
  }
  // JavaScript reads `\k<x>` as a literal when no group has that name; PCRE2 rejects it.
  if (next === 'k') ok = !inClass && groups.names.has(/^<([A-Za-z_]\w*)>/.exec(p.slice(i + 2))?.[1] ?? '');
  if (inClass && PCRE_NOT_IN_CLASS.has(next)) ok = false;
  // PCRE2 cannot repeat an assertion; JavaScript reads `\z?` as an optional `z`.
  if (!inClass && PCRE_ASSERTIONS.has(next) && /[?*+{]/.test(after)) return 'quantifier after an assertion';
  return ok ? null : `unsupported escape \\${next}`;
}

/** Index of the `]` closing the class opened at `start` (JavaScript rules; the pattern is valid JS). */
function classEnd(p: string, start: number): number {
  for (let i = start + 1; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === ']') return i;
  }
  return p.length;
}

/** Number of capturing groups and the names of the named ones (JavaScript and PCRE2 syntax). */
function scanGroups(p: string): { count: number; names: Set<string> } {
  let count = 0;
  const names = new Set<string>();
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === '[') i = classEnd(p, i);
    else if (p[i] === '(') {
      const named = /^\(\?(?:P?<([A-Za-z_]\w*)>|'([A-Za-z_]\w*)')/.exec(p.slice(i));
      if (named) names.add(named[1] ?? named[2]!);
      if (named || p[i + 1] !== '?') count++;
    }
  }
  return { count, names };
}

function buildParamFilter(params: Map<string, string>, resource: ResourceQueryInfo, lim: QueryLimits): Filter {
  const byField = new Map<string, { eq?: { value: unknown }; ops: Filter }>();
  for (const [key, raw] of params) {
    if (RESERVED.has(key)) continue;
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
      entry.eq = { value: coerce(raw) };
      continue;
    }
    switch (op) {
      case 'in':
      case 'nin': {
        const items = splitList(raw);
        if (items.length > lim.maxInItems) {
          throw new BadRequestError(`${op} accepts at most ${lim.maxInItems} values`, { param: key });
        }
        entry.ops[`$${op}`] = items.map(coerce);
        break;
      }
      case 'exists':
        if (raw !== 'true' && raw !== 'false') throw new BadRequestError('exists must be true or false', { param: key });
        entry.ops.$exists = raw === 'true';
        break;
      case 'regex':
        checkRegex(raw, 'i', lim, key);
        entry.ops.$regex = raw;
        entry.ops.$options = 'i';
        break;
      default:
        entry.ops[`$${op}`] = coerce(raw);
    }
  }
  const filter: Filter = {};
  for (const [field, { eq, ops }] of byField) {
    if (Object.keys(ops).length === 0) filter[field] = eq!.value;
    else filter[field] = eq ? { $eq: eq.value, ...ops } : ops;
  }
  return filter;
}

function buildTagClauses(params: Map<string, string>, resource: ResourceQueryInfo, lim: QueryLimits): Filter[] {
  const clauses: Filter[] = [];
  for (const op of ['in', 'all', 'nin'] as const) {
    const param = `tags__${op}`;
    const raw = params.get(param);
    if (raw === undefined) continue;
    if (!resource.hasTags) throw new BadRequestError(`Tag filters are not supported by ${resource.name}`, { param });
    const tags = splitList(raw);
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

// ---------------------------------------------------------------------------------------------
// where

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function isScalar(v: unknown): v is string | number | boolean | null {
  return v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

/** Depth, node count, JSON-only value types and prototype keys, before any semantic check. */
function checkStructure(v: unknown, depth: number, limits: QueryLimits, counter: { nodes: number }): void {
  if (isScalar(v)) return;
  if (depth > limits.maxWhereDepth) {
    throw new BadRequestError(`where is nested deeper than ${limits.maxWhereDepth} levels`, { param: 'where' });
  }
  let children: unknown[];
  if (Array.isArray(v)) {
    children = v;
  } else if (isPlainObject(v)) {
    const keys = Object.keys(v);
    for (const k of keys) {
      if (FORBIDDEN_KEYS.has(k)) throw new BadRequestError(`Key '${k}' is not allowed in where`, { param: 'where' });
    }
    children = keys.map((k) => v[k]);
  } else {
    throw new BadRequestError('where may only contain JSON values', { param: 'where' });
  }
  counter.nodes += children.length;
  if (counter.nodes > limits.maxWhereNodes) {
    throw new BadRequestError(`where has more than ${limits.maxWhereNodes} keys and array items`, { param: 'where' });
  }
  for (const c of children) checkStructure(c, depth + 1, limits, counter);
}

function bad(message: string): BadRequestError {
  return new BadRequestError(message, { param: 'where' });
}

function isIdPath(path: string): boolean {
  return path.endsWith('_id');
}

class WhereWalker {
  constructor(
    private readonly resource: ResourceQueryInfo,
    private readonly limits: QueryLimits,
  ) {}

  /** A query-level object; `prefix` is `<field>.` inside a filter-style `$elemMatch`. */
  filter(obj: Record<string, unknown>, prefix: string): Filter {
    const out: Filter = {};
    for (const [key, value] of Object.entries(obj)) {
      if (key.startsWith('$')) {
        this.checkOperator(key);
        if (!LOGICAL_OPS.has(key)) throw bad(`Operator ${key} cannot be used at this position`);
        if (!Array.isArray(value) || value.length === 0) throw bad(`${key} takes a non-empty array of objects`);
        out[key] = value.map((item) => {
          if (!isPlainObject(item)) throw bad(`${key} takes a non-empty array of objects`);
          return this.filter(item, prefix);
        });
        continue;
      }
      const path = prefix + key;
      if (!isSafePath(key) || !this.resource.isFilterable(path)) {
        throw new BadRequestError(`Unknown filter field '${path}'`, { param: 'where' });
      }
      out[key] = this.fieldValue(value, path);
    }
    return out;
  }

  private checkOperator(key: string): void {
    if (!WHERE_OPERATOR_SET.has(key)) throw bad(`Operator ${key} is not allowed`);
  }

  private fieldValue(value: unknown, path: string): unknown {
    if (isPlainObject(value)) return this.operators(value, path);
    return this.literal(value, path);
  }

  /** A scalar or an array of scalars (array equality / comparison operand). */
  private literal(value: unknown, path: string): unknown {
    if (Array.isArray(value)) return value.map((item) => this.scalar(item, path));
    return this.scalar(value, path);
  }

  private scalar(value: unknown, path: string): unknown {
    if (isPlainObject(value)) {
      for (const k of Object.keys(value)) if (k.startsWith('$')) this.checkOperator(k);
      throw bad(`Embedded document values are not supported in where (at '${path}'); use dotted paths`);
    }
    if (!isScalar(value)) throw bad(`Unsupported value at '${path}'`);
    if (typeof value === 'string' && isIdPath(path) && HEX24.test(value)) return new Types.ObjectId(value);
    return value;
  }

  private scalarList(value: unknown, op: string, path: string): unknown[] {
    if (!Array.isArray(value)) throw bad(`${op} takes an array`);
    if (value.length > this.limits.maxInItems) throw bad(`${op} accepts at most ${this.limits.maxInItems} values`);
    return value.map((item) => this.scalar(item, path));
  }

  /** An operator object applying to `path`, e.g. `{ $gt: 1, $lt: 5 }`. */
  private operators(obj: Record<string, unknown>, path: string): Filter {
    const keys = Object.keys(obj);
    if (keys.length === 0) throw bad(`Empty operator object at '${path}'`);
    for (const k of keys) {
      if (!k.startsWith('$')) throw bad(`Embedded document values are not supported in where (at '${path}'); use dotted paths`);
      this.checkOperator(k);
    }
    const out: Filter = {};
    for (const op of keys) {
      const value = obj[op];
      switch (op) {
        case '$eq':
        case '$ne':
        case '$gt':
        case '$gte':
        case '$lt':
        case '$lte':
          out[op] = this.literal(value, path);
          break;
        case '$in':
        case '$nin':
        case '$all':
          out[op] = this.scalarList(value, op, path);
          break;
        case '$exists':
          if (typeof value !== 'boolean') throw bad('$exists takes true or false');
          out[op] = value;
          break;
        case '$size':
          if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > INT32_MAX) {
            throw bad('$size takes a non-negative integer');
          }
          out[op] = value;
          break;
        case '$regex':
          if (typeof value !== 'string') throw bad('$regex takes a string');
          checkRegex(value, typeof obj.$options === 'string' ? obj.$options : '', this.limits, 'where');
          out[op] = value;
          break;
        case '$options':
          if (typeof value !== 'string' || !REGEX_OPTIONS.test(value)) throw bad('$options may only contain the flags i, m, s, x');
          if (!('$regex' in obj)) throw bad('$options requires $regex');
          out[op] = value;
          break;
        case '$not':
          if (!isPlainObject(value)) throw bad('$not takes an operator object');
          out[op] = this.operators(value, path);
          break;
        case '$elemMatch': {
          if (!isPlainObject(value) || Object.keys(value).length === 0) throw bad('$elemMatch takes a non-empty object');
          const opStyle = Object.keys(value).every((k) => k.startsWith('$') && !LOGICAL_OPS.has(k));
          out[op] = opStyle ? this.operators(value, path) : this.filter(value, `${path}.`);
          break;
        }
        default:
          // $and / $or / $nor are allowed operators but only at query level.
          throw bad(`Operator ${op} cannot be used at this position`);
      }
    }
    return out;
  }
}
