/**
 * Property, through HTTP against the real database: for random data (many duplicate sort values,
 * null budgets), a random sort, limit and filter, walking `next` to the end and then `prev` back
 * to the start yields every matching document exactly once, in the order of the offset-mode
 * listing with the same sort, which itself is the documented order (sort fields, `_id` as
 * final tiebreaker, null lowest).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { collection, idsOf, qs, type Doc } from './read-helpers.ts';

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };

beforeAll(async () => {
  // Hundreds of requests per property run: the per-credential rate limit is not under test here.
  t = await buildTestApp({ plugins: [resourcesPlugin], config: { RATE_LIMIT_ENABLED: 'false' } });
  alice = await createTenantUser(t);
});
afterAll(() => t?.close());

const SORTS = ['budget', '-budget', '-budget,name', '-created_at', 'created_at', 'name', 'name,-budget', '-name,budget'] as const;

type Row = { name: string; budget: number | null };
const rowArb: fc.Arbitrary<Row> = fc.record({
  name: fc.constantFrom('a', 'b', 'c', 'A', 'B', 'ab'),
  budget: fc.option(fc.constantFrom(1, 2, 3, 2.5), { nil: null, freq: 4 }),
});

/** Compare two values in the database's sort order (null lowest; strings by code unit, i.e. ASCII here). */
function cmp(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  return (a as number | string) < (b as number | string) ? -1 : 1;
}

/** The documented order: the sort fields, then `_id` in the direction of the last field. */
function specOrder(docs: Doc[], sort: string): string[] {
  const spec = sort.split(',').map((s) => (s.startsWith('-') ? ([s.slice(1), -1] as const) : ([s, 1] as const)));
  const all = [...spec, ['_id', spec[spec.length - 1]![1]] as const];
  return idsOf(
    [...docs].sort((x, y) => {
      for (const [f, dir] of all) {
        const c = cmp(x[f], y[f]) * dir;
        if (c !== 0) return c;
      }
      return 0;
    }),
  );
}

const get = async (params: Record<string, string | undefined>) => {
  const res = await t.http('GET', `/projects${qs(params)}`, { key: alice.key });
  if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};

it('next to the end, then prev back: every matching row exactly once, in offset order', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(rowArb, { maxLength: 24 }),
      fc.constantFrom(...SORTS),
      fc.integer({ min: 1, max: 7 }),
      fc.option(fc.constantFrom(1, 2, 2.5, 3), { nil: null }),
      async (rows, sort, limit, minBudget) => {
        // SETUP: a clean collection for this run.
        await collection(t, 'projects').deleteMany({});
        let created: Doc[] = [];
        if (rows.length) {
          const res = await t.http('POST', '/projects/bulk', { key: alice.key, json: { items: rows } });
          expect(res.status).toBe(201);
          created = res.body.items;
        }
        const filter = minBudget === null ? {} : { budget__gte: String(minBudget) };
        const matching = created.filter((d) => minBudget === null || (d.budget !== null && d.budget >= minBudget));

        const offset = idsOf((await get({ sort, per_page: '100', ...filter })).items);
        expect(offset).toEqual(specOrder(matching, sort));

        // Forward walk.
        const forward: string[] = [];
        let page = await get({ sort, limit: String(limit), ...filter });
        let pages = 1;
        for (;;) {
          expect(page.cursors.has_prev).toBe(pages > 1);
          expect(page.items.length).toBeLessThanOrEqual(limit);
          forward.push(...idsOf(page.items));
          if (!page.cursors.has_next) break;
          expect(page.items).toHaveLength(limit);
          expect(pages).toBeLessThan(100);
          page = await get({ sort, limit: String(limit), cursor: page.cursors.next, ...filter });
          pages++;
        }
        expect(page.cursors.next).toBeNull();
        expect(forward).toEqual(offset);

        // Backward walk from the last page.
        let backward: string[] = idsOf(page.items);
        while (page.cursors.has_prev) {
          page = await get({ sort, limit: String(limit), cursor: page.cursors.prev, direction: 'prev', ...filter });
          expect(page.items.length).toBeGreaterThan(0);
          expect(page.items.length).toBeLessThanOrEqual(limit);
          expect(page.cursors.has_next).toBe(true);
          backward = [...idsOf(page.items), ...backward];
          expect(backward.length).toBeLessThanOrEqual(offset.length);
        }
        expect(page.cursors.prev).toBeNull();
        expect(backward).toEqual(offset);
      },
    ),
    { numRuns: 40 },
  );
}, 60_000);
