/**
 * `npx tsx bench/fanout.ts`: the machine's CPU per create with webhooks on, counted until the webhook
 * fan-out consumer has caught up with every event (what a change costs once its fan-out is done,
 * not only while the creates run). Each side (`BENCH_SIDES`, default `app`; `base:app` runs the
 * checkout in `BENCH_BASE_DIR`, old code against new) creates `BENCH_CREATES` projects (default
 * 5,000, 10 connections) in `BENCH_ROUNDS` rounds (default 2), the order rotating, and waits for the
 * consumer's position to pass the newest event. Prints, per side and round: how long the creates
 * took, how far behind the fan-out was when they ended, when it caught up, the machine's CPU per
 * create (from `/proc/stat`, Linux), and the fan-out's claims in the database.
 */
import autocannon from 'autocannon';
import mongoose from 'mongoose';
import { machineCpu } from './machine.ts';
import { seed, startServer } from './seed.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const N = Number(process.env.BENCH_CREATES ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const SIDES = (process.env.BENCH_SIDES ?? 'app').split(',').filter(Boolean);
const FANOUT = 'webhooks.outbound-fanout';

if (machineCpu() === null) throw new Error('bench/fanout.ts reads the machine\'s CPU from /proc/stat: Linux only');
const { mem, MONGODB_URI, tenant, user, key } = await seed(2000, log);
const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id, WEBHOOKS_ENABLED: 'true' };
const conn = await mongoose.createConnection(MONGODB_URI).asPromise();
const position = async () => ((await conn.collection('event_consumers').findOne({ _id: FANOUT } as never))?.position as Date | undefined)?.getTime() ?? 0;
const newest = async () => ((await conn.collection('events').find().sort({ committed_at: -1 }).limit(1).next())?.committed_at as Date).getTime();
for (let round = 0; round < ROUNDS; round++) {
  for (const side of SIDES.map((_, j) => SIDES[(j + round) % SIDES.length]!)) {
    const { child, port } = await startServer(side, env);
    await new Promise((r) => setTimeout(r, 1500));
    const [m0, t0] = [machineCpu()!, Date.now()];
    const r = await autocannon({ url: `http://127.0.0.1:${port}/projects`, connections: 10, amount: N, method: 'POST', body: '{"name":"x"}', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' } });
    const created = Date.now();
    // The relay's last batch lands within its interval.
    await new Promise((res) => setTimeout(res, 300));
    const last = await newest();
    const behind = (last - (await position())) / 1000;
    while ((await position()) < last && Date.now() - t0 < 600_000) await new Promise((res) => setTimeout(res, 200));
    const [m1, t1] = [machineCpu()!, Date.now()];
    const claims = await conn.collection('event_claims').countDocuments({ consumer: FANOUT });
    log(`${side.padEnd(9)} round ${round + 1}: ${N} creates in ${((created - t0) / 1000).toFixed(1)} s (${r.non2xx} non-2xx); fan-out ${behind.toFixed(1)} s behind then, caught up ${((t1 - t0) / 1000).toFixed(1)} s after the start${(await position()) < last ? ' (NOT: gave up after 600 s)' : ''}; machine ${((m1 - m0) / N).toFixed(0)} µs per create; fan-out claims so far ${claims}`);
    await new Promise((res) => { child.once('exit', res); child.kill('SIGINT'); });
  }
}
await conn.close();
await mem?.stop();
process.exit(0);
