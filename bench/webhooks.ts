/**
 * Webhook receiver throughput: accepted events per second of `POST /webhooks/bench` against a bare
 * Koa handler that verifies the same HMAC and inserts the same document (aim: ratio >= 0.8), and
 * against a bare handler that also makes the app's second write (the handler's outcome).
 * Every request carries a new event id, signed by the load generator.
 *
 * Standalone: `npx tsx bench/webhooks.ts` (MONGODB_URI optional; an embedded MongoDB otherwise).
 * From bench/run.ts: `await benchWebhooks(MONGODB_URI)`.
 */
import { createHmac, randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { startServer } from './seed.ts';
import { MongoMemoryServer } from 'mongodb-memory-server';

const BENCH_WEBHOOK_SECRET = 'bench-webhook-secret-0123456789';
const log = (s: string) => process.stdout.write(`${s}\n`);

/** Runs the comparison on the database at `mongodbUri` and returns the rates and ratios. */
export async function benchWebhooks(mongodbUri: string, opts: { seconds?: number; connections?: number } = {}) {
  const seconds = opts.seconds ?? Number(process.env.BENCH_SECONDS ?? 5);
  const connections = opts.connections ?? Number(process.env.BENCH_CONNECTIONS ?? 10);
  const uri = new URL(mongodbUri);
  uri.pathname = '/bench_webhooks';
  const env = { ...process.env, MONGODB_URI: uri.toString(), BENCH_WEBHOOK_SECRET };
  const rates: Record<string, number> = {};

  const measure = async (name: string, mode: string, path: string) => {
    const { child, port } = await startServer(mode, env, [], './webhooks-serve.ts');
    try {
      const run = randomBytes(4).toString('hex');
      let n = 0;
      const requests = [
        {
          method: 'POST' as const,
          path,
          setupRequest: (req: autocannon.Request) => {
            const body = JSON.stringify({ id: `${run}-${n++}`, type: 'bench.event', data: { amount: 1200, currency: 'eur' } });
            return { ...req, body, headers: { 'Content-Type': 'application/json', 'X-Signature': createHmac('sha256', BENCH_WEBHOOK_SECRET).update(body).digest('hex') } };
          },
        },
      ];
      await autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: 1, requests });
      const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: seconds, requests });
      const bad = r.non2xx + r.errors;
      const rate = r.requests.total / ((new Date(r.finish).getTime() - new Date(r.start).getTime()) / 1000);
      rates[name] = rate;
      log(`${name.padEnd(28)} ${rate.toFixed(0).padStart(7)} events/s   p99 ${r.latency.p99} ms${bad ? `   (${bad} non-2xx/errors!)` : ''}`);
      if (bad) throw new Error(`${name}: ${bad} non-2xx responses or errors; the measurement is invalid`);
    } finally {
      child.kill('SIGTERM');
    }
  };

  // Alternate twice so drift in the database cannot favour whichever side runs first.
  for (const round of [0, 1]) {
    await measure(`bare webhook #${round}`, 'bare', '/webhooks/bench');
    await measure(`bare+update webhook #${round}`, 'bare-update', '/webhooks/bench');
    await measure(`app webhook #${round}`, 'app', '/webhooks/bench');
  }
  const avg = (k: string) => (rates[`${k} #0`]! + rates[`${k} #1`]!) / 2;
  const summary = {
    'webhook receiver vs bare verify+insert (aim >= 0.8)': (avg('app webhook') / avg('bare webhook')).toFixed(2),
    'webhook receiver vs bare verify+insert+outcome update': (avg('app webhook') / avg('bare+update webhook')).toFixed(2),
  };
  log('\nwebhook ratios (same run, same database):');
  for (const [k, v] of Object.entries(summary)) log(`  ${k.padEnd(66)} ${v}`);
  return { rates, summary };
}


if (import.meta.url === `file://${process.argv[1]}`) {
  const mem = process.env.MONGODB_URI ? undefined : await MongoMemoryServer.create();
  try {
    await benchWebhooks(process.env.MONGODB_URI ?? mem!.getUri());
  } finally {
    await mem?.stop();
  }
  process.exit(0);
}
