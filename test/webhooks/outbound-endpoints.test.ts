/**
 * /webhook-endpoints through HTTP: create, list, get, patch, delete; the secret shown once; event
 * types checked against the catalogue; refused URLs; roles; audit entries without secrets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { outboundEventsPlugin, TEST_EVENT } from '../fixtures/outbound-events-plugin.ts';
import { OUTBOUND_CONFIG } from './outbound-helpers.ts';

let t: TestApp;
let a: Awaited<ReturnType<typeof createTenantUser>>;
let aUser: Awaited<ReturnType<typeof createTenantUser>>;
const URL_A = 'http://127.0.0.1:9/a';

beforeAll(async () => {
  t = await buildTestApp({ plugins: [webhooksPlugin, auditPlugin, outboundEventsPlugin], config: OUTBOUND_CONFIG });
  a = await createTenantUser(t, { roles: ['admin'] });
  aUser = await createTenantUser(t, { tenantId: a.tenantId, roles: ['user'] });
});
afterAll(() => t?.close());

const create = (json: unknown, key = a.key) => t.http('POST', '/webhook-endpoints', { key, json });

describe('endpoints', () => {
  it('creates an endpoint answering its secret once; list, get and patch never show it', async () => {
    const res = await create({ url: URL_A, event_types: [TEST_EVENT, 'ping'], description: 'orders' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ url: URL_A, event_types: [TEST_EVENT, 'ping'], description: 'orders', enabled: true, disabled_reason: null, secret_rotated_at: null });
    expect(res.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(res.body.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    const id = res.body.id;

    const one = await t.http('GET', `/webhook-endpoints/${id}`, { key: a.key });
    expect(one.status).toBe(200);
    expect(one.body).not.toHaveProperty('secret');
    expect(JSON.stringify(one.body)).not.toContain(res.body.secret.slice(6));

    const list = await t.http('GET', '/webhook-endpoints?per_page=1', { key: a.key });
    expect(list.status).toBe(200);
    expect(list.headers.get('x-total-count')).toBe(String(list.body.total));
    expect(list.body.items).toHaveLength(1);
    expect(JSON.stringify(list.body)).not.toContain('whsec_');

    const patched = await t.http('PATCH', `/webhook-endpoints/${id}`, { key: a.key, json: { url: 'http://127.0.0.1:9/b', event_types: ['*'], enabled: false, description: null } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ url: 'http://127.0.0.1:9/b', event_types: ['*'], enabled: false, description: null });
    expect(patched.body).not.toHaveProperty('secret');

    expect((await t.http('DELETE', `/webhook-endpoints/${id}`, { key: a.key })).status).toBe(204);
    expectError(await t.http('GET', `/webhook-endpoints/${id}`, { key: a.key }), 404, 'NOT_FOUND');
    expectError(await t.http('DELETE', `/webhook-endpoints/${id}`, { key: a.key }), 404, 'NOT_FOUND');
  });

  it('paginates with page/per_page and the page headers', async () => {
    const b = await createTenantUser(t, { roles: ['admin'] });
    for (let i = 0; i < 3; i++) expect((await create({ url: `${URL_A}${i}`, event_types: ['*'] }, b.key)).status).toBe(201);
    const p2 = await t.http('GET', '/webhook-endpoints?page=2&per_page=2', { key: b.key });
    expect(p2.body).toMatchObject({ total: 3, page: 2, per_page: 2, total_pages: 2 });
    expect(p2.body.items).toHaveLength(1);
    expect(p2.body.items[0].url).toBe(`${URL_A}0`);
    expect([p2.headers.get('x-page'), p2.headers.get('x-per-page'), p2.headers.get('x-total-pages')]).toEqual(['2', '2', '2']);
  });

  it('refuses an event type outside the catalogue, naming the known types, and writes nothing', async () => {
    const before = (await t.http('GET', '/webhook-endpoints', { key: a.key })).body.total;
    const err = expectError(await create({ url: URL_A, event_types: ['ping', 'no.such'] }), 422, 'VALIDATION_ERROR');
    expect(err.message).toContain(TEST_EVENT);
    expect(err.details.known_types).toEqual(expect.arrayContaining(['ping', TEST_EVENT, 'webhook_endpoint.disabled']));
    expect(err.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'event_types', 1] })]);
    expect((await t.http('GET', '/webhook-endpoints', { key: a.key })).body.total).toBe(before);
    const ok = (await create({ url: URL_A, event_types: ['*'] })).body.id;
    expectError(await t.http('PATCH', `/webhook-endpoints/${ok}`, { key: a.key, json: { event_types: ['nope'] } }), 422, 'VALIDATION_ERROR');
  });

  it('validates bodies: missing fields, bad url, unknown keys', async () => {
    expectError(await create({ event_types: ['*'] }), 422, 'VALIDATION_ERROR');
    expectError(await create({ url: 'ftp://127.0.0.1/x', event_types: ['*'] }), 422, 'VALIDATION_ERROR');
    expectError(await create({ url: URL_A, event_types: [] }), 422, 'VALIDATION_ERROR');
    expectError(await create({ url: URL_A, event_types: ['*'], secret: 'mine' }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('GET', '/webhook-endpoints/nope', { key: a.key }), 422, 'VALIDATION_ERROR');
  });

  it.each([
    ['a private address', 'http://10.0.0.1/x'],
    ['the metadata address', 'http://169.254.169.254/'],
    ['IPv6 loopback', 'http://[::1]/'],
    ['the name localhost', 'http://localhost/'],
    ['CGNAT', 'http://100.64.0.1/'],
    ['an IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]/'],
    ['the EC2 IPv6 metadata address', 'http://[fd00:ec2::254]/'],
    ['unspecified', 'http://0.0.0.0/'],
    ['multicast', 'http://224.0.0.1/'],
  ])('refuses %s at creation and update (422 on url)', async (_what, url) => {
    const err = expectError(await create({ url, event_types: ['*'] }), 422, 'VALIDATION_ERROR');
    expect(err.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'url'], msg: expect.stringMatching(/^refused: /) })]);
    const ok = (await create({ url: URL_A, event_types: ['*'] })).body.id;
    expectError(await t.http('PATCH', `/webhook-endpoints/${ok}`, { key: a.key, json: { url } }), 422, 'VALIDATION_ERROR');
    expect((await t.http('GET', `/webhook-endpoints/${ok}`, { key: a.key })).body.url).toBe(URL_A);
  });

  it('refuses a plain user (403) and an anonymous caller (401)', async () => {
    expectError(await create({ url: URL_A, event_types: ['*'] }, aUser.key), 403, 'ACCESS_DENIED');
    expectError(await t.http('GET', '/webhook-endpoints', { key: aUser.key }), 403, 'ACCESS_DENIED');
    expectError(await t.http('GET', '/webhook-endpoints', { key: null }), 401, 'AUTH_REQUIRED');
    const gql = await t.gql('{ webhookEndpoints { total } }', {}, { key: aUser.key });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
  });

  it('GraphQL: the declared administrator permission, before the arguments; nothing is written for a refused caller', async () => {
    const before = (await t.http('GET', '/webhook-endpoints?per_page=100', { key: a.key })).body.total;
    const m = 'mutation($u: String!) { createWebhookEndpoint(url: $u, event_types: ["*"]) { endpoint { id url } secret } }';
    for (const [key, code] of [[null, 'AUTH_REQUIRED'], [aUser.key, 'ACCESS_DENIED']] as const) {
      expect((await t.gql(m, { u: URL_A }, { key })).body.errors?.[0]?.extensions?.code).toBe(code);
      // A bad argument does not tell a refused caller anything: the permission comes first.
      expect((await t.gql(m, { u: 'not a url' }, { key })).body.errors?.[0]?.extensions?.code).toBe(code);
      expect((await t.gql('{ webhookEndpoints { total } }', {}, { key })).body.errors?.[0]?.extensions?.code).toBe(code);
    }
    expect((await t.http('GET', '/webhook-endpoints?per_page=100', { key: a.key })).body.total).toBe(before);
    const ok = await t.gql(m, { u: URL_A }, { key: a.key });
    expect(ok.body.errors).toBeUndefined();
    expect(ok.body.data.createWebhookEndpoint.endpoint.url).toBe(URL_A);
    const one = await t.gql('query($id: ID!) { webhookEndpoint(id: $id) { url } }', { id: ok.body.data.createWebhookEndpoint.endpoint.id }, { key: a.key });
    expect(one.body.data.webhookEndpoint).toEqual({ url: URL_A });
  });

  it('lets a system administrator act for a tenant with X-Tenant-Id', async () => {
    const res = await t.http('POST', '/webhook-endpoints', { key: ADMIN_KEY, headers: { 'X-Tenant-Id': a.tenantId }, json: { url: URL_A, event_types: ['ping'], description: 'by system' } });
    expect(res.status).toBe(201);
    const seen = await t.http('GET', `/webhook-endpoints/${res.body.id}`, { key: a.key });
    expect(seen.body.description).toBe('by system');
  });
});

describe('audit', () => {
  it('records creation, change, rotation and deletion, never with a secret', async () => {
    const res = await create({ url: URL_A, event_types: ['*'] });
    const id = res.body.id;
    const rotated = await t.http('POST', `/webhook-endpoints/${id}/rotate-secret`, { key: a.key });
    expect(rotated.status).toBe(200);
    await t.http('PATCH', `/webhook-endpoints/${id}`, { key: a.key, json: { description: 'x' } });
    await t.http('DELETE', `/webhook-endpoints/${id}`, { key: a.key });
    await t.app.services.get('audit').flush();
    const all = await t.app.db.conn.collection('audit_log').find({ resource: 'webhook_endpoints' }).toArray();
    const mine = all.filter((e) => String(e.item_id) === id);
    expect(mine.map((e) => e.operation).sort()).toEqual(['delete', 'insert', 'update', 'update']);
    const text = JSON.stringify(all);
    expect(text).not.toContain(res.body.secret.slice(6, 30));
    expect(text).not.toContain(rotated.body.secret.slice(6, 30));
    expect(text).not.toContain('whsec_');
    const rotation = mine.find((e) => e.operation === 'update' && e.changes?.secret_rotated_at);
    expect(rotation).toBeDefined();
  });
});
