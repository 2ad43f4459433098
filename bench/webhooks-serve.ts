/**
 * One webhook receiver under test, in its own process. BENCH_MODE: `app` (the real server with
 * WEBHOOKS_ENABLED and a no-op provider `bench`), `bare` (a bare Koa handler that reads the raw
 * body, verifies the same HMAC, parses it and inserts the same document) or `bare-update` (bare,
 * plus the second write the app makes to record the handler's outcome). Prints `READY <port>`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import Koa from 'koa';
import getRawBody from 'raw-body';
import mongoose from 'mongoose';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { definePlugin } from '../core/plugin.ts';

// Passed by bench/webhooks.ts, which signs the requests with it.
const BENCH_WEBHOOK_SECRET = process.env.BENCH_WEBHOOK_SECRET!;

const mode = process.env.BENCH_MODE ?? 'app';
const uri = process.env.MONGODB_URI!;

if (mode === 'bare' || mode === 'bare-update') {
  const conn = await mongoose.createConnection(uri).asPromise();
  const events = conn.db!.collection('webhook_events');
  const koa = new Koa();
  koa.use(async (ctx) => {
    const raw = await getRawBody(ctx.req, { limit: '1mb' });
    const given = Buffer.from(String(ctx.get('X-Signature')), 'hex');
    const expected = createHmac('sha256', BENCH_WEBHOOK_SECRET).update(raw).digest();
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      ctx.status = 401;
      return;
    }
    const payload = JSON.parse(raw.toString('utf8')) as { id: string; type: string };
    const now = new Date();
    const res = await events.insertOne({
      provider: 'bench', event_id: payload.id, event_type: payload.type, delivery_id: null, payload,
      headers: { 'content-type': ctx.get('Content-Type'), 'x-signature': ctx.get('X-Signature') },
      status: 'processing', processed_at: null, error: null, retry_count: 0, is_duplicate: false, attempts: 1,
      lease_until: new Date(now.getTime() + 300_000), created_at: now, updated_at: now,
    });
    if (mode === 'bare-update') {
      await events.updateOne({ _id: res.insertedId, status: 'processing', attempts: 1 }, { $set: { status: 'processed', processed_at: new Date(), lease_until: null } });
    }
    ctx.body = { status: 'ok', event_id: payload.id };
  });
  const server = koa.listen(0, '127.0.0.1', () => process.stdout.write(`READY ${(server.address() as { port: number }).port}\n`));
} else {
  const config = loadConfig({ MONGODB_URI: uri, LOG_LEVEL: 'silent', WEBHOOKS_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false', AUDIT_LOG_ENABLED: 'false' });
  const bench = definePlugin({
    name: 'bench-webhook-provider',
    dependsOn: ['webhooks'],
    setup({ services }) {
      services.get('webhooks').register({
        provider: 'bench', secret: BENCH_WEBHOOK_SECRET, verifier: { type: 'hmac-sha256' }, event_id_path: 'id', event_type_path: 'type',
        handler: async () => undefined,
      });
      return {};
    },
  });
  const app = await createApp({ corePlugins: corePlugins(), config, plugins: [...builtinPlugins(), bench] });
  const port = await app.listen(0, '127.0.0.1');
  process.stdout.write(`READY ${port}\n`);
}
