/**
 * `npx tsx bench/cpu.ts [path]`: server CPU time per request, app against bare, for one scenario
 * (default: get-one, then `/ping/:id`, the pipeline without a database). Throughput ratios on a shared machine swing with the database and the other
 * processes; the CPU the server process itself spends per request does not, so this says where the
 * app stands against bare independently of load. Each side serves `BENCH_REQUESTS` requests
 * (default 20,000, after 2,000 of warm-up) over 10 connections; rounds alternate (`BENCH_ROUNDS`, 3).
 */
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { seed, startServer } from './seed.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** Asks the server for its CPU time so far (µs), through SIGUSR2 (bench/serve.ts). */
function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    const onData = (b: Buffer) => {
      const m = /CPU (\d+)/.exec(b.toString());
      if (m) {
        child.stdout!.off('data', onData);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on('data', onData);
    child.kill('SIGUSR2');
  });
}

async function measure(mode: string, env: NodeJS.ProcessEnv, path: string, key: string) {
  const { child, port } = await startServer(mode, env);
  const url = `http://127.0.0.1:${port}${path}`;
  const load = (amount: number) => autocannon({ url, connections: 10, amount, headers: { 'X-API-Key': key } });
  await load(2000);
  const before = await cpuOf(child);
  const r = await load(REQUESTS);
  const after = await cpuOf(child);
  await new Promise((res) => { child.once('exit', res); child.kill('SIGINT'); });
  if (r.non2xx) throw new Error(`${mode}: ${r.non2xx} non-2xx answers`);
  return (after - before) / REQUESTS;
}

async function main() {
  const { mem, MONGODB_URI, tenant, key, sample } = await seed(Number(process.env.BENCH_DOCS ?? 20_000), log);
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id };
  const paths = process.argv.length > 2 ? process.argv.slice(2) : [`/projects/${String(sample._id)}`, `/ping/${String(sample._id)}`];
  for (const path of paths) {
    const ratios: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const bare = await measure('bare', env, path, key);
      const app = await measure('app', env, path, key);
      ratios.push(bare / app);
      log(`${path} round ${i + 1}: bare ${bare.toFixed(0)} µs/request, app ${app.toFixed(0)} µs/request (+${(app - bare).toFixed(0)}), bare/app ${(bare / app).toFixed(2)}`);
    }
    ratios.sort((a, b) => a - b);
    log(`${path}: server CPU bare/app, median of ${ROUNDS}: ${ratios[Math.floor(ROUNDS / 2)]!.toFixed(2)}`);
  }
  await mem?.stop();
}

await main();
