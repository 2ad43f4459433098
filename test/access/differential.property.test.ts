/**
 * Differential test: random roles (rows, fields, several roles, includes) over random documents. The
 * REST list and the GraphQL list return exactly the rows and fields an in-memory evaluation of the
 * same rules gives (GraphQL shows a field the caller may not read as null, as an absent one).
 * One app; each case seeds a fresh tenant.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Types } from 'mongoose';
import type { TestApp } from '../helpers/app.ts';
import { matches } from '../../plugins/access/match.ts';
import { accessApp, createRole, newTenant, userWith } from './helpers.ts';

type Doc = Record<string, any>;
const FIELDS = ['title', 'status', 'level', 'secret'] as const;
const BASE = new Set(['_id', 'tenant_id', 'created_at', 'updated_at', 'created_by', 'updated_by', 'is_deleted', 'deleted_at', 'deleted_by', 'version']);

const status = fc.constantFrom('draft', 'review', 'done');
const docArb = fc.record({ title: fc.constantFrom('a', 'b', 'c'), status, level: fc.integer({ min: 0, max: 5 }), secret: fc.constantFrom('x', 'y') }, { requiredKeys: ['title'] });
const cond = fc.oneof(
  status.map((s) => ({ status: s })),
  fc.integer({ min: 0, max: 5 }).map((n) => ({ level: { $gte: n } })),
  fc.array(status, { minLength: 1, maxLength: 2 }).map((s) => ({ status: { $in: s } })),
  fc.constantFrom('x', 'y').map((s) => ({ secret: { $ne: s } })),
  fc.integer({ min: 0, max: 5 }).map((n) => ({ $or: [{ level: { $lt: n } }, { title: 'a' }] })),
);
const ruleArb = fc.record({
  rows: fc.option(cond, { nil: undefined }),
  fields: fc.option(fc.oneof(fc.subarray([...FIELDS]), fc.subarray([...FIELDS]).map((except) => ({ except }))), { nil: undefined }),
}, { requiredKeys: [] });
const roleArb = fc.record({ read: fc.option(ruleArb, { nil: null }), includesPrev: fc.boolean() });
const caseArb = fc.record({ docs: fc.array(docArb, { minLength: 0, maxLength: 6 }), roles: fc.array(roleArb, { minLength: 1, maxLength: 3 }) });

let t: TestApp;
beforeAll(async () => {
  t = await accessApp({ RATE_LIMIT_ENABLED: 'false' });
});
afterAll(() => t?.close());

/** The expected answer: rows any held role grants; per row, the fields of the roles granting it. */
function expected(docs: Doc[], grants: { rows?: Doc; fields?: string[] | { except: string[] } }[]): Doc[] {
  const fieldsOf = (f: (typeof grants)[number]['fields']) => (!f ? [...FIELDS] : Array.isArray(f) ? f : FIELDS.filter((x) => !f.except.includes(x)));
  return docs.flatMap((d) => {
    const granting = grants.filter((g) => !g.rows || matches(d, g.rows));
    if (!granting.length) return [];
    const keep = new Set(granting.flatMap((g) => fieldsOf(g.fields)));
    return [Object.fromEntries(Object.entries(d).filter(([k]) => keep.has(k)))];
  });
}

it('REST list and GraphQL list = in-memory evaluation of the same rules (200 cases)', async () => {
  await fc.assert(
    fc.asyncProperty(caseArb, async ({ docs, roles }) => {
      const tenant = await newTenant(t);
      const names: string[] = [];
      const grants: Doc[] = [];
      // Role i may include role i-1: the user then holds both.
      for (const [i, r] of roles.entries()) {
        const name = `r${i}`;
        await createRole(t, { name, includes: r.includesPrev && i > 0 ? [`r${i - 1}`] : [], permissions: r.read ? { notes: { read: r.read } } : {} }, { tenantId: tenant });
        names.push(name);
      }
      const held = names.at(-1)!;
      const reach = (i: number): number[] => [i, ...(roles[i]!.includesPrev && i > 0 ? reach(i - 1) : [])];
      const holds = reach(names.length - 1);
      for (const i of holds) if (roles[i]!.read) grants.push(roles[i]!.read!);
      const ruledAny = holds.length > 0; // every role is custom: a role without rules for notes grants nothing
      for (const d of docs) await t.http('POST', '/notes', { json: d, headers: { 'X-Tenant-Id': tenant } });
      const user = await userWith(t, tenant, [held]);
      const res = await t.http('GET', '/notes?per_page=100&sort=_id', { key: user.key });
      const gq = await t.gql<{ notes: { total: number; items: Doc[] } }>(`{ notes(per_page: 100, sort: "_id") { total items { ${FIELDS.join(' ')} } } }`, {}, { key: user.key });
      expect(gq.body.errors).toBeUndefined();
      const anyRules = holds.some((i) => roles[i]!.read);
      if (ruledAny && !anyRules) {
        // No held role has rules for notes: access as without rules.
        expect(res.status).toBe(200);
        expect(res.body.total).toBe(docs.length);
        expect(gq.body.data!.notes.total).toBe(docs.length);
        return;
      }
      expect(res.status).toBe(200);
      const stored = await t.app.db.conn.collection('notes').find({ tenant_id: new Types.ObjectId(tenant) }).sort({ _id: 1 }).toArray();
      const want = expected(stored.map((s) => Object.fromEntries(FIELDS.filter((f) => f in s).map((f) => [f, s[f]]))), grants as never);
      const got = (res.body.items as Doc[]).map((d) => Object.fromEntries(Object.entries(d).filter(([k]) => !BASE.has(k))));
      expect(got).toEqual(want);
      expect(res.body.total).toBe(want.length);
      expect(gq.body.data!.notes.items).toEqual(want.map((w) => Object.fromEntries(FIELDS.map((f) => [f, w[f] ?? null]))));
      expect(gq.body.data!.notes.total).toBe(want.length);
    }),
    { numRuns: 200 },
  );
}, 600_000);
