import { createHmac } from 'node:crypto';
import { Types } from 'mongoose';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../core/errors.ts';
import { cursorFilter, decodeCursor, encodeCursor, querySort, sortKey } from '../../lib/cursor.ts';
import {
  DEFAULT_QUERY_LIMITS,
  parseListQuery,
  parseSort,
  type ParsedListQuery,
  type QueryLimits,
  type ResourceQueryInfo,
  type SortSpec,
} from '../../plugins/resources/query.ts';
import { WHERE_OPERATORS, validateWhere } from '../../plugins/resources/where.ts';
import { escapeRegex } from '../../plugins/resources/regex.ts';

const FILTERABLE = new Set([
  '_id',
  'name',
  'title',
  'n',
  'status',
  'created_at',
  'tenant_id',
  'project_id',
  'tags',
  'meta',
  'meta.a',
  'meta.owner_id',
  'items',
  'items.price',
  'my__field',
]);

const resource: ResourceQueryInfo = {
  name: 'widgets',
  isFilterable: (p) => FILTERABLE.has(p),
  searchableFields: ['name', 'title'],
  defaultSort: '-created_at',
  defaultPageSize: 25,
  maxPageSize: 100,
  hasTags: true,
  populatable: ['project_id', 'owner_id', 'a_id'],
};
const plain: ResourceQueryInfo = { ...resource, searchableFields: [], hasTags: false };

const OID = '507f1f77bcf86cd799439011';
const OID2 = '507f1f77bcf86cd799439012';
const oid = (h: string) => new Types.ObjectId(h);

type Q = Record<string, string | string[] | undefined>;
type ErrorShape = { status?: number; code?: string; message?: string; details?: Record<string, unknown> };

/** Assert `fn` throws an AppError with the given status/code, message fragment and details subset. */
function expectAppError(fn: () => unknown, shape: ErrorShape): void {
  const { message, details, ...rest } = shape;
  expect(fn).toThrow(AppError);
  expect(fn).toThrow(
    expect.objectContaining({
      ...rest,
      ...(message !== undefined ? { message: expect.stringContaining(message) } : {}),
      ...(details !== undefined ? { details: expect.objectContaining(details) } : {}),
    }),
  );
}

const bad = (message?: string, details?: Record<string, unknown>): ErrorShape => ({
  status: 400,
  code: 'BAD_REQUEST',
  ...(message !== undefined ? { message } : {}),
  ...(details !== undefined ? { details } : {}),
});

const filterOf = (query: Q, res = resource) => parseListQuery(query, res).filter;
const where = (w: unknown) => ({ where: JSON.stringify(w) });

describe('exports', () => {
  it('has the documented defaults and allow-list', () => {
    expect(DEFAULT_QUERY_LIMITS).toEqual({
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
    expect([...WHERE_OPERATORS].sort()).toEqual(
      ['$and', '$or', '$nor', '$not', '$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists', '$regex', '$options', '$all', '$elemMatch', '$size'].sort(),
    );
    for (const forbidden of ['$where', '$expr', '$function', '$accumulator']) expect(WHERE_OPERATORS).not.toContain(forbidden);
  });
});

describe('pagination mode and paging parameters', () => {
  const rows: Array<{ name: string; query: Q; expected: Partial<ParsedListQuery> }> = [
    { name: 'nothing → offset page 1', query: {}, expected: { mode: 'offset', page: 1, perPage: 25, limit: 25, cursor: null, direction: 'next' } },
    { name: 'page → offset', query: { page: '3' }, expected: { mode: 'offset', page: 3, perPage: 25 } },
    { name: 'per_page → offset', query: { per_page: '10' }, expected: { mode: 'offset', page: 1, perPage: 10 } },
    { name: 'per_page at ceiling', query: { per_page: '100' }, expected: { mode: 'offset', perPage: 100 } },
    { name: 'limit without page → cursor', query: { limit: '10' }, expected: { mode: 'cursor', limit: 10, cursor: null } },
    { name: 'limit with per_page → cursor', query: { limit: '10', per_page: '5' }, expected: { mode: 'cursor', limit: 10, perPage: 5 } },
    { name: 'limit with page → offset', query: { limit: '10', page: '2' }, expected: { mode: 'offset', page: 2, limit: 10 } },
    { name: 'cursor → cursor', query: { cursor: 'abc.def' }, expected: { mode: 'cursor', cursor: 'abc.def', limit: 25 } },
    { name: 'cursor with page → cursor', query: { cursor: 'abc.def', page: '4' }, expected: { mode: 'cursor', page: 4 } },
    { name: 'empty cursor → cursor first page', query: { cursor: '' }, expected: { mode: 'cursor', cursor: null } },
    { name: 'direction prev', query: { cursor: 'x.y', direction: 'prev' }, expected: { direction: 'prev' } },
    { name: 'direction next', query: { direction: 'next' }, expected: { direction: 'next' } },
    { name: 'limit at ceiling', query: { limit: '100' }, expected: { limit: 100 } },
    { name: 'leading zeros', query: { page: '007' }, expected: { page: 7 } },
    { name: 'undefined values are absent', query: { page: undefined, limit: undefined }, expected: { mode: 'offset', page: 1 } },
    { name: 'include_deleted default', query: {}, expected: { includeDeleted: false } },
    { name: 'include_deleted=true', query: { include_deleted: 'true' }, expected: { includeDeleted: true } },
    { name: 'include_deleted=1', query: { include_deleted: '1' }, expected: { includeDeleted: true } },
    { name: 'include_deleted=false', query: { include_deleted: 'false' }, expected: { includeDeleted: false } },
    { name: 'include_deleted=0', query: { include_deleted: '0' }, expected: { includeDeleted: false } },
    { name: 'reserved names never filter', query: { include_deleted: 'true', page: '1', direction: 'next' }, expected: { filter: {} } },
  ];
  it.each(rows)('$name', ({ query, expected }) => {
    expect(parseListQuery(query, resource)).toMatchObject(expected);
  });

  const errors: Array<{ name: string; query: Q; error: ErrorShape }> = [
    { name: 'page 0', query: { page: '0' }, error: bad('page must be an integer >= 1', { param: 'page' }) },
    { name: 'page negative', query: { page: '-1' }, error: bad('page') },
    { name: 'page float', query: { page: '1.5' }, error: bad('page') },
    { name: 'page text', query: { page: 'abc' }, error: bad('page') },
    { name: 'page empty', query: { page: '' }, error: bad('page') },
    { name: 'page exponent', query: { page: '1e3' }, error: bad('page') },
    { name: 'page beyond safe integer', query: { page: '99999999999999999999' }, error: bad('page') },
    { name: 'per_page 0', query: { per_page: '0' }, error: bad('per_page', { param: 'per_page' }) },
    { name: 'per_page text', query: { per_page: 'ten' }, error: bad('per_page') },
    { name: 'limit 0', query: { limit: '0' }, error: bad('limit', { param: 'limit' }) },
    { name: 'limit text', query: { limit: '5x' }, error: bad('limit') },
    { name: 'direction unknown', query: { direction: 'up' }, error: bad('direction', { param: 'direction' }) },
    { name: 'include_deleted unknown', query: { include_deleted: 'yes' }, error: bad('include_deleted') },
    { name: 'repeated reserved parameter', query: { page: ['1', '2'] }, error: bad("'page' given more than once", { param: 'page' }) },
    { name: 'repeated filter parameter', query: { name: ['a', 'b'] }, error: bad("'name' given more than once") },
  ];
  it.each(errors)('400: $name', ({ query, error }) => {
    expectAppError(() => parseListQuery(query, resource), error);
  });

  it('per_page above the resource ceiling is a 422, like limit above its ceiling, both naming the parameter', () => {
    expectAppError(() => parseListQuery({ per_page: '101' }, resource), {
      status: 422,
      code: 'VALIDATION_ERROR',
      details: { param: 'per_page', errors: [{ loc: ['query', 'per_page'], msg: 'per_page must be at most 100', type: 'too_big' }] },
    });
    expectAppError(() => parseListQuery({ limit: '101' }, resource), {
      status: 422,
      code: 'VALIDATION_ERROR',
      details: { param: 'limit', errors: [{ loc: ['query', 'limit'], msg: 'limit must be at most 100', type: 'too_big' }] },
    });
  });

  it('honours limit overrides', () => {
    expect(parseListQuery({ limit: '10' }, resource, { maxLimit: 10 }).limit).toBe(10);
    expectAppError(() => parseListQuery({ limit: '11' }, resource, { maxLimit: 10 }), { status: 422, code: 'VALIDATION_ERROR', message: 'limit must be at most 10' });
    expect(parseListQuery({ cursor: '' }, resource, { defaultLimit: 7 }).limit).toBe(7);
  });
});

describe('equality filters and coercion', () => {
  const rows: Array<{ raw: string; value: unknown }> = [
    { raw: 'true', value: true },
    { raw: 'false', value: false },
    { raw: 'null', value: null },
    { raw: 'none', value: null },
    { raw: '42', value: 42 },
    { raw: '-7', value: -7 },
    { raw: '0', value: 0 },
    { raw: '007', value: 7 },
    { raw: '3.5', value: 3.5 },
    { raw: '-0.25', value: -0.25 },
    { raw: '1e3', value: 1000 },
    { raw: '2.5E-1', value: 0.25 },
    { raw: '9007199254740993', value: '9007199254740993' },
    { raw: '1e999', value: '1e999' },
    { raw: OID, value: oid(OID) },
    { raw: OID.toUpperCase(), value: oid(OID) },
    { raw: '123456789012345678901234', value: oid('123456789012345678901234') },
    { raw: 'hello', value: 'hello' },
    { raw: 'True', value: 'True' },
    { raw: 'NULL', value: 'NULL' },
    { raw: 'NaN', value: 'NaN' },
    { raw: '1.', value: '1.' },
    { raw: '.5', value: '.5' },
    { raw: ' 5', value: ' 5' },
    { raw: '', value: '' },
    { raw: '507f1f77bcf86cd79943901', value: '507f1f77bcf86cd79943901' },
  ];
  it.each(rows)('name=$raw', ({ raw, value }) => {
    expect(filterOf({ name: raw })).toEqual({ name: value });
  });

  it('keeps a 24-hex value a real ObjectId', () => {
    expect(filterOf({ project_id: OID }).project_id).toBeInstanceOf(Types.ObjectId);
  });

  it('accepts dotted filterable paths and field names containing __', () => {
    expect(filterOf({ 'meta.a': '1', my__field: 'x' })).toEqual({ 'meta.a': 1, my__field: 'x' });
  });
});

describe('suffix operators', () => {
  const rows: Array<{ name: string; query: Q; filter: Record<string, unknown> }> = [
    { name: 'gt', query: { n__gt: '5' }, filter: { n: { $gt: 5 } } },
    { name: 'gte', query: { n__gte: '5.5' }, filter: { n: { $gte: 5.5 } } },
    { name: 'lt', query: { n__lt: '-1' }, filter: { n: { $lt: -1 } } },
    { name: 'lte', query: { created_at__lte: 'x' }, filter: { created_at: { $lte: 'x' } } },
    { name: 'ne null', query: { n__ne: 'null' }, filter: { n: { $ne: null } } },
    { name: 'ne bool', query: { status__ne: 'false' }, filter: { status: { $ne: false } } },
    { name: 'in strings', query: { status__in: 'a,b' }, filter: { status: { $in: ['a', 'b'] } } },
    { name: 'in coerced and trimmed', query: { n__in: '1, 2 ,x,,true' }, filter: { n: { $in: [1, 2, 'x', true] } } },
    { name: 'in empty', query: { n__in: '' }, filter: { n: { $in: [] } } },
    { name: 'nin', query: { n__nin: '1' }, filter: { n: { $nin: [1] } } },
    { name: 'in object ids', query: { project_id__in: `${OID},${OID2}` }, filter: { project_id: { $in: [oid(OID), oid(OID2)] } } },
    { name: 'exists true', query: { name__exists: 'true' }, filter: { name: { $exists: true } } },
    { name: 'exists false', query: { name__exists: 'false' }, filter: { name: { $exists: false } } },
    { name: 'regex', query: { name__regex: '^ab+c' }, filter: { name: { $regex: '^ab+c', $options: 'i' } } },
    { name: 'regex is not coerced', query: { name__regex: '123' }, filter: { name: { $regex: '123', $options: 'i' } } },
    { name: 'regex at max length', query: { name__regex: 'a'.repeat(256) }, filter: { name: { $regex: 'a'.repeat(256), $options: 'i' } } },
    { name: 'two operators on one field merge', query: { n__gt: '1', n__lt: '5' }, filter: { n: { $gt: 1, $lt: 5 } } },
    { name: 'equality plus operator uses $eq', query: { n: '3', n__ne: '4' }, filter: { n: { $eq: 3, $ne: 4 } } },
    { name: 'dotted field with operator', query: { 'items.price__gte': '10' }, filter: { 'items.price': { $gte: 10 } } },
    { name: 'field with __ and operator', query: { my__field__ne: 'x' }, filter: { my__field: { $ne: 'x' } } },
    { name: 'id field with operator', query: { _id__gt: OID }, filter: { _id: { $gt: oid(OID) } } },
  ];
  it.each(rows)('$name', ({ query, filter }) => {
    expect(filterOf(query)).toEqual(filter);
  });

  it('allows exactly maxInItems values', () => {
    expect(filterOf({ n__in: Array.from({ length: 200 }, (_, i) => i).join(',') }).n).toEqual({
      $in: Array.from({ length: 200 }, (_, i) => i),
    });
  });

  const errors: Array<{ name: string; query: Q; error: ErrorShape }> = [
    { name: 'unknown operator', query: { n__foo: '1' }, error: bad("Unknown filter operator 'foo'", { param: 'n__foo' }) },
    { name: 'empty operator', query: { n__: '1' }, error: bad('Unknown filter operator') },
    { name: 'case-sensitive operator', query: { n__GT: '1' }, error: bad('Unknown filter operator') },
    { name: 'unknown field', query: { secret: '1' }, error: bad("Unknown filter field 'secret'", { param: 'secret' }) },
    { name: 'unknown field with operator', query: { secret__gt: '1' }, error: bad("Unknown filter field 'secret'", { param: 'secret__gt' }) },
    { name: 'unknown field, unknown operator', query: { secret__zz: '1' }, error: bad("Unknown filter field 'secret'") },
    { name: 'relation traversal', query: { 'project_id.secret': '1' }, error: bad("Unknown filter field 'project_id.secret'") },
    { name: 'operator-looking name', query: { $where: '1' }, error: bad('Unknown filter field') },
    { name: 'empty field', query: { __gt: '1' }, error: bad("Unknown filter field ''") },
    { name: 'prototype key', query: Object.fromEntries([['__proto__', '1']]) as Q, error: bad('Unknown filter field') },
    { name: 'prototype path segment', query: { 'meta.__proto__': '1' }, error: bad('Unknown filter field') },
    { name: 'constructor', query: { constructor: '1' }, error: bad('Unknown filter field') },
    { name: 'exists non-boolean', query: { name__exists: 'yes' }, error: bad('exists must be true or false') },
    { name: 'exists numeric', query: { name__exists: '1' }, error: bad('exists must be true or false') },
    { name: 'invalid regex', query: { name__regex: '(' }, error: bad('Invalid regular expression', { param: 'name__regex' }) },
    { name: 'regex too long', query: { name__regex: 'a'.repeat(257) }, error: bad('longer than 256') },
    { name: 'in too many items', query: { n__in: Array.from({ length: 201 }, (_, i) => i).join(',') }, error: bad('at most 200') },
    { name: 'nin too many items', query: { n__nin: Array.from({ length: 201 }, (_, i) => i).join(',') }, error: bad('at most 200') },
  ];
  it.each(errors)('400: $name', ({ query, error }) => {
    expectAppError(() => parseListQuery(query, resource), error);
  });
});

describe('where', () => {
  const rows: Array<{ name: string; where: unknown; filter: Record<string, unknown> }> = [
    { name: 'empty object', where: {}, filter: {} },
    { name: 'equality', where: { name: 'a', n: 1, status: null, tags: true }, filter: { name: 'a', n: 1, status: null, tags: true } },
    { name: 'comparison', where: { n: { $gt: 1, $lte: 9 } }, filter: { n: { $gt: 1, $lte: 9 } } },
    { name: '$or', where: { $or: [{ n: 1 }, { name: 'x' }] }, filter: { $or: [{ n: 1 }, { name: 'x' }] } },
    { name: '$and/$nor nesting', where: { $and: [{ $nor: [{ n: 1 }] }] }, filter: { $and: [{ $nor: [{ n: 1 }] }] } },
    { name: '$regex/$options', where: { name: { $regex: '^a', $options: 'im' } }, filter: { name: { $regex: '^a', $options: 'im' } } },
    { name: '$not', where: { name: { $not: { $regex: 'x' } } }, filter: { name: { $not: { $regex: 'x' } } } },
    { name: '$exists', where: { name: { $exists: false } }, filter: { name: { $exists: false } } },
    { name: '$in/$nin', where: { n: { $in: [1, 2], $nin: ['a'] } }, filter: { n: { $in: [1, 2], $nin: ['a'] } } },
    { name: '$eq/$ne', where: { n: { $eq: 1, $ne: 2 } }, filter: { n: { $eq: 1, $ne: 2 } } },
    { name: '$all and $size', where: { tags: { $all: ['a', 'b'], $size: 2 } }, filter: { tags: { $all: ['a', 'b'], $size: 2 } } },
    { name: 'array equality', where: { tags: ['a', 'b'] }, filter: { tags: ['a', 'b'] } },
    { name: '$elemMatch filter', where: { items: { $elemMatch: { price: { $gt: 5 } } } }, filter: { items: { $elemMatch: { price: { $gt: 5 } } } } },
    {
      name: '$elemMatch with logical',
      where: { items: { $elemMatch: { $or: [{ price: 1 }, { price: 2 }] } } },
      filter: { items: { $elemMatch: { $or: [{ price: 1 }, { price: 2 }] } } },
    },
    { name: '$elemMatch operators', where: { tags: { $elemMatch: { $gt: 'a', $lt: 'm' } } }, filter: { tags: { $elemMatch: { $gt: 'a', $lt: 'm' } } } },
    { name: 'dotted path', where: { 'meta.a': { $gte: 2 } }, filter: { 'meta.a': { $gte: 2 } } },
    { name: '_id hex → ObjectId', where: { _id: OID }, filter: { _id: oid(OID) } },
    { name: 'tenant_id hex → ObjectId', where: { tenant_id: OID }, filter: { tenant_id: oid(OID) } },
    { name: '*_id $in → ObjectIds', where: { project_id: { $in: [OID, OID2] } }, filter: { project_id: { $in: [oid(OID), oid(OID2)] } } },
    { name: 'nested *_id $ne', where: { 'meta.owner_id': { $ne: OID } }, filter: { 'meta.owner_id': { $ne: oid(OID) } } },
    { name: '*_id inside $not', where: { project_id: { $not: { $eq: OID } } }, filter: { project_id: { $not: { $eq: oid(OID) } } } },
    { name: '*_id inside $or', where: { $or: [{ _id: OID }] }, filter: { $or: [{ _id: oid(OID) }] } },
    { name: 'other fields keep hex strings', where: { name: OID }, filter: { name: OID } },
    { name: 'non-hex id stays string', where: { project_id: 'abc' }, filter: { project_id: 'abc' } },
    { name: '$regex on *_id is not converted', where: { project_id: { $regex: OID } }, filter: { project_id: { $regex: OID } } },
    { name: 'depth 6 allowed', where: { $and: [{ $or: [{ n: { $gt: 1 } }] }] }, filter: { $and: [{ $or: [{ n: { $gt: 1 } }] }] } },
  ];
  it.each(rows)('$name', ({ where: w, filter }) => {
    expect(filterOf(where(w))).toEqual(filter);
  });

  it('allows exactly maxWhereNodes nodes', () => {
    // 1 key + 1 operator key + 198 items = 200
    const items = Array.from({ length: 198 }, (_, i) => i);
    expect(filterOf(where({ n: { $in: items } }))).toEqual({ n: { $in: items } });
  });

  const errors: Array<{ name: string; raw: string; error: ErrorShape; limits?: Partial<QueryLimits> }> = [
    { name: 'invalid JSON', raw: '{bad', error: bad('not valid JSON', { param: 'where' }) },
    { name: 'empty string', raw: '', error: bad('not valid JSON') },
    { name: 'array', raw: '[]', error: bad('must be a JSON object') },
    { name: 'null', raw: 'null', error: bad('must be a JSON object') },
    { name: 'number', raw: '5', error: bad('must be a JSON object') },
    { name: 'string', raw: '"x"', error: bad('must be a JSON object') },
    { name: '$where', raw: '{"$where":"sleep(1000)"}', error: bad('Operator $where is not allowed') },
    { name: '$expr', raw: '{"$expr":{"$eq":["$a","$b"]}}', error: bad('Operator $expr is not allowed') },
    { name: '$function', raw: '{"n":{"$function":{}}}', error: bad('Operator $function is not allowed') },
    { name: '$accumulator', raw: '{"n":{"$accumulator":1}}', error: bad('Operator $accumulator is not allowed') },
    { name: 'unknown operator', raw: '{"n":{"$foo":1}}', error: bad('Operator $foo is not allowed') },
    { name: 'forbidden operator deep', raw: '{"$or":[{"$and":[{"n":{"$where":1}}]}]}', error: bad('Operator $where is not allowed') },
    { name: 'forbidden inside $elemMatch', raw: '{"items":{"$elemMatch":{"$expr":1}}}', error: bad('Operator $expr is not allowed') },
    { name: 'forbidden inside literal array', raw: '{"n":{"$in":[{"$where":1}]}}', error: bad('Operator $where is not allowed') },
    { name: 'operator at query level', raw: '{"$gt":1}', error: bad('Operator $gt cannot be used at this position') },
    { name: 'logical in operator object', raw: '{"n":{"$or":[{"n":1}]}}', error: bad('Operator $or cannot be used at this position') },
    { name: 'unknown field', raw: '{"secret":1}', error: bad("Unknown filter field 'secret'") },
    { name: 'relation traversal', raw: '{"project_id.secret":1}', error: bad("Unknown filter field 'project_id.secret'") },
    { name: 'unknown field in $or', raw: '{"$or":[{"secret":1}]}', error: bad("Unknown filter field 'secret'") },
    { name: 'unknown $elemMatch field', raw: '{"items":{"$elemMatch":{"secret":1}}}', error: bad("Unknown filter field 'items.secret'") },
    { name: 'embedded document', raw: '{"meta":{"a":1}}', error: bad('Embedded document') },
    { name: 'mixed operator object', raw: '{"n":{"$gt":1,"a":2}}', error: bad('Embedded document') },
    { name: 'embedded document in $in', raw: '{"n":{"$in":[{"a":1}]}}', error: bad('Embedded document') },
    { name: 'nested arrays', raw: '{"n":[[1]]}', error: bad('Unsupported value') },
    { name: 'empty operator object', raw: '{"n":{}}', error: bad('Empty operator object') },
    { name: '$or empty', raw: '{"$or":[]}', error: bad('non-empty array') },
    { name: '$or object', raw: '{"$or":{"n":1}}', error: bad('non-empty array') },
    { name: '$and of scalars', raw: '{"$and":[1]}', error: bad('non-empty array') },
    { name: '$nor of arrays', raw: '{"$nor":[[]]}', error: bad('non-empty array') },
    { name: '$in not array', raw: '{"n":{"$in":1}}', error: bad('$in takes an array') },
    {
      name: '$in above maxInItems',
      raw: JSON.stringify({ n: { $in: [1, 2, 3] } }),
      limits: { maxInItems: 2 },
      error: bad('$in accepts at most 2'),
    },
    { name: '$all above maxInItems', raw: JSON.stringify({ tags: { $all: ['a', 'b', 'c'] } }), limits: { maxInItems: 2 }, error: bad('at most 2') },
    { name: '$exists string', raw: '{"n":{"$exists":"yes"}}', error: bad('$exists') },
    { name: '$size negative', raw: '{"tags":{"$size":-1}}', error: bad('$size') },
    { name: '$size float', raw: '{"tags":{"$size":1.5}}', error: bad('$size') },
    { name: '$regex not string', raw: '{"name":{"$regex":1}}', error: bad('$regex takes a string') },
    { name: 'invalid $regex', raw: '{"name":{"$regex":"("}}', error: bad('Invalid regular expression') },
    { name: '$regex too long', raw: JSON.stringify({ name: { $regex: 'a'.repeat(257) } }), error: bad('longer than 256') },
    { name: '$options flag g', raw: '{"name":{"$regex":"a","$options":"g"}}', error: bad('$options') },
    { name: '$options without $regex', raw: '{"name":{"$options":"i"}}', error: bad('$options requires $regex') },
    { name: '$not scalar', raw: '{"name":{"$not":"x"}}', error: bad('$not takes an operator object') },
    { name: '$elemMatch empty', raw: '{"items":{"$elemMatch":{}}}', error: bad('$elemMatch') },
    { name: '__proto__ key', raw: '{"__proto__":{"n":1}}', error: bad("Key '__proto__' is not allowed") },
    { name: 'nested __proto__ key', raw: '{"n":{"$in":[{"__proto__":1}]}}', error: bad("Key '__proto__' is not allowed") },
    { name: 'constructor key', raw: '{"constructor":1}', error: bad("Key 'constructor' is not allowed") },
    { name: 'prototype key', raw: '{"$or":[{"prototype":1}]}', error: bad("Key 'prototype' is not allowed") },
    { name: '__proto__ path segment', raw: '{"meta.__proto__.x":1}', error: bad('Unknown filter field') },
    { name: 'too deep', raw: '{"$and":[{"$or":[{"$and":[{"n":1}]}]}]}', error: bad('deeper than 6') },
    { name: 'too many nodes', raw: JSON.stringify({ n: { $nin: Array.from({ length: 199 }, (_, i) => i) } }), error: bad('more than 200') },
    { name: 'too long', raw: JSON.stringify({ name: 'x'.repeat(8200) }), error: bad('at most 8192') },
  ];
  it.each(errors)('400: $name', ({ raw, error, limits }) => {
    expectAppError(() => parseListQuery({ where: raw }, resource, limits), error);
  });

  it('validateWhere rejects non-JSON values and long values directly', () => {
    const lim = DEFAULT_QUERY_LIMITS;
    expectAppError(() => validateWhere({ n: new Date() }, resource, lim), bad('where may only contain JSON values'));
    expectAppError(() => validateWhere({ n: Number.NaN }, resource, lim), bad('JSON values'));
    expectAppError(() => validateWhere({ n: { $gt: 1n } }, resource, lim), bad('JSON values'));
    expectAppError(() => validateWhere({ name: 'x'.repeat(9000) }, resource, lim), bad('at most 8192'));
    const cyclic: Record<string, unknown> = { $or: [] };
    (cyclic.$or as unknown[]).push(cyclic);
    expectAppError(() => validateWhere(cyclic, resource, lim), bad('deeper than 6'));
  });

  it('returns a copy, not the input', () => {
    const input = { $or: [{ n: 1 }] };
    const out = validateWhere(input, resource, DEFAULT_QUERY_LIMITS);
    expect(out).toEqual(input);
    expect(out).not.toBe(input);
    expect(out.$or).not.toBe(input.$or);
  });
});

describe('merging where with query parameters', () => {
  const rows: Array<{ name: string; query: Q; filter: Record<string, unknown> }> = [
    { name: 'parameter wins for the same field', query: { ...where({ n: 1, name: 'a' }), n: '2' }, filter: { n: 2, name: 'a' } },
    { name: 'suffix parameter wins', query: { ...where({ n: { $lt: 0 } }), n__gt: '5' }, filter: { n: { $gt: 5 } } },
    { name: 'where $or kept', query: { ...where({ $or: [{ n: 1 }, { n: 2 }] }), name: 'x' }, filter: { $or: [{ n: 1 }, { n: 2 }], name: 'x' } },
    { name: 'where dotted path is another field', query: { ...where({ 'meta.a': 1 }), meta: 'x' }, filter: { 'meta.a': 1, meta: 'x' } },
    { name: 'tag filter overrides where tags', query: { ...where({ tags: 'a', n: 1 }), tags__in: 'b' }, filter: { n: 1, tags: { $in: ['b'] } } },
    {
      name: 'q appended to where $and',
      query: { ...where({ $and: [{ n: 1 }] }), q: 'foo' },
      filter: {
        $and: [
          { n: 1 },
          { $or: [{ name: { $regex: '(^|\\s)foo', $options: 'i' } }, { title: { $regex: '(^|\\s)foo', $options: 'i' } }] },
        ],
      },
    },
  ];
  it.each(rows)('$name', ({ query, filter }) => {
    expect(filterOf(query)).toEqual(filter);
  });
});

describe('q search', () => {
  const word = (w: string) => ({
    $or: [{ name: { $regex: `(^|\\s)${w}`, $options: 'i' } }, { title: { $regex: `(^|\\s)${w}`, $options: 'i' } }],
  });
  const rows: Array<{ q: string; filter: Record<string, unknown> }> = [
    { q: 'foo', filter: { $and: [word('foo')] } },
    { q: '  foo   bar ', filter: { $and: [word('foo'), word('bar')] } },
    { q: 'a.b(c)*', filter: { $and: [word('a\\.b\\(c\\)\\*')] } },
    { q: 'x\ty', filter: { $and: [word('x'), word('y')] } },
    { q: '', filter: {} },
    { q: '   ', filter: {} },
    { q: 'q'.repeat(256), filter: { $and: [word('q'.repeat(256))] } },
  ];
  it.each(rows)('q=$q', ({ q, filter }) => {
    expect(filterOf({ q })).toEqual(filter);
  });

  it('the generated regex is a case-insensitive word-prefix match', () => {
    const clause = (filterOf({ q: 'Wid' }).$and as Array<{ $or: Array<Record<string, { $regex: string }>> }>)[0]!;
    const re = new RegExp(clause.$or[0]!.name!.$regex, 'i');
    expect(re.test('Blue widget')).toBe(true);
    expect(re.test('widget')).toBe(true);
    expect(re.test('awidget')).toBe(false);
  });

  it('400 without searchable fields', () => {
    expectAppError(() => parseListQuery({ q: 'x' }, plain), bad('Search is not enabled for this resource', { param: 'q' }));
    expectAppError(() => parseListQuery({ q: '' }, plain), bad('Search is not enabled for this resource'));
  });

  it('400 above maxQLength', () => {
    expectAppError(() => parseListQuery({ q: 'q'.repeat(257) }, resource), bad('q must be at most 256'));
  });
});

describe('tags', () => {
  const rows: Array<{ name: string; query: Q; filter: Record<string, unknown> }> = [
    { name: 'in', query: { tags__in: 'a, b,,c,' }, filter: { tags: { $in: ['a', 'b', 'c'] } } },
    { name: 'all', query: { tags__all: 'a,b' }, filter: { tags: { $all: ['a', 'b'] } } },
    { name: 'nin', query: { tags__nin: 'a' }, filter: { tags: { $nin: ['a'] } } },
    { name: 'no coercion', query: { tags__in: `1,true,null,${OID}` }, filter: { tags: { $in: ['1', 'true', 'null', OID] } } },
    {
      name: 'several combine with $and',
      query: { tags__in: 'a', tags__nin: 'b' },
      filter: { $and: [{ tags: { $in: ['a'] } }, { tags: { $nin: ['b'] } }] },
    },
    {
      name: 'tag equality plus tag filter',
      query: { tags: 'x', tags__all: 'y' },
      filter: { tags: 'x', $and: [{ tags: { $all: ['y'] } }] },
    },
    {
      name: 'with q',
      query: { tags__in: 'a', q: 'z' },
      filter: {
        tags: { $in: ['a'] },
        $and: [{ $or: [{ name: { $regex: '(^|\\s)z', $options: 'i' } }, { title: { $regex: '(^|\\s)z', $options: 'i' } }] }],
      },
    },
  ];
  it.each(rows)('$name', ({ query, filter }) => {
    expect(filterOf(query)).toEqual(filter);
  });

  it.each(['tags__in', 'tags__all', 'tags__nin'])('400 for %s on a resource without tags', (param) => {
    expectAppError(() => parseListQuery({ [param]: 'a' }, plain), bad('Tag filters are not supported', { param }));
  });
});

describe('sort', () => {
  const rows: Array<{ sort: string | undefined; spec: Array<[string, 1 | -1]> }> = [
    { sort: undefined, spec: [['created_at', -1], ['_id', -1]] },
    { sort: 'name', spec: [['name', 1], ['_id', 1]] },
    { sort: '-name', spec: [['name', -1], ['_id', -1]] },
    { sort: '+name', spec: [['name', 1], ['_id', 1]] },
    // `+` arrives as a space after form-decoding of the query string.
    { sort: ' name', spec: [['name', 1], ['_id', 1]] },
    { sort: '-n,name', spec: [['n', -1], ['name', 1], ['_id', 1]] },
    { sort: 'name,-n', spec: [['name', 1], ['n', -1], ['_id', -1]] },
    { sort: ' -n , name ,', spec: [['n', -1], ['name', 1], ['_id', 1]] },
    { sort: '_id', spec: [['_id', 1]] },
    { sort: '-_id', spec: [['_id', -1]] },
    { sort: 'name,-_id', spec: [['name', 1], ['_id', -1]] },
    { sort: 'meta.a', spec: [['meta.a', 1], ['_id', 1]] },
  ];
  it.each(rows)('sort=$sort', ({ sort, spec }) => {
    expect(parseListQuery(sort === undefined ? {} : { sort }, resource).sort).toEqual(spec);
    if (sort !== undefined) expect(parseSort(sort, resource)).toEqual(spec);
  });

  it('a resource without a default sort falls back to _id', () => {
    expect(parseListQuery({}, { ...resource, defaultSort: '' }).sort).toEqual([['_id', 1]]);
  });

  const errors: Array<{ sort: string; message: string }> = [
    { sort: 'secret', message: "Unknown sort field 'secret'" },
    { sort: 'project_id.secret', message: 'Unknown sort field' },
    { sort: 'name,name', message: "Sort field 'name' given more than once" },
    { sort: 'name,-name', message: 'more than once' },
    { sort: '', message: 'at least one field' },
    { sort: ',', message: 'at least one field' },
    { sort: '-', message: 'Unknown sort field' },
    { sort: '--name', message: 'Unknown sort field' },
    { sort: '$natural', message: 'Unknown sort field' },
  ];
  it.each(errors)('400: sort=$sort', ({ sort, message }) => {
    expectAppError(() => parseListQuery({ sort }, resource), bad(message, { param: 'sort' }));
    expectAppError(() => parseSort(sort, resource), bad(message));
  });
});

describe('fields and populate', () => {
  const fieldRows: Array<{ fields: string; expected: string[] }> = [
    { fields: 'name,n', expected: ['_id', 'name', 'n'] },
    { fields: ' name , ,n,name', expected: ['_id', 'name', 'n'] },
    { fields: '_id', expected: ['_id'] },
    { fields: 'name,_id', expected: ['_id', 'name'] },
    { fields: 'meta.a,meta', expected: ['_id', 'meta'] },
  ];
  it.each(fieldRows)('fields=$fields', ({ fields, expected }) => {
    expect(parseListQuery({ fields }, resource).fields).toEqual(expected);
  });

  it('fields absent → null', () => {
    expect(parseListQuery({}, resource).fields).toBeNull();
  });

  it.each([
    { fields: 'secret', message: "Unknown field 'secret'" },
    { fields: 'project_id.secret', message: 'Unknown field' },
    { fields: '', message: 'at least one field' },
  ])('400: fields=$fields', ({ fields, message }) => {
    expectAppError(() => parseListQuery({ fields }, resource), bad(message, { param: 'fields' }));
  });

  it.each([
    { populate: 'project_id', expected: ['project_id'] },
    { populate: 'project_id, owner_id,project_id', expected: ['project_id', 'owner_id'] },
    { populate: '', expected: [] },
  ])('populate=$populate', ({ populate, expected }) => {
    expect(parseListQuery({ populate }, resource).populate).toEqual(expected);
  });

  it('400 for a non-populatable field and above maxPopulate', () => {
    expectAppError(() => parseListQuery({ populate: 'secret' }, resource), bad("Field 'secret' cannot be populated", { param: 'populate' }));
    expectAppError(() => parseListQuery({ populate: 'name' }, resource), bad('cannot be populated'));
    expectAppError(() => parseListQuery({ populate: 'project_id,owner_id,a_id' }, resource, { maxPopulate: 2 }), bad('at most 2'));
  });
});

describe('escapeRegex', () => {
  it.each(['a.b', '(x)', '[a-z]+', '^$', 'a|b', '\\d{2}', '?*+', 'plain'])('%s matches itself literally', (s) => {
    const re = new RegExp(`^${escapeRegex(s)}$`);
    expect(re.test(s)).toBe(true);
  });
  it('escapes every metacharacter', () => {
    expect(escapeRegex('.*+?^${}()|[]\\')).toBe('\\.\\*\\+\\?\\^\\$\\{\\}\\(\\)\\|\\[\\]\\\\');
  });
});

describe('regular expressions the database would reject', () => {
  // Each pattern compiles in JavaScript but PCRE2 (the database) rejects it or reads it differently.
  const rejected: Array<{ pattern: string; options?: string; message: string }> = [
    { pattern: '\\C', message: 'unsupported escape \\C' },
    { pattern: '\\q', message: 'unsupported escape \\q' },
    { pattern: '\\u0041', message: 'unsupported escape \\u' },
    { pattern: '\\L', message: 'unsupported escape' },
    { pattern: '\\g1', message: 'unsupported escape' },
    { pattern: '\\o', message: 'unsupported escape' },
    { pattern: '\\K', message: 'unsupported escape' },
    { pattern: '\\p', message: 'unsupported escape \\p' },
    { pattern: '\\p{Foo}', message: 'unsupported escape \\p' },
    { pattern: '\\xZ', message: 'unsupported escape \\x' },
    { pattern: '\\c1', message: 'unsupported escape \\c' },
    { pattern: '\\k<a>', message: 'unsupported escape \\k' },
    { pattern: '\\N{U+41}', message: 'unsupported escape \\N' },
    { pattern: '[\\B]', message: 'unsupported escape \\B' },
    { pattern: '\\z?', message: 'quantifier after an assertion' },
    { pattern: '\\1', message: 'non-existent group' },
    { pattern: '(a)\\2', message: 'non-existent group' },
    { pattern: '[]', message: 'empty character class' },
    { pattern: '[^]', message: 'empty character class' },
    { pattern: '[a-\\d]', message: 'invalid range' },
    { pattern: '[\\w-z]', message: 'invalid range' },
    { pattern: '[:alpha:]', message: 'POSIX' },
    { pattern: '[[:alpha:]]', message: 'POSIX' },
    { pattern: 'a{70000}', message: 'quantifier too large' },
    { pattern: 'a{,3}', message: '{0,n}' },
    { pattern: '(?<=a+)b', message: 'lookbehind of unbounded length' },
    { pattern: '(?<!a{2,})b', message: 'lookbehind of unbounded length' },
    { pattern: 'a#comment', options: 'x', message: 'x option' },
    { pattern: '( ?:a)', options: 'x', message: 'x option' },
    { pattern: 'a [', options: 'x', message: 'Invalid regular expression' },
  ];
  it.each(rejected)('400: /$pattern/$options', ({ pattern, options, message }) => {
    const where = JSON.stringify({ name: options === undefined ? { $regex: pattern } : { $regex: pattern, $options: options } });
    expectAppError(() => parseListQuery({ where }, resource), bad(message, { param: 'where' }));
    if (options === undefined) expectAppError(() => parseListQuery({ name__regex: pattern }, resource), bad(message, { param: 'name__regex' }));
  });

  const accepted: Array<{ pattern: string; options?: string }> = [
    { pattern: '^ab+c$' },
    { pattern: '\\d{2,4}\\s\\w*\\b' },
    { pattern: '(a)\\1' },
    { pattern: '(?<x>a)\\k<x>' },
    { pattern: '(?<=ab)c' },
    { pattern: '(?<!a?)c' },
    { pattern: '\\p{L}\\P{Lu}' },
    { pattern: '\\x41\\cA\\t\\n' },
    { pattern: '\\A\\z' },
    { pattern: '[a-z\\d_-]' },
    { pattern: '[\\b]' },
    { pattern: 'a{0,3}' },
    { pattern: 'é😀' },
    { pattern: 'a b', options: 'x' },
    { pattern: 'a\\ b', options: 'imsx' },
  ];
  it.each(accepted)('accepted: /$pattern/$options', ({ pattern, options }) => {
    const op = options === undefined ? { $regex: pattern } : { $regex: pattern, $options: options };
    expect(filterOf(where({ name: op }))).toEqual({ name: op });
  });
});

describe('cursor (lib/cursor.ts)', () => {
  const SECRET = 'unit-test-secret-0123456789abcdef0123';
  const sort: SortSpec = [
    ['n', -1],
    ['s', 1],
    ['_id', 1],
  ];
  const id = oid(OID);

  it('sortKey is the canonical sort expression', () => {
    expect(sortKey(sort)).toBe('-n,s,_id');
    expect(sortKey([['_id', -1]])).toBe('-_id');
  });

  it('querySort keeps the order for next and reverses every direction for prev', () => {
    expect(querySort(sort, 'next')).toEqual({ n: -1, s: 1, _id: 1 });
    expect(querySort(sort, 'prev')).toEqual({ n: 1, s: -1, _id: -1 });
    expect(Object.keys(querySort(sort, 'prev'))).toEqual(['n', 's', '_id']);
  });

  const filterRows: Array<{ name: string; sort: SortSpec; values: unknown[]; direction: 'next' | 'prev'; filter: Record<string, unknown> }> = [
    {
      name: 'single ascending field, next',
      sort: [['n', 1], ['_id', 1]],
      values: [5, id],
      direction: 'next',
      filter: { $or: [{ n: { $gt: 5 } }, { n: 5, _id: { $gt: id } }] },
    },
    {
      name: 'single ascending field, prev (null sorts before 5)',
      sort: [['n', 1], ['_id', 1]],
      values: [5, id],
      direction: 'prev',
      filter: { $or: [{ n: { $lt: 5 } }, { n: null }, { n: 5, _id: { $lt: id } }] },
    },
    {
      name: 'descending field, next (null comes last)',
      sort: [['n', -1], ['_id', -1]],
      values: [5, id],
      direction: 'next',
      filter: { $or: [{ n: { $lt: 5 } }, { n: null }, { n: 5, _id: { $lt: id } }] },
    },
    {
      name: 'after null ascending',
      sort: [['n', 1], ['_id', 1]],
      values: [null, id],
      direction: 'next',
      filter: { $or: [{ n: { $ne: null } }, { n: null, _id: { $gt: id } }] },
    },
    {
      name: 'before null ascending (nothing sorts below null)',
      sort: [['n', 1], ['_id', 1]],
      values: [null, id],
      direction: 'prev',
      filter: { $or: [{ n: null, _id: { $lt: id } }] },
    },
    {
      name: 'three fields mixed directions',
      sort,
      values: [3, 'b', id],
      direction: 'next',
      filter: { $or: [{ n: { $lt: 3 } }, { n: null }, { n: 3, s: { $gt: 'b' } }, { n: 3, s: 'b', _id: { $gt: id } }] },
    },
    {
      name: 'no branch possible',
      sort: [['n', 1]],
      values: [null],
      direction: 'prev',
      filter: { _id: { $in: [] } },
    },
  ];
  it.each(filterRows)('cursorFilter: $name', ({ sort: s, values, direction, filter }) => {
    expect(cursorFilter(s, values, direction)).toEqual(filter);
  });

  it('encodes dates, object ids, nested paths and missing values', () => {
    const when = new Date('2024-05-06T07:08:09.010Z');
    const spec: SortSpec = [
      ['created_at', -1],
      ['meta.rank', 1],
      ['missing', 1],
      ['_id', 1],
    ];
    const token = encodeCursor(spec, { _id: id, created_at: when, meta: { rank: 2 } }, SECRET);
    const payload = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString('utf8'));
    expect(payload).toEqual({ s: '-created_at,meta.rank,missing,_id', v: [{ $date: when.toISOString() }, 2, null, { $oid: OID }] });
    const decoded = decodeCursor(token, spec, SECRET);
    expect(decoded).toEqual([when, 2, null, id]);
    expect(decoded[0]).toBeInstanceOf(Date);
    expect(decoded[3]).toBeInstanceOf(Types.ObjectId);
  });

  it('round-trips Decimal128 and non-finite numbers', () => {
    const spec: SortSpec = [
      ['a', 1],
      ['b', 1],
      ['_id', 1],
    ];
    const decoded = decodeCursor(encodeCursor(spec, { _id: id, a: Types.Decimal128.fromString('12.50'), b: -Infinity }, SECRET), spec, SECRET);
    expect(String(decoded[0])).toBe('12.50');
    expect(decoded[1]).toBe(-Infinity);
  });

  it('refuses sort values it cannot encode', () => {
    expect(() => encodeCursor([['f', 1]], { f: () => 1 }, SECRET)).toThrow(TypeError);
    expect(() => encodeCursor([['f', 1]], { f: new Date('x') }, SECRET)).toThrow(TypeError);
  });

  const token = () => encodeCursor(sort, { _id: id, n: 1, s: 'x' }, SECRET);
  const sign = (body: string) => `${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`;
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const decodeErrors: Array<{ name: string; token: () => string; sort?: SortSpec; message: string }> = [
    { name: 'empty', token: () => '', message: 'Invalid cursor' },
    { name: 'no dot', token: () => token().replace('.', ''), message: 'Invalid cursor' },
    { name: 'two dots', token: () => `${token()}.x`, message: 'Invalid cursor' },
    { name: 'not base64url', token: () => `ab+c.${token().split('.')[1]}`, message: 'Invalid cursor' },
    { name: 'padding', token: () => `${token()}=`, message: 'Invalid cursor' },
    { name: 'too long', token: () => `${'a'.repeat(9000)}.b`, message: 'Invalid cursor' },
    { name: 'wrong signature', token: () => `${token().split('.')[0]}.${'A'.repeat(43)}`, message: 'Invalid cursor: signature mismatch' },
    { name: 'other secret', token: () => encodeCursor(sort, { _id: id }, 'another-secret'), message: 'Invalid cursor: signature mismatch' },
    { name: 'other sort', token: token, sort: [['n', 1], ['s', 1], ['_id', 1]], message: 'Cursor was issued for a different sort' },
    { name: 'signed garbage', token: () => sign('bm90IGpzb24'), message: 'Invalid cursor' },
    { name: 'signed non-object', token: () => sign(b64([1, 2])), message: 'Invalid cursor' },
    { name: 'signed wrong arity', token: () => sign(b64({ s: '-n,s,_id', v: [1] })), message: 'Invalid cursor' },
    { name: 'signed unknown tag', token: () => sign(b64({ s: '-n,s,_id', v: [{ $foo: 1 }, 'x', { $oid: OID }] })), message: 'Invalid cursor' },
    { name: 'signed bad oid', token: () => sign(b64({ s: '-n,s,_id', v: [1, 'x', { $oid: 'zz' }] })), message: 'Invalid cursor' },
    { name: 'signed bad date', token: () => sign(b64({ s: '-n,s,_id', v: [{ $date: 'nope' }, 'x', { $oid: OID }] })), message: 'Invalid cursor' },
  ];
  it.each(decodeErrors)('decodeCursor 400: $name', ({ token: make, sort: s, message }) => {
    const t = make();
    expectAppError(() => decodeCursor(t, s ?? sort, SECRET), { status: 400, code: 'BAD_REQUEST', message, details: { param: 'cursor' } });
    expect(() => decodeCursor(t, s ?? sort, SECRET)).toThrow(expect.objectContaining({ message }));
  });
});
