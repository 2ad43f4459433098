/**
 * Outbound webhooks under access rules: an endpoint naming a `role` is sent only the events of rows
 * that role may read, with `data` masked to its fields, to a real local receiver; an endpoint
 * without one gets every event whole. The role must exist in the endpoint's tenant (or be built
 * in), on REST and GraphQL, and a role an endpoint names cannot be deleted or renamed (409).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { OUTBOUND_CONFIG, startReceiver, until, type Receiver } from '../webhooks/outbound-helpers.ts';
import { createRole, folders, newTenant, notes } from './helpers.ts';

type Doc = Record<string, any>;
let t: TestApp;
let a: string;
let b: string;
let role: { id: string };
const receivers: Receiver[] = [];
const as = (tenant: string) => ({ 'X-Tenant-Id': tenant });
const endpoint = (tenant: string, json: Doc) => t.http('POST', '/webhook-endpoints', { key: ADMIN_KEY, headers: as(tenant), json });
const bodies = (r: Receiver) => r.requests.map((q) => JSON.parse(q.body) as Doc);

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin.configure({ resources: [notes, folders] }), accessPlugin, webhooksPlugin],
    config: OUTBOUND_CONFIG, checkResponses: false,
  });
  a = await newTenant(t);
  b = await newTenant(t);
  role = await createRole(t, { name: 'open-only', permissions: { notes: { read: { rows: { status: 'open' }, fields: { except: ['secret'] } } } } }, { tenantId: a });
  await createRole(t, { name: 'b-only', permissions: { notes: { read: true } } }, { tenantId: b });
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t?.close();
});

describe('webhook endpoints with a role', () => {
  it('validates the role: unknown or another tenant\'s is 422 naming it; built-in and the tenant\'s own are kept', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const unknown = expectError(await endpoint(a, { url: r.url, event_types: ['notes.created'], role: 'nope' }), 422, 'VALIDATION_ERROR');
    expect(unknown.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'role'], type: 'unknown_role' })]);
    expectError(await endpoint(a, { url: r.url, event_types: ['notes.created'], role: 'b-only' }), 422, 'VALIDATION_ERROR');
    const builtin = await endpoint(a, { url: r.url, event_types: ['notes.created'], role: 'user' });
    expect(builtin.status).toBe(201);
    expect(builtin.body.role).toBe('user');
    const patched = await t.http('PATCH', `/webhook-endpoints/${builtin.body.id}`, { headers: as(a), json: { role: 'nope' } });
    expectError(patched, 422, 'VALIDATION_ERROR');
    expect((await t.http('DELETE', `/webhook-endpoints/${builtin.body.id}`, { headers: as(a) })).status).toBe(204);

    const gUnknown = await t.gql('mutation($url: String!) { createWebhookEndpoint(url: $url, event_types: ["ping"], role: "nope") { secret } }', { url: r.url }, { headers: as(a) });
    expect(gUnknown.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const gOk = await t.gql<{ createWebhookEndpoint: { endpoint: Doc } }>(
      'mutation($url: String!) { createWebhookEndpoint(url: $url, event_types: ["ping"], role: "open-only") { endpoint { id role } } }', { url: r.url }, { headers: as(a) },
    );
    expect(gOk.body.data!.createWebhookEndpoint.endpoint.role).toBe('open-only');
    const gClear = await t.gql<{ updateWebhookEndpoint: Doc }>('mutation($id: ID!) { updateWebhookEndpoint(id: $id, role: "user") { role } }', { id: gOk.body.data!.createWebhookEndpoint.endpoint.id }, { headers: as(a) });
    expect(gClear.body.data!.updateWebhookEndpoint.role).toBe('user');
    const gNull = await t.gql<{ updateWebhookEndpoint: Doc }>('mutation($id: ID!) { updateWebhookEndpoint(id: $id, role: null) { role } }', { id: gOk.body.data!.createWebhookEndpoint.endpoint.id }, { headers: as(a) });
    expect(gNull.body.data!.updateWebhookEndpoint.role).toBeNull();
    const gLeft = await t.gql<{ updateWebhookEndpoint: Doc }>('mutation($id: ID!) { updateWebhookEndpoint(id: $id, role: "user") { role } }', { id: gOk.body.data!.createWebhookEndpoint.endpoint.id }, { headers: as(a) });
    const gKeep = await t.gql<{ updateWebhookEndpoint: Doc }>('mutation($id: ID!) { updateWebhookEndpoint(id: $id, description: "kept") { role } }', { id: gOk.body.data!.createWebhookEndpoint.endpoint.id }, { headers: as(a) });
    expect([gLeft.body.data!.updateWebhookEndpoint.role, gKeep.body.data!.updateWebhookEndpoint.role]).toEqual(['user', 'user']);
  });

  it('delivers to a role\'s endpoint only the rows it may read, masked; an endpoint without a role gets every event whole', async () => {
    const [restricted, whole] = [await startReceiver(), await startReceiver()];
    receivers.push(restricted, whole);
    const er = await endpoint(a, { url: restricted.url, event_types: ['notes.created'], role: 'open-only' });
    const ew = await endpoint(a, { url: whole.url, event_types: ['notes.created'] });
    expect([er.status, ew.status]).toEqual([201, 201]);
    for (const [title, status] of [['o1', 'open'], ['c1', 'closed'], ['o2', 'open']]) {
      const res = await t.http('POST', '/notes', { headers: as(a), json: { title, status, secret: `s-${title}` } });
      expect(res.status).toBe(201);
    }
    await until(() => whole.requests.length >= 3 && restricted.requests.length >= 2, 20_000);
    expect(bodies(whole).map((e) => [e.data.title, e.data.secret]).sort()).toEqual([['c1', 's-c1'], ['o1', 's-o1'], ['o2', 's-o2']]);
    const got = bodies(restricted);
    expect(got.map((e) => e.data.title).sort()).toEqual(['o1', 'o2']);
    for (const e of got) {
      expect(e.type).toBe('notes.created');
      expect('secret' in e.data).toBe(false);
      expect(e.data.status).toBe('open');
    }
    // Every event was fanned out before the whole endpoint got its third: the closed row made no delivery.
    const deliveries = await t.http('GET', `/webhook-endpoints/${er.body.id}/deliveries`, { headers: as(a) });
    expect(deliveries.body.total).toBe(2);
  });

  it('a role an endpoint names cannot be deleted or renamed (409); once no endpoint names it, it can', async () => {
    const del = expectError(await t.http('DELETE', `/admin/roles/${role.id}`, { headers: as(a) }), 409, 'CONFLICT');
    expect(del.details).toMatchObject({ role: 'open-only', held_by: 'webhook endpoints' });
    expectError(await t.http('PATCH', `/admin/roles/${role.id}`, { headers: as(a), json: { name: 'renamed' } }), 409, 'CONFLICT');
    const list = await t.http('GET', '/webhook-endpoints?per_page=100', { headers: as(a) });
    for (const e of list.body.items as Doc[]) {
      if (e.role !== 'open-only') continue;
      const res = await t.http('PATCH', `/webhook-endpoints/${e.id}`, { headers: as(a), json: { role: null } });
      expect(res.body.role).toBeNull();
    }
    expect((await t.http('DELETE', `/admin/roles/${role.id}`, { headers: as(a) })).status).toBe(204);
  });
});
