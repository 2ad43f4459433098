/**
 * Every attempt of an outbound delivery: `attempt_log` (oldest first, the last 20) beside the
 * specified `attempts` count and `last_attempt`, in REST and GraphQL; and the event each recorded
 * attempt stores (`webhook_delivery.failed` / `.succeeded`, in the delivery's outbox, written by the
 * update that records the attempt) with the delivery as data, in the delivery's tenant only. Those
 * events are never sent to webhook endpoints.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { outboundEventsPlugin, TEST_EVENT } from '../fixtures/outbound-events-plugin.ts';
import { catalogue, eventsOfType, expectConforms, visibleTo } from '../events/domain-helpers.ts';
import { OUTBOUND_CONFIG, startReceiver, until, type Receiver } from './outbound-helpers.ts';

type Tenant = Awaited<ReturnType<typeof createTenantUser>>;
type Json = Record<string, any>;

let t: TestApp;
let A: Tenant;
let B: Tenant;
let plain: Tenant;
let recv: Receiver;
let star: Receiver;
let ep: { id: string; secret: string };
let schemas: Record<string, Json>;

const DELIVERIES_Q = `query($id: ID!) { webhookDeliveries(endpoint_id: $id) { total items { id status attempts
  last_attempt { status duration_ms error response_excerpt attempted_at }
  attempt_log { status duration_ms error response_excerpt attempted_at } } } }`;

const endpoint = async (url: string, event_types: string[], key = A.key) => {
  const res = await t.http('POST', '/webhook-endpoints', { key, json: { url, event_types } });
  expect(res.status).toBe(201);
  return res.body as { id: string; secret: string };
};
const emit = (n: number) => t.app.services.get('events').append(TEST_EVENT, { actor: systemActor(A.tenantId), tenant_id: A.tenantId, data: { n } });
const deliveriesOf = async (id: string, key = A.key) => (await t.http('GET', `/webhook-endpoints/${id}/deliveries`, { key })).body.items as Json[];
const ofDelivery = (id: string) => (e: Json) => e.data.id === id;

beforeAll(async () => {
  // One attempt on the schedule, so a failed delivery stays failed until retried by hand.
  t = await buildTestApp({ plugins: [webhooksPlugin, outboundEventsPlugin], config: { ...OUTBOUND_CONFIG, WEBHOOK_DELIVERY_RETRY_SCHEDULE: '0' } });
  A = await createTenantUser(t, { roles: ['admin'] });
  B = await createTenantUser(t, { roles: ['admin'] });
  plain = await createTenantUser(t, { tenantId: A.tenantId, roles: ['user'] });
  [recv, star] = await Promise.all([startReceiver(), startReceiver()]);
  ep = await endpoint(recv.url, [TEST_EVENT]);
  await endpoint(star.url, ['*']);
  schemas = await catalogue(t, A.key, ['webhook_delivery.failed', 'webhook_delivery.succeeded'], 'webhooks');
});
afterAll(async () => {
  await t?.close();
  await Promise.all([recv?.close(), star?.close()]);
});

describe('attempt_log', () => {
  let failed: Json;
  let delivered: Json;

  it('a delivery that fails with 500 and then succeeds on a retry shows both attempts (REST)', async () => {
    let n = 0;
    recv.respond = () => (++n === 1 ? 500 : 200);
    await emit(1);
    failed = await until(async () => (await deliveriesOf(ep.id)).find((d) => d.status === 'failed'));
    expect(failed).toMatchObject({ attempts: 1, last_attempt: { status: 500, error: 'HTTP 500' } });
    expect(failed.attempt_log).toEqual([failed.last_attempt]);

    const retried = await t.http('POST', `/webhook-endpoints/${ep.id}/deliveries/${failed.id}/retry`, { key: A.key });
    expect(retried.status).toBe(200);
    delivered = retried.body;
    expect(delivered).toMatchObject({ id: failed.id, status: 'delivered', attempts: 2, last_attempt: { status: 200, error: null, response_excerpt: 'ok' } });
    const [first, second] = delivered.attempt_log as Json[];
    expect(delivered.attempt_log).toHaveLength(2);
    expect(first).toEqual(failed.last_attempt);
    expect(first!.response_excerpt).toMatch(/^nope x+$/);
    expect(first!.response_excerpt).toHaveLength(500);
    expect(second).toEqual(delivered.last_attempt);
    expect(Date.parse(second!.attempted_at)).toBeGreaterThanOrEqual(Date.parse(first!.attempted_at));
    for (const a of delivered.attempt_log) expect(Number.isInteger(a.duration_ms)).toBe(true);
    // The list answers the same delivery.
    expect((await deliveriesOf(ep.id)).find((d) => d.id === failed.id)).toEqual(delivered);
  });

  it('GraphQL shows the same attempts; another tenant and a plain user see nothing (REST and GraphQL)', async () => {
    const g = await t.gql(DELIVERIES_Q, { id: ep.id }, { key: A.key });
    expect(g.body.errors).toBeUndefined();
    const d = g.body.data.webhookDeliveries.items.find((x: Json) => x.id === delivered.id);
    expect(d).toEqual({ id: delivered.id, status: 'delivered', attempts: 2, last_attempt: delivered.last_attempt, attempt_log: delivered.attempt_log });

    expectError(await t.http('GET', `/webhook-endpoints/${ep.id}/deliveries`, { key: B.key }), 404, 'NOT_FOUND');
    expect((await t.gql(DELIVERIES_Q, { id: ep.id }, { key: B.key })).body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expectError(await t.http('GET', `/webhook-endpoints/${ep.id}/deliveries`, { key: plain.key }), 403, 'ACCESS_DENIED');
    expect((await t.gql(DELIVERIES_Q, { id: ep.id }, { key: plain.key })).body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    // The system administrator acting for tenant A sees them.
    const sys = await t.http('GET', `/webhook-endpoints/${ep.id}/deliveries`, { key: ADMIN_KEY, headers: { 'X-Tenant-Id': A.tenantId } });
    expect(sys.body.items.find((x: Json) => x.id === delivered.id).attempt_log).toHaveLength(2);
  });

  it('keeps the last 20 attempts; attempts and last_attempt go on counting', async () => {
    recv.respond = () => 503;
    await emit(2);
    const d = await until(async () => (await deliveriesOf(ep.id)).find((x) => x.status === 'failed' && x.id !== failed.id));
    let last: Json = d;
    for (let i = 0; i < 21; i++) {
      const r = await t.http('POST', `/webhook-endpoints/${ep.id}/deliveries/${d.id}/retry`, { key: A.key });
      expect(r.status).toBe(200);
      last = r.body;
    }
    expect(last.attempts).toBe(22);
    expect(last.attempt_log).toHaveLength(20);
    expect(last.attempt_log.every((a: Json) => a.status === 503)).toBe(true);
    expect(last.attempt_log[19]).toEqual(last.last_attempt);
    const times = last.attempt_log.map((a: Json) => Date.parse(a.attempted_at));
    expect([...times].sort((x, y) => x - y)).toEqual(times);
  });
});

describe('webhook_delivery events', () => {
  it('each recorded attempt stores its event with the delivery as data, in the delivery tenant only', async () => {
    const d = (await deliveriesOf(ep.id)).find((x) => x.status === 'delivered')!;
    const [f] = await eventsOfType(t, A.key, 'webhook_delivery.failed', ofDelivery(d.id));
    expect(f).toMatchObject({ type: 'webhook_delivery.failed', tenant_id: A.tenantId, actor: null });
    // The delivery as it was after that attempt, frozen into the event.
    expect(f!.data).toMatchObject({ id: d.id, endpoint_id: ep.id, status: 'failed', attempts: 1, last_attempt: { status: 500 } });
    expect(f!.data.attempt_log).toHaveLength(1);
    expectConforms(schemas['webhook_delivery.failed']!, f!.data);
    const [s] = await eventsOfType(t, A.key, 'webhook_delivery.succeeded', ofDelivery(d.id));
    expect(s).toMatchObject({ tenant_id: A.tenantId, actor: null });
    expect(s!.data).toEqual(d);
    expectConforms(schemas['webhook_delivery.succeeded']!, s!.data);
    // Never the endpoint's secret, never the lease or the outbox.
    expect(JSON.stringify([f, s])).not.toContain(ep.secret);
    expect(Object.keys(s!.data)).not.toContain('lease_until');
    expect(Object.keys(s!.data)).not.toContain('_outbox');

    // Tenant B sees none of them, nor reads one by id; the system administrator reads them.
    expect(await visibleTo(t, B.key, 'webhook_delivery.failed', ofDelivery(d.id))).toEqual([]);
    expect(await visibleTo(t, B.key, 'webhook_delivery.succeeded', ofDelivery(d.id))).toEqual([]);
    expect((await t.http('GET', `/events/${s!.id}`, { key: B.key })).status).toBe(404);
    expect(await visibleTo(t, ADMIN_KEY, 'webhook_delivery.succeeded', ofDelivery(d.id))).toHaveLength(1);
    // One event per recorded attempt: 2 for this delivery, 22 for the one retried 21 times.
    const other = (await deliveriesOf(ep.id)).find((x) => x.attempts === 22)!;
    expect(await eventsOfType(t, A.key, 'webhook_delivery.failed', ofDelivery(other.id), 22)).toHaveLength(22);
    await t.app.services.get('events').flush();
    const doc = await t.app.db.conn.collection('webhook_deliveries').findOne({ _id: new Types.ObjectId(d.id) });
    expect(doc!._outbox).toEqual([]);
  });

  it('are never sent to endpoints, and no endpoint may subscribe to them', async () => {
    // The `*` endpoint got the two test events and nothing about deliveries.
    await until(() => star.requests.length >= 2);
    expect(star.requests.map((r) => JSON.parse(r.body).type)).toEqual([TEST_EVENT, TEST_EVENT]);
    const refused = await t.http('POST', '/webhook-endpoints', { key: A.key, json: { url: recv.url, event_types: ['webhook_delivery.failed'] } });
    const err = expectError(refused, 422, 'VALIDATION_ERROR');
    expect(err.details.known_types).toContain(TEST_EVENT);
    expect(err.details.known_types).not.toContain('webhook_delivery.failed');
    expect((err.details.errors as { msg: string }[])[0]!.msg).toBe('"webhook_delivery.failed" is never sent to webhook endpoints');
  });
});
