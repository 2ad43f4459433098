/**
 * `npm run bench:observability`: the cost of metrics and tracing on `GET /projects/:id`, as
 * throughput ratios measured in one run against the same seeded database (never absolute numbers:
 * the database here may be a stand-in and the machine shared):
 * - metrics on / off (`METRICS_ENABLED`), tracing off on both sides; aim >= 0.95
 * - tracing at 100% sampling / off, metrics on on both sides; aim >= 0.8
 * - tracing at 10% sampling / off; aim >= 0.95
 *
 * The four servers (bench/observability-sides.ts) start once and run side by side for the whole run
 * on the same database, each warmed up first (JIT, pools, auth cache). In each of `BENCH_ROUNDS`
 * rounds (default 5) every side is measured for `BENCH_SECONDS`, the order rotating between rounds
 * so no side always runs first; each ratio is the median of its per-round ratios, printed with the
 * rounds and the load average. Spans go to a local OTLP/HTTP sink that accepts and drops them.
 * Knobs: `BENCH_SECONDS` (5), `BENCH_CONNECTIONS` (10), `BENCH_ROUNDS` (5), `BENCH_DOCS` (5,000),
 * `BENCH_WARMUP_SECONDS` (3), `BENCH_SIDES` (default `nometrics,metrics,trace100,trace10`; add `als`
 * and `trace0` to take tracing's cost apart: context propagation alone, and the unsampled path;
 * a pair is printed when both its sides ran).
 */
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import mongoose from 'mongoose';
import { seed } from './seed.ts';
import { type Load, loadAvg, log, measureRate, ratioOf, runBench, runRounds, showRatio } from './scenarios.ts';
import { OBSERVABILITY_SIDES, type ObservabilitySide, isObservabilitySide, startObservabilitySide, startOtlpSink } from './observability-sides.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const SIDES = (process.env.BENCH_SIDES?.split(',').filter(Boolean) ?? [...OBSERVABILITY_SIDES]).map((s) => {
  if (!isObservabilitySide(s)) throw new Error(`BENCH_SIDES: unknown side ${s}`);
  return s;
});

const PAIRS: [label: string, on: ObservabilitySide, off: ObservabilitySide, aim: number][] = [
  ['metrics on / off', 'metrics', 'nometrics', 0.95],
  ['tracing 100% / off', 'trace100', 'metrics', 0.8],
  ['tracing 10% / off', 'trace10', 'metrics', 0.95],
  // Taking tracing apart (no aim of their own): context propagation alone, the unsampled path, and
  // what each costs beyond context propagation.
  ['als / off', 'als', 'metrics', 0],
  ['tracing 0% / off', 'trace0', 'metrics', 0],
  ['tracing 0% / als', 'trace0', 'als', 0],
  ['tracing 10% / als', 'trace10', 'als', 0],
];

async function main() {
  // A connection to a server process this bench already stopped is refused at the very end of a
  // run (nobody awaiting it); failed requests during a measurement invalidate it (measureRate).
  process.on('unhandledRejection', (err) => {
    if ((err as { code?: string }).code !== 'ECONNREFUSED') throw err;
  });
  const { mem, MONGODB_URI, tenant, user, key, sample } = await seed(Number(process.env.BENCH_DOCS ?? 5000), log);
  const sink = await startOtlpSink();
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  const headers = { 'X-API-Key': key };
  const getOne: Load = { path: `/projects/${String(sample._id)}` };

  const servers = new Map<ObservabilitySide, { child: ChildProcess; port: number }>();
  const rates: Record<string, number[]> = {};
  try {
    for (const side of SIDES) servers.set(side, await startObservabilitySide(side, env, sink.url));
    log(`GET /projects/:id, ${CONNECTIONS} connections, ${DURATION} s per side, ${ROUNDS} rounds, ${WARMUP} s warm-up per side; load average ${loadAvg()}`);
    for (const { port } of servers.values()) await autocannon({ url: `http://127.0.0.1:${port}${getOne.path}`, connections: CONNECTIONS, duration: WARMUP, headers });
    await runRounds([[['get-one', SIDES, getOne]]], ROUNDS, () => true, async (_name, side, load) => {
      (rates[side] ??= []).push(await measureRate(side, servers.get(side)!.port, load, { connections: CONNECTIONS, duration: DURATION, headers }));
    });
  } finally {
    for (const { child } of servers.values()) child.kill('SIGTERM');
  }

  log(`\nratios (median of per-round ratios, same run, same database; load average now ${loadAvg()}):`);
  for (const [label, on, off, aim] of PAIRS) {
    if (!SIDES.includes(on) || !SIDES.includes(off)) continue;
    const r = ratioOf(rates, on, off);
    const met = r.median !== null && r.median >= aim ? 'met' : 'not met';
    log(`  ${label.padEnd(20)} ${showRatio(r)}${aim ? `   aim >= ${aim}: ${met}` : ''}`);
  }
  log(`req/s per side and round: ${SIDES.map((s) => `${s} ${(rates[s] ?? []).map((x) => x.toFixed(0)).join(' / ')}`).join('; ')}`);
  log(`OTLP export requests received by the sink: ${sink.received()}`);
  sink.close();
  await mongoose.disconnect();
  await mem?.stop();
}

runBench(main);
