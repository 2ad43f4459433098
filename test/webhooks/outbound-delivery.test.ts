/**
 * Outbound deliveries end to end: events appended to the log reach a local receiver signed per
 * Standard Webhooks, are retried on the schedule, end `failed` and can be retried by hand; secret
 * rotation signs with both secrets; test pings go to one endpoint; failing endpoints get disabled.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser } from '../helpers/app.ts';
import { systemActor } from '../../core/context.ts';
import { Tenancy } from '../../core/tenancy.ts';
import { createOutbound, FANOUT_CONSUMER } from '../../plugins/webhooks/outbound.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { outboundEventsPlugin, TEST_EVENT } from '../fixtures/outbound-events-plugin.ts';
import { OUTBOUND_CONFIG, sleep, startReceiver, until, verifies, type Receiver } from './outbound-helpers.ts';

type Tenant = Awaited<ReturnType<typeof createTenantUser>>;

const receivers: Receiver[] = [];
const receiver = async () => {
  const r = await startReceiver();
  receivers.push(r);
  return r;
};
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function setup(config: Record<string, string> = {}) {
  const t = await buildTestApp({ plugins: [webhooksPlugin, outboundEventsPlugin], config: { ...OUTBOUND_CONFIG, ...config } });
  const a = await createTenantUser(t, { roles: ['admin'] });
  const endpoint = async (url: string, event_types: string[], key = a.key) => {
    const res = await t.http('POST', '/webhook-endpoints', { key, json: { url, event_types } });
    expect(res.status).toBe(201);
    return res.body as { id: string; secret: string };
  };
  const emit = (tenant: Tenant = a, n = 1) => t.app.services.get('events').append(TEST_EVENT, { actor: systemActor(tenant.tenantId), tenant_id: tenant.tenantId, data: { n } });
  const deliveries = async (id: string) => (await t.http('GET', `/webhook-endpoints/${id}/deliveries`, { key: a.key })).body;
  /** The endpoint's newest delivery once it has `status`. */
  const newest = (id: string, status: string, ms = 15_000) =>
    until(async () => {
      const d = (await deliveries(id)).items[0];
      return d?.status === status ? d : null;
    }, ms);
  return { t, a, endpoint, emit, deliveries, newest };
}

describe('delivery', () => {
  let s: Awaited<ReturnType<typeof setup>>;
  beforeAll(async () => {
    s = await setup();
  });
  afterAll(() => s?.t.close());

  it('posts the event once, signed, with the documented body, to every matching endpoint of the tenant', async () => {
    const [typed, star, other, off, later] = await Promise.all([receiver(), receiver(), receiver(), receiver(), receiver()]);
    const b = await createTenantUser(s.t, { roles: ['admin'] });
    const bRecv = await receiver();
    const ep = await s.endpoint(typed.url, [TEST_EVENT]);
    const epStar = await s.endpoint(star.url, ['*']);
    await s.endpoint(other.url, ['ping']);
    const epOff = await s.endpoint(off.url, [TEST_EVENT]);
    await s.t.http('PATCH', `/webhook-endpoints/${epOff.id}`, { key: s.a.key, json: { enabled: false } });
    await s.endpoint(bRecv.url, ['*'], b.key);

    const event = await s.emit();
    await s.endpoint(later.url, ['*']); // created after the event: not a target
    await until(() => typed.requests.length === 1 && star.requests.length === 1);
    await sleep(600);
    expect([typed.requests.length, star.requests.length, other.requests.length, off.requests.length, bRecv.requests.length, later.requests.length]).toEqual([1, 1, 0, 0, 0, 0]);

    const req = typed.requests[0]!;
    expect(verifies(ep.secret, req)).toBe(true);
    expect(verifies(epStar.secret, req)).toBe(false);
    expect(verifies(epStar.secret, star.requests[0]!)).toBe(true);
    expect(req.headers['webhook-id']).toBe(event.id);
    expect(req.headers['content-type']).toBe('application/json');
    expect(Math.abs(Number(req.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(10);
    const body = JSON.parse(req.body);
    expect(body).toEqual({ id: event.id, type: TEST_EVENT, timestamp: event.created_at.toISOString(), data: { n: 1 } });

    const delivered = await s.newest(ep.id, 'delivered');
    expect((await s.deliveries(ep.id)).total).toBe(1);
    expect(delivered).toMatchObject({ event_id: event.id, event_type: TEST_EVENT, status: 'delivered', attempts: 1, next_attempt_at: null, last_attempt: { status: 200, error: null, response_excerpt: 'ok' } });
    expect(delivered.last_attempt.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('claims only the events that have a target: an event of a tenant without endpoints costs the fan-out no write', async () => {
    const r = await receiver();
    const b = await createTenantUser(s.t, { roles: ['admin'] });
    const ep = await s.endpoint(r.url, [TEST_EVENT]);
    const none = await s.emit(b);
    const some = await s.emit();
    await s.newest(ep.id, 'delivered');
    const db = s.t.app.db.conn;
    const committed = (await db.collection('events').findOne({ _id: none.id } as never))!.committed_at as Date;
    // The fan-out has moved past the event of tenant b, without claiming it.
    await until(async () => ((await db.collection('event_consumers').findOne({ _id: FANOUT_CONSUMER } as never))?.position as Date | undefined)! >= committed);
    expect(await db.collection('event_claims').countDocuments({ consumer: FANOUT_CONSUMER, event_id: none.id })).toBe(0);
    expect(await db.collection('event_claims').findOne({ consumer: FANOUT_CONSUMER, event_id: some.id })).toMatchObject({ status: 'done' });
    expect(await db.collection('webhook_deliveries').countDocuments({ event_id: none.id })).toBe(0);
  });

  it('fans out idempotently: handling one event again creates no second delivery; an event without tenant goes nowhere', async () => {
    const r = await receiver();
    const ep = await s.endpoint(r.url, [TEST_EVENT]);
    // A second fan-out consumer on the same database, as another process's would be (never started).
    const other = createOutbound({
      db: s.t.app.db.conn, config: s.t.app.config, tenancy: new Tenancy(true), events: s.t.app.services.get('events'), log: s.t.app.log, metrics: s.t.app.services.get('metrics'),
    });
    const event = await s.emit();
    // Handled three times at once (this app's consumer too). A handler that throws is retried by
    // its consumer, so only a lost or doubled delivery is a failure here. The test database may
    // answer a concurrent insert of the same unique key with "deadlock detected" where MongoDB
    // answers a duplicate key; any other error fails the test.
    for (const r of await Promise.allSettled([other.consumer.handle(event), other.consumer.handle(event)])) {
      if (r.status === 'rejected' && !/deadlock detected/.test(String((r.reason as Error)?.message))) throw r.reason;
    }
    await s.newest(ep.id, 'delivered');
    await other.consumer.handle(event);
    await sleep(500);
    expect((await s.deliveries(ep.id)).total).toBe(1);
    expect(r.requests).toHaveLength(1);

    await other.consumer.handle({ ...event, id: 'evt_000000000000000000000001', tenant_id: null });
    expect(await s.t.app.db.conn.collection('webhook_deliveries').countDocuments({ event_id: 'evt_000000000000000000000001' })).toBe(0);
  });

  it('retries failed attempts on the schedule with the same webhook-id', async () => {
    const r = await receiver();
    let n = 0;
    r.respond = () => (++n <= 2 ? 500 : 204);
    const ep = await s.endpoint(r.url, [TEST_EVENT]);
    const event = await s.emit();
    await until(() => r.requests.length === 3, 15_000);
    const gaps = [r.requests[1]!.at - r.requests[0]!.at, r.requests[2]!.at - r.requests[1]!.at];
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(900);
    expect(new Set(r.requests.map((q) => q.headers['webhook-id']))).toEqual(new Set([event.id]));
    const d = await s.newest(ep.id, 'delivered');
    expect(d).toMatchObject({ attempts: 3, last_attempt: { status: 204 } });
  });

  it('ends failed when the schedule is spent, then a retry by hand delivers it', async () => {
    const r = await receiver();
    r.respond = () => 503;
    const ep = await s.endpoint(r.url, [TEST_EVENT]);
    await s.emit();
    const failed = await s.newest(ep.id, 'failed');
    expect(r.requests).toHaveLength(3);
    expect(failed).toMatchObject({ attempts: 3, next_attempt_at: null, last_attempt: { status: 503, error: 'HTTP 503' } });
    expect(failed.last_attempt.response_excerpt).toHaveLength(500);
    await sleep(1500);
    expect(r.requests).toHaveLength(3);

    r.respond = () => 200;
    const retried = await s.t.http('POST', `/webhook-endpoints/${ep.id}/deliveries/${failed.id}/retry`, { key: s.a.key });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ id: failed.id, status: 'delivered', attempts: 4, last_attempt: { status: 200 } });
    expect(r.requests).toHaveLength(4);
    expect(r.requests[3]!.headers['webhook-id']).toBe(r.requests[0]!.headers['webhook-id']);
  });

  it('signs with the old and the new secret during the rotation overlap', async () => {
    const r = await receiver();
    const ep = await s.endpoint(r.url, [TEST_EVENT]);
    const rotated = await s.t.http('POST', `/webhook-endpoints/${ep.id}/rotate-secret`, { key: s.a.key });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(ep.secret);
    expect(rotated.body.secret_rotated_at).not.toBeNull();
    await s.emit();
    await until(() => r.requests.length === 1);
    const sig = String(r.requests[0]!.headers['webhook-signature']);
    expect(sig.split(' ')).toHaveLength(2);
    expect(sig.split(' ').every((p) => p.startsWith('v1,'))).toBe(true);
    expect(verifies(ep.secret, r.requests[0]!)).toBe(true);
    expect(verifies(rotated.body.secret, r.requests[0]!)).toBe(true);

    // A second rotation keeps only the secret it replaces: the first one stops signing.
    const again = await s.t.http('POST', `/webhook-endpoints/${ep.id}/rotate-secret`, { key: s.a.key });
    await s.emit();
    await until(() => r.requests.length === 2);
    expect(verifies(ep.secret, r.requests[1]!)).toBe(false);
    expect(verifies(rotated.body.secret, r.requests[1]!)).toBe(true);
    expect(verifies(again.body.secret, r.requests[1]!)).toBe(true);
  });

  it('test sends a ping to that endpoint only, REST and GraphQL', async () => {
    const [mine, pingSub, starSub] = await Promise.all([receiver(), receiver(), receiver()]);
    const ep = await s.endpoint(mine.url, [TEST_EVENT]);
    await s.endpoint(pingSub.url, ['ping']);
    await s.endpoint(starSub.url, ['*']);
    const res = await s.t.http('POST', `/webhook-endpoints/${ep.id}/test`, { key: s.a.key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ event_type: 'ping', status: 'delivered', attempts: 1, last_attempt: { status: 200 } });
    expect(mine.requests).toHaveLength(1);
    const body = JSON.parse(mine.requests[0]!.body);
    expect(body).toMatchObject({ id: res.body.event_id, type: 'ping', data: { endpoint_id: ep.id } });
    expect(verifies(ep.secret, mine.requests[0]!)).toBe(true);

    const gql = await s.t.gql('mutation($id: ID!) { testWebhookEndpoint(id: $id) { status event_type attempts } }', { id: ep.id }, { key: s.a.key });
    expect(gql.body.data?.testWebhookEndpoint).toEqual({ status: 'delivered', event_type: 'ping', attempts: 1 });
    expect(mine.requests).toHaveLength(2);
    await sleep(800);
    expect([pingSub.requests.length, starSub.requests.length]).toEqual([0, 0]);
    expect((await s.deliveries(ep.id)).total).toBe(2);
  });

  it('a refused connection is a failed attempt with its error', async () => {
    const r = await receiver();
    const dead = r.url;
    await r.close();
    receivers.splice(receivers.indexOf(r), 1);
    const ep = await s.endpoint(dead, ['ping']);
    const res = await s.t.http('POST', `/webhook-endpoints/${ep.id}/test`, { key: s.a.key });
    expect(res.body).toMatchObject({ status: 'pending', attempts: 1, last_attempt: { status: null, error: expect.stringContaining('ECONNREFUSED') } });
    expect(new Date(res.body.next_attempt_at).getTime()).toBeGreaterThan(Date.now());
  });
});

describe('disabling a failing endpoint', () => {
  let s: Awaited<ReturnType<typeof setup>>;
  beforeAll(async () => {
    // 0.0005 hours = 1.8 s of failing attempts.
    s = await setup({ WEBHOOK_ENDPOINT_DISABLE_AFTER_HOURS: '0.0005', WEBHOOK_DELIVERY_RETRY_SCHEDULE: '0,1,1,1,1,1' });
  });
  afterAll(() => s?.t.close());

  it('disables it with a reason once every attempt failed for the setting, and says so with an event', async () => {
    const [bad, watcher] = await Promise.all([receiver(), receiver()]);
    bad.respond = () => 500;
    const ep = await s.endpoint(bad.url, [TEST_EVENT]);
    const w = await s.endpoint(watcher.url, ['webhook_endpoint.disabled']);
    await s.emit();
    const disabled = await until(async () => {
      const e = (await s.t.http('GET', `/webhook-endpoints/${ep.id}`, { key: s.a.key })).body;
      return e.enabled === false ? e : null;
    }, 15_000);
    expect(disabled.disabled_reason).toMatch(/failed for 0.0005 hours/);
    const attempts = bad.requests.length;
    expect(attempts).toBeGreaterThanOrEqual(3);
    // The pending delivery is not sent to a disabled endpoint: it ends failed.
    const d = await s.newest(ep.id, 'failed', 5000);
    expect(d.last_attempt.error).toMatch(/disabled/);
    expect(bad.requests.length).toBe(attempts);

    const events = await s.t.http('GET', '/events?type=webhook_endpoint.disabled', { key: s.a.key });
    expect(events.body.items).toHaveLength(1);
    expect(events.body.items[0]).toMatchObject({ tenant_id: s.a.tenantId, actor: null, data: { id: ep.id, enabled: false, disabled_reason: disabled.disabled_reason } });
    expect(JSON.stringify(events.body.items[0])).not.toContain('whsec_');
    // The same event carries the disable's audit entry (an update by the system, the endpoint before it frozen as `previous`).
    const stored = await s.t.app.db.conn.collection('events').findOne({ _id: events.body.items[0].id } as never);
    expect(stored).toMatchObject({ previous: { id: ep.id, enabled: true }, meta: { resource: 'webhook_endpoints', audit: { operation: 'update', resource: 'webhook_endpoints', actor_name: null } } });
    expect(JSON.stringify(stored)).not.toContain('whsec_');
    await until(() => watcher.requests.length === 1);
    expect(JSON.parse(watcher.requests[0]!.body)).toMatchObject({ type: 'webhook_endpoint.disabled', data: { id: ep.id } });
    expect(verifies(w.secret, watcher.requests[0]!)).toBe(true);

    // Enabling it again clears the reason.
    const on = await s.t.http('PATCH', `/webhook-endpoints/${ep.id}`, { key: s.a.key, json: { enabled: true } });
    expect(on.body).toMatchObject({ enabled: true, disabled_reason: null });
  });

  it('the event is written by the disabling update: held back from the relay (a process that died), the sweep stores it once', async () => {
    const bad = await receiver();
    bad.respond = () => 500;
    const ep = await s.endpoint(bad.url, [TEST_EVENT]);
    const events = s.t.app.services.get('events');
    const committed = events.committed.bind(events);
    const endpoints = s.t.app.db.conn.collection('webhook_endpoints');
    // This process "dies" after the disabling write: the relay never hears of it.
    let heldBack = false;
    events.committed = async (source, doc) => {
      if (source.name !== 'webhook_endpoints') return committed(source, doc);
      heldBack = true;
    };
    try {
      await s.emit();
      // Until the disabling write has handed its document over (not only until it is visible:
      // restoring the relay in between would let that hand-over through).
      await until(async () => heldBack && (await endpoints.findOne({ _id: new Types.ObjectId(ep.id) }))?.enabled === false, 15_000);
    } finally {
      events.committed = committed;
    }
    const raw = await endpoints.findOne({ _id: new Types.ObjectId(ep.id) });
    expect(raw!._outbox).toEqual([expect.objectContaining({ type: 'webhook_endpoint.disabled', data: expect.objectContaining({ id: ep.id, enabled: false }) })]);
    const ofEp = async () => (await s.t.http('GET', '/events?type=webhook_endpoint.disabled&limit=100', { key: s.a.key })).body.items.filter((e: { data: { id: string } }) => e.data.id === ep.id);
    expect(await ofEp()).toEqual([]);
    await endpoints.updateOne({ _id: raw!._id }, { $set: { '_outbox.0.created_at': new Date(Date.now() - 60_000) } });
    // A catch-up sweep from before then (the passes every process runs find an entry 5 s after it was written).
    const from = new Date(Date.now() - 120_000);
    await events.sweep(from);
    await events.sweep(from);
    const stored = await ofEp();
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ id: raw!._outbox[0].id, data: { enabled: false, disabled_reason: raw!.disabled_reason } });
    expect((await endpoints.findOne({ _id: raw!._id }))!._outbox).toEqual([]);
  });

  it('a success ends the failing period: an endpoint that recovers stays enabled', async () => {
    const r = await receiver();
    let n = 0;
    r.respond = () => (++n % 2 ? 500 : 200);
    const ep = await s.endpoint(r.url, [TEST_EVENT]);
    for (let i = 0; i < 3; i++) {
      await s.emit();
      await sleep(1000);
    }
    await until(async () => (await s.deliveries(ep.id)).items.every((d: { status: string }) => d.status === 'delivered'), 10_000);
    expect((await s.t.http('GET', `/webhook-endpoints/${ep.id}`, { key: s.a.key })).body.enabled).toBe(true);
  });
});

describe('the end of the rotation overlap', () => {
  let s: Awaited<ReturnType<typeof setup>>;
  beforeAll(async () => {
    s = await setup({ WEBHOOK_SECRET_ROTATION_OVERLAP_SECONDS: '1' });
  });
  afterAll(() => s?.t.close());

  it('signs with the new secret alone once the overlap has passed', async () => {
    const r = await receiver();
    const ep = await s.endpoint(r.url, ['ping']);
    const rotated = (await s.t.http('POST', `/webhook-endpoints/${ep.id}/rotate-secret`, { key: s.a.key })).body;
    await s.t.http('POST', `/webhook-endpoints/${ep.id}/test`, { key: s.a.key });
    expect(String(r.requests[0]!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    await sleep(1100);
    await s.t.http('POST', `/webhook-endpoints/${ep.id}/test`, { key: s.a.key });
    expect(String(r.requests[1]!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifies(rotated.secret, r.requests[1]!)).toBe(true);
    expect(verifies(ep.secret, r.requests[1]!)).toBe(false);
  });
});
