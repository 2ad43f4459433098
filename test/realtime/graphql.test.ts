/**
 * GraphQL subscriptions on /graphql over both transports (graphql-ws with the `ws` package, and
 * Yoga's GraphQL over SSE): `events`, `resourceChanged`, `jobRun`, `auditEntries`; the refused
 * `connection_init`; the same limits and error codes as over HTTP; who sees what on each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { jobsFixturePlugin } from '../fixtures/jobs-fixture-plugin.ts';
import { eventWriterPlugin } from '../fixtures/event-writer-plugin.ts';
import { resourceEventsPlugin } from '../fixtures/resource-events-plugin.ts';
import { FAST, trigger, waitRun } from '../jobs/helpers.ts';
import { EVENT_FIELDS, EVENTS_SUBSCRIPTION, sleep, sseSubscribe, until, wsTracker } from './helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
let userA: Awaited<ReturnType<typeof createTenantUser>>;
let adminA: Awaited<ReturnType<typeof createTenantUser>>;
let userB: Awaited<ReturnType<typeof createTenantUser>>;
const ws = wsTracker(() => t.url);
const { client, sub } = ws;
const EVENTS = EVENTS_SUBSCRIPTION;
const CHANGED = `subscription($resource: String!, $id: ID) { resourceChanged(resource: $resource, id: $id) { ${EVENT_FIELDS} } }`;

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin, auditPlugin, jobsPlugin, jobsFixturePlugin, eventWriterPlugin, resourceEventsPlugin],
    config: { ...FAST, SAMPLE_RESOURCES_ENABLED: 'false', EVENTS_POLL_INTERVAL_MS: '50', GRAPHQL_MAX_ALIASES: '3' },
  });
  userA = await createTenantUser(t, { features: ['memos'] });
  adminA = await createTenantUser(t, { tenantId: userA.tenantId, roles: ['admin'], features: ['memos'] });
  // B's user is A's user's second membership: one person, two tenants.
  userB = await addMembership(t, userA.userId, { features: ['memos'] });
});
afterAll(async () => {
  await ws.disposeAll();
  await t?.close();
});

const memo = (key: string, title: string) => t.http('POST', '/memos', { key, json: { title } });

describe('graphql-ws on /graphql', () => {
  it('refuses connection_init without a credential or with a rejected one (4403); accepts {apiKey}, {authorization} and upgrade headers', async () => {
    for (const params of [{}, { apiKey: 'ak_wrong-0000000000000000000' }, { authorization: 'Bearer not.a.token' }]) {
      let closed: any;
      const s = sub(client(params, (e) => (closed = e)), EVENTS);
      await until(() => s.done && closed, 5000, 'refusal');
      expect(closed.code).toBe(4403);
      expect(s.results).toEqual([]);
    }
    const tok = await t.http('POST', '/auth/token', { key: userA.key });
    expect(tok.status).toBe(200);
    const byToken = sub(client({ authorization: `Bearer ${tok.body.token}` }), EVENTS, { types: ['memos.created'] });
    const byKey = sub(client({ apiKey: userA.key }), EVENTS, { types: ['memos.created'] });
    await sleep(300);
    await memo(userA.key, 'hello ws');
    await until(() => byToken.results.length === 1 && byKey.results.length === 1, 15_000, 'deliveries');
    expect(byKey.values('events')[0]).toMatchObject({ type: 'memos.created', tenant_id: userA.tenantId, data: { title: 'hello ws' } });
    expect(byKey.values('events')[0].data).not.toHaveProperty('secret');
  });

  it('events: tenant, feature guard and administrators-only types, per subscriber', async () => {
    const noFeature = await createTenantUser(t, { tenantId: userA.tenantId });
    const a = sub(client({ apiKey: userA.key }), EVENTS);
    const b = sub(client({ apiKey: userB.key }), EVENTS);
    const nf = sub(client({ apiKey: noFeature.key }), EVENTS);
    const adm = sub(client({ apiKey: adminA.key }), EVENTS, { types: ['ew_note.created'] });
    await sleep(300);
    await memo(userA.key, 'a1');
    await memo(userB.key, 'b1');
    await t.http('POST', '/ew-notes', { key: userA.key, json: { title: 'note' } });
    await until(() => a.results.length >= 1 && b.results.length >= 1 && adm.results.length === 1, 15_000, 'deliveries');
    await sleep(400);
    expect(a.values('events').map((e) => e.data.title)).toEqual(['a1']);
    expect(b.values('events').map((e) => e.data.title)).toEqual(['b1']);
    expect(nf.results).toEqual([]);
    expect(adm.values('events').map((e) => e.type)).toEqual(['ew_note.created']);
  });

  it('resourceChanged: one resource, optionally one document; a failed guard is the subscription error ACCESS_DENIED; an unknown resource NOT_FOUND', async () => {
    const first = await memo(userA.key, 'watched');
    const other = await memo(userA.key, 'other');
    const all = sub(client({ apiKey: userA.key }), CHANGED, { resource: 'memos' });
    const one = sub(client({ apiKey: userA.key }), CHANGED, { resource: 'memos', id: first.body._id });
    const fromB = sub(client({ apiKey: userB.key }), CHANGED, { resource: 'memos', id: first.body._id });
    await sleep(300);
    const etag = (id: string) => t.http('GET', `/memos/${id}`, { key: userA.key }).then((r) => r.headers.get('etag')!);
    expect((await t.http('PATCH', `/memos/${first.body._id}`, { key: userA.key, json: { title: 'watched 2' }, headers: { 'If-Match': await etag(first.body._id) } })).status).toBe(200);
    expect((await t.http('PATCH', `/memos/${other.body._id}`, { key: userA.key, json: { title: 'other 2' }, headers: { 'If-Match': await etag(other.body._id) } })).status).toBe(200);
    expect((await t.http('DELETE', `/memos/${first.body._id}`, { key: userA.key, headers: { 'If-Match': await etag(first.body._id) } })).status).toBe(204);
    await until(() => one.results.length === 2 && all.results.length === 3, 15_000, 'changes').catch((e) => { throw new Error(`${e.message}: ${JSON.stringify([one.results, all.results, one.errors])}`); });
    await sleep(300);
    expect(one.values('resourceChanged').map((e) => e.type)).toEqual(['memos.updated', 'memos.deleted']);
    expect(all.values('resourceChanged').map((e) => e.data.title)).toEqual(['watched 2', 'other 2', 'watched 2']);
    expect(fromB.results).toEqual([]);

    const noFeature = await createTenantUser(t, { tenantId: userA.tenantId });
    const denied = sub(client({ apiKey: noFeature.key }), CHANGED, { resource: 'memos' });
    const unknown = sub(client({ apiKey: userA.key }), CHANGED, { resource: 'nothing' });
    await until(() => denied.errors.length && unknown.errors.length, 5000, 'errors');
    expect(denied.errors[0].extensions).toMatchObject({ code: 'ACCESS_DENIED', status: 403, details: { feature: 'memos' }, request_id: expect.any(String) });
    expect(unknown.errors[0].extensions).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('the same limits and validation as over HTTP: aliases (BAD_REQUEST), variables depth, unknown type (VALIDATION_ERROR), unknown field', async () => {
    const c = client({ apiKey: adminA.key });
    const aliases = sub(c, 'subscription { events { a: id b: id c: id d: id e: id } }');
    const badType = sub(c, EVENTS, { types: ['no.such'] });
    const unknownField = sub(c, 'subscription { events { nope } }');
    let vars: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 40; i++) vars = { x: vars };
    const deepVars = sub(c, 'subscription($v: JSON) { events { id } }', { v: vars });
    const missingRun = sub(c, 'subscription { jobRun(id: "5f0000000000000000000000") { event } }');
    await until(() => aliases.done && badType.done && unknownField.done && deepVars.done && missingRun.done, 5000, 'refusals');
    expect(aliases.errors[0].extensions).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
    expect(badType.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { errors: [expect.objectContaining({ loc: ['args', 'types'] })] } });
    expect(unknownField.errors[0].message).toMatch(/nope/);
    expect(deepVars.errors[0].extensions).toMatchObject({ code: 'BAD_REQUEST', details: { limit: 'input_depth' } });
    expect(missingRun.errors[0].extensions).toMatchObject({ code: 'NOT_FOUND', request_id: expect.any(String) });
    // The connection stays usable after refused operations.
    const ok = sub(c, EVENTS, { types: ['ew_note.created'] });
    await sleep(300);
    await t.http('POST', '/ew-notes', { key: adminA.key, json: { title: 'still open' } });
    await until(() => ok.results.length === 1, 15_000, 'a delivery');
  });

  it('jobRun: log lines, progress and the end of one run, tenant-scoped as GET /jobs/runs/{id}', async () => {
    const r = await trigger(t, 'sleepy', { ms: 1200, steps: 3 });
    expect(r.status).toBe(202);
    const q = 'subscription($id: String!) { jobRun(id: $id) { event status percentage log { message level } result } }';
    const s = sub(client({ apiKey: ADMIN_KEY }), q, { id: r.body.id });
    const other = sub(client({ apiKey: adminA.key }), q, { id: r.body.id });
    await until(() => s.done, 15_000, 'the run end');
    const updates = s.values('jobRun');
    expect(updates.at(-1)).toMatchObject({ event: 'end', status: 'completed' });
    expect(updates.filter((u) => u.event === 'log').length).toBeGreaterThan(0);
    expect(updates.filter((u) => u.event === 'progress').length).toBeGreaterThan(0);
    await waitRun(t, r.body.id);
    await until(() => other.done, 5000);
    expect(other.errors[0].extensions.code).toBe('NOT_FOUND');
  });

  it('auditEntries: new entries for those who may list the audit log, of their tenant only', async () => {
    const q = 'subscription($resource: String) { auditEntries(resource: $resource) { id resource operation tenant_id } }';
    const adm = sub(client({ apiKey: adminA.key }), q, { resource: 'memos' });
    const user = sub(client({ apiKey: userA.key }), q, {});
    const otherAdmin = await createTenantUser(t, { tenantId: userB.tenantId, roles: ['admin'] });
    const admB = sub(client({ apiKey: otherAdmin.key }), q, {});
    await until(() => user.done, 5000);
    expect(user.errors[0].extensions.code).toBe('ACCESS_DENIED');
    await sleep(300);
    await memo(userA.key, 'audited');
    await until(() => adm.results.length === 1, 15_000, 'the audit entry');
    expect(adm.values('auditEntries')[0]).toMatchObject({ resource: 'memos', operation: 'insert', tenant_id: userA.tenantId });
    await sleep(400);
    expect(admB.results).toEqual([]);
    // An administrator who loses the role stops receiving: the stream ends with ACCESS_DENIED (with
    // another administrator in the tenant, since its last one keeps the role).
    await createTenantUser(t, { tenantId: userB.tenantId, roles: ['admin'] });
    expect((await t.http('PATCH', `/admin/users/${otherAdmin.userId}`, { json: { roles: ['user'] } })).status).toBe(200);
    await until(() => admB.done, 10_000, 'the end of the demoted stream');
    expect(admB.errors[0].extensions.code).toBe('ACCESS_DENIED');
  });
});

describe('GraphQL over SSE (Yoga) on /graphql', () => {
  it('events and resourceChanged stream as `next` events; tenant and guard rules as over WebSocket; 401 envelope for a rejected key', async () => {
    const a = await sseSubscribe(t.url, EVENTS, { types: ['memos.created'] }, { 'X-API-Key': userA.key });
    const b = await sseSubscribe(t.url, CHANGED, { resource: 'memos' }, { 'X-API-Key': userB.key });
    expect(a.status).toBe(200);
    await sleep(300);
    await memo(userA.key, 'over sse');
    await memo(userB.key, 'b over sse');
    await until(() => a.results().length === 1 && b.results().length === 1, 15_000, 'deliveries');
    expect(a.results()[0].data.events).toMatchObject({ type: 'memos.created', data: { title: 'over sse' } });
    expect(b.results()[0].data.resourceChanged).toMatchObject({ tenant_id: userB.tenantId, data: { title: 'b over sse' } });
    a.close();
    b.close();
    const noFeature = await createTenantUser(t, { tenantId: userA.tenantId });
    const denied = await sseSubscribe(t.url, CHANGED, { resource: 'memos' }, { 'X-API-Key': noFeature.key });
    await until(() => denied.ended, 5000);
    expect(denied.results()[0].errors[0].extensions.code).toBe('ACCESS_DENIED');
    const bad = await sseSubscribe(t.url, EVENTS, {}, { 'X-API-Key': 'ak_wrong-0000000000000000000' });
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe('AUTH_REQUIRED');
    const anonymous = await sseSubscribe(t.url, EVENTS, {}, {});
    await until(() => anonymous.ended, 5000);
    expect(anonymous.results()[0].errors[0].extensions.code).toBe('AUTH_REQUIRED');
  });
});
