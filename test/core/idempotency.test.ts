/**
 * `Idempotency-Key` on POST and PATCH, REST and GraphQL: replays, a reused key, a request still
 * running, per-actor scope, stored 4xx and released 5xx, concurrent repeats in one process and
 * across two server processes. Everything through HTTP, against the real database.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { slowRoutePlugin } from '../fixtures/slow-route-plugin.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
let bob: { key: string; tenantId: string; userId: string };
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, slowRoutePlugin] });
  alice = await createTenantUser(t);
  // The other tenant's user is a second membership of the first one's person: one person, two tenants.
  bob = await addMembership(t, alice.userId);
});
afterAll(() => t?.close());

const newKey = () => `k-${randomBytes(8).toString('hex')}`;
const records = () => t.app.db.conn.collection('idempotency_keys');
const post = (path: string, json: unknown, key: string | null, actorKey = alice.key, headers: Record<string, string> = {}) =>
  t.http('POST', path, { key: actorKey, json, headers: { ...(key !== null ? { 'Idempotency-Key': key } : {}), ...headers } });
const projectsNamed = async (name: string, actorKey = alice.key) =>
  (await t.http('GET', `/projects?name=${encodeURIComponent(name)}&per_page=100`, { key: actorKey })).body.items as { _id: string }[];

describe('REST replay', () => {
  it('a repeated POST answers the stored 201 (same body, ETag, Location) with Idempotent-Replayed, and creates nothing', async () => {
    const key = newKey();
    const name = `replay-${key}`;
    const first = await post('/projects', { name, budget: 5 }, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post('/projects', { budget: 5, name }, key); // other key order, same body
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('content-type')).toMatch(/^application\/json/);
    expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    expect(await projectsNamed(name)).toHaveLength(1);
  });

  it('a repeated PATCH answers the stored 200 and does not write again', async () => {
    const created = await post('/projects', { name: `patch-${newKey()}`, budget: 1 }, null);
    const id = created.body._id as string;
    const key = newKey();
    const patch = () => t.http('PATCH', `/projects/${id}`, { key: alice.key, json: { budget: 2 }, headers: { 'If-Match': '"1"', 'Idempotency-Key': key } });
    const first = await patch();
    expect(first.status).toBe(200);
    expect(first.headers.get('etag')).toBe('"2"');
    // Without the key this repeat would be refused (412: the revision moved on); with it, it is the same answer.
    const again = await patch();
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('etag')).toBe('"2"');
    expect(again.body).toEqual(first.body);
    expect((await t.http('GET', `/projects/${id}`, { key: alice.key })).body.version).toBe(2);
  });

  it('If-Match is part of the request: a 412 is replayed for the same If-Match, another If-Match is another request', async () => {
    const created = await post('/projects', { name: `ifmatch-${newKey()}` }, null);
    const key = newKey();
    const patch = (etag: string) => t.http('PATCH', `/projects/${created.body._id}`, { key: alice.key, json: { budget: 3 }, headers: { 'If-Match': etag, 'Idempotency-Key': key } });
    expectError(await patch('"7"'), 412, 'ETAG_MISMATCH');
    const again = await patch('"7"');
    expectError(again, 412, 'ETAG_MISMATCH');
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expectError(await patch('"1"'), 422, 'IDEMPOTENCY_KEY_REUSED');
  });

  it('the same key with a different body, or on another path, answers 422 IDEMPOTENCY_KEY_REUSED', async () => {
    const key = newKey();
    const name = `reuse-${key}`;
    expect((await post('/projects', { name }, key)).status).toBe(201);
    const other = await post('/projects', { name, budget: 9 }, key);
    expectError(other, 422, 'IDEMPOTENCY_KEY_REUSED');
    expectError(await post('/slow', { label: name }, key), 422, 'IDEMPOTENCY_KEY_REUSED');
    const [doc] = await projectsNamed(name);
    expect((await t.http('GET', `/projects/${doc!._id}`, { key: alice.key })).body.budget).not.toBe(9);
  });

  it('a repeat while the first request still runs answers 409 IDEMPOTENCY_IN_PROGRESS; afterwards it replays', async () => {
    const key = newKey();
    const label = `slow-${key}`;
    const first = post('/slow', { label, ms: 800 }, key);
    await sleep(250);
    const during = await post('/slow', { label, ms: 800 }, key);
    expectError(during, 409, 'IDEMPOTENCY_IN_PROGRESS');
    expect(during.headers.get('retry-after')).toBe('1');
    const done = await first;
    expect(done.status).toBe(201);
    expect(done.body.runs).toBe(1);
    const after = await post('/slow', { label, ms: 800 }, key);
    expect(after.status).toBe(201);
    expect(after.headers.get('idempotent-replayed')).toBe('true');
    expect(after.body).toEqual({ label, runs: 1 });
  });

  it('20 concurrent identical POST /projects with one key create exactly one project', async () => {
    const key = newKey();
    const name = `burst-${key}`;
    const answers = await Promise.all(Array.from({ length: 20 }, () => post('/projects', { name }, key)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 201 || s === 409), statuses.join(',')).toBe(true);
    expect(answers.filter((a) => a.status === 201 && !a.headers.get('idempotent-replayed'))).toHaveLength(1);
    expect(await projectsNamed(name)).toHaveLength(1);
  });
});

describe('scope: actor, tenant and key', () => {
  it('the same key from another user of another tenant is independent', async () => {
    const key = newKey();
    const a = await post('/projects', { name: `scope-${key}` }, key, alice.key);
    const b = await post('/projects', { name: `scope-${key}` }, key, bob.key);
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(b.body._id).not.toBe(a.body._id);
    expect(b.body.tenant_id).toBe(bob.tenantId);
    // A different body under the same key is no reuse across actors either.
    expect((await post('/projects', { name: `scope-other-${key}` }, key, bob.key)).status).toBe(422);
  });

  it('the same actor acting in another tenant (X-Tenant-Id) is independent', async () => {
    const key = newKey();
    const name = `tenant-${key}`;
    const inA = await post('/projects', { name }, key, ADMIN_KEY, { 'X-Tenant-Id': alice.tenantId });
    const inB = await post('/projects', { name }, key, ADMIN_KEY, { 'X-Tenant-Id': bob.tenantId });
    expect([inA.status, inB.status]).toEqual([201, 201]);
    expect(inB.headers.get('idempotent-replayed')).toBeNull();
    expect(inA.body.tenant_id).toBe(alice.tenantId);
    expect(inB.body.tenant_id).toBe(bob.tenantId);
    const replay = await post('/projects', { name }, key, ADMIN_KEY, { 'X-Tenant-Id': alice.tenantId });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body._id).toBe(inA.body._id);
  });
});

describe('error answers', () => {
  it('a 4xx is stored and replayed in the envelope, with the repeat\'s own request id', async () => {
    const key = newKey();
    const first = await post('/projects', { budget: 'x' }, key);
    const e1 = expectError(first, 422, 'VALIDATION_ERROR');
    const again = await post('/projects', { budget: 'x' }, key);
    const e2 = expectError(again, 422, 'VALIDATION_ERROR');
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(e2).toEqual(e1);
    expect(again.body.request_id).not.toBe(first.body.request_id);
  });

  it('a 5xx releases the key: the retry runs again', async () => {
    const key = newKey();
    const label = `flaky-${key}`;
    expectError(await post('/flaky', { label }, key), 500, 'INTERNAL_ERROR');
    const retry = await post('/flaky', { label }, key);
    expectError(retry, 500, 'INTERNAL_ERROR');
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect((await t.app.db.conn.collection('slow_route_runs').findOne({ _id: label as never }))?.runs).toBe(2);
    expect(await records().countDocuments({ key })).toBe(0);
  });

  it('a GraphQL mutation answering INTERNAL_ERROR releases the key like a 5xx', async () => {
    const key = newKey();
    const label = `gql-flaky-${key}`;
    const run = () => t.gql('mutation ($label: String!) { slowRouteFlaky(label: $label) }', { label }, { key: alice.key, headers: { 'Idempotency-Key': key } });
    expect((await run()).body.errors?.[0]?.extensions?.code).toBe('INTERNAL_ERROR');
    const retry = await run();
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect((await t.app.db.conn.collection('slow_route_runs').findOne({ _id: label as never }))?.runs).toBe(2);
    expect(await records().countDocuments({ key })).toBe(0);
  });

  it('an empty key or one longer than 255 characters answers 400 BAD_REQUEST and writes nothing', async () => {
    const name = `badkey-${newKey()}`;
    for (const key of ['', 'x'.repeat(256)]) {
      const res = await post('/projects', { name }, key);
      const err = expectError(res, 400, 'BAD_REQUEST');
      expect(err.details).toMatchObject({ header: 'Idempotency-Key', max_length: 255 });
    }
    expect(await projectsNamed(name)).toHaveLength(0);
    expect((await post('/projects', { name }, 'x'.repeat(255))).status).toBe(201);
  });
});

describe('records', () => {
  it('a stored answer expires after IDEMPOTENCY_TTL_HOURS (expires_at with a TTL index)', async () => {
    const key = newKey();
    const before = Date.now();
    await post('/projects', { name: `ttl-${key}` }, key);
    const rec = await records().findOne({ key });
    expect(rec).toMatchObject({ actor_id: alice.userId, tenant_id: alice.tenantId, state: 'done', status: 201 });
    const ttl = (rec!.expires_at as Date).getTime() - before;
    expect(ttl).toBeGreaterThan(24 * 3_600_000 - 60_000);
    expect(ttl).toBeLessThan(24 * 3_600_000 + 60_000);
    const indexes = await records().indexes();
    expect(indexes.find((i) => i.key.expires_at === 1)?.expireAfterSeconds).toBe(0);
    expect(indexes.find((i) => i.unique)?.key).toEqual({ actor_id: 1, tenant_id: 1, key: 1 });
  });

  it('an expired record (a crashed run\'s lapsed lease, or past its TTL) is taken over by the next request', async () => {
    const key = newKey();
    const name = `lapsed-${key}`;
    const past = new Date(Date.now() - 1000);
    await records().insertOne({ actor_id: alice.userId, tenant_id: alice.tenantId, key, fingerprint: 'x', run: 'crashed', state: 'running', status: null, headers: {}, body: null, error: null, created_at: past, expires_at: past });
    const res = await post('/projects', { name }, key);
    expect(res.status).toBe(201);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect(await records().findOne({ key })).toMatchObject({ state: 'done', status: 201 });
    expect((await post('/projects', { name }, key)).headers.get('idempotent-replayed')).toBe('true');
  });

  it('no header, GET, no authenticated actor, or no route: no record', async () => {
    const count = await records().countDocuments();
    expect((await post('/projects', { name: `plain-${newKey()}` }, null)).status).toBe(201);
    expect((await t.http('GET', '/projects', { key: alice.key, headers: { 'Idempotency-Key': newKey() } })).status).toBe(200);
    expect((await t.http('POST', '/projects', { key: null, json: { name: 'anon' }, headers: { 'Idempotency-Key': newKey() } })).status).toBe(401);
    expect((await post('/no/such/route', { name: 'x' }, newKey())).status).toBe(404);
    expect((await post('/health', {}, newKey())).status).toBe(405);
    expect(await records().countDocuments()).toBe(count);
  });
});

describe('GraphQL', () => {
  const create = `mutation ($input: JSON!) { createProject(input: $input) { _id name etag } }`;

  it('a mutation repeated with the same Idempotency-Key header is replayed and runs once', async () => {
    const key = newKey();
    const name = `gql-${key}`;
    const first = await t.gql(create, { input: { name } }, { key: alice.key, headers: { 'Idempotency-Key': key } });
    expect(first.status).toBe(200);
    expect(first.body.data.createProject.name).toBe(name);
    const again = await t.gql(create, { input: { name } }, { key: alice.key, headers: { 'Idempotency-Key': key } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await projectsNamed(name)).toHaveLength(1);
    const changed = await t.gql(create, { input: { name: `${name}-2` } }, { key: alice.key, headers: { 'Idempotency-Key': key } });
    expectError(changed, 422, 'IDEMPOTENCY_KEY_REUSED');
  });

  it('queries ignore the header', async () => {
    const key = newKey();
    const q = await t.gql('{ projects { total } }', {}, { key: alice.key, headers: { 'Idempotency-Key': key } });
    const again = await t.gql('{ projects { total } }', {}, { key: alice.key, headers: { 'Idempotency-Key': key } });
    expect([q.status, again.status]).toEqual([200, 200]);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await records().countDocuments({ key })).toBe(0);
  });
});

describe('the lease of a running request', () => {
  let short: TestApp;
  let user: { key: string };
  beforeAll(async () => {
    short = await buildTestApp({ plugins: [slowRoutePlugin], config: { IDEMPOTENCY_LEASE_SECONDS: '1' } });
    user = await createTenantUser(short);
  });
  afterAll(() => short?.close());

  it('is renewed while the request runs: a repeat after the lease length still gets 409, and the route ran once', async () => {
    const key = newKey();
    const label = `lease-${key}`;
    const send = () => short.http('POST', '/slow', { key: user.key, json: { label, ms: 2500 }, headers: { 'Idempotency-Key': key } });
    const first = send();
    await sleep(1800);
    expectError(await send(), 409, 'IDEMPOTENCY_IN_PROGRESS');
    expect((await first).body).toEqual({ label, runs: 1 });
  });
});

describe('two server processes on one database', () => {
  const uri = uniqueDbUri();
  let replicas: ServerProcess[] = [];
  let setup: TestApp;
  beforeAll(async () => {
    replicas = await startReplicas(2, { MONGODB_URI: uri });
    setup = await buildTestApp({ config: { MONGODB_URI: uri } });
  });
  afterAll(async () => {
    await Promise.all([...replicas.map((p) => p.stop()), setup?.close()]);
  });

  it('20 concurrent identical POST /projects with one key, split across both, create exactly one project', async () => {
    const user = await createTenantUser(setup);
    const key = newKey();
    const name = `replicas-${key}`;
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${replicas[i % 2]!.url}/projects`, {
          method: 'POST',
          headers: { 'X-API-Key': user.key, 'Content-Type': 'application/json', 'Idempotency-Key': key },
          body: JSON.stringify({ name }),
        }),
      ),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 201 || s === 409), statuses.join(',')).toBe(true);
    expect(answers.filter((a) => a.status === 201 && !a.headers.get('idempotent-replayed'))).toHaveLength(1);
    const list = await (await fetch(`${replicas[0]!.url}/projects?name=${name}`, { headers: { 'X-API-Key': user.key } })).json();
    expect(list.total).toBe(1);
  });
});
