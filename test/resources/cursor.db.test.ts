/**
 * Keyset pagination against a real database (no mocks): for random data with many duplicate and
 * null sort values, walking `next` pages and then `prev` pages must visit every document exactly
 * once, in the order of a plain `find().sort()`.
 */
import fc from 'fast-check';
import { MongoMemoryServer } from 'mongodb-memory-server';
import mongoose, { Schema, type Connection, type Model, type Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cursorFilter, decodeCursor, encodeCursor, querySort } from '../../lib/cursor.ts';
import { parseListQuery, parseSort, type ResourceQueryInfo, type SortSpec } from '../../plugins/resources/query.ts';

interface Item {
  _id: Types.ObjectId;
  n?: number | null;
  s?: string | null;
  created_at?: Date | null;
}

interface Page {
  items: Item[];
  next: string | null;
  prev: string | null;
  hasNext: boolean;
  hasPrev: boolean;
}

const SECRET = 'cursor-db-test-secret-0123456789abcdef';
const resource: ResourceQueryInfo = {
  name: 'items',
  isFilterable: (p) => ['_id', 'n', 's', 'created_at'].includes(p),
  searchableFields: [],
  defaultSort: '-created_at',
  defaultPageSize: 25,
  maxPageSize: 100,
  hasTags: false,
  populatable: [],
};

let server: MongoMemoryServer;
let conn: Connection;
let Items: Model<Item>;

beforeAll(async () => {
  server = await MongoMemoryServer.create();
  conn = await mongoose.createConnection(server.getUri(), { dbName: 'cursor_test' }).asPromise();
  Items = conn.model<Item>('Item', new Schema<Item>({ n: Number, s: String, created_at: Date }, { versionKey: false }));
  await Items.init();
}, 120_000);

afterAll(async () => {
  await conn?.close();
  await server?.stop();
});

/** The list service's cursor-mode algorithm, as documented at the top of cursor.ts. */
async function listPage(filter: Record<string, unknown>, sort: SortSpec, limit: number, cursor: string | null, direction: 'next' | 'prev'): Promise<Page> {
  const range = cursor === null ? null : cursorFilter(sort, decodeCursor(cursor, sort, SECRET), direction);
  const query = range === null ? filter : { $and: [filter, range] };
  const rows = await Items.find(query).sort(querySort(sort, direction)).limit(limit + 1).lean<Item[]>();
  const more = rows.length > limit;
  const items = rows.slice(0, limit);
  if (direction === 'prev') items.reverse();
  const hasNext = direction === 'next' ? more : cursor !== null;
  const hasPrev = direction === 'next' ? cursor !== null : more;
  const first = items[0];
  const last = items[items.length - 1];
  return {
    items,
    next: hasNext && last ? encodeCursor(sort, last as unknown as Record<string, unknown>, SECRET) : null,
    prev: hasPrev && first ? encodeCursor(sort, first as unknown as Record<string, unknown>, SECRET) : null,
    hasNext,
    hasPrev,
  };
}

/** MongoDB's order for the values used here: null and missing first, then by value. */
function compareValues(a: unknown, b: unknown): number {
  const an = a === null || a === undefined;
  const bn = b === null || b === undefined;
  if (an || bn) return an === bn ? 0 : an ? -1 : 1;
  if (a instanceof Date && b instanceof Date) return a.getTime() - b.getTime();
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function compareDocs(sort: SortSpec, a: Item, b: Item): number {
  for (const [field, dir] of sort) {
    const c = compareValues(a[field as keyof Item], b[field as keyof Item]);
    if (c !== 0) return c * dir;
  }
  return 0;
}

const DATES = [new Date('2024-01-01T00:00:00Z'), new Date('2024-01-01T00:00:00.001Z'), new Date('2025-06-30T12:00:00Z')];
const maybe = <T,>(arb: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: arb, weight: 4 }, { arbitrary: fc.constant(null), weight: 1 }, { arbitrary: fc.constant(undefined), weight: 1 });
const docArb = fc.record({
  n: maybe(fc.integer({ min: -2, max: 3 })),
  s: maybe(fc.constantFrom('a', 'b', 'B', 'c', 'ab')),
  created_at: maybe(fc.constantFrom(...DATES)),
});
const sortArb = fc.constantFrom('n', '-n', 'n,s', '-n,s', 's,-n', '-created_at', 'created_at,-s', '-s,n,-created_at', '_id', '-_id', 'n,-_id');
const filterArb = fc.constantFrom<Record<string, unknown>>({}, { s: { $ne: 'b' } }, { n: { $gte: 0 } }, { created_at: { $exists: true } });

describe('cursor pagination against the database', () => {
  it('next and prev walks return every document exactly once, in sort order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(docArb, { maxLength: 60, size: 'max' }),
        sortArb,
        fc.integer({ min: 1, max: 12 }),
        filterArb,
        async (docs, sortExpr, limit, filter) => {
          await Items.deleteMany({});
          if (docs.length > 0) {
            await Items.insertMany(docs.map((d) => Object.fromEntries(Object.entries(d).filter(([, v]) => v !== undefined))));
          }
          const sort = parseSort(sortExpr, resource);
          const full = await Items.find(filter).sort(querySort(sort, 'next')).lean<Item[]>();
          const ids = full.map((d) => String(d._id));

          // The database's own order must be MongoDB's order (null/missing lowest), or the
          // pagination check below would prove nothing.
          for (let i = 1; i < full.length; i++) expect(compareDocs(sort, full[i - 1]!, full[i]!)).toBeLessThan(0);

          // Forward walk.
          const pages: Page[] = [];
          let page = await listPage(filter, sort, limit, null, 'next');
          pages.push(page);
          while (page.hasNext) {
            expect(pages.length).toBeLessThanOrEqual(full.length);
            page = await listPage(filter, sort, limit, page.next, 'next');
            pages.push(page);
          }
          expect(pages.flatMap((p) => p.items.map((d) => String(d._id)))).toEqual(ids);
          pages.forEach((p, i) => {
            expect(p.hasPrev).toBe(i > 0);
            if (i < pages.length - 1) expect(p.items).toHaveLength(limit);
          });

          // Backward walk from the last page's prev cursor, then the last page itself.
          const lastPage = pages[pages.length - 1]!;
          const back: Page[] = [];
          let cursor = lastPage.prev;
          while (cursor !== null) {
            expect(back.length).toBeLessThanOrEqual(full.length);
            const p = await listPage(filter, sort, limit, cursor, 'prev');
            expect(p.hasNext).toBe(true);
            expect(p.items.length).toBeGreaterThan(0);
            back.unshift(p);
            cursor = p.hasPrev ? p.prev : null;
          }
          expect([...back, lastPage].flatMap((p) => p.items.map((d) => String(d._id)))).toEqual(ids);
          expect(back[0]?.hasPrev ?? false).toBe(false);

          // prev without a cursor is the last page of the order.
          const tail = await listPage(filter, sort, limit, null, 'prev');
          expect(tail.items.map((d) => String(d._id))).toEqual(ids.slice(Math.max(0, ids.length - limit)));
          expect(tail.hasPrev).toBe(ids.length > limit);
        },
      ),
      { numRuns: 20 },
    );
  }, 60_000);
});

describe('filters built by parseListQuery run on the database', () => {
  const searchable: ResourceQueryInfo = {
    ...resource,
    isFilterable: (p) => ['_id', 'n', 's', 'created_at', 'tags', 'items', 'items.price', 'project_id'].includes(p),
    searchableFields: ['s'],
    hasTags: true,
  };
  const OID = '507f1f77bcf86cd799439011';

  const queries: Array<Record<string, string>> = [
    { n: '1', s__ne: 'null', created_at__lte: '2030' },
    { n__in: '1,2,x', s__nin: 'a', n__exists: 'true', s__regex: '^b.+' },
    { _id__gt: OID, project_id: OID },
    { q: 'wid blue', tags__in: 'a,b', tags__nin: 'z', tags__all: 'a' },
    {
      where: JSON.stringify({
        $or: [{ n: { $gt: 1, $lte: 5 } }, { s: { $not: { $regex: '^a', $options: 'imsx' } } }],
        $nor: [{ tags: { $size: 3 } }],
        $and: [{ items: { $elemMatch: { price: { $gte: 1 } } } }, { tags: { $elemMatch: { $in: ['a'] } } }],
        project_id: { $in: [OID] },
        created_at: { $exists: false },
      }),
    },
  ];

  const parseQuery = (query: Record<string, string>) => parseListQuery(query, searchable);

  it.each(queries)('accepted: %j', async (query) => {
    const { filter } = parseQuery(query);
    await expect(Items.collection.find(filter).toArray()).resolves.toBeInstanceOf(Array);
  });

  it('q matches case-insensitive word prefixes', async () => {
    await Items.deleteMany({});
    await Items.collection.insertMany([{ s: 'Blue widget' }, { s: 'widget' }, { s: 'awidget' }, { s: 'WIDE' }, { s: null }, {}]);
    const found = await Items.collection.find(parseQuery({ q: 'wid' }).filter, { projection: { _id: 0, s: 1 } }).toArray();
    expect(found.map((d) => d.s).sort()).toEqual(['Blue widget', 'WIDE', 'widget']);
    const both = await Items.collection.find(parseQuery({ q: 'blu WID' }).filter, { projection: { _id: 0, s: 1 } }).toArray();
    expect(both.map((d) => d.s)).toEqual(['Blue widget']);
  });
});
