/**
 * Differential, against a model: random tenants (2-4), people holding 1-3 memberships each with
 * random roles, and random credentials of those memberships (API keys, tokens minted from them,
 * passkey sign-ins with and without X-Tenant-Id, tokens re-signed to name another tenant or
 * membership); random operations on a resource (create, read, list, update, delete), GET /auth/me,
 * the users list and membership removals on another replica, each over REST or GraphQL, with or
 * without an X-Tenant-Id naming a tenant the credential is not bound to. After every request the
 * answer is checked against the model: it acted in exactly its credential's tenant (the stored
 * `tenant_id`, lists and totals), the forged header changed nothing, a token or sign-in naming a
 * tenant the credential may not act in is refused (401 AUTH_REQUIRED), and a removed membership's
 * credentials are refused within AUTH_CACHE_TTL_MS on the replica that did not remove it.
 */
import fc from 'fast-check';
import { SignJWT, decodeJwt } from 'jose';
import { Types } from 'mongoose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ADMIN_KEY, TEST_SECRETS, buildTestApp, createTenantUser, expectError, uniqueDbUri, type HttpResult, type TestApp } from '../helpers/app.ts';
import { addMembership } from '../helpers/memberships.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { webauthnPlugin } from '../../plugins/webauthn/index.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';
import { SoftAuthenticator } from '../webauthn/authenticator.ts';
import { PASSKEY_CONFIG, loginWith, registerPasskey } from '../webauthn/helpers.ts';
import { until } from '../realtime/helpers.ts';

const TTL = 200;
const config = { ...PASSKEY_CONFIG, SAMPLE_RESOURCES_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', AUTH_CACHE_TTL_MS: String(TTL) };
const plugins = [resourcesPlugin, resourceEventsPlugin, webauthnPlugin];
/** Requests go to `a`; removals to `b`, so only the TTL (not `a`'s own invalidation) ends the credentials on `a`. */
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  const uri = uniqueDbUri();
  a = await buildTestApp({ plugins, config: { ...config, MONGODB_URI: uri } });
  b = await buildTestApp({ plugins, config: { ...config, MONGODB_URI: uri } });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

type Via = 'rest' | 'gql';
type Doc = Record<string, any>;
interface Member { userId: string; tenant: number; person: number; admin: boolean; live: boolean; keyId: string }
interface Person { email: string; members: number[]; device: SoftAuthenticator | null; home: number }
interface Cred { kind: 'api_key' | 'key_token' | 'passkey_token'; member: number; secret: string; cid: string }
interface Memo { id: string; tenant: number; title: string; version: number; deleted: boolean }
interface Model { tenants: string[]; members: Member[]; people: Person[]; creds: Cred[]; memos: Memo[] }

/** A tenant that does not exist, and a value that is no tenant id at all: forged headers name these too. */
const NOWHERE = new Types.ObjectId().toHexString();
const secret = new TextEncoder().encode(TEST_SECRETS.TOKEN_SECRET);
let seq = 0;

const member = (m: Model, c: Cred) => m.members[c.member]!;
const tenantOf = (m: Model, c: Cred) => m.tenants[member(m, c).tenant]!;
const auth = (c: Cred) => (c.kind === 'api_key' ? { key: c.secret } : { key: null, token: c.secret });
const at = <T>(xs: T[], i: number) => xs[i % xs.length]!;
/** X-Tenant-Id naming anything but the credential's tenant (another tenant of the same person included), or none. */
function forged(m: Model, c: Cred, f: number | null): Record<string, string> {
  if (f === null) return {};
  return { 'X-Tenant-Id': at([...m.tenants.filter((t) => t !== tenantOf(m, c)), NOWHERE, 'not-a-tenant'], f) };
}
/** The answer of a request whose credential must be refused: 401 AUTH_REQUIRED on REST and on /graphql. */
const refused = (res: HttpResult<any>) => expectError(res, 401, 'AUTH_REQUIRED');
const gqlData = (res: HttpResult<any>, field: string) => {
  expect(res.body.errors, JSON.stringify(res.body)).toBeUndefined();
  return res.body.data[field];
};
const gqlCode = (res: HttpResult<any>) => res.body.errors?.[0]?.extensions?.code as string | undefined;
const ids = (xs: { id?: string; _id?: string }[]) => xs.map((x) => x._id ?? x.id).sort();

/** Builds the world the model describes, through the admin API, and answers the model. */
async function build(world: World): Promise<Model> {
  const m: Model = { tenants: [], members: [], people: [], creds: [], memos: [] };
  for (let i = 0; i < world.tenants; i++) {
    const res = await a.http('POST', '/admin/tenants', { key: ADMIN_KEY, json: { name: `d-${++seq}` } });
    expect(res.status).toBe(201);
    m.tenants.push(res.body.id as string);
  }
  for (const [pi, p] of world.people.entries()) {
    const email = `p${++seq}-${Date.now()}@example.com`;
    const person: Person = { email, members: [], device: null, home: m.members.length };
    for (const [k, ti] of p.tenants.entries()) {
      const roles = [p.admin[k] ? 'admin' : 'user'] as ('admin' | 'user')[];
      const made = k === 0
        ? await createTenantUser(a, { tenantId: m.tenants[ti], email, roles, features: ['memos'] })
        : await addMembership(a, m.members[person.home]!.userId, { tenantId: m.tenants[ti]!, roles, features: ['memos'] });
      person.members.push(m.members.length);
      m.creds.push({ kind: 'api_key', member: m.members.length, secret: made.key, cid: `api_key:${made.keyId}` });
      m.members.push({ userId: made.userId, tenant: ti, person: pi, admin: roles[0] === 'admin', live: true, keyId: made.keyId });
    }
    if (p.passkey) {
      person.device = new SoftAuthenticator();
      expect((await registerPasskey(a, m.creds.find((c) => c.member === person.home)!.secret, person.device)).status).toBe(201);
    }
    m.people.push(person);
  }
  return m;
}

// --- operations: each sends one request (or a sign-in) and checks the answer against the model ---

async function createMemo(m: Model, p: { cred: number; forge: number | null; via: Via }) {
  const c = at(m.creds, p.cred);
  const title = `memo-${++seq}`;
  const opts = { ...auth(c), headers: forged(m, c, p.forge) };
  const res = p.via === 'rest'
    ? await a.http('POST', '/memos', { ...opts, json: { title } })
    : await a.gql('mutation($i: JSON!) { createMemo(input: $i) { _id tenant_id title version } }', { i: { title } }, opts);
  if (!member(m, c).live) return void refused(res);
  if (p.via === 'rest') expect(res.status, JSON.stringify(res.body)).toBe(201);
  const doc = (p.via === 'rest' ? res.body : gqlData(res, 'createMemo')) as Doc;
  expect(doc.tenant_id).toBe(tenantOf(m, c));
  const stored = await a.app.db.conn.collection('memos').findOne({ _id: new Types.ObjectId(String(doc._id)) });
  expect(String(stored!.tenant_id)).toBe(tenantOf(m, c));
  m.memos.push({ id: String(doc._id), tenant: member(m, c).tenant, title, version: 1, deleted: false });
}

/** Read, update or delete one memo: only in its own tenant, and a 404 (never a 403) elsewhere. */
async function touchMemo(m: Model, p: { op: 'read' | 'update' | 'delete'; cred: number; memo: number; forge: number | null; via: Via }) {
  const c = at(m.creds, p.cred);
  const memo = at(m.memos, p.memo);
  const opts = { ...auth(c), headers: forged(m, c, p.forge) };
  const ifMatch = `"${memo.version}"`;
  const title = `renamed-${++seq}`;
  let res: HttpResult<any>;
  const F = '_id tenant_id title version is_deleted';
  if (p.via === 'rest') {
    const headers = p.op === 'read' ? opts.headers : { ...opts.headers, 'If-Match': ifMatch };
    const method = ({ read: 'GET', update: 'PATCH', delete: 'DELETE' } as const)[p.op];
    res = await a.http(method, `/memos/${memo.id}`, { ...opts, headers, ...(p.op === 'update' ? { json: { title } } : {}) });
  } else if (p.op === 'read') res = await a.gql(`query($id: ID!) { memo(id: $id) { ${F} } }`, { id: memo.id }, opts);
  else if (p.op === 'update') res = await a.gql(`mutation($id: ID!, $e: String, $i: JSON!) { updateMemo(id: $id, if_match: $e, input: $i) { ${F} } }`, { id: memo.id, e: ifMatch, i: { title } }, opts);
  else res = await a.gql(`mutation($id: ID!, $e: String) { deleteMemo(id: $id, if_match: $e) { ${F} } }`, { id: memo.id, e: ifMatch }, opts);
  if (!member(m, c).live) return void refused(res);
  const mine = memo.tenant === member(m, c).tenant && !memo.deleted;
  if (!mine) {
    if (p.via === 'rest') expectError(res, 404, 'NOT_FOUND');
    else expect(gqlCode(res), JSON.stringify(res.body)).toBe('NOT_FOUND');
  } else if (p.via === 'rest' && p.op === 'delete') expect(res.status, JSON.stringify(res.body)).toBe(204);
  else {
    if (p.via === 'rest') expect(res.status, JSON.stringify(res.body)).toBe(200);
    const doc = (p.via === 'rest' ? res.body : gqlData(res, { read: 'memo', update: 'updateMemo', delete: 'deleteMemo' }[p.op])) as Doc;
    expect(doc).toMatchObject({ _id: memo.id, tenant_id: tenantOf(m, c), title: p.op === 'update' ? title : memo.title });
  }
  if (mine && p.op !== 'read') Object.assign(memo, { version: memo.version + 1 }, p.op === 'update' ? { title } : { deleted: true });
  // Whatever was answered, the stored document is as the model says: still in its own tenant.
  const stored = await a.app.db.conn.collection('memos').findOne({ _id: new Types.ObjectId(memo.id) });
  expect({ tenant: String(stored!.tenant_id), title: stored!.title, version: stored!.version, deleted: !!stored!.is_deleted })
    .toEqual({ tenant: m.tenants[memo.tenant], title: memo.title, version: memo.version, deleted: memo.deleted });
}

async function listMemos(m: Model, p: { cred: number; forge: number | null; via: Via }) {
  const c = at(m.creds, p.cred);
  const opts = { ...auth(c), headers: forged(m, c, p.forge) };
  const res = p.via === 'rest'
    ? await a.http('GET', '/memos?per_page=100', opts)
    : await a.gql('{ memos(per_page: 100) { items { _id tenant_id } total } }', {}, opts);
  if (!member(m, c).live) return void refused(res);
  if (p.via === 'rest') expect(res.status, JSON.stringify(res.body)).toBe(200);
  const page = (p.via === 'rest' ? res.body : gqlData(res, 'memos')) as { items: Doc[]; total: number };
  const expected = m.memos.filter((x) => x.tenant === member(m, c).tenant && !x.deleted).map((x) => x.id).sort();
  expect(page.items.every((d) => d.tenant_id === tenantOf(m, c))).toBe(true);
  expect(ids(page.items)).toEqual(expected);
  expect(page.total).toBe(expected.length);
}

/** GET /auth/me (or GraphQL me and myMemberships): the credential's membership, and its person's live memberships. */
async function me(m: Model, p: { cred: number; forge: number | null; via: Via }) {
  const c = at(m.creds, p.cred);
  const opts = { ...auth(c), headers: forged(m, c, p.forge) };
  const res = p.via === 'rest' ? await a.http('GET', '/auth/me', opts) : await a.gql('{ me { id tenant_id } myMemberships { user_id tenant_id } }', {}, opts);
  if (!member(m, c).live) return void refused(res);
  if (p.via === 'rest') expect(res.status, JSON.stringify(res.body)).toBe(200);
  const self = (p.via === 'rest' ? res.body : gqlData(res, 'me')) as Doc;
  const list = (p.via === 'rest' ? res.body.memberships : res.body.data.myMemberships) as Doc[];
  expect({ id: self.id, tenant_id: self.tenant_id }).toEqual({ id: member(m, c).userId, tenant_id: tenantOf(m, c) });
  const live = m.people[member(m, c).person]!.members.map((i) => m.members[i]!).filter((x) => x.live);
  expect(list.map((x) => `${x.user_id}@${x.tenant_id}`).sort()).toEqual(live.map((x) => `${x.userId}@${m.tenants[x.tenant]}`).sort());
}

/** The users list: a tenant administrator sees exactly its tenant's live memberships; a user is refused. */
async function users(m: Model, p: { cred: number; forge: number | null; via: Via }) {
  const c = at(m.creds, p.cred);
  const opts = { ...auth(c), headers: forged(m, c, p.forge) };
  const res = p.via === 'rest' ? await a.http('GET', '/admin/users?per_page=100', opts) : await a.gql('{ usersPage(per_page: 100) { items { id tenant_id } total } }', {}, opts);
  if (!member(m, c).live) return void refused(res);
  if (!member(m, c).admin) {
    if (p.via === 'rest') expectError(res, 403, 'ACCESS_DENIED');
    else expect(gqlCode(res)).toBe('ACCESS_DENIED');
    return;
  }
  const page = (p.via === 'rest' ? res.body : gqlData(res, 'usersPage')) as { items: Doc[]; total: number };
  const expected = m.members.filter((x) => x.live && x.tenant === member(m, c).tenant).map((x) => x.userId).sort();
  expect(page.items.every((u) => u.tenant_id === tenantOf(m, c))).toBe(true);
  expect(ids(page.items)).toEqual(expected);
  expect(page.total).toBe(expected.length);
}

/** A token minted from a credential: bound to the same membership and tenant. */
async function mint(m: Model, p: { cred: number; via: Via }) {
  const c = at(m.creds, p.cred);
  const res = p.via === 'rest' ? await a.http('POST', '/auth/token', auth(c)) : await a.gql('mutation { issueToken { token } }', {}, auth(c));
  if (!member(m, c).live) return void refused(res);
  const token = (p.via === 'rest' ? res.body : gqlData(res, 'issueToken')).token as string;
  const claims = decodeJwt(token);
  expect({ sub: claims.sub, tid: claims.tid, cid: claims.cid }).toEqual({ sub: member(m, c).userId, tid: tenantOf(m, c), cid: c.cid });
  m.creds.push({ kind: c.kind === 'passkey_token' ? 'passkey_token' : 'key_token', member: c.member, secret: token, cid: c.cid });
}

/**
 * A correctly signed token naming `target` (any membership) and a tenant: accepted only when it is
 * the credential's own membership and tenant, or, for a passkey, another live membership of the
 * same person in that membership's tenant.
 */
async function resign(m: Model, p: { cred: number; target: number; tenant: number | null }) {
  const c = at(m.creds, p.cred);
  const target = at(m.members, p.target);
  const tid = p.tenant === null ? m.tenants[target.tenant]! : at([...m.tenants, NOWHERE], p.tenant);
  const token = await new SignJWT({ tid, cid: c.cid }).setProtectedHeader({ alg: 'HS256' }).setSubject(target.userId).setIssuedAt().setExpirationTime('5m').sign(secret);
  const res = await a.http('GET', '/auth/me', { key: null, token });
  const own = target === member(m, c) || (c.kind === 'passkey_token' && target.person === member(m, c).person);
  if (!(own && target.live && tid === m.tenants[target.tenant])) return void refused(res);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect({ id: res.body.id, tenant_id: res.body.tenant_id }).toEqual({ id: target.userId, tenant_id: tid });
}

/** A passkey sign-in without a tenant, naming one of the person's, or naming another. */
async function signIn(m: Model, p: { person: number; tenant: number | null }) {
  const person = at(m.people.filter((x) => x.device && m.members[x.home]!.live), p.person);
  const live = person.members.filter((i) => m.members[i]!.live);
  const named = p.tenant === null ? null : at([...m.tenants, NOWHERE], p.tenant);
  const res = await loginWith(a, person.email, person.device!, {}, named ? { 'X-Tenant-Id': named } : {});
  const chosen = named === null ? (live.length === 1 ? live[0] : undefined) : live.find((i) => m.tenants[m.members[i]!.tenant] === named);
  if (named === null && live.length > 1) {
    const err = expectError(res, 409, 'TENANT_REQUIRED');
    expect((err.details.tenants as { id: string }[]).map((x) => x.id).sort()).toEqual(live.map((i) => m.tenants[m.members[i]!.tenant]).sort());
    return;
  }
  if (chosen === undefined) return void refused(res);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const claims = decodeJwt(res.body.token as string);
  expect({ sub: claims.sub, tid: claims.tid }).toEqual({ sub: m.members[chosen]!.userId, tid: m.tenants[m.members[chosen]!.tenant] });
  m.creds.push({ kind: 'passkey_token', member: chosen, secret: res.body.token as string, cid: String(claims.cid) });
}

/** A membership removed on replica `b` by a credential: 204 only by an administrator of its tenant, never the last one. */
async function remove(m: Model, p: { cred: number; target: number; via: Via }) {
  const c = at(m.creds, p.cred);
  const target = at(m.members, p.target);
  const res = p.via === 'rest'
    ? await b.http('DELETE', `/admin/users/${target.userId}`, auth(c))
    : await b.gql('mutation($id: String!) { deleteUser(id: $id) }', { id: target.userId }, auth(c));
  const actor = member(m, c);
  const lastAdmin = target.admin && !m.members.some((x) => x !== target && x.live && x.admin && x.tenant === target.tenant);
  const expected = !actor.live ? 'AUTH_REQUIRED' : !actor.admin ? 'ACCESS_DENIED' : !target.live || target.tenant !== actor.tenant ? 'NOT_FOUND'
    : target === actor ? 'ACCESS_DENIED' : lastAdmin ? 'CONFLICT' : null;
  if (expected === 'AUTH_REQUIRED') return void refused(res);
  if (expected) {
    if (p.via === 'rest') expectError(res, { ACCESS_DENIED: 403, NOT_FOUND: 404, CONFLICT: 409 }[expected], expected);
    else expect(gqlCode(res), JSON.stringify(res.body)).toBe(expected);
    return;
  }
  if (p.via === 'rest') expect(res.status, JSON.stringify(res.body)).toBe(204);
  else expect(gqlData(res, 'deleteUser')).toBe(true);
  target.live = false;
  // On `a`, every credential of the removed membership ends within the TTL (bound: room for a busy machine).
  for (const gone of m.creds.filter((x) => m.members[x.member] === target))
    await until(async () => (await a.http('GET', '/auth/me', auth(gone))).status === 401, Math.max(50 * TTL, 10_000), `${gone.kind} of a removed membership refused`);
}

// --- the random world and the commands over it ---

const worldArb = fc.integer({ min: 2, max: 4 }).chain((tenants) =>
  fc.record({
    tenants: fc.constant(tenants),
    people: fc.array(
      fc.record({
        tenants: fc.uniqueArray(fc.nat({ max: tenants - 1 }), { minLength: 1, maxLength: Math.min(3, tenants) }),
        admin: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
        passkey: fc.boolean(),
      }),
      { minLength: 2, maxLength: 4 },
    ),
  }),
);
type World = { tenants: number; people: { tenants: number[]; admin: boolean[]; passkey: boolean }[] };

class Step implements fc.AsyncCommand<Model, object> {
  constructor(private readonly name: string, private readonly params: object, private readonly go: (m: Model) => Promise<void>, private readonly when: (m: Model) => boolean = () => true) {}
  check(m: Readonly<Model>): boolean {
    return this.when(m as Model);
  }
  async run(m: Model): Promise<void> {
    await this.go(m);
  }
  toString(): string {
    return `${this.name}(${JSON.stringify(this.params)})`;
  }
}

const n = fc.nat({ max: 1000 });
const via = fc.constantFrom<Via>('rest', 'gql');
const forge = fc.option(n, { nil: null });
const hasMemos = (m: Model) => m.memos.length > 0;
const signable = (m: Model) => m.people.some((x) => x.device && m.members[x.home]!.live);
const commands = [
  fc.record({ cred: n, forge, via }).map((p) => new Step('create', p, (m) => createMemo(m, p))),
  fc.record({ op: fc.constantFrom('read', 'update', 'delete' as const), cred: n, memo: n, forge, via }).map((p) => new Step(p.op, p, (m) => touchMemo(m, p), hasMemos)),
  fc.record({ cred: n, forge, via }).map((p) => new Step('list', p, (m) => listMemos(m, p))),
  fc.record({ cred: n, forge, via }).map((p) => new Step('me', p, (m) => me(m, p))),
  fc.record({ cred: n, forge, via }).map((p) => new Step('users', p, (m) => users(m, p))),
  fc.record({ cred: n, via }).map((p) => new Step('mint', p, (m) => mint(m, p))),
  fc.record({ cred: n, target: n, tenant: fc.option(n, { nil: null }) }).map((p) => new Step('resign', p, (m) => resign(m, p))),
  fc.record({ person: n, tenant: fc.option(n, { nil: null }) }).map((p) => new Step('signIn', p, (m) => signIn(m, p), signable)),
  fc.record({ cred: n, target: n, via }).map((p) => new Step('remove', p, (m) => remove(m, p))),
];

it('no request acts outside its credential\'s tenant, whatever the people, memberships, credentials and headers', async () => {
  await fc.assert(
    fc.asyncProperty(worldArb, fc.commands(commands, { maxCommands: 15 }), async (world, cmds) => {
      const model = await build(world);
      await fc.asyncModelRun(() => ({ model, real: {} }), cmds);
    }),
    { numRuns: 25 },
  );
}, 300_000);
