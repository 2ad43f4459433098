/**
 * The receiver flow, step by step, through real HTTP on a real database:
 * 404, 401 (nothing stored), 422 (nothing stored), event type and delivery id, duplicates,
 * handler success and failure, redelivery of failed events (max_retries), lease takeover,
 * 413 / 400, stored headers, and the system actor.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { webhookEventModel } from '../../plugins/webhooks/model.ts';
import { deliver, hmac, newCalls, providersPlugin } from './helpers.ts';

const calls = newCalls();
let t: TestApp;
const model = () => webhookEventModel(t.app.db.conn);
const count = () => model().countDocuments({});
const signed = (body: string, extra: Record<string, string> = {}) => ({ 'X-Signature': hmac('sha256', body), ...extra });

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [
      webhooksPlugin,
      providersPlugin(calls, [
        {
          provider: 'acme', secret: 'whsec-test-secret-0123456789', verifier: { type: 'hmac-sha256' },
          event_id_path: 'meta.id', event_type_path: 'meta.type', delivery_id_header: 'X-Delivery', max_retries: 2,
        },
      ]),
    ],
    config: { WEBHOOKS_ENABLED: 'true', BODY_LIMIT: '2kb' },
  });
});
afterAll(() => t?.close());
beforeEach(async () => {
  calls.list.length = 0;
  calls.failWith = null;
  calls.gate = null;
  await model().deleteMany({});
});

describe('receiver flow', () => {
  it('1. an unknown provider is 404', async () => {
    const body = '{"meta":{"id":"e1"}}';
    const res = await deliver(t, 'nobody', body, signed(body));
    expect(res.status).toBe(404);
    expect(envelope(res).code).toBe('NOT_FOUND');
    expect(await count()).toBe(0);
  });

  it('2. a missing or wrong signature is 401 and nothing is stored', async () => {
    const body = '{"meta":{"id":"e1"}}';
    const none = await deliver(t, 'acme', body);
    expect(none.status).toBe(401);
    expect(envelope(none).code).toBe('AUTH_REQUIRED');
    const wrong = await deliver(t, 'acme', body, { 'X-Signature': hmac('sha256', body, 'another-secret') });
    expect(wrong.status).toBe(401);
    const garbage = await deliver(t, 'acme', body, { 'X-Signature': 'zz' });
    expect(garbage.status).toBe(401);
    expect(await count()).toBe(0);
    expect(calls.list).toHaveLength(0);
  });

  it('a tampered body with a valid header is 401', async () => {
    const body = '{"meta":{"id":"e1"},"amount":10}';
    const res = await deliver(t, 'acme', body.replace('10', '99'), signed(body));
    expect(res.status).toBe(401);
    expect(await count()).toBe(0);
  });

  it('bytes differing only in whitespace or key order from what was signed fail', async () => {
    const body = '{"meta":{"id":"e1"},"a":1,"b":2}';
    expect((await deliver(t, 'acme', '{"meta": {"id": "e1"}, "a": 1, "b": 2}', signed(body))).status).toBe(401);
    expect((await deliver(t, 'acme', '{"b":2,"a":1,"meta":{"id":"e1"}}', signed(body))).status).toBe(401);
    expect((await deliver(t, 'acme', `${body}\n`, signed(body))).status).toBe(401);
    // The signed bytes themselves, with their unusual spacing, pass.
    const odd = '{ "meta" : { "id" : "e1" } ,"a":1}';
    expect((await deliver(t, 'acme', odd, signed(odd))).status).toBe(200);
  });

  it('3. a missing event id is 422 and nothing is stored', async () => {
    for (const body of ['{"meta":{}}', '{"id":"top-level"}', '{"meta":{"id":""}}', '{"meta":{"id":{"x":1}}}']) {
      const res = await deliver(t, 'acme', body, signed(body));
      expect(res.status).toBe(422);
      const err = envelope(res);
      expect(err.code).toBe('VALIDATION_ERROR');
      expect(err.details.errors).toEqual([{ loc: ['body', 'meta', 'id'], msg: expect.any(String), type: 'missing' }]);
    }
    expect(await count()).toBe(0);
    expect(calls.list).toHaveLength(0);
  });

  it('4-5-7-8. a new event is stored with type and delivery id, its handler runs once as the system actor, answer ok', async () => {
    const body = '{"meta":{"id":"evt_1","type":"invoice.paid"},"n":42}';
    const res = await deliver(t, 'acme', body, signed(body, { 'X-Delivery': 'd-1', 'X-API-Key': 'should-not-be-stored', 'X-Other': 'dropped' }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', event_id: 'evt_1' });
    expect(calls.list).toHaveLength(1);
    const call = calls.list[0]!;
    expect(call.payload).toEqual({ meta: { id: 'evt_1', type: 'invoice.paid' }, n: 42 });
    expect(call.event).toMatchObject({ provider: 'acme', event_id: 'evt_1', event_type: 'invoice.paid', delivery_id: 'd-1', attempt: 1 });
    expect(call.event.actor).toMatchObject({ id: 'system', scope: 'system' });
    const doc = await model().findOne({ provider: 'acme', event_id: 'evt_1' }).lean();
    expect(doc).toMatchObject({ status: 'processed', event_type: 'invoice.paid', delivery_id: 'd-1', error: null, retry_count: 0, is_duplicate: false });
    expect(doc!.processed_at).toBeInstanceOf(Date);
    expect(doc!.payload).toEqual({ meta: { id: 'evt_1', type: 'invoice.paid' }, n: 42 });
    // The allow-list: content type, user agent, signature, delivery id; never credentials or others.
    const headers = doc!.headers as Record<string, string>;
    expect(Object.keys(headers).sort()).toEqual(expect.arrayContaining(['content-type', 'x-delivery', 'x-signature']));
    expect(headers).not.toHaveProperty('x-api-key');
    expect(headers).not.toHaveProperty('x-other');
    expect(JSON.stringify(headers)).not.toContain('whsec-test-secret');
  });

  it('event type is null when its path is absent', async () => {
    const body = '{"meta":{"id":"evt_nt"}}';
    expect((await deliver(t, 'acme', body, signed(body))).status).toBe(200);
    expect(await model().findOne({ event_id: 'evt_nt' }).lean()).toMatchObject({ event_type: null, delivery_id: null });
  });

  it('6. a redelivery of a processed event answers already_processed, counts the retry and marks the duplicate', async () => {
    const body = '{"meta":{"id":"evt_dup"}}';
    expect((await deliver(t, 'acme', body, signed(body))).body).toEqual({ status: 'ok', event_id: 'evt_dup' });
    const again = await deliver(t, 'acme', body, signed(body, { 'X-Delivery': 'd-2' }));
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ status: 'already_processed' });
    await deliver(t, 'acme', body, signed(body));
    expect(calls.list).toHaveLength(1);
    expect(await model().findOne({ event_id: 'evt_dup' }).lean()).toMatchObject({ status: 'processed', retry_count: 2, is_duplicate: true });
  });

  it('6. a redelivery while the handler still runs answers processing', async () => {
    let release!: () => void;
    calls.gate = new Promise<void>((r) => (release = r));
    const body = '{"meta":{"id":"evt_slow"}}';
    const first = deliver(t, 'acme', body, signed(body));
    await expect.poll(() => calls.list.length).toBe(1);
    const second = await deliver(t, 'acme', body, signed(body));
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ status: 'processing' });
    release();
    expect((await first).body).toEqual({ status: 'ok', event_id: 'evt_slow' });
    expect(calls.list).toHaveLength(1);
    expect(await model().findOne({ event_id: 'evt_slow' }).lean()).toMatchObject({ status: 'processed', retry_count: 1, is_duplicate: true });
  });

  it('7-8. a failing handler stores failed with the error and answers 500 {status: failed} without the error text', async () => {
    calls.failWith = 'database of acme exploded at /srv/secret/path';
    const body = '{"meta":{"id":"evt_fail"}}';
    const res = await deliver(t, 'acme', body, signed(body));
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ status: 'failed', event_id: 'evt_fail' });
    expect(JSON.stringify(res.body)).not.toContain('exploded');
    const doc = await model().findOne({ event_id: 'evt_fail' }).lean();
    expect(doc).toMatchObject({ status: 'failed', error: 'database of acme exploded at /srv/secret/path', processed_at: null, attempts: 1 });
  });

  it('a redelivery of a failed event re-runs the handler until max_retries, then leaves it failed for an operator', async () => {
    calls.failWith = 'down';
    const body = '{"meta":{"id":"evt_rr"}}';
    expect((await deliver(t, 'acme', body, signed(body))).status).toBe(500);
    // max_retries = 2: two redeliveries re-run the handler ...
    expect((await deliver(t, 'acme', body, signed(body))).status).toBe(500);
    expect((await deliver(t, 'acme', body, signed(body))).status).toBe(500);
    expect(calls.list.map((c) => c.event.attempt)).toEqual([1, 2, 3]);
    // ... the third does not: acknowledged (so the provider stops), still failed.
    const past = await deliver(t, 'acme', body, signed(body));
    expect(past.status).toBe(200);
    expect(past.body).toEqual({ status: 'failed', event_id: 'evt_rr' });
    expect(calls.list).toHaveLength(3);
    expect(await model().findOne({ event_id: 'evt_rr' }).lean()).toMatchObject({ status: 'failed', attempts: 3, retry_count: 3 });
  });

  it('a redelivery of a failed event that now succeeds answers ok and marks it processed', async () => {
    calls.failWith = 'flaky';
    const body = '{"meta":{"id":"evt_flaky"}}';
    expect((await deliver(t, 'acme', body, signed(body))).status).toBe(500);
    calls.failWith = null;
    const res = await deliver(t, 'acme', body, signed(body));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', event_id: 'evt_flaky' });
    expect(await model().findOne({ event_id: 'evt_flaky' }).lean()).toMatchObject({ status: 'processed', error: null, attempts: 2 });
  });

  it('an event stuck in processing after a crash is taken over once its lease has passed', async () => {
    const now = new Date();
    const base = { provider: 'acme', payload: { meta: { id: 'x' } }, headers: {}, attempts: 1, created_at: now, updated_at: now };
    await model().create({ ...base, event_id: 'evt_stuck', status: 'processing', lease_until: new Date(now.getTime() - 1000) });
    await model().create({ ...base, event_id: 'evt_live', status: 'processing', lease_until: new Date(now.getTime() + 60_000) });
    const live = '{"meta":{"id":"evt_live"}}';
    expect((await deliver(t, 'acme', live, signed(live))).body).toEqual({ status: 'processing' });
    const stuck = '{"meta":{"id":"evt_stuck"}}';
    const res = await deliver(t, 'acme', stuck, signed(stuck));
    expect(res.body).toEqual({ status: 'ok', event_id: 'evt_stuck' });
    expect(calls.list).toHaveLength(1);
    expect(await model().findOne({ event_id: 'evt_stuck' }).lean()).toMatchObject({ status: 'processed', attempts: 2 });
  });
});

describe('bad bodies', () => {
  it('a body over BODY_LIMIT is 413 and nothing is stored', async () => {
    const body = JSON.stringify({ meta: { id: 'big' }, pad: 'x'.repeat(4000) });
    const res = await deliver(t, 'acme', body, signed(body));
    expect(res.status).toBe(413);
    expect(envelope(res).code).toBe('PAYLOAD_TOO_LARGE');
    expect(await count()).toBe(0);
  });

  it('a signed non-JSON body is 400; JSON that is not an object is 422; nothing is stored', async () => {
    const text = 'meta=1&id=2';
    const res = await deliver(t, 'acme', text, { ...signed(text), 'Content-Type': 'application/x-www-form-urlencoded' });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
    const broken = '{"meta":';
    expect((await deliver(t, 'acme', broken, signed(broken))).status).toBe(400);
    const arr = '[1,2]';
    expect((await deliver(t, 'acme', arr, signed(arr))).status).toBe(422);
    expect(await count()).toBe(0);
  });

  it('an unsigned non-JSON body is 401 (the signature is checked before parsing)', async () => {
    const res = await deliver(t, 'acme', 'not json');
    expect(res.status).toBe(401);
  });

  it('no answer carries a stack or a database message', async () => {
    const body = '{"meta":{"id":"evt_stack"}}';
    for (const res of [await deliver(t, 'acme', '{', signed('{')), await deliver(t, 'acme', body), await deliver(t, 'x', body)]) {
      const text = JSON.stringify(res.body);
      expect(text).not.toMatch(/at .*\.ts:\d+|Mongo|E11000|SyntaxError/);
    }
  });
});
