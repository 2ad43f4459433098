/**
 * Differential check of tenant binding: fast-check draws people with one to three memberships in
 * three fresh tenants (each membership a random role), gives every membership two credentials (its
 * API key and a bearer token minted from it), and runs random sequences of requests against the
 * server and against a model of what each tenant holds. Every request's tenant is checked against
 * its credential's binding: documents it creates carry that tenant, lists and counts (REST and
 * GraphQL, `GET /admin/users` for administrators) hold exactly that tenant's rows, another tenant's
 * document is 404 to read, change or delete, a forged `X-Tenant-Id` naming another tenant changes
 * nothing, and a removed membership's key and token are refused while the person's other
 * memberships keep working.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { addMembership } from '../helpers/memberships.ts';
import { until } from '../realtime/helpers.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';

const TTL = 300;
let app: TestApp;

beforeAll(async () => {
  app = await buildTestApp({
    plugins: [resourcesPlugin, resourceEventsPlugin],
    config: { SAMPLE_RESOURCES_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', AUTH_CACHE_TTL_MS: String(TTL) },
  });
});
afterAll(async () => {
  await app?.close();
});

type Role = 'user' | 'admin';
/** One membership as the test knows it: its tenant (by index and id), role and two credentials. */
interface Membership { person: number; tenant: number; tenantId: string; userId: string; role: Role; key: string; token: string; removed: boolean }
/** What the server should hold: per tenant, the live memos (id → title). */
interface Model { tenants: string[]; memos: Map<string, string>[]; members: Membership[]; seq: number }
interface Real { run: number }

/** A population: per person, the tenants (indexes 0–2) they belong to and the role in each. */
const population = fc.array(
  fc.uniqueArray(fc.record({ tenant: fc.integer({ min: 0, max: 2 }), role: fc.constantFrom<Role>('user', 'admin') }), { minLength: 1, maxLength: 3, selector: (m) => m.tenant }),
  { minLength: 2, maxLength: 4 },
);

const credentialOf = (m: Membership, useToken: boolean) => (useToken ? { key: null, token: m.token } : { key: m.key });
const live = (model: Model) => model.members.filter((m) => !m.removed);
const pick = <T>(xs: T[], i: number): T => xs[i % xs.length]!;
/** Requests checked against the model, over all runs (the property must have exercised something). */
let checked = 0;

async function setUp(people: { tenant: number; role: Role }[][], run: number): Promise<Model> {
  const tenants: string[] = [];
  for (let t = 0; t < 3; t++) {
    const res = await app.http('POST', '/admin/tenants', { key: ADMIN_KEY, json: { name: `diff-${run}-${t}` } });
    expect(res.status).toBe(201);
    tenants.push(res.body.id as string);
  }
  const members: Membership[] = [];
  for (const [p, memberships] of people.entries()) {
    let first: string | null = null;
    for (const { tenant, role } of memberships) {
      const email = `diff-${run}-${p}@example.com`;
      const made: { userId: string; key: string } = first === null
        ? await createTenantUser(app, { tenantId: tenants[tenant], email, roles: [role], features: ['memos'] })
        : await addMembership(app, first, { tenantId: tenants[tenant], roles: [role], features: ['memos'] });
      first ??= made.userId;
      const tok = await app.http('POST', '/auth/token', { key: made.key });
      expect(tok.status, JSON.stringify(tok.body)).toBe(200);
      members.push({ person: p, tenant, tenantId: tenants[tenant]!, userId: made.userId, role, key: made.key, token: tok.body.token as string, removed: false });
    }
  }
  return { tenants, memos: tenants.map(() => new Map()), members, seq: 0 };
}

/** The memos a credential sees over REST and GraphQL: exactly its tenant's, counted as the model counts. */
async function checkLists(model: Model, m: Membership, useToken: boolean, forged?: string) {
  const cred = credentialOf(m, useToken);
  const want = [...model.memos[m.tenant]!.values()].sort();
  const rest = await app.http('GET', '/memos?per_page=100', { ...cred, headers: forged ? { 'X-Tenant-Id': forged } : {} });
  expect(rest.status, JSON.stringify(rest.body)).toBe(200);
  expect((rest.body.items as { tenant_id: string }[]).every((d) => d.tenant_id === m.tenantId)).toBe(true);
  expect((rest.body.items as { title: string }[]).map((d) => d.title).sort()).toEqual(want);
  expect(rest.body.total).toBe(want.length);
  const g = await app.gql('{ memos(per_page: 100) { total items { title tenant_id } } }', {}, cred);
  expect(g.body.errors).toBeUndefined();
  expect(g.body.data!.memos.total).toBe(want.length);
  expect((g.body.data!.memos.items as { title: string; tenant_id: string }[]).every((d) => d.tenant_id === m.tenantId)).toBe(true);
}

/** Commands: each draws its membership (and target) by index into the live population. */
class Create implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number, readonly useToken: boolean, readonly forge: number) {}
  check = (model: Readonly<Model>) => live(model as Model).length > 0;
  async run(model: Model) {
    checked++;
    const m = pick(live(model), this.who);
    const forged = pick(model.tenants, this.forge);
    const title = `memo-${model.seq++}`;
    const res = await app.http('POST', '/memos', { ...credentialOf(m, this.useToken), headers: { 'X-Tenant-Id': forged }, json: { title } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    // Created in the credential's tenant, whatever the header said.
    expect(res.body.tenant_id).toBe(m.tenantId);
    model.memos[m.tenant]!.set(res.body._id as string, title);
  }
  toString = () => `Create(${this.who}, token=${this.useToken}, forge=${this.forge})`;
}

class List implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number, readonly useToken: boolean, readonly forge: number | null) {}
  check = (model: Readonly<Model>) => live(model as Model).length > 0;
  async run(model: Model) {
    checked++;
    const m = pick(live(model), this.who);
    await checkLists(model, m, this.useToken, this.forge === null ? undefined : pick(model.tenants, this.forge));
  }
  toString = () => `List(${this.who}, token=${this.useToken}, forge=${this.forge})`;
}

/** Read, change or delete a memo drawn from all tenants: done in the own tenant, 404 elsewhere. */
class Touch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number, readonly target: number, readonly op: 'get' | 'patch' | 'delete', readonly useToken: boolean) {}
  check = (model: Readonly<Model>) => live(model as Model).length > 0 && model.memos.some((t) => t.size > 0);
  async run(model: Model) {
    checked++;
    const m = pick(live(model), this.who);
    const all = model.memos.flatMap((t, tenant) => [...t.keys()].map((id) => ({ id, tenant })));
    const { id, tenant } = pick(all, this.target);
    const cred = credentialOf(m, this.useToken);
    // Writes carry the document's current ETag, read by the system administrator: knowing it gives
    // another tenant nothing.
    const etag = (await app.http('GET', `/memos/${id}`, { key: ADMIN_KEY })).headers.get('etag')!;
    const headers = { 'If-Match': etag };
    const res = this.op === 'get' ? await app.http('GET', `/memos/${id}`, cred)
      : this.op === 'patch' ? await app.http('PATCH', `/memos/${id}`, { ...cred, headers, json: { title: `renamed-${model.seq}` } })
      : await app.http('DELETE', `/memos/${id}`, { ...cred, headers });
    if (tenant !== m.tenant) {
      expect(res.status, `${this.op} of another tenant's memo: ${JSON.stringify(res.body)}`).toBe(404);
      return;
    }
    expect(res.status, JSON.stringify(res.body)).toBe(this.op === 'delete' ? 204 : 200);
    if (this.op === 'patch') model.memos[tenant]!.set(id, `renamed-${model.seq++}`);
    if (this.op === 'delete') model.memos[tenant]!.delete(id);
    if (this.op !== 'delete') expect(res.body.tenant_id).toBe(m.tenantId);
  }
  toString = () => `Touch(${this.who}, ${this.target}, ${this.op}, token=${this.useToken})`;
}

/** `GET /auth/me` names the credential's membership; `GET /admin/users` lists and counts only its tenant. */
class Me implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number, readonly useToken: boolean) {}
  check = (model: Readonly<Model>) => live(model as Model).length > 0;
  async run(model: Model) {
    checked++;
    const m = pick(live(model), this.who);
    const cred = credentialOf(m, this.useToken);
    const me = await app.http('GET', '/auth/me', cred);
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: m.userId, tenant_id: m.tenantId });
    const theirs = live(model).filter((x) => x.person === m.person).map((x) => x.tenantId).sort();
    expect((me.body.memberships as { tenant_id: string }[]).map((x) => x.tenant_id).sort()).toEqual(theirs);
    const users = await app.http('GET', '/admin/users?per_page=100', cred);
    if (m.role !== 'admin') {
      expect(users.status).toBe(403);
      return;
    }
    expect(users.status, JSON.stringify(users.body)).toBe(200);
    const want = live(model).filter((x) => x.tenant === m.tenant).map((x) => x.userId).sort();
    expect((users.body.items as { id: string }[]).map((u) => u.id).sort()).toEqual(want);
    expect(users.body.total).toBe(want.length);
  }
  toString = () => `Me(${this.who}, token=${this.useToken})`;
}

/** Removes a plain member: its key and token stop working; the person's other memberships do not. */
class Remove implements fc.AsyncCommand<Model, Real> {
  constructor(readonly who: number) {}
  check = (model: Readonly<Model>) => live(model as Model).some((m) => m.role === 'user');
  async run(model: Model) {
    checked++;
    const m = pick(live(model).filter((x) => x.role === 'user'), this.who);
    expect((await app.http('DELETE', `/admin/users/${m.userId}`, { key: ADMIN_KEY })).status).toBe(204);
    m.removed = true;
    // Bound: the TTL plus room for a busy machine; the point is that they end at all.
    await until(async () => (await app.http('GET', '/auth/me', { key: m.key })).status === 401, 30 * TTL, 'the key refused');
    await until(async () => (await app.http('GET', '/auth/me', { key: null, token: m.token })).status === 401, 30 * TTL, 'the token refused');
    expect((await app.http('GET', '/memos', { key: m.key })).status).toBe(401);
    const g = await app.gql('{ memos { total } }', {}, { key: null, token: m.token });
    // A credential that no longer authenticates is refused before GraphQL runs, with the REST envelope.
    expect(g.status).toBe(401);
    expect((g.body as unknown as { error: { code: string } }).error.code).toBe('AUTH_REQUIRED');
    for (const sibling of live(model).filter((x) => x.person === m.person)) await checkLists(model, sibling, false);
  }
  toString = () => `Remove(${this.who})`;
}

const idx = fc.nat({ max: 20 });
const commands = [
  fc.tuple(idx, fc.boolean(), idx).map(([w, t, f]) => new Create(w, t, f)),
  fc.tuple(idx, fc.boolean(), fc.option(idx, { nil: null })).map(([w, t, f]) => new List(w, t, f)),
  fc.tuple(idx, idx, fc.constantFrom('get' as const, 'patch' as const, 'delete' as const), fc.boolean()).map(([w, x, op, t]) => new Touch(w, x, op, t)),
  fc.tuple(idx, fc.boolean()).map(([w, t]) => new Me(w, t)),
  idx.map((w) => new Remove(w)),
];

describe('no request acts outside its credential\'s tenant (differential, random people and memberships)', () => {
  it('every request of every random sequence matches the model of its bound tenant', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(population, fc.commands(commands, { maxCommands: 16, size: 'max' }), async (people, cmds) => {
        const model = await setUp(people, run++);
        await fc.asyncModelRun(() => ({ model, real: { run } }), cmds);
      }),
      { numRuns: 40, endOnFailure: true },
    );
    expect(checked).toBeGreaterThan(150);
  }, 600_000);
});
