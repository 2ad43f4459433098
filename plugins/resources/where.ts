/**
 * The `where` validator: an allow-list of operators and filterable paths with
 * size limits, returning a sanitized copy that is safe to hand to MongoDB.
 */
import { Types } from 'mongoose';
import type { Filter } from '../../core/access.ts';
import type { QueryLimits, ResourceQueryInfo } from './query-types.ts';
import { checkRegex } from './regex.ts';
import { QueryParamError } from './params.ts';

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

export const HEX24 = /^[0-9a-fA-F]{24}$/;
const INT32_MAX = 2 ** 31 - 1;
const REGEX_OPTIONS = /^[imsx]*$/;


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
  if (!isPlainObject(value)) throw new QueryParamError('where must be a JSON object', 'where');
  const counter = { nodes: 0 };
  checkStructure(value, 1, limits, counter);
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    json = undefined;
  }
  if (json === undefined || json.length > limits.maxWhereBytes) {
    throw new QueryParamError(`where must be at most ${limits.maxWhereBytes} characters of JSON`, 'where');
  }
  return new WhereWalker(resource, limits).filter(value, '');
}

/**
 * Structural checks shared by every client-supplied path: non-empty segments, no operator-like
 * (`$`) segment, no prototype keys, and the resource must expose it.
 */
export function checkPath(path: string, resource: ResourceQueryInfo, param: string, message: string): void {
  if (!isSafePath(path) || !resource.isFilterable(path)) throw new QueryParamError(message, param);
}

export function isSafePath(path: string): boolean {
  if (path.length === 0 || path.includes('\0')) return false;
  return path.split('.').every((seg) => seg.length > 0 && !seg.startsWith('$') && !FORBIDDEN_KEYS.has(seg));
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
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
    throw new QueryParamError(`where is nested deeper than ${limits.maxWhereDepth} levels`, 'where');
  }
  let children: unknown[];
  if (Array.isArray(v)) {
    children = v;
  } else if (isPlainObject(v)) {
    const keys = Object.keys(v);
    for (const k of keys) {
      if (FORBIDDEN_KEYS.has(k)) throw new QueryParamError(`Key '${k}' is not allowed in where`, 'where');
    }
    children = keys.map((k) => v[k]);
  } else {
    throw new QueryParamError('where may only contain JSON values', 'where');
  }
  counter.nodes += children.length;
  if (counter.nodes > limits.maxWhereNodes) {
    throw new QueryParamError(`where has more than ${limits.maxWhereNodes} keys and array items`, 'where');
  }
  for (const c of children) checkStructure(c, depth + 1, limits, counter);
}

function bad(message: string): QueryParamError {
  return new QueryParamError(message, 'where');
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
        throw new QueryParamError(`Unknown filter field '${path}'`, 'where');
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
          checkRegex(value, typeof obj.$options === 'string' ? obj.$options : '', this.limits.maxRegexLength, 'where');
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
