import fc from 'fast-check';
import { Types } from 'mongoose';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../core/errors.ts';
import { decodeCursor, encodeCursor } from '../../lib/cursor.ts';
import {
  DEFAULT_QUERY_LIMITS,
  parseListQuery,
  type ResourceQueryInfo,
  type SortSpec,
} from '../../plugins/resources/query.ts';
import { WHERE_OPERATORS, validateWhere } from '../../plugins/resources/where.ts';

const FILTERABLE = new Set(['_id', 'name', 'n', 'status', 'created_at', 'tenant_id', 'project_id', 'tags', 'meta.a', 'items', 'items.price']);
const withEverything: ResourceQueryInfo = {
  name: 'widgets',
  isFilterable: (p) => FILTERABLE.has(p),
  searchableFields: ['name'],
  defaultSort: '-created_at',
  defaultPageSize: 25,
  maxPageSize: 100,
  hasTags: true,
  populatable: ['project_id'],
};
const bare: ResourceQueryInfo = { ...withEverything, searchableFields: [], hasTags: false, populatable: [] };

const OID = '507f1f77bcf86cd799439011';
const FORBIDDEN_OPS = ['$where', '$expr', '$function', '$accumulator'];
const OTHER_OPS = ['$foo', '$lookup', '$text', '$jsonSchema', '$comment', '$natural', '$'];
const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'];
const RESERVED = ['page', 'per_page', 'cursor', 'limit', 'direction', 'sort', 'fields', 'where', 'q', 'include_deleted', 'populate', 'tags__in', 'tags__all', 'tags__nin'];
const FIELD_NAMES = [...FILTERABLE, 'secret', 'project_id.secret', 'price', 'meta', '', 'a..b', '$where', ...PROTO_KEYS];
const SUFFIXES = ['gt', 'gte', 'lt', 'lte', 'ne', 'in', 'nin', 'exists', 'regex', 'foo', '', 'GT'];
const allowed = new Set(WHERE_OPERATORS);

/** Every key of a returned filter, at any depth, that is not an allowed operator or a safe key. */
function badKeys(v: unknown, out: string[] = []): string[] {
  if (Array.isArray(v)) {
    for (const x of v) badKeys(x, out);
  } else if (typeof v === 'object' && v !== null && !(v instanceof Types.ObjectId)) {
    for (const [k, x] of Object.entries(v)) {
      if ((k.startsWith('$') && !allowed.has(k)) || PROTO_KEYS.includes(k)) out.push(k);
      badKeys(x, out);
    }
  }
  return out;
}

function expectAppError400or422(e: unknown): void {
  expect(e).toBeInstanceOf(AppError);
  expect([400, 422]).toContain((e as AppError).status);
}

// --- where values -------------------------------------------------------------------------------

const scalarArb = fc.oneof(
  fc.constantFrom<unknown>(OID, '^a', '(', 'imsx', 'g', 'x'.repeat(300), '', 0, -1, 2.5, 1e300, true, false, null),
  fc.string({ maxLength: 8 }),
  fc.integer(),
);
const anyKeyArb = fc.oneof(
  fc.constantFrom(...WHERE_OPERATORS),
  fc.constantFrom(...FORBIDDEN_OPS, ...OTHER_OPS),
  fc.constantFrom(...FIELD_NAMES),
  fc.string({ maxLength: 6 }),
);

/** Arbitrary JSON trees whose keys mix allowed, forbidden and unknown operators with field names. */
const randomTree = fc.letrec<{ node: unknown; arr: unknown[]; obj: Record<string, unknown> }>((tie) => ({
  node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalarArb, tie('arr'), tie('obj')),
  arr: fc.array(tie('node'), { maxLength: 4 }),
  obj: fc.array(fc.tuple(anyKeyArb, tie('node')), { maxLength: 4 }).map((entries) => Object.fromEntries(entries)),
})).obj;

/** Mostly well-formed filters (so the success path is exercised), with a forbidden key now and then. */
const shapedTree = fc.letrec<{ filter: Record<string, unknown>; value: unknown; ops: Record<string, unknown> }>((tie) => {
  const field = fc.constantFrom('name', 'n', '_id', 'project_id', 'tags', 'meta.a', 'items', 'secret');
  const strayKey = fc.constantFrom(...FORBIDDEN_OPS, ...OTHER_OPS, ...PROTO_KEYS);
  return {
    filter: fc
      .array(
        fc.oneof(
          { depthSize: 'small', withCrossShrink: true },
          { arbitrary: fc.tuple(field, tie('value')), weight: 8 },
          { arbitrary: fc.tuple(fc.constantFrom('$and', '$or', '$nor'), fc.array(tie('filter'), { minLength: 1, maxLength: 3 })), weight: 3 },
          { arbitrary: fc.tuple(strayKey, scalarArb), weight: 1 },
        ),
        { maxLength: 3 },
      )
      .map((entries) => Object.fromEntries(entries)),
    value: fc.oneof({ depthSize: 'small' }, scalarArb, fc.array(scalarArb, { maxLength: 3 }), tie('ops')),
    ops: fc
      .array(
        fc.oneof(
          { depthSize: 'small' },
          { arbitrary: fc.tuple(fc.constantFrom('$eq', '$ne', '$gt', '$gte', '$lt', '$lte'), scalarArb), weight: 6 },
          fc.tuple(fc.constantFrom('$in', '$nin', '$all'), fc.array(scalarArb, { maxLength: 4 })),
          fc.tuple(fc.constant('$exists'), fc.boolean()),
          fc.tuple(fc.constant('$size'), fc.integer({ min: -1, max: 5 })),
          fc.tuple(fc.constant('$regex'), fc.constantFrom('^a', 'b$', '(', 'x|y')),
          fc.tuple(fc.constant('$not'), tie('ops')),
          fc.tuple(fc.constant('$elemMatch'), fc.oneof(tie('ops'), tie('filter'))),
          { arbitrary: fc.tuple(strayKey, scalarArb), weight: 1 },
        ),
        { minLength: 1, maxLength: 3 },
      )
      .map((entries) => Object.fromEntries(entries)),
  };
}).filter;

describe('validateWhere properties', () => {
  const check = (stats: { ok: number; rejected: number }) => (tree: unknown) => {
    let out: Record<string, unknown>;
    try {
      out = validateWhere(tree, withEverything, DEFAULT_QUERY_LIMITS);
    } catch (e) {
      expect(e).toBeInstanceOf(AppError);
      expect((e as AppError).status).toBe(400);
      stats.rejected++;
      return;
    }
    stats.ok++;
    expect(badKeys(out)).toEqual([]);
    for (const op of FORBIDDEN_OPS) expect(JSON.stringify(out)).not.toContain(`"${op}"`);
  };

  it('random trees: 400 or a filter with only allowed operators', () => {
    const stats = { ok: 0, rejected: 0 };
    fc.assert(fc.property(randomTree, check(stats)), { numRuns: 2000 });
    expect(stats.rejected).toBeGreaterThan(0);
  });

  it('shaped trees: 400 or a filter with only allowed operators', () => {
    const stats = { ok: 0, rejected: 0 };
    fc.assert(fc.property(shapedTree, check(stats)), { numRuns: 2000 });
    // Guard against a generator that only ever produces rejected input.
    expect(stats.ok).toBeGreaterThan(100);
    expect(stats.rejected).toBeGreaterThan(100);
  });

  it('any JS value (not only JSON): 400 or a safe filter, never another error', () => {
    fc.assert(fc.property(fc.anything({ withBigInt: true, withDate: true, withMap: true, withNullPrototype: true }), check({ ok: 0, rejected: 0 })), {
      numRuns: 1000,
    });
  });
});

// --- whole query objects ------------------------------------------------------------------------

const queryKeyArb = fc.oneof(
  fc.constantFrom(...RESERVED),
  fc.constantFrom(...FIELD_NAMES),
  fc.tuple(fc.constantFrom(...FIELD_NAMES), fc.constantFrom(...SUFFIXES)).map(([f, op]) => `${f}__${op}`),
  fc.string({ maxLength: 10 }),
);
const queryValueArb = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('true', 'false', 'null', 'none', '1', '0', '-1', '1.5', '1e999', '101', OID, '', ' ', 'next', 'prev', '-n,name', 'name,name', '(', 'a,b,,c'),
  fc.integer().map(String),
  fc.oneof(randomTree, shapedTree).map((t) => JSON.stringify(t)),
  fc.array(fc.string({ maxLength: 4 }), { minLength: 1, maxLength: 3 }),
  fc.constant(undefined),
);
const queryArb = fc
  .array(fc.tuple(queryKeyArb, queryValueArb), { maxLength: 8 })
  .map((entries) => Object.fromEntries(entries) as Record<string, string | string[] | undefined>);

describe('parseListQuery properties', () => {
  it('returns a consistent result or throws an AppError with status 400/422, nothing else', () => {
    const stats = { ok: 0, rejected: 0 };
    fc.assert(
      fc.property(queryArb, fc.boolean(), (query, rich) => {
        const resource = rich ? withEverything : bare;
        let parsed;
        try {
          parsed = parseListQuery(query, resource);
        } catch (e) {
          expectAppError400or422(e);
          stats.rejected++;
          return;
        }
        stats.ok++;
        expect(badKeys(parsed.filter)).toEqual([]);
        expect(parsed.sort.some(([f]) => f === '_id')).toBe(true);
        if (parsed.fields) expect(parsed.fields).toContain('_id');
        expect(parsed.perPage).toBeLessThanOrEqual(resource.maxPageSize);
        expect(parsed.limit).toBeLessThanOrEqual(DEFAULT_QUERY_LIMITS.maxLimit);
        for (const p of parsed.populate) expect(resource.populatable).toContain(p);
      }),
      { numRuns: 3000 },
    );
    expect(stats.ok).toBeGreaterThan(100);
  });
});

// --- cursors ------------------------------------------------------------------------------------

const SECRET = 'test-secret-of-at-least-32-bytes-long!!';
const oidArb = fc.uint8Array({ minLength: 12, maxLength: 12 }).map((b) => new Types.ObjectId(Buffer.from(b)));
const sortValueArb = fc.oneof(
  fc.string(),
  fc.double(),
  fc.integer(),
  fc.date({ noInvalidDate: true }),
  fc.constant(null),
  fc.constant(undefined),
  fc.boolean(),
  oidArb,
);

/** Comparable form: keeps the type of every value and distinguishes -0 and NaN. */
function norm(v: unknown): unknown {
  if (v instanceof Types.ObjectId) return { oid: v.toHexString() };
  if (v instanceof Date) return { date: v.toISOString() };
  if (typeof v === 'number') return { num: Object.is(v, -0) ? '-0' : String(v) };
  return v ?? null;
}

const cursorCaseArb = fc
  .record({
    values: fc.array(sortValueArb, { minLength: 0, maxLength: 3 }),
    dirs: fc.array(fc.constantFrom<1 | -1>(1, -1), { minLength: 4, maxLength: 4 }),
    id: oidArb,
    nested: fc.boolean(),
  })
  .map(({ values, dirs, id, nested }) => {
    const doc: Record<string, unknown> = { _id: id, meta: {} };
    const sort: SortSpec = [];
    values.forEach((v, i) => {
      const field = nested && i === 0 ? 'meta.x' : `f${i}`;
      if (field === 'meta.x') (doc.meta as Record<string, unknown>).x = v;
      else doc[field] = v;
      sort.push([field, dirs[i]!]);
    });
    sort.push(['_id', dirs[3]!]);
    return { doc, sort, expected: [...values, id] };
  });

describe('cursor properties', () => {
  it('encode/decode round-trips every sort value type', () => {
    fc.assert(
      fc.property(cursorCaseArb, ({ doc, sort, expected }) => {
        const token = encodeCursor(sort, doc, SECRET);
        expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
        const decoded = decodeCursor(token, sort, SECRET);
        expect(decoded.map(norm)).toEqual(expected.map(norm));
      }),
      { numRuns: 1000 },
    );
  });

  it('any single-character change of the token is a 400', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ %';
    fc.assert(
      fc.property(cursorCaseArb, fc.nat(), fc.nat(), ({ doc, sort }, pos, pick) => {
        const token = encodeCursor(sort, doc, SECRET);
        const i = pos % token.length;
        const candidates = alphabet.replace(token[i]!, '');
        const tampered = token.slice(0, i) + candidates[pick % candidates.length] + token.slice(i + 1);
        expect(() => decodeCursor(tampered, sort, SECRET)).toThrow(expect.objectContaining({ status: 400, code: 'BAD_REQUEST' }));
      }),
      { numRuns: 2000 },
    );
  });

  it('a cursor signed with another secret is a signature mismatch', () => {
    fc.assert(
      fc.property(cursorCaseArb, fc.string({ minLength: 1 }), ({ doc, sort }, other) => {
        fc.pre(other !== SECRET);
        const token = encodeCursor(sort, doc, other);
        expect(() => decodeCursor(token, sort, SECRET)).toThrow(expect.objectContaining({ status: 400, message: 'Invalid cursor: signature mismatch' }));
      }),
      { numRuns: 200 },
    );
  });

  it('arbitrary strings never decode and never throw anything but a 400', () => {
    const sort: SortSpec = [['_id', 1]];
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.base64String(), fc.string().map((s) => `${Buffer.from(s).toString('base64url')}.abc`)), (token) => {
        expect(() => decodeCursor(token, sort, SECRET)).toThrow(expect.objectContaining({ status: 400 }));
      }),
      { numRuns: 1000 },
    );
  });
});
