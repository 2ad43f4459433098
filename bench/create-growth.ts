/**
 * `npx tsx bench/create-growth.ts`: what a create costs as its collection grows, per side, each side
 * on a database of its own (so one side's writes, sweeps and versions are not another's): every side
 * (`BENCH_SIDES`, default `app-floor,app,app-noversions`, modes of bench/serve.ts) gets `BENCH_DOCS`
 * (20,000) seeded projects and its server; then in each of `BENCH_STEPS` (7) steps, sides in turn
 * (the order rotating), each side's server takes `BENCH_CREATES` (15,000) creates over 10
 * connections, so every side's collection grows by the same amount. Per step and side: the rate,
 * the server's CPU per create, its database's CPU per create (bench/db-cpu.ts: the gateway and its
 * backends, whoever runs them), and the database's CPU per second while that side's server idles
 * `BENCH_IDLE_S` (3) seconds before its run (the background: the outbox sweep, pollers), which is
 * subtracted for the run's length in "net". Prints the load average with each step.
 */
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import { seed, serverReport, startServer } from './seed.ts';
import { dbCpuMeter } from './db-cpu.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const SIDES = (process.env.BENCH_SIDES ?? 'app-floor,app,app-noversions').split(',').filter(Boolean);
const STEPS = Number(process.env.BENCH_STEPS ?? 7);
const CREATES = Number(process.env.BENCH_CREATES ?? 15_000);
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 3);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
const body = JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 });

interface Row { rate: number; server: number; db: number; idle: number; net: number }

async function main() {
  const sides = [];
  for (const side of SIDES) {
    const s = await seed(Number(process.env.BENCH_DOCS ?? 20_000), log);
    const env = { ...process.env, MONGODB_URI: s.MONGODB_URI, BENCH_TENANT_ID: s.tenant.id, BENCH_USER_ID: s.user.id };
    const server = await startServer(side, env);
    const meter = dbCpuMeter(s.MONGODB_URI);
    if (meter.micros() === null) throw new Error('no database process found (bench/db-cpu.ts needs the DocumentDB stand-in on Linux)');
    const create = (amount: number) => autocannon({
      url: `http://127.0.0.1:${server.port}/projects`, method: 'POST', connections: 10, amount, sampleInt: 20, body,
      headers: { 'X-API-Key': s.key, 'Content-Type': 'application/json' },
    });
    await create(1000);
    sides.push({ side, s, server, meter, create, rows: [] as Row[] });
  }
  try {
    for (let step = 0; step < STEPS; step++) {
      log(`step ${step + 1}/${STEPS} (load average ${load()})`);
      for (let i = 0; i < sides.length; i++) {
        const x = sides[(i + step) % sides.length]!;
        const i0 = x.meter.micros()!;
        await sleep(IDLE_S * 1000);
        const idle = (x.meter.micros()! - i0) / IDLE_S;
        const [c0, d0] = [(await serverReport(x.server.child)).cpu, x.meter.micros()!];
        const r = await x.create(CREATES);
        const [c1, d1] = [(await serverReport(x.server.child)).cpu, x.meter.micros()!];
        if (r.non2xx || r.errors) throw new Error(`${x.side}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        const seconds = (new Date(r.finish).getTime() - new Date(r.start).getTime()) / 1000;
        const row = { rate: CREATES / seconds, server: (c1 - c0) / CREATES, db: (d1 - d0) / CREATES, idle, net: (d1 - d0 - idle * seconds) / CREATES };
        x.rows.push(row);
        log(`  ${x.side.padEnd(16)} ${row.rate.toFixed(0).padStart(5)} req/s  server ${row.server.toFixed(0)} µs  database ${row.db.toFixed(0)} µs (net ${row.net.toFixed(0)})  database idle ${(idle / 1000).toFixed(0)} ms/s  (${20_000 + 1000 + (step + 1) * CREATES} projects)`);
      }
    }
  } finally {
    for (const x of sides) x.server.child.kill('SIGTERM');
  }
  log(`\nby step (load average now ${load()}):`);
  for (const x of sides) {
    for (const k of ['rate', 'server', 'db', 'net', 'idle'] as const) log(`  ${x.side.padEnd(16)} ${k.padEnd(7)} ${x.rows.map((r) => (k === 'idle' ? r[k] / 1000 : r[k]).toFixed(0)).join(', ')}`);
  }
  const [first, ...rest] = sides;
  for (const x of rest) log(`  rate ${x.side} / ${first!.side} by step: ${x.rows.map((r, i) => (r.rate / first!.rows[i]!.rate).toFixed(2)).join(', ')}`);
  for (const x of sides) {
    x.meter.stop();
    await x.s.mem?.stop();
  }
}

await main();
process.exit(0);
