/**
 * Every verifier option and preset, signatures made by the providers' own libraries where they
 * offer it (Stripe's generateTestHeaderString, standardwebhooks' Webhook#sign).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { webhookEventModel } from '../../plugins/webhooks/model.ts';
import { deliver, hmac, newCalls, providersPlugin, SECRET } from './helpers.ts';

const STRIPE_SECRET = 'whsec_test_stripe_secret';
// Standard Webhooks secrets are base64 after the `whsec_` prefix.
const SW_SECRET = `whsec_${Buffer.from('standard-webhooks-test-secret-32b').toString('base64')}`;
const calls = newCalls();
let t: TestApp;
// A provider declared in configuration whose deliveries carry their timestamp in a header.
const DECLARED = JSON.stringify([{ name: 'declared', verifier: { type: 'hmac-sha256' }, secret_env: 'DECLARED_WEBHOOK_SECRET', event_id_path: 'id', timestamp_header: 'X-Timestamp' }]);

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [
      webhooksPlugin,
      providersPlugin(calls, [
        { provider: 'prefixed', secret: SECRET, verifier: { type: 'hmac-sha256', prefix: 'sha256=' }, signature_header: 'X-Sig', event_id_path: 'id' },
        { provider: 'hex256', secret: SECRET, verifier: { type: 'hmac-sha256', encoding: 'hex' }, event_id_path: 'id' },
        { provider: 'b64', secret: SECRET, verifier: { type: 'hmac-sha256', encoding: 'base64' }, event_id_path: 'id' },
        { provider: 'sha512', secret: SECRET, verifier: { type: 'hmac-sha512', prefix: 'v1,', encoding: 'base64' }, event_id_path: 'id' },
        {
          provider: 'custom', secret: 'letmein', event_id_path: 'id', signature_header: 'X-Token',
          verifier: { verify: async (bytes: Buffer, signature: string, secret: string) => signature === `${secret}:${bytes.length}` },
        },
        { provider: 'stripe', secret: STRIPE_SECRET, verifier: { type: 'stripe' } },
        { provider: 'sw', secret: SW_SECRET, verifier: { type: 'standard-webhooks' } },
        { provider: 'gh', secret: SECRET, verifier: { type: 'github' } },
        {
          provider: 'custom-ts', secret: SECRET, event_id_path: 'id', timestamp_header: 'X-Timestamp',
          // Signs `timestamp.body`, as timestamped schemes do; the receiver checks the timestamp's age.
          verifier: { verify: async (bytes: Buffer, signature: string, secret: string, headers) => signature === hmac('sha256', `${String(headers['x-timestamp'])}.${bytes.toString()}`, secret) },
        },
      ]),
    ],
    config: { WEBHOOKS_ENABLED: 'true', WEBHOOK_PROVIDERS: DECLARED, DECLARED_WEBHOOK_SECRET: SECRET },
  });
});
afterAll(() => t?.close());
beforeEach(async () => {
  calls.list.length = 0;
  await webhookEventModel(t.app.db.conn).deleteMany({});
});

const body = (id: string) => `{"id":"${id}","type":"thing.happened","data":{"n":1}}`;

describe('HMAC options', () => {
  it('prefix: stripped before comparing; a value without it fails', async () => {
    const b = body('p1');
    expect((await deliver(t, 'prefixed', b, { 'X-Sig': `sha256=${hmac('sha256', b)}` })).body).toEqual({ status: 'ok', event_id: 'p1' });
    expect((await deliver(t, 'prefixed', b, { 'X-Sig': hmac('sha256', b) })).status).toBe(401);
    expect((await deliver(t, 'prefixed', b, { 'X-Sig': `sha1=${hmac('sha256', b)}` })).status).toBe(401);
  });

  it('hex (default encoding, either case); base64 of the same MAC fails', async () => {
    const b = body('h1');
    expect((await deliver(t, 'hex256', b, { 'X-Signature': hmac('sha256', b).toUpperCase() })).status).toBe(200);
    expect((await deliver(t, 'hex256', b, { 'X-Signature': hmac('sha256', b, SECRET, 'base64') })).status).toBe(401);
    // A truncated MAC (length check before timingSafeEqual) fails rather than throws.
    expect((await deliver(t, 'hex256', body('h2'), { 'X-Signature': hmac('sha256', body('h2')).slice(0, 32) })).status).toBe(401);
  });

  it('base64', async () => {
    const b = body('b1');
    expect((await deliver(t, 'b64', b, { 'X-Signature': hmac('sha256', b, SECRET, 'base64') })).status).toBe(200);
    expect((await deliver(t, 'b64', body('b2'), { 'X-Signature': hmac('sha256', body('b2')) })).status).toBe(401);
  });

  it('sha512 (with prefix and base64); a sha256 MAC fails', async () => {
    const b = body('s1');
    expect((await deliver(t, 'sha512', b, { 'X-Signature': `v1,${hmac('sha512', b, SECRET, 'base64')}` })).status).toBe(200);
    expect((await deliver(t, 'sha512', body('s2'), { 'X-Signature': `v1,${hmac('sha256', body('s2'), SECRET, 'base64')}` })).status).toBe(401);
  });

  it('a custom verifier gets the raw bytes, the header value and the secret', async () => {
    const b = body('c1');
    expect((await deliver(t, 'custom', b, { 'X-Token': `letmein:${Buffer.byteLength(b)}` })).status).toBe(200);
    expect((await deliver(t, 'custom', b, { 'X-Token': 'letmein:1' })).status).toBe(401);
  });
});

describe('presets', () => {
  it('Stripe: a header from stripe.webhooks.generateTestHeaderString passes; id and type from the payload', async () => {
    const payload = JSON.stringify({ id: 'evt_123', object: 'event', type: 'payment_intent.succeeded' });
    const header = Stripe.webhooks.generateTestHeaderString({ payload, secret: STRIPE_SECRET });
    const res = await deliver(t, 'stripe', payload, { 'Stripe-Signature': header });
    expect(res.body).toEqual({ status: 'ok', event_id: 'evt_123' });
    expect(calls.list[0]!.event).toMatchObject({ event_type: 'payment_intent.succeeded' });
  });

  it('Stripe: a timestamp outside the 300 s tolerance, a wrong secret or a tampered body is 401', async () => {
    const payload = JSON.stringify({ id: 'evt_old', object: 'event', type: 'x' });
    const old = Stripe.webhooks.generateTestHeaderString({ payload, secret: STRIPE_SECRET, timestamp: Math.floor(Date.now() / 1000) - 301 });
    expect((await deliver(t, 'stripe', payload, { 'Stripe-Signature': old })).status).toBe(401);
    const wrong = Stripe.webhooks.generateTestHeaderString({ payload, secret: 'whsec_other' });
    expect((await deliver(t, 'stripe', payload, { 'Stripe-Signature': wrong })).status).toBe(401);
    const fresh = Stripe.webhooks.generateTestHeaderString({ payload, secret: STRIPE_SECRET });
    expect((await deliver(t, 'stripe', payload.replace('"x"', '"y"'), { 'Stripe-Signature': fresh })).status).toBe(401);
    expect(calls.list).toHaveLength(0);
  });

  it('Standard Webhooks: signed with Webhook#sign; the webhook-id is the event id', async () => {
    const payload = JSON.stringify({ type: 'user.created', timestamp: new Date().toISOString(), data: { id: 'u1' } });
    const now = new Date();
    const sig = new Webhook(SW_SECRET).sign('msg_abc', now, payload);
    const headers = { 'webhook-id': 'msg_abc', 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': sig };
    const res = await deliver(t, 'sw', payload, headers);
    expect(res.body).toEqual({ status: 'ok', event_id: 'msg_abc' });
    expect(calls.list[0]!.event).toMatchObject({ event_type: 'user.created', delivery_id: 'msg_abc' });
    // The id is part of what is signed: another id with the same signature fails.
    expect((await deliver(t, 'sw', payload, { ...headers, 'webhook-id': 'msg_other' })).status).toBe(401);
  });

  it('Standard Webhooks: a stale timestamp is 401', async () => {
    const payload = JSON.stringify({ type: 'user.created', data: {} });
    const then = new Date(Date.now() - 10 * 60_000);
    const sig = new Webhook(SW_SECRET).sign('msg_old', then, payload);
    const res = await deliver(t, 'sw', payload, { 'webhook-id': 'msg_old', 'webhook-timestamp': String(Math.floor(then.getTime() / 1000)), 'webhook-signature': sig });
    expect(res.status).toBe(401);
  });

  it('GitHub: X-Hub-Signature-256 with sha256=; delivery GUID is the event id, X-GitHub-Event the type', async () => {
    const payload = JSON.stringify({ action: 'opened', number: 1 });
    const headers = {
      'X-Hub-Signature-256': `sha256=${hmac('sha256', payload)}`,
      'X-GitHub-Event': 'pull_request',
      'X-GitHub-Delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958',
    };
    const res = await deliver(t, 'gh', payload, headers);
    expect(res.body).toEqual({ status: 'ok', event_id: '72d3162e-cc78-11e3-81ab-4c9367dc0958' });
    expect(calls.list[0]!.event).toMatchObject({ event_type: 'pull_request' });
    expect((await deliver(t, 'gh', payload, { ...headers, 'X-Hub-Signature-256': hmac('sha256', payload) })).status).toBe(401);
  });
});

describe('signed timestamps: the tolerance applies before and after now', () => {
  const DAY = 86_400;
  const now = () => Math.floor(Date.now() / 1000);
  const stored = () => webhookEventModel(t.app.db.conn).countDocuments({});
  /** Signs `payload` for `provider` as of `ts` (Unix seconds), as each provider's sender would. */
  const signers: Record<string, (payload: string, ts: number) => Record<string, string>> = {
    stripe: (payload, ts) => ({ 'Stripe-Signature': Stripe.webhooks.generateTestHeaderString({ payload, secret: STRIPE_SECRET, timestamp: ts }) }),
    sw: (payload, ts) => ({
      'webhook-id': `msg_${ts}`, 'webhook-timestamp': String(ts), 'webhook-signature': new Webhook(SW_SECRET).sign(`msg_${ts}`, new Date(ts * 1000), payload),
    }),
    'custom-ts': (payload, ts) => ({ 'X-Timestamp': String(ts), 'X-Signature': hmac('sha256', `${ts}.${payload}`) }),
    declared: (payload, ts) => ({ 'X-Timestamp': String(ts), 'X-Signature': hmac('sha256', payload) }),
  };

  for (const [provider, sign] of Object.entries(signers)) {
    it(`${provider}: a timestamp 1 day or 1 year ahead is refused like a stale one, and nothing is stored`, async () => {
      for (const [label, ts] of [['+1 day', now() + DAY], ['+1 year', now() + 365 * DAY], ['-1 day', now() - DAY]] as const) {
        const payload = body(`ts_${provider}_${label}`);
        const res = await deliver(t, provider, payload, sign(payload, ts));
        expect(res.status, label).toBe(401);
        expect(envelope(res).code, label).toBe('AUTH_REQUIRED');
      }
      expect(await stored()).toBe(0);
      expect(calls.list).toHaveLength(0);
      // Within the tolerance, a little ahead (clock skew) or behind, it passes.
      for (const ts of [now() + 60, now() - 60]) {
        const payload = body(`ts_${provider}_ok_${ts}`);
        expect((await deliver(t, provider, payload, sign(payload, ts))).status).toBe(200);
      }
    });
  }

  it('a provider given a timestamp header refuses a delivery without it or with one that is not Unix seconds', async () => {
    const payload = body('ts_missing');
    for (const ts of [undefined, 'yesterday', `${now()}.5`, '']) {
      const headers = { 'X-Signature': hmac('sha256', payload), ...(ts === undefined ? {} : { 'X-Timestamp': ts }) };
      expect((await deliver(t, 'declared', payload, headers)).status).toBe(401);
    }
    expect(await stored()).toBe(0);
  });
});
