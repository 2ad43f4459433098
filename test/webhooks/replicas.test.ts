/**
 * Exactly-once across server processes: 50 concurrent deliveries of one event, spread over two
 * processes on one database, run the handler once (insert-first on the unique (provider, event_id)).
 * No fixed sleeps: the handler waits for a condition (every duplicate counted), the test for the answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import mongoose, { type Connection } from 'mongoose';
import { uniqueDbUri } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';
import { COUNTER_SECRET } from '../fixtures/webhook-counter-plugin.ts';
import { hmac } from './helpers.ts';

const uri = uniqueDbUri();
let procs: ServerProcess[] = [];
let conn: Connection;

beforeAll(async () => {
  const env = { MONGODB_URI: uri, WEBHOOKS_ENABLED: 'true', PLUGINS: './test/fixtures/webhook-counter-plugin.ts', RATE_LIMIT_ENABLED: 'false' };
  procs = await startReplicas(2, env);
  conn = await mongoose.createConnection(uri).asPromise();
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await conn?.close();
});

describe('50 concurrent deliveries across 2 processes', () => {
  it('run the handler exactly once and count 49 retries', async () => {
    // The handler holds until all 49 duplicates are counted: each of them meets the event in flight.
    const body = JSON.stringify({ id: 'evt_concurrent', type: 'x', hold_until_retries: 49 });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        fetch(`${procs[i % 2]!.url}/webhooks/counter`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Signature': hmac('sha256', body, COUNTER_SECRET) },
          body,
        }).then(async (r) => ({ status: r.status, body: (await r.json()) as { status: string } })),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.filter((r) => r.body.status === 'ok')).toHaveLength(1);
    expect(results.filter((r) => r.body.status === 'processing')).toHaveLength(49);
    const db = conn;
    expect(await db.collection('webhook_counter').findOne({ _id: 'evt_concurrent' as never })).toMatchObject({ runs: 1 });
    const events = await db.collection('webhook_events').find({ provider: 'counter', event_id: 'evt_concurrent' }).toArray();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ status: 'processed', retry_count: 49, is_duplicate: true, attempts: 1 });
  });
});
