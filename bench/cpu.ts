/**
 * `npx tsx bench/cpu.ts [path]`: server CPU time per request, app against bare, for one scenario
 * (default: get-one, then `/ping/:id`, the pipeline without a database; `get-one` and `ping` name them). Throughput ratios on a shared machine swing with the database and the other
 * processes; the CPU the server process itself spends per request does not, so this says where the
 * app stands against bare independently of load. Each side serves `BENCH_REQUESTS` requests
 * (default 20,000, after 2,000 of warm-up) over 10 connections; rounds alternate (`BENCH_ROUNDS`, 3).
 *
 * Writes: `BENCH_BODY='{"name":"x"}'` POSTs that body to the path (create); the path `patch` sends
 * PATCH `{"budget":42}` with the right `If-Match` to seeded documents in turn (update).
 * `BENCH_SIDES` (default `bare,app`) lists the servers (`<side>@ruled`: the same server called by the
 * seeded user whose role has a `rows` rule, e.g. `BENCH_SIDES=app,app@ruled npx tsx bench/cpu.ts get-one-active`
 * for what the rule costs a get-one); `base:app` is the app of the checkout in
 * `BENCH_BASE_DIR` (old code against new in one run). Each side after the first is compared to the first.
 * The sides of bench/observability-sides.ts (`nometrics`, `metrics`, `trace100`, `trace10`, and `als`,
 * `trace0` to take tracing apart) measure what metrics and tracing cost per request (spans go to a
 * local OTLP sink that drops them), e.g. `BENCH_SIDES=nometrics,metrics,trace100,trace10 npx tsx bench/cpu.ts`
 * or `BENCH_SIDES=metrics,als,trace0,trace10`.
 *
 * On Linux it also charges the whole machine's CPU per request (from `/proc/stat`) to three parts:
 * the server, the load generator (this process), and the rest: the database's processes, plus
 * anything else running. A create or update is bound by the machine's cores, not by the server
 * alone, so `machine bare/x` is the throughput ratio a CPU-bound machine would give: it shows which
 * part of a gap is the server's and which the database's (the events and audit rows of a write).
 * No throughput here: autocannon ends a run of `amount` requests on its one-second tick, so rates
 * come out in whole seconds; measure them with `npm run bench` or `bench/compare.ts`.
 */
import type { ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import { machineCpu } from './machine.ts';
import { patchRequests, seed, serverReport, startServer } from './seed.ts';
import { isObservabilitySide, startObservabilitySide, startOtlpSink } from './observability-sides.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SIDES = (process.env.BENCH_SIDES ?? 'bare,app').split(',').filter(Boolean);
const BODY = process.env.BENCH_BODY;

/** Asks the server for its CPU time so far (µs), through SIGUSR2 (bench/serve.ts). */
const cpuOf = async (child: ChildProcess) => (await serverReport(child)).cpu;

/** µs per request: the server's CPU, and where the machine has them, the load generator's and the rest's. */
interface Cost { server: number; bench?: number; rest?: number }

async function measure(side: string, env: NodeJS.ProcessEnv, path: string, keys: { key: string; ruledKey: string }, patch: (() => autocannon.Request[]) | null, otlp: string) {
  const [mode, who] = side.split('@') as [string, string | undefined];
  const key = who === 'ruled' ? keys.ruledKey : keys.key;
  const { child, port } = await (isObservabilitySide(mode) ? startObservabilitySide(mode, env, otlp) : startServer(mode, env));
  const url = `http://127.0.0.1:${port}${patch ? '/projects' : path}`;
  const headers = { 'X-API-Key': key, ...(BODY ? { 'Content-Type': 'application/json' } : {}) };
  const load = (amount: number) => autocannon({ url, connections: 10, amount, headers, ...(BODY ? { method: 'POST' as const, body: BODY } : {}), ...(patch ? { requests: patch() } : {}) });
  await load(2000);
  const before = await cpuOf(child);
  const [m0, b0] = [machineCpu(), process.cpuUsage()];
  const r = await load(REQUESTS);
  const [m1, b1] = [machineCpu(), process.cpuUsage(b0)];
  const after = await cpuOf(child);
  await new Promise((res) => { child.once('exit', res); child.kill('SIGINT'); });
  if (r.non2xx) throw new Error(`${mode}: ${r.non2xx} non-2xx answers`);
  const cost: Cost = { server: (after - before) / REQUESTS };
  if (m0 !== null && m1 !== null) {
    cost.bench = (b1.user + b1.system) / REQUESTS;
    cost.rest = Math.max(0, (m1 - m0) / REQUESTS - cost.server - cost.bench);
  }
  return cost;
}

const machine = (c: Cost) => c.server + (c.bench ?? NaN) + (c.rest ?? NaN);

async function main() {
  const { mem, MONGODB_URI, tenant, user, key, ruledKey, activeId, sample, updIds } = await seed(Number(process.env.BENCH_DOCS ?? 20_000), log);
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  // `get-one` and `ping` name the default paths (their id is the seeded sample's).
  const named: Record<string, string> = { 'get-one': `/projects/${String(sample._id)}`, ping: `/ping/${String(sample._id)}` };
  const paths = process.argv.length > 2 ? process.argv.slice(2).map((p) => (p === 'get-one-active' ? `/projects/${activeId}` : named[p] ?? p)) : Object.values(named);
  const versions = new Map<string, number>();
  const sink = await startOtlpSink();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (const path of paths) {
    // Each side on its own 2,000 documents: a write superseding another process's last one freezes
    // its entries (bench/scenarios.ts), which would charge one side for another's.
    const share = Math.min(2000, Math.floor(updIds.length / SIDES.length));
    const patchOf = (side: string) => (path === 'patch' ? () => patchRequests(updIds.slice(SIDES.indexOf(side) * share, (SIDES.indexOf(side) + 1) * share), versions) : null);
    const cpu: Record<string, number[]> = {};
    const costs: Record<string, Cost[]> = {};
    for (let i = 0; i < ROUNDS; i++) {
      // Rotate the order so no side always runs first.
      const order = SIDES.map((_, j) => SIDES[(j + i) % SIDES.length]!);
      for (const side of order) {
        const c = await measure(side, env, path, { key, ruledKey }, patchOf(side), sink.url);
        (costs[side] ??= []).push(c);
        (cpu[side] ??= []).push(c.server);
      }
      const [first, ...rest] = SIDES;
      log(`${path} round ${i + 1} (load ${loadavg().map((l) => l.toFixed(1)).join(' ')}): ${SIDES.map((s) => `${s} ${cpu[s]!.at(-1)!.toFixed(0)} µs`).join(', ')}; ${rest.map((s) => `${first}/${s} ${(cpu[first!]!.at(-1)! / cpu[s]!.at(-1)!).toFixed(2)}`).join(', ')}`);
    }
    const [first, ...rest] = SIDES;
    log(`${path}: server CPU µs/request, median of ${ROUNDS}: ${SIDES.map((s) => `${s} ${median(cpu[s]!).toFixed(0)} (${cpu[s]!.map((x) => x.toFixed(0)).join(', ')})`).join('; ')}`);
    for (const s of rest) log(`${path}: ${first}/${s}, median of per-round ratios: ${median(cpu[s]!.map((x, i) => cpu[first!]![i]! / x)).toFixed(2)}`);
    if (costs[first!]![0]!.rest !== undefined) {
      const med = (s: string, part: keyof Cost) => median(costs[s]!.map((c) => c[part]!)).toFixed(0);
      log(`${path}: machine CPU µs/request, median of ${ROUNDS}: ${SIDES.map((s) => `${s} ${median(costs[s]!.map(machine)).toFixed(0)} (server ${med(s, 'server')}, load generator ${med(s, 'bench')}, rest ${med(s, 'rest')})`).join('; ')}`);
      for (const s of rest) log(`${path}: machine ${first}/${s}, median of per-round ratios: ${median(costs[s]!.map((c, i) => machine(costs[first!]![i]!) / machine(c))).toFixed(2)}`);
    }
  }
  sink.close();
  await mem?.stop();
}

await main();
