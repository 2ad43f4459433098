/**
 * Tenant isolation of outbound webhooks on every route, REST and GraphQL: tenant B's administrator
 * can neither see nor touch tenant A's endpoints and deliveries (404), and counts do not cross.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { outboundEventsPlugin, TEST_EVENT } from '../fixtures/outbound-events-plugin.ts';
import { OUTBOUND_CONFIG, startReceiver, until, type Receiver } from './outbound-helpers.ts';
import { addMembership } from '../helpers/memberships.ts';

let t: TestApp;
let a: Awaited<ReturnType<typeof createTenantUser>>;
let b: Awaited<ReturnType<typeof createTenantUser>>;
let recv: Receiver;
let epA: string;
let delA: string;
let epB: string;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [webhooksPlugin, outboundEventsPlugin], config: OUTBOUND_CONFIG });
  a = await createTenantUser(t, { roles: ['admin'] });
  // B's administrator is A's administrator's second membership: one person, two tenants.
  b = await addMembership(t, a.userId, { roles: ['admin'] });
  recv = await startReceiver();
  epA = (await t.http('POST', '/webhook-endpoints', { key: a.key, json: { url: recv.url, event_types: ['*'] } })).body.id;
  epB = (await t.http('POST', '/webhook-endpoints', { key: b.key, json: { url: recv.url, event_types: ['*'] } })).body.id;
  await t.http('POST', '/webhook-endpoints', { key: a.key, json: { url: recv.url, event_types: ['ping'] } });
  await t.app.services.get('events').append(TEST_EVENT, { actor: systemActor(a.tenantId), tenant_id: a.tenantId, data: { n: 1 } });
  delA = await until(async () => {
    const d = (await t.http('GET', `/webhook-endpoints/${epA}/deliveries`, { key: a.key })).body.items[0];
    return d?.status === 'delivered' && d.id;
  });
});
afterAll(async () => {
  await t?.close();
  await recv?.close();
});

describe('REST', () => {
  it.each([
    ['GET', '{A}', () => `/webhook-endpoints/${epA}`],
    ['PATCH', '{A}', () => `/webhook-endpoints/${epA}`],
    ['DELETE', '{A}', () => `/webhook-endpoints/${epA}`],
    ['POST', '{A}/rotate-secret', () => `/webhook-endpoints/${epA}/rotate-secret`],
    ['POST', '{A}/test', () => `/webhook-endpoints/${epA}/test`],
    ['GET', '{A}/deliveries', () => `/webhook-endpoints/${epA}/deliveries`],
    ['POST', '{A}/deliveries/{A delivery}/retry', () => `/webhook-endpoints/${epA}/deliveries/${delA}/retry`],
    ['POST', '{B}/deliveries/{A delivery}/retry', () => `/webhook-endpoints/${epB}/deliveries/${delA}/retry`],
  ])("%s /webhook-endpoints/%s as tenant B is 404 and changes nothing", async (method, _label, path) => {
    const before = recv.requests.length;
    const json = method === 'PATCH' ? { description: 'hijacked' } : undefined;
    expectError(await t.http(method, path(), { key: b.key, ...(json ? { json } : {}) }), 404, 'NOT_FOUND');
    const still = await t.http('GET', `/webhook-endpoints/${epA}`, { key: a.key });
    expect(still.status).toBe(200);
    expect(still.body.description).toBeNull();
    expect(still.body.secret_rotated_at).toBeNull();
    expect(recv.requests.length).toBe(before);
  });

  it('lists and counts only the own tenant', async () => {
    const la = await t.http('GET', '/webhook-endpoints', { key: a.key });
    const lb = await t.http('GET', '/webhook-endpoints', { key: b.key });
    expect([la.body.total, lb.body.total]).toEqual([2, 1]);
    expect(lb.body.items.map((e: { id: string }) => e.id)).toEqual([epB]);
    expect((await t.http('GET', `/webhook-endpoints/${epB}/deliveries`, { key: b.key })).body.total).toBe(0);
    expect((await t.http('GET', `/webhook-endpoints/${epA}/deliveries`, { key: a.key })).body.total).toBe(1);
  });
});

describe('GraphQL', () => {
  const gqlErr = async (query: string, variables: Record<string, unknown>) => {
    const res = await t.gql(query, variables, { key: b.key });
    return res.body.errors?.[0]?.extensions?.code;
  };

  it.each([
    ['webhookEndpoint', 'query($id: ID!) { webhookEndpoint(id: $id) { id } }'],
    ['webhookDeliveries', 'query($id: ID!) { webhookDeliveries(endpoint_id: $id) { total } }'],
    ['updateWebhookEndpoint', 'mutation($id: ID!) { updateWebhookEndpoint(id: $id, description: "x") { id } }'],
    ['deleteWebhookEndpoint', 'mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }'],
    ['rotateWebhookEndpointSecret', 'mutation($id: ID!) { rotateWebhookEndpointSecret(id: $id) { secret } }'],
    ['testWebhookEndpoint', 'mutation($id: ID!) { testWebhookEndpoint(id: $id) { id } }'],
    ['retryWebhookDelivery', 'mutation($id: ID!, $d: ID!) { retryWebhookDelivery(endpoint_id: $id, delivery_id: $d) { id } }'],
  ])("%s on another tenant's endpoint is NOT_FOUND", async (_name, query) => {
    expect(await gqlErr(query, { id: epA, d: delA })).toBe('NOT_FOUND');
    const still = await t.http('GET', `/webhook-endpoints/${epA}`, { key: a.key });
    expect(still.body).toMatchObject({ description: null, secret_rotated_at: null });
  });

  it('lists only the own tenant, and manages its own endpoints like REST', async () => {
    const list = await t.gql('{ webhookEndpoints { total items { id url event_types enabled } } }', {}, { key: b.key });
    expect(list.body.data.webhookEndpoints).toMatchObject({ total: 1, items: [{ id: epB }] });
    const created = await t.gql(
      'mutation($url: String!) { createWebhookEndpoint(url: $url, event_types: ["ping"], description: "g") { secret endpoint { id description enabled } } }',
      { url: recv.url },
      { key: b.key },
    );
    const c = created.body.data.createWebhookEndpoint;
    expect(c.secret).toMatch(/^whsec_/);
    expect(c.endpoint).toMatchObject({ description: 'g', enabled: true });
    const bad = await t.gql('mutation { createWebhookEndpoint(url: "http://10.0.0.1/", event_types: ["ping"]) { secret } }', {}, { key: b.key });
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const unknown = await t.gql(`mutation($url: String!) { createWebhookEndpoint(url: $url, event_types: ["nope"]) { secret } }`, { url: recv.url }, { key: b.key });
    expect(unknown.body.errors?.[0]?.extensions?.details?.known_types).toEqual(expect.arrayContaining(['ping', TEST_EVENT]));
    const upd = await t.gql('mutation($id: ID!) { updateWebhookEndpoint(id: $id, enabled: false) { enabled } }', { id: c.endpoint.id }, { key: b.key });
    expect(upd.body.data.updateWebhookEndpoint.enabled).toBe(false);
    const rot = await t.gql('mutation($id: ID!) { rotateWebhookEndpointSecret(id: $id) { secret endpoint { secret_rotated_at } } }', { id: c.endpoint.id }, { key: b.key });
    expect(rot.body.data.rotateWebhookEndpointSecret.secret).not.toBe(c.secret);
    const del = await t.gql('mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }', { id: c.endpoint.id }, { key: b.key });
    expect(del.body.data.deleteWebhookEndpoint).toBe(true);
    expect((await t.gql('{ webhookEndpoints { total } }', {}, { key: b.key })).body.data.webhookEndpoints.total).toBe(1);
  });

  it('shows deliveries and retries them for the own tenant', async () => {
    const res = await t.gql('query($id: ID!) { webhookDeliveries(endpoint_id: $id) { total items { id status attempts last_attempt { status } } } }', { id: epA }, { key: a.key });
    expect(res.body.data.webhookDeliveries).toMatchObject({ total: 1, items: [{ id: delA, status: 'delivered', last_attempt: { status: 200 } }] });
    const retry = await t.gql('mutation($id: ID!, $d: ID!) { retryWebhookDelivery(endpoint_id: $id, delivery_id: $d) { status attempts } }', { id: epA, d: delA }, { key: a.key });
    expect(retry.body.data.retryWebhookDelivery).toEqual({ status: 'delivered', attempts: 2 });
  });
});
