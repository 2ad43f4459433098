/**
 * Inbound webhook failures in the event log: an event whose handler fails enters the dead-letter
 * queue and stores `webhook_event.failed` (and `webhook_event.recovered` when a later run of it
 * succeeds), written in the inbound event's outbox by the update that records the outcome
 * (docs/events.md). Inbound events belong to no tenant (one system-scoped
 * collection, operated by system administrators), so the event has no tenant: the system
 * administrator reads it, tenant administrators never do.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { webhookEventModel } from '../../plugins/webhooks/model.ts';
import { deliver, hmac, newCalls, providersPlugin, SECRET } from '../webhooks/helpers.ts';
import { catalogue, eventsOfType, expectConforms, visibleTo } from './domain-helpers.ts';

const calls = newCalls();
let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
let schema: Record<string, any>;
const send = (id: string) => {
  const b = JSON.stringify({ id, type: 'invoice.paid', customer: 'cus_1' });
  return deliver(t, 'alpha', b, { 'X-Signature': hmac('sha256', b), 'X-Event-Type': 'invoice.paid' });
};
const ofInbound = (eventId: string) => (e: Record<string, any>) => e.data.event_id === eventId;

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [
      webhooksPlugin,
      providersPlugin(calls, [{ provider: 'alpha', secret: SECRET, verifier: { type: 'hmac-sha256' }, event_id_path: 'id', event_type_path: 'type', max_retries: 1 }]),
    ],
    config: { WEBHOOKS_ENABLED: 'true' },
  });
  A = await createTenantUser(t, { roles: ['admin'] });
  B = await createTenantUser(t, { roles: ['admin'] });
  schema = (await catalogue(t, A.key, ['webhook_event.failed'], 'webhooks'))['webhook_event.failed']!;
});
afterAll(() => t?.close());
beforeEach(() => {
  calls.list.length = 0;
  calls.failWith = null;
});

describe('webhook_event.failed', () => {
  it('the catalogue lists it with the JSON Schema of an inbound event', () => {
    expect(schema.schema.properties).toMatchObject({ event_id: { type: 'string' }, status: { enum: expect.arrayContaining(['failed']) }, headers: expect.any(Object) });
  });

  it('a failing handler puts the event in the dead-letter queue and stores one event with it, without the signature', async () => {
    calls.failWith = 'database unavailable';
    const res = await send('evt_dlq_1');
    expect(res.status).toBe(500);
    const dlq = await t.http('GET', '/webhooks/dead-letter');
    const stored = dlq.body.items.find((e: { event_id: string }) => e.event_id === 'evt_dlq_1');
    expect(stored).toMatchObject({ status: 'failed', error: 'database unavailable' });

    const [e] = await eventsOfType(t, ADMIN_KEY, 'webhook_event.failed', ofInbound('evt_dlq_1'));
    expect(e).toMatchObject({ type: 'webhook_event.failed', tenant_id: null, actor: null });
    expect(e!.data).toMatchObject({
      id: stored.id, provider: 'alpha', event_id: 'evt_dlq_1', event_type: 'invoice.paid', status: 'failed', error: 'database unavailable', attempts: 1,
      payload: { id: 'evt_dlq_1', type: 'invoice.paid', customer: 'cus_1' },
    });
    // The inbound event as the operator API shows it, minus the provider's signature header.
    expect(stored.headers['x-signature']).toBeTruthy();
    expect(e!.data.headers).not.toHaveProperty('x-signature');
    expect(JSON.stringify(e!.data)).not.toContain(stored.headers['x-signature']);
    expect(e!.data.headers['content-type']).toBe('application/json');
    const { headers: _h, ...rest } = stored;
    const { headers: _d, ...data } = e!.data;
    expect(data).toEqual(rest);
    expectConforms(schema, e!.data);

    // No tenant: tenant administrators never see it, nor read it by id.
    expect(await visibleTo(t, A.key, 'webhook_event.failed', ofInbound('evt_dlq_1'))).toEqual([]);
    expect(await visibleTo(t, B.key, 'webhook_event.failed', ofInbound('evt_dlq_1'))).toEqual([]);
    expect((await t.http('GET', `/events/${e!.id}`, { key: A.key })).status).toBe(404);
    expect((await webhookEventModel(t.app.db.conn).findById(stored.id).lean())!._outbox).toEqual([]);
  });

  it('each failed attempt stores its own event (redelivery, then a retry by hand); a success stores none', async () => {
    calls.failWith = 'first';
    expect((await send('evt_dlq_2')).status).toBe(500);
    calls.failWith = 'second';
    expect((await send('evt_dlq_2')).status).toBe(500); // the provider redelivers (max_retries 1): runs again, fails again
    const dlq = await t.http('GET', '/webhooks/dead-letter');
    const stored = dlq.body.items.find((e: { event_id: string }) => e.event_id === 'evt_dlq_2');
    calls.failWith = 'third';
    expect((await t.http('POST', `/webhooks/dead-letter/${stored.id}/retry`)).body).toMatchObject({ status: 'failed', error: 'third' });
    const events = await eventsOfType(t, ADMIN_KEY, 'webhook_event.failed', ofInbound('evt_dlq_2'), 3);
    expect(events.map((e) => [e.data.attempts, e.data.error]).reverse()).toEqual([[1, 'first'], [2, 'second'], [3, 'third']]);

    calls.failWith = null;
    expect((await t.http('POST', `/webhooks/dead-letter/${stored.id}/retry`)).body).toMatchObject({ status: 'processed' });
    expect((await send('evt_ok')).status).toBe(200);
    await t.app.services.get('events').flush();
    expect(await visibleTo(t, ADMIN_KEY, 'webhook_event.failed', ofInbound('evt_dlq_2'))).toHaveLength(3);
    expect(await visibleTo(t, ADMIN_KEY, 'webhook_event.failed', ofInbound('evt_ok'))).toEqual([]);
  });
});

describe('webhook_event.recovered', () => {
  it('a failed event handled on a retry leaves the dead-letter queue and stores webhook_event.recovered once; a first success stores none', async () => {
    const recovered = (await catalogue(t, A.key, ['webhook_event.recovered'], 'webhooks'))['webhook_event.recovered']!;
    calls.failWith = 'down for now';
    expect((await send('evt_rec_1')).status).toBe(500);
    const stored = (await t.http('GET', '/webhooks/dead-letter')).body.items.find((e: { event_id: string }) => e.event_id === 'evt_rec_1');
    calls.failWith = null;
    expect((await t.http('POST', `/webhooks/dead-letter/${stored.id}/retry`)).body).toMatchObject({ status: 'processed' });
    expect((await t.http('GET', '/webhooks/dead-letter')).body.items.map((e: { event_id: string }) => e.event_id)).not.toContain('evt_rec_1');
    const [e] = await eventsOfType(t, ADMIN_KEY, 'webhook_event.recovered', ofInbound('evt_rec_1'));
    expect(e).toMatchObject({ type: 'webhook_event.recovered', tenant_id: null, actor: null, data: { id: stored.id, event_id: 'evt_rec_1', status: 'processed', error: null, attempts: 2 } });
    expect(e!.data.headers).not.toHaveProperty('x-signature');
    expectConforms(recovered, e!.data);
    // No tenant: tenant administrators never see it.
    expect(await visibleTo(t, A.key, 'webhook_event.recovered', ofInbound('evt_rec_1'))).toEqual([]);
    expect((await send('evt_rec_ok')).status).toBe(200);
    await t.app.services.get('events').flush();
    expect(await visibleTo(t, ADMIN_KEY, 'webhook_event.recovered', ofInbound('evt_rec_ok'))).toEqual([]);
    expect(await visibleTo(t, ADMIN_KEY, 'webhook_event.recovered', ofInbound('evt_rec_1'))).toHaveLength(1);
  });
});
