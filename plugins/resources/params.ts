/**
 * The list parameters of a resource, declared once: the REST query string (its documentation in
 * `/openapi.json` and its reading in {@link readListQuery}), the GraphQL list arguments
 * (graphql.ts) and the set of names that are never field filters all come from {@link LIST_PARAMS}.
 * The checking itself is query.ts's (`parseListArgs`), shared by REST and GraphQL.
 */
import { z } from 'zod';
import { AppError, BadRequestError, ErrorCode } from '../../core/errors.ts';

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

/** A REST query object as Koa parses it (a repeated parameter is an array). */
export type RawQuery = Record<string, string | string[] | undefined>;

/**
 * How a parameter is read: `int` (digits only in a query string), `boolean` (`true`/`false`/`1`/`0`),
 * `text` (one string), `list` (comma-separated; a GraphQL string list), `json` (`where`: JSON text,
 * or any JSON value in GraphQL).
 */
export type ListParamKind = 'int' | 'boolean' | 'text' | 'list' | 'json';

/** One list parameter. */
export interface ListParam {
  /** Name in the query string. */
  name: string;
  /** Name of the GraphQL argument and key of {@link ListArgs}. */
  arg: Exclude<keyof ListArgs, 'filter'>;
  kind: ListParamKind;
  /** Documentation of the query parameter. */
  doc: string;
  /** Documentation of the GraphQL argument, when it has one. */
  graphqlDoc?: string;
  /** Position among the GraphQL list arguments (after `where` and `filter`'s own places). */
  graphqlOrder: number;
}

/** Every list parameter, in the order of the REST documentation. */
export const LIST_PARAMS: readonly ListParam[] = [
  { name: 'page', arg: 'page', kind: 'int', doc: 'Offset mode page number (>= 1), default 1', graphqlOrder: 9 },
  { name: 'per_page', arg: 'per_page', kind: 'int', doc: 'Offset mode page size; above the resource max_page_size is a 422', graphqlOrder: 10 },
  { name: 'cursor', arg: 'cursor', kind: 'text', doc: 'Opaque signed cursor; selects cursor mode', graphqlOrder: 12 },
  { name: 'limit', arg: 'limit', kind: 'int', doc: 'Cursor mode page size (default 25, max 100); without `page` selects cursor mode', graphqlOrder: 11 },
  { name: 'direction', arg: 'direction', kind: 'text', doc: '`next` (default) or `prev`', graphqlOrder: 13 },
  { name: 'sort', arg: 'sort', kind: 'text', doc: 'Comma-separated fields, `-` prefix for descending', graphqlOrder: 6 },
  { name: 'fields', arg: 'fields', kind: 'list', doc: 'Comma-separated projection; `_id` is always returned', graphqlOrder: 7 },
  {
    name: 'where', arg: 'where', kind: 'json', doc: 'JSON filter with allow-listed operators',
    graphqlDoc: 'Same as REST `where` (object or JSON string)', graphqlOrder: 0,
  },
  { name: 'q', arg: 'q', kind: 'text', doc: 'Word-prefix search over the searchable fields', graphqlOrder: 2 },
  { name: 'include_deleted', arg: 'include_deleted', kind: 'boolean', doc: '`true` to include soft-deleted documents (admins only)', graphqlOrder: 14 },
  { name: 'populate', arg: 'populate', kind: 'list', doc: 'Comma-separated relation fields to expand', graphqlOrder: 8 },
  { name: 'tags__in', arg: 'tags_in', kind: 'list', doc: 'Any listed tag present', graphqlOrder: 3 },
  { name: 'tags__all', arg: 'tags_all', kind: 'list', doc: 'Every listed tag present', graphqlOrder: 4 },
  { name: 'tags__nin', arg: 'tags_nin', kind: 'list', doc: 'No listed tag present', graphqlOrder: 5 },
];

/** GraphQL's `filter` argument: the query string's field filters as one object (position 1). */
export const FILTER_ARG_DOC = 'Equality and suffix filters as REST parameters, e.g. {"budget__gt": 10}';

/** Query parameter names that are never field filters. */
export const RESERVED_PARAMS: ReadonlySet<string> = new Set(LIST_PARAMS.map((p) => p.name));

const BY_NAME = new Map(LIST_PARAMS.map((p) => [p.name, p]));

const optionalText = (doc: string) => z.string().optional().describe(doc);

/** JSON Schema type of each kind, as the parameter is documented (the query string carries text). */
const DOC_TYPE: Record<ListParamKind, { type: 'integer' | 'boolean' | 'string'; minimum?: number }> = {
  int: { type: 'integer', minimum: 1 }, boolean: { type: 'boolean' }, text: { type: 'string' }, list: { type: 'string' }, json: { type: 'string' },
};

/**
 * The REST list query, any other name a field filter. It only documents the parameters (typed by
 * their kind): the route accepts any value, and {@link readListQuery} and `parseListArgs` do the
 * checking, so every mistake in a list parameter (a repeated one included) is one 400.
 */
export const listQuerySchema = z
  .object(Object.fromEntries(LIST_PARAMS.map((p) => [p.name, z.any().meta({ ...DOC_TYPE[p.kind], description: p.doc }).optional()])))
  .catchall(z.union([z.string(), z.array(z.string())]).describe('`<field>` equality or `<field>__<op>` (gt gte lt lte ne in nin exists regex)'));

/** The parameters of a get-one read. */
export const getOneQuerySchema = z.object({ fields: optionalText('Projection'), populate: optionalText('Relations to expand'), include_deleted: optionalText('Admins only'), draft: optionalText('Resources with drafts: true shows the pending draft to callers who may read it') });

const POSITIVE_INT = /^\d+$/;

/**
 * A malformed list parameter: 400 `BAD_REQUEST`, whatever the mistake (a bad value, a value over
 * a limit, an unknown field or operator, a value the field's type cannot hold, a repeated
 * parameter). `details.param` names the parameter, and `details.errors` says the same in the
 * shape of a 422 (`loc: ['query', <parameter>]`), so a client reads every input error one way.
 * GraphQL arguments report the REST parameter name (`tags__in` for `tags_in`).
 */
export class QueryParamError extends BadRequestError {
  constructor(message: string, param: string, type = 'invalid_parameter') {
    super(message, { param, errors: [{ loc: ['query', param], msg: message, type }] });
  }
}

/**
 * A page size above its ceiling (`per_page` above the resource's `max_page_size`, `limit` above the
 * cursor ceiling): 422 `VALIDATION_ERROR` for `per_page` and `limit` alike, naming the
 * parameter like every list-parameter error (`param`, `errors[].loc`).
 */
export class PageSizeError extends AppError {
  constructor(param: 'per_page' | 'limit', max: number) {
    const msg = `${param} must be at most ${max}`;
    super(422, ErrorCode.VALIDATION_ERROR, msg, { param, errors: [{ loc: ['query', param], msg, type: 'too_big' }] });
  }
}

/**
 * Reads a REST query string into {@link ListArgs}: list parameters by their kind, every other name
 * into `filter`.
 * @throws QueryParamError for a repeated or malformed parameter
 */
export function readListQuery(query: RawQuery): ListArgs {
  const args: ListArgs = {};
  // No prototype: a `__proto__` parameter must stay a key (and be refused as a field), not a prototype.
  const filter = Object.create(null) as Record<string, string>;
  for (const key of Object.keys(query)) {
    const value = query[key];
    if (value === undefined) continue;
    if (Array.isArray(value)) throw new QueryParamError(`Query parameter '${key}' given more than once`, key);
    if (typeof value !== 'string') throw new QueryParamError(`Query parameter '${key}' is malformed`, key);
    const param = BY_NAME.get(key);
    if (!param) filter[key] = value;
    else if (param.kind === 'int') (args as Record<string, unknown>)[param.arg] = POSITIVE_INT.test(value) ? Number(value) : NaN;
    else if (param.kind === 'boolean') (args as Record<string, unknown>)[param.arg] = readBoolean(value, key);
    else (args as Record<string, unknown>)[param.arg] = value;
  }
  args.filter = filter;
  return args;
}

function readBoolean(value: string, name: string): boolean {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new QueryParamError(`${name} must be true, false, 1 or 0`, name);
}
