/**
 * The request limiter counts in memory and shares its counts through the store every
 * RATE_LIMIT_SYNC_MS (plugins/rate-limit/service.ts): two real server processes on one database, and the
 * window of one process.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import mongoose from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';

const MAX = 300;
const SYNC_MS = 25;

describe('two replicas, one budget, requests as fast as they go', () => {
  const uri = uniqueDbUri();
  let replicas: ServerProcess[];
  let setup: TestApp;
  beforeAll(async () => {
    replicas = await startReplicas(2, { MONGODB_URI: uri, RATE_LIMIT_MAX: String(MAX), RATE_LIMIT_SYNC_MS: String(SYNC_MS), RATE_LIMIT_WINDOW_SECONDS: '600' });
    setup = await buildTestApp({ config: { MONGODB_URI: uri, RATE_LIMIT_ENABLED: 'false' } });
  });
  afterAll(async () => {
    await Promise.all([...(replicas ?? []).map((p) => p.stop()), setup?.close()]);
  });

  it('accept at least RATE_LIMIT_MAX and at most RATE_LIMIT_MAX + the sync bound, then both refuse', async () => {
    const { key } = await createTenantUser(setup);
    // The bound depends on how fast the store answers on this machine now: measure a sync's round
    // trip (one bulk write, one read) on the same database while the burst runs.
    const conn = await mongoose.createConnection(uri).asPromise();
    const probe = conn.db!.collection('rate_limit_probe');
    let roundTrip = 0;
    let bursting = true;
    const probing = (async () => {
      while (bursting) {
        const t0 = performance.now();
        await probe.bulkWrite([{ updateOne: { filter: { key: 'p' }, update: [{ $set: { points: { $add: [{ $ifNull: ['$points', 0] }, 1] } } }], upsert: true } }]);
        await probe.find({ key: { $in: ['p'] } }).toArray();
        roundTrip = Math.max(roundTrip, performance.now() - t0);
        await sleep(SYNC_MS);
      }
    })();

    const N = 3 * MAX;
    const CONCURRENCY = 16;
    let sent = 0;
    let accepted = 0;
    let refused = 0;
    const start = performance.now();
    let lastAccepted = start;
    const worker = async () => {
      while (sent < N) {
        const p = replicas[sent++ % 2]!;
        const res = await fetch(`${p.url}/auth/me`, { headers: { 'X-API-Key': key } });
        await res.arrayBuffer();
        if (res.status === 200) {
          accepted++;
          lastAccepted = performance.now();
        } else if (res.status === 429) refused++;
        else throw new Error(`unexpected status ${res.status}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    bursting = false;
    await probing;
    await conn.close();

    // What each replica may accept before the other's counts reach it: the other's traffic over two
    // sync intervals plus a store round trip (docs/operations.md), at the rate requests were
    // accepted, plus the requests in flight when the limit was met.
    const rate = accepted / ((lastAccepted - start) / 1000);
    const bound = Math.ceil(rate * 2 * ((SYNC_MS + roundTrip) / 1000)) + CONCURRENCY;
    const report = { accepted, refused, rate: Math.round(rate), roundTripMs: Math.round(roundTrip), bound };
    expect(accepted + refused, JSON.stringify(report)).toBe(N);
    expect(accepted, JSON.stringify(report)).toBeGreaterThanOrEqual(MAX);
    expect(accepted, JSON.stringify(report)).toBeLessThanOrEqual(MAX + Math.min(bound, MAX));

    // Afterwards both refuse, each knowing the other's counts.
    await sleep(10 * SYNC_MS);
    for (const p of replicas) expect((await fetch(`${p.url}/auth/me`, { headers: { 'X-API-Key': key } })).status).toBe(429);
  });
});

describe('one process', () => {
  let t: TestApp;
  beforeAll(async () => {
    // A window long enough that three requests fall inside it on a busy machine.
    t = await buildTestApp({ config: { RATE_LIMIT_MAX: '2', RATE_LIMIT_WINDOW_SECONDS: '3', TRUST_PROXY: 'true' } });
  });
  afterAll(() => t?.close());

  it('a new window starts with a new budget', async () => {
    const hello = () => t.http('GET', '/health/x', { key: null, headers: { 'X-Forwarded-For': '10.9.0.1' } });
    expect((await hello()).status).toBe(404);
    expect((await hello()).status).toBe(404);
    const refused = await hello();
    expect(refused.status).toBe(429);
    const reset = Number(refused.headers.get('ratelimit-reset'));
    expect(reset).toBeGreaterThanOrEqual(1);
    expect(reset).toBeLessThanOrEqual(3);
    expect((await hello()).status).toBe(429);
    await sleep(reset * 1000 + 100);
    expect((await hello()).status).toBe(404);
  });

  it('counts reach the store within RATE_LIMIT_SYNC_MS, in the documents the exact limiter uses', async () => {
    await t.http('GET', '/health/x', { key: null, headers: { 'X-Forwarded-For': '10.9.0.2' } });
    const limits = t.app.db.conn.db!.collection('rate_limits');
    let doc = null;
    for (let i = 0; i < 100 && !doc; i++) {
      await sleep(20);
      doc = await limits.findOne({ key: 'rate_limits:ip:10.9.0.2' });
    }
    expect(doc).toMatchObject({ points: 1, expire: expect.any(Date) });
  });
});
