/**
 * A local stand-in for the few Stripe API endpoints the `stripe` provider calls
 * (`POST /v1/payment_intents`, `POST /v1/refunds`), answering Stripe-shaped JSON. The SDK is pointed
 * at it with its `host`/`port`/`protocol` options (`STRIPE_API_URL`). It honours `Idempotency-Key`
 * like Stripe (same key → same object) and records every request.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StripeRequest {
  method: string;
  path: string;
  form: Record<string, string>;
  idempotencyKey: string | null;
  authorization: string | null;
}

export interface FakeStripe {
  url: string;
  requests: StripeRequest[];
  /** Refunds answer a Stripe API error (HTTP 402) while this is > 0. */
  failRefunds: number;
  close(): Promise<void>;
}

const readForm = async (req: IncomingMessage): Promise<Record<string, string>> => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
};

/** `metadata[a]=1` form fields → `{ a: '1' }`. */
const metadataOf = (form: Record<string, string>) =>
  Object.fromEntries(Object.entries(form).filter(([k]) => k.startsWith('metadata[')).map(([k, v]) => [k.slice(9, -1), v]));

export async function startFakeStripe(): Promise<FakeStripe> {
  let seq = 0;
  const byKey = new Map<string, unknown>();
  const state: FakeStripe = { url: '', requests: [], failRefunds: 0, close: async () => undefined };
  const server: Server = createServer(async (req, res) => {
    const form = await readForm(req);
    const key = (req.headers['idempotency-key'] as string | undefined) ?? null;
    state.requests.push({ method: req.method ?? '', path: req.url ?? '', form, idempotencyKey: key, authorization: (req.headers.authorization as string | undefined) ?? null });
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json', 'Request-Id': `req_${++seq}` });
      res.end(JSON.stringify(body));
    };
    if (key && byKey.has(`${req.url}:${key}`)) return send(200, byKey.get(`${req.url}:${key}`));
    if (req.method === 'POST' && req.url === '/v1/payment_intents') {
      const id = `pi_test_${++seq}`;
      const pi = {
        id, object: 'payment_intent', amount: Number(form.amount), currency: form.currency, status: 'requires_payment_method',
        client_secret: `${id}_secret_abc`, metadata: metadataOf(form), livemode: false,
      };
      if (key) byKey.set(`${req.url}:${key}`, pi);
      return send(200, pi);
    }
    if (req.method === 'POST' && req.url === '/v1/refunds') {
      if (state.failRefunds > 0) {
        state.failRefunds--;
        return send(402, { error: { type: 'invalid_request_error', code: 'charge_already_refunded', message: 'Charge has already been refunded.' } });
      }
      const refund = { id: `re_test_${++seq}`, object: 'refund', amount: Number(form.amount), payment_intent: form.payment_intent, status: 'succeeded', metadata: metadataOf(form) };
      if (key) byKey.set(`${req.url}:${key}`, refund);
      return send(200, refund);
    }
    send(404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method}: ${req.url})` } });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise((r) => server.close(() => r()));
  return state;
}
