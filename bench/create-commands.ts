/**
 * `npx tsx bench/create-commands.ts`: the database commands (and the statements inside bulk writes)
 * a server sends per 1,000 creates of `/projects`, by command and collection, one side at a time on
 * the same seeded database (bench/commands-preload.ts counts them in the server process). Per side
 * (`BENCH_SIDES`, default `app-floor,app`, modes of bench/serve.ts): `BENCH_WARMUP` (500) creates,
 * a pause, an idle window of `BENCH_IDLE_S` (8) seconds (the background: sweep ticks, limiter syncs,
 * pollers), then `BENCH_CREATES` (3,000) creates over 10 connections and the same pause (so the
 * relay and the sweep's recent pass, 5 s behind, have gone over them). Printed: the counts of the
 * creates' window per 1,000 creates, with the idle window's rate for as long subtracted ("net"),
 * and the idle rate per second. Only one server runs at a time: a sweep's reads are its own writes'.
 * `BENCH_OP=update` counts updates (PATCH with `If-Match`) the same way.
 */
import type { ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import { patchRequests, seed, startServer } from './seed.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const SIDES = (process.env.BENCH_SIDES ?? 'app-floor,app').split(',').filter(Boolean);
const CREATES = Number(process.env.BENCH_CREATES ?? 3000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 500);
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 8);
/** `BENCH_OP=update`: PATCHes with `If-Match` of the seeded documents in turn instead of creates (counted the same way). */
const UPDATES = process.env.BENCH_OP === 'update';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
type Counts = Record<string, number>;

/** The server's counts so far (its SIGUSR2 report with the preload). */
function snapshot(child: ChildProcess): Promise<Counts> {
  return new Promise((resolve) => {
    let out = '';
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = /COMMANDS (.*)\n/.exec(out);
      if (!m || !/CPU \d+\n/.test(out)) return;
      child.stdout!.off('data', onData);
      resolve(JSON.parse(m[1]!) as Counts);
    };
    child.stdout!.on('data', onData);
    child.kill('SIGUSR2');
  });
}
const minus = (a: Counts, b: Counts): Counts => Object.fromEntries(Object.keys(a).map((k) => [k, a[k]! - (b[k] ?? 0)]));

async function main() {
  const { mem, MONGODB_URI, tenant, user, key, updIds } = await seed(Number(process.env.BENCH_DOCS ?? 20_000), log);
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  const preload = new URL('./commands-preload.ts', import.meta.url).pathname;
  // The seeded documents' versions, shared by the sides (each PATCH sends its document's current one).
  const versions = new Map<string, number>();
  const results: Record<string, { net: Counts; raw: Counts; idlePerS: Counts }> = {};
  for (const side of SIDES) {
    const { child, port } = await startServer(side, env, ['--import', preload]);
    const create = (amount: number) => autocannon({
      url: `http://127.0.0.1:${port}/projects`, connections: 10, amount,
      ...(UPDATES
        ? { headers: { 'X-API-Key': key }, requests: patchRequests(updIds, versions) }
        : { method: 'POST' as const, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 }) }),
    });
    await create(WARMUP);
    await sleep(IDLE_S * 1000);
    const a = await snapshot(child);
    await sleep(IDLE_S * 1000);
    const b = await snapshot(child);
    const t0 = Date.now();
    const r = await create(CREATES);
    if (r.non2xx || r.errors) throw new Error(`${side}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    await sleep(IDLE_S * 1000);
    const c = await snapshot(child);
    const seconds = (Date.now() - t0) / 1000;
    await new Promise((res) => { child.once('exit', res); child.kill('SIGINT'); });
    const idle = minus(b, a);
    const raw = minus(c, b);
    const idlePerS = Object.fromEntries(Object.entries(idle).map(([k, v]) => [k, v / IDLE_S]));
    const net = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, v - (idlePerS[k] ?? 0) * seconds]));
    results[side] = { net, raw, idlePerS };
    log(`${side}: ${CREATES} creates at ${(CREATES / r.duration).toFixed(0)} req/s, window ${seconds.toFixed(1)} s (load ${load()})`);
  }
  const keys = [...new Set(Object.values(results).flatMap((r) => Object.keys(r.raw)))].sort();
  const per = (n: number) => ((n * 1000) / CREATES).toFixed(1).padStart(9);
  log(`\nper 1,000 ${UPDATES ? 'updates' : 'creates'}: net (raw) for ${SIDES.join(' | ')}; then idle per second`);
  for (const k of keys) {
    if (SIDES.every((s) => !results[s]!.raw[k])) continue;
    log(`${k.padEnd(52)} ${SIDES.map((s) => `${per(results[s]!.net[k] ?? 0)} (${per(results[s]!.raw[k] ?? 0).trim()})`).join(' | ')} | ${SIDES.map((s) => (results[s]!.idlePerS[k] ?? 0).toFixed(2)).join(' | ')}`);
  }
  await mem?.stop();
}

await main();
process.exit(0);
