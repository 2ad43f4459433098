/**
 * One door: an operation over graphql-ws passes the guards of an HTTP request. One rate-limit
 * budget per key whatever the transport (REST, GraphQL over HTTP, over SSE, over WebSocket), the
 * same RATE_LIMITED refusal, an access-log line naming the transport, the request metrics, and
 * `extensions.idempotencyKey` with the store and answers of the `Idempotency-Key` header.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import WebSocket from 'ws';
import { createClient, type Client } from 'graphql-ws';
import { ADMIN_KEY, buildTestApp, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { total } from '../observability/helpers.ts';
import { EVENTS_SUBSCRIPTION, sseSubscribe, until, wsTracker } from './helpers.ts';

const MAX = 12;
const FAILURES = 4;
type Line = Record<string, unknown>;
const lines: Line[] = [];
const sink = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Line); cb(); } });
const requests = () => lines.filter((l) => l.msg === 'request');

let t: TestApp;
const ws = wsTracker(() => t.url);
beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin],
    config: { RATE_LIMIT_MAX: String(MAX), RATE_LIMIT_WINDOW_SECONDS: '60', AUTH_FAILURE_LIMIT: String(FAILURES), TRUST_PROXY: 'true' },
    logger: pino({ level: 'info', base: undefined }, sink),
  });
});
afterAll(async () => {
  await ws.disposeAll();
  await t?.close();
});

/** A user with an API key, made through the identity service so that no request spends a budget. */
async function newUser(): Promise<{ key: string; tenantId: string; userId: string }> {
  const identity = t.app.services.get('identity');
  const admin = await identity.authenticateApiKey(ADMIN_KEY);
  const tenant = await identity.createTenant(admin, { name: `door-${randomBytes(3).toString('hex')}` });
  const user = await identity.createUser(admin, { email: `door-${randomBytes(4).toString('hex')}@example.com`, name: 'Door', tenant_id: tenant.id });
  return { key: (await identity.createApiKey(admin, { user_id: user.id, name: 'door' })).key, tenantId: tenant.id, userId: user.id };
}

type Answer = { results: any[]; errors: any[] };
/** One query or mutation over graphql-ws: its results and errors once it completed. */
function op(client: Client, query: string, variables: Record<string, unknown> = {}, extensions?: Record<string, unknown>): Promise<Answer> {
  const a: Answer = { results: [], errors: [] };
  return new Promise((resolve) => {
    client.subscribe({ query, variables, ...(extensions ? { extensions } : {}) }, {
      next: (r) => a.results.push(r),
      error: (e) => {
        a.errors.push(...(Array.isArray(e) ? e : [e]));
        resolve(a);
      },
      complete: () => resolve(a),
    });
  });
}

const ME = 'query Me { me { id } }';
const CREATE = 'mutation ($input: JSON!) { createProject(input: $input) { _id name } }';

function expectRateLimited(a: Answer) {
  expect(a.results).toEqual([]);
  expect(a.errors).toHaveLength(1);
  const ext = a.errors[0].extensions;
  expect(ext).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
  expect(ext.retry_after).toBeGreaterThanOrEqual(1);
  expect(ext.retry_after).toBeLessThanOrEqual(60);
  expect(ext.details).toEqual({ retry_after: ext.retry_after });
  expect(typeof ext.request_id).toBe('string');
}

describe('one rate-limit budget per key, whatever the transport', () => {
  it('REST, GraphQL over HTTP, GraphQL over SSE and graphql-ws spend one budget; past it every door refuses', async () => {
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    for (let i = 0; i < 3; i++) expect((await t.http('GET', '/auth/me', { key: u.key })).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await t.gql(ME, {}, { key: u.key })).status).toBe(200);
    const sse = await sseSubscribe(t.url, EVENTS_SUBSCRIPTION, {}, { 'X-API-Key': u.key });
    expect(sse.status).toBe(200);
    sse.close();
    for (let i = 0; i < 3; i++) expect((await op(c, ME)).results[0].data.me.id).toBe(u.userId);
    // 10 spent: the HTTP request sees the WebSocket's three.
    const rest = await t.http('GET', '/auth/me', { key: u.key });
    expect(rest.headers.get('ratelimit-remaining')).toBe(String(MAX - 11));
    expect((await op(c, ME)).errors).toEqual([]);
    expectRateLimited(await op(c, ME));
    expectError(await t.http('GET', '/auth/me', { key: u.key }), 429, 'RATE_LIMITED');
    expectError(await t.gql(ME, {}, { key: u.key }), 429, 'RATE_LIMITED');
    expect((await sseSubscribe(t.url, EVENTS_SUBSCRIPTION, {}, { 'X-API-Key': u.key })).status).toBe(429);
    // Another key has its own budget.
    expect((await t.http('GET', '/auth/me', { key: (await newUser()).key })).status).toBe(200);
  });

  it('a flood over one WebSocket is answered exactly up to the budget; then HTTP on the same key is 429', async () => {
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    const answers = await Promise.all(Array.from({ length: 50 }, () => op(c, ME)));
    const answered = answers.filter((a) => a.results[0]?.data?.me);
    expect(answered).toHaveLength(MAX);
    for (const a of answers.filter((x) => !x.results.length)) expectRateLimited(a);
    const http = await t.http('GET', '/auth/me', { key: u.key });
    expectError(http, 429, 'RATE_LIMITED');
    expect(Number(http.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('a bearer token spends its user\'s budget over WebSocket as over HTTP', async () => {
    const u = await newUser();
    const tok = await t.http('POST', '/auth/token', { key: u.key });
    expect(tok.status).toBe(200);
    const c = ws.client({ authorization: `Bearer ${tok.body.token}` });
    for (let i = 0; i < MAX - 1; i++) expect((await op(c, ME)).errors).toEqual([]);
    expect((await t.http('GET', '/auth/me', { token: tok.body.token })).status).toBe(200);
    expectRateLimited(await op(c, ME));
  });
});

describe('authentication', () => {
  it('a rejected connection_init counts as a failed authentication: guesses of one key prefix over WebSocket lock it out over HTTP too', async () => {
    const prefix = `ak_${randomBytes(3).toString('hex')}`;
    const guess = () => `${prefix}${randomBytes(16).toString('hex')}`;
    for (let i = 0; i < FAILURES; i++) {
      let closed: any;
      const c = ws.client({ apiKey: guess() }, (e) => (closed = e));
      await op(c, ME);
      await until(() => closed, 5000, 'the refusal');
      expect(closed.code).toBe(4403);
    }
    // From another address, the same prefix is now past AUTH_FAILURE_LIMIT: 429 instead of 401.
    expectError(await t.http('GET', '/auth/me', { key: guess(), headers: { 'X-Forwarded-For': '10.77.0.1' } }), 429, 'RATE_LIMITED');
    expectError(await t.http('GET', '/auth/me', { key: `ak_${randomBytes(16).toString('hex')}`, headers: { 'X-Forwarded-For': '10.77.0.2' } }), 401, 'AUTH_REQUIRED');
  });

  it('with TRUST_PROXY, a WebSocket\'s client address is its upgrade request\'s X-Forwarded-For, as over HTTP', async () => {
    const ip = `10.78.0.${randomBytes(1)[0]}`;
    class Forwarded extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols, { headers: { 'X-Forwarded-For': ip } });
      }
    }
    for (let i = 0; i < FAILURES; i++) {
      let closed: any;
      const c = createClient({ url: `${t.url.replace(/^http/, 'ws')}/graphql`, webSocketImpl: Forwarded, connectionParams: { apiKey: `ak_${randomBytes(16).toString('hex')}` }, retryAttempts: 0, lazy: true, on: { closed: (e) => (closed = e) } });
      await op(c, ME);
      await until(() => closed, 5000, 'the refusal');
      await c.dispose();
    }
    expectError(await t.http('GET', '/auth/me', { key: `ak_${randomBytes(16).toString('hex')}`, headers: { 'X-Forwarded-For': ip } }), 429, 'RATE_LIMITED');
  });
});

describe('access log and metrics', () => {
  it('each WebSocket operation writes one access-log line with transport "ws"; HTTP and SSE name theirs', async () => {
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    lines.length = 0;
    await op(c, ME);
    await t.http('GET', '/auth/me', { key: u.key });
    const sse = await sseSubscribe(t.url, EVENTS_SUBSCRIPTION, {}, { 'X-API-Key': u.key });
    await until(() => sse.comments.length || sse.events.length || sse.status === 200, 5000, 'stream open');
    sse.close();
    await until(() => requests().some((l) => l.transport === 'sse'), 10_000, 'the SSE line');
    const ws1 = requests().filter((l) => l.transport === 'ws');
    expect(ws1).toEqual([expect.objectContaining({
      method: 'WS', route: '/graphql', status: 200, operation_type: 'query', operation_name: 'Me', tenant_id: u.tenantId, actor_id: u.userId,
    })]);
    expect(typeof ws1[0]!.request_id).toBe('string');
    expect(typeof ws1[0]!.duration_ms).toBe('number');
    expect(requests().find((l) => l.transport === 'http')).toMatchObject({ method: 'GET', route: '/auth/me', status: 200 });
    expect(requests().find((l) => l.transport === 'sse')).toMatchObject({ method: 'POST', route: '/graphql', status: 200 });
  });

  it('a refused WebSocket operation is logged with its 429 and the error\'s request id', async () => {
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    await Promise.all(Array.from({ length: MAX }, () => op(c, ME)));
    lines.length = 0;
    const refused = await op(c, ME);
    expectRateLimited(refused);
    expect(requests()).toEqual([expect.objectContaining({ transport: 'ws', status: 429, request_id: refused.errors[0].extensions.request_id, actor_id: u.userId })]);
  });

  it('WebSocket operations are counted in http_request_duration_seconds (method "WS") and their refusals in rate_limit_refusals_total', async () => {
    const labels = { method: 'WS', route: '/graphql' };
    const ok = await total(t, 'http_request_duration_seconds', { ...labels, status_class: '2xx' });
    const limited = await total(t, 'http_request_duration_seconds', { ...labels, status_class: '4xx' });
    const refusals = await total(t, 'rate_limit_refusals_total');
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    await Promise.all(Array.from({ length: MAX + 3 }, () => op(c, ME)));
    expect(await total(t, 'http_request_duration_seconds', { ...labels, status_class: '2xx' })).toBe(ok + MAX);
    expect(await total(t, 'http_request_duration_seconds', { ...labels, status_class: '4xx' })).toBe(limited + 3);
    expect(await total(t, 'rate_limit_refusals_total')).toBe(refusals + 3);
  });
});

describe('extensions.idempotencyKey over graphql-ws', () => {
  const records = () => t.app.db.conn.collection('idempotency_keys');
  const named = async (name: string, key: string) => (await t.http('GET', `/projects?name=${encodeURIComponent(name)}&per_page=100`, { key })).body.items as unknown[];

  it('a repeated mutation answers the stored result (idempotentReplayed) and writes once; another body with the key is IDEMPOTENCY_KEY_REUSED', async () => {
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    const key = `k-${randomBytes(6).toString('hex')}`;
    const name = `ws-${key}`;
    const first = await op(c, CREATE, { input: { name } }, { idempotencyKey: key });
    expect(first.errors).toEqual([]);
    const created = first.results[0].data.createProject;
    expect(created.name).toBe(name);
    expect(first.results[0].extensions?.idempotentReplayed).toBeUndefined();
    const again = await op(c, CREATE, { input: { name } }, { idempotencyKey: key });
    expect(again.errors).toEqual([]);
    expect(again.results[0].data.createProject).toEqual(created);
    expect(again.results[0].extensions).toEqual({ idempotentReplayed: true });
    expect(await named(name, u.key)).toHaveLength(1);
    // The same store as the header: the same operation over HTTP with the key is that answer too.
    const http = await t.gql(CREATE, { input: { name } }, { key: u.key, headers: { 'Idempotency-Key': key } });
    expect(http.headers.get('idempotent-replayed')).toBe('true');
    expect(http.body.data.createProject).toEqual(created);
    const other = await op(c, CREATE, { input: { name: `${name}-2` } }, { idempotencyKey: key });
    expect(other.results).toEqual([]);
    expect(other.errors[0].extensions).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', status: 422 });
    expect(await named(`${name}-2`, u.key)).toHaveLength(0);
    expect(await records().countDocuments({ key })).toBe(1);
  });

  it('10 concurrent identical mutations with one key over one socket create exactly one project; the others replay or are IDEMPOTENCY_IN_PROGRESS', async () => {
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    const key = `k-${randomBytes(6).toString('hex')}`;
    const name = `ws-race-${key}`;
    const answers = await Promise.all(Array.from({ length: 10 }, () => op(c, CREATE, { input: { name } }, { idempotencyKey: key })));
    const ids = new Set(answers.filter((a) => a.results.length).map((a) => a.results[0].data.createProject._id));
    expect(ids.size).toBe(1);
    for (const a of answers.filter((x) => !x.results.length)) expect(a.errors[0].extensions).toMatchObject({ code: 'IDEMPOTENCY_IN_PROGRESS', status: 409 });
    expect(await named(name, u.key)).toHaveLength(1);
  });

  it('a key longer than 255 characters is BAD_REQUEST and runs nothing; queries and keyless mutations keep no record', async () => {
    const u = await newUser();
    const c = ws.client({ apiKey: u.key });
    const name = `ws-long-${randomBytes(4).toString('hex')}`;
    const long = await op(c, CREATE, { input: { name } }, { idempotencyKey: 'x'.repeat(256) });
    expect(long.errors[0].extensions).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
    expect(await named(name, u.key)).toHaveLength(0);
    const key = `k-${randomBytes(6).toString('hex')}`;
    expect((await op(c, ME, {}, { idempotencyKey: key })).errors).toEqual([]);
    expect(await records().countDocuments({ key })).toBe(0);
  });
});
