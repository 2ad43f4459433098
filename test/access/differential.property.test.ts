/**
 * Differential test: random roles (rows, fields, several roles, includes) over random documents. The
 * REST list, the GraphQL list and the SSE stream (`GET /events/stream`) return exactly the rows and
 * fields an in-memory evaluation of the same rules gives (GraphQL shows a field the caller may not
 * read as null, as an absent one). One app; each case seeds a fresh tenant.
 *
 * The stream is checked on every second case (100 of the 200, so at least 50 even when shrinking
 * stops early): it is read by resuming after the last event before the documents
 * (`last_event_id`), up to a `folders.created` sentinel that every caller reads whole, so the
 * `notes.created` events before it are all the stream delivers for the case, in committed order.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Types } from 'mongoose';
import type { TestApp } from '../helpers/app.ts';
import { matches } from '../../plugins/access/match.ts';
import { eventStream, until } from '../realtime/helpers.ts';
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
let cases = 0;
let streamed = 0;
beforeAll(async () => {
  t = await accessApp({ RATE_LIMIT_ENABLED: 'false' });
});
afterAll(() => t?.close());

/** The newest event of the tenant now (the stream resumes after it). */
async function lastEventId(tenant: string): Promise<string> {
  await t.app.services.get('events').flush();
  const res = await t.http('GET', '/events?limit=1', { headers: { 'X-Tenant-Id': tenant } });
  return res.body.items[0].id as string;
}

/** The `data` of the `notes.created` events the stream delivers to `key` after `anchor`, up to the sentinel. */
async function fromStream(tenant: string, key: string, anchor: string): Promise<Doc[]> {
  const sentinel = await t.http('POST', '/folders', { json: { name: 'sentinel' }, headers: { 'X-Tenant-Id': tenant } });
  expect(sentinel.status).toBe(201);
  const s = await eventStream(t.url, { key, query: `types=notes.created,folders.created&last_event_id=${anchor}` });
  try {
    expect(s.status).toBe(200);
    await until(() => s.events.some((e) => e.event === 'folders.created'), 15_000, 'the sentinel');
    return s.events.slice(0, s.events.findIndex((e) => e.event === 'folders.created')).map((e) => JSON.parse(e.data).data as Doc);
  } finally {
    s.close();
  }
}

const own = (d: Doc) => Object.fromEntries(FIELDS.filter((f) => f in d).map((f) => [f, d[f]]));

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

it('REST list, GraphQL list and the SSE stream = in-memory evaluation of the same rules (200 cases; the stream in 100)', async () => {
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
      const user = await userWith(t, tenant, [held]);
      const stream = cases++ % 2 === 0;
      const anchor = stream ? await lastEventId(tenant) : '';
      for (const d of docs) await t.http('POST', '/notes', { json: d, headers: { 'X-Tenant-Id': tenant } });
      const events = stream ? await fromStream(tenant, user.key, anchor) : null;
      if (events) streamed++;
      const res = await t.http('GET', '/notes?per_page=100&sort=_id', { key: user.key });
      const gq = await t.gql<{ notes: { total: number; items: Doc[] } }>(`{ notes(per_page: 100, sort: "_id") { total items { ${FIELDS.join(' ')} } } }`, {}, { key: user.key });
      expect(gq.body.errors).toBeUndefined();
      const anyRules = holds.some((i) => roles[i]!.read);
      if (ruledAny && !anyRules) {
        // No held role has rules for notes: access as without rules.
        expect(res.status).toBe(200);
        expect(res.body.total).toBe(docs.length);
        expect(gq.body.data!.notes.total).toBe(docs.length);
        if (events) expect(events.map(own)).toEqual(docs.map(own));
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
      // The stream's masked data also keeps the base fields: only the resource's own fields are compared.
      if (events) expect(events.map(own)).toEqual(want);
    }),
    { numRuns: 200 },
  );
  expect(streamed).toBeGreaterThanOrEqual(50);
}, 600_000);
