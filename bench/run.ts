/**
 * `npm run bench`: seeds a database, then measures the server against baselines in the same run
 * and prints ratios (never absolute targets: the database here may be a stand-in whose absolute
 * speed says nothing). Results also go to bench/results.json.
 *
 * The headline is the server WITH THE DEFAULT SETTINGS (rate limiter on with the MongoDB store,
 * audit on); the same ratios with the rate limiter off follow on a second line. Three servers run
 * side by side (defaults, limiter off, a bare Koa + driver handler); every scenario is measured on
 * each of them in `BENCH_ROUNDS` rounds (default 5), the order rotating between rounds, and each
 * ratio is the median of its per-round ratios, printed with the rounds.
 */
import { writeFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import mongoose from 'mongoose';
import { ACTIVE_WHERE, seed, serverReport, startServer, versionsOf } from './seed.ts';
import { machineCpu, settle } from './machine.ts';
import { dbCpuMeter } from './db-cpu.ts';
import { benchWebhooks } from './webhooks.ts';
import { benchJobs } from './jobs.ts';
import { benchFiles } from './files.ts';
import { type Load, type Scenario, loadAvg, log, measureRate, ratioOf, runBench, runRounds, scenarios, showRatio } from './scenarios.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const DOCS = Number(process.env.BENCH_DOCS ?? 20_000);
/** Rounds per scenario: the stand-in database's throughput drifts by ±30% between runs, so the median of several rounds says more than one. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/**
 * `BENCH_BASE_DIR=<checkout of older code>` adds a fourth side, `base:app`: the old code's server with
 * the defaults, measured in the same rounds on the same database (before/after in one run).
 */
/**
 * `BENCH_FLOOR=1` adds two sides to the writes (bench/serve.ts): `bare-durable`, the least a create
 * or update with the event log's and audit's guarantees writes (its floor), and `app-floor`, the
 * app's request pipeline with the defaults in front of those same writes. Their ratios say how much
 * of the gap to bare is the database's floor, the pipeline's, and the resources plugin's.
 */
const FLOOR: string[] = process.env.BENCH_FLOOR === '1' ? ['bare-durable', 'app-floor'] : [];
/**
 * `BENCH_EXTRA_SIDES=app-noversions,app-noaudit` (modes of bench/serve.ts) adds those servers to the
 * writes, each reported against `app-floor` (with `BENCH_FLOOR=1`), `bare` and `app`: what one
 * difference of the app from its floor costs, measured in the same rounds. `BENCH_SERVER_CPU=1`
 * also prints each side's server CPU, the database's (bench/db-cpu.ts: its gateway and backends)
 * and the machine's per write request by round (is it the server or the database whose cost grows
 * with the run's writes), `BENCH_COUNT_DOCS=1` the sizes of
 * the collections a create grows after the rounds.
 */
const EXTRA: string[] = (process.env.BENCH_EXTRA_SIDES ?? '').split(',').filter(Boolean);
/**
 * `BENCH_SIDES=app,app-floor,...`: only those of the sides above run (fewer servers on the machine,
 * each with its background work); scenarios and ratios of the others are left out.
 */
const KEEP = process.env.BENCH_SIDES?.split(',').filter(Boolean) ?? null;
const SIDES = ['app', 'app-nolimit', 'bare', ...(process.env.BENCH_BASE_DIR ? ['base:app'] : []), ...FLOOR, ...EXTRA].filter((s) => !KEEP || KEEP.includes(s));
type Side = string;
const BASE: Side[] = SIDES.filter((s) => s.startsWith('base:'));
/**
 * `BENCH_SETTLE_MS` (default 5,000; 0: off): before each write measurement, wait up to that long for
 * a quiet machine (bench/machine.ts `settle`), so one side's deferred database work is not measured
 * in the next side's window. A create's or an update's single rounds otherwise swing by ±0.3.
 */
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 5000);
/** How long each write measurement waited to settle (ms). */
const settled: number[] = [];

async function main() {
  const { mem, MONGODB_URI, tenant, user, key, ruledKey, activeId, sample, cursor500, updIds } = await seed(DOCS, log);
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  const headers = { 'X-API-Key': key };
  const id = String(sample._id);
  // BENCH_ONLY=get,list runs only the scenarios whose name contains one of the words (quick checks).
  const only = process.env.BENCH_ONLY?.split(',').filter(Boolean) ?? [];
  const wanted = (name: string) => !only.length || only.some((w) => name.includes(w));

  const servers = new Map<Side, { child: ChildProcess; port: number }>();
  for (const side of SIDES) servers.set(side, await startServer(side, env));
  /** Rates per scenario and side, one per round. */
  const rates: Record<string, number[]> = {};

  /** With `BENCH_SERVER_CPU=1`, the server's CPU per request of each write measurement, and the machine's (µs), by round. */
  const cpus: Record<string, { server: number[]; db: number[]; machine: number[] }> = {};
  const db = process.env.BENCH_SERVER_CPU === '1' ? dbCpuMeter(MONGODB_URI) : null;
  const measure = async (name: string, side: Side, opts: Load) => {
    const child = servers.get(side)!.child;
    const write = /create|update/.test(name);
    if (write && SETTLE_MS > 0) settled.push(await settle(SETTLE_MS));
    const probe = process.env.BENCH_SERVER_CPU === '1' && write;
    const [c0, d0, m0] = probe ? [(await serverReport(child)).cpu, db!.micros(), machineCpu()] : [0, null, null];
    const rate = await measureRate(`${side} ${name}`, servers.get(side)!.port, opts, { connections: CONNECTIONS, duration: DURATION, headers });
    (rates[`${side} ${name}`] ??= []).push(rate);
    if (!probe) return;
    const [c1, d1, m1] = [(await serverReport(child)).cpu, db!.micros(), machineCpu()];
    const n = rate * DURATION;
    const c = (cpus[`${side} ${name}`] ??= { server: [], db: [], machine: [] });
    c.server.push((c1 - c0) / n);
    c.db.push(d0 !== null && d1 !== null ? (d1 - d0) / n : NaN);
    c.machine.push(m0 !== null && m1 !== null ? (m1 - m0) / n : NaN);
  };

  try {
    // Warm up (JIT, connection pools, auth cache) on a read so writes are not spent twice.
    for (const { port } of servers.values()) await autocannon({ url: `http://127.0.0.1:${port}/projects/${id}`, connections: CONNECTIONS, duration: 2, headers });

    const { reads: r, create, update, updateShared } = scenarios({ key, sampleId: id, updIds }, versionsOf(MONGODB_URI));
    const reads: Scenario<Side>[] = [
      ['auth/me', ['app', 'app-nolimit'], r['auth/me']],
      ['get-one', ['app', 'app-nolimit', 'bare'], r['get-one']],
      ['list', ['app', 'app-nolimit', 'bare'], r.list],
      ['graphql list', ['app', 'app-nolimit'], r['graphql list']],
      // Access rules: a user whose role's rows rule is ACTIVE_WHERE against the unrestricted user
      // sending the same filter as `?where=` (the rule must be part of the query), and get-one.
      ['access list rule', ['app'], { path: '/projects?per_page=25', headers: { 'X-API-Key': ruledKey } }, 'access list'],
      ['access list where', ['app'], { path: `/projects?per_page=25&where=${encodeURIComponent(JSON.stringify(ACTIVE_WHERE))}` }, 'access list'],
      // Unreported: absorbs the lists' garbage and the database's recent work, which would otherwise
      // fall on whichever side of the pair runs first.
      ['access get-one warm-up', ['app'], { path: `/projects/${activeId}` }],
      ['access get-one rule', ['app'], { path: `/projects/${activeId}`, headers: { 'X-API-Key': ruledKey } }, 'access get-one'],
      ['access get-one plain', ['app'], { path: `/projects/${activeId}` }, 'access get-one'],
    ];
    // Writes last: the documents they add would otherwise weigh on the later lists.
    const writes: Scenario<Side>[] = [
      ['create', ['app', 'app-nolimit', 'bare', ...BASE, ...FLOOR, ...EXTRA], create],
      ['update', ['app', 'app-nolimit', 'bare', ...BASE, ...FLOOR, ...EXTRA], update(SIDES)],
      // The app and its floor on the same documents, one after the other (`BENCH_ONLY=shared`).
      ...(only.includes('shared') ? [['update, shared documents', ['app', ...FLOOR], updateShared] as Scenario<Side>] : []),
    ];
    // Depth: page 500 against page 1, in rounds, before the writes add their rows to page 1's sort.
    // The cursor pair also on bare (its floor: the app's filter, sort and boundary range, raw driver).
    const pages: Scenario<Side>[] = [
      ['cursor page 1', ['app', 'bare'], { path: '/projects?limit=25' }, 'cursor depth'],
      ['cursor page 500', ['app', 'bare'], { path: `/projects?limit=25&cursor=${cursor500}` }, 'cursor depth'],
      ['offset page 1', ['app'], { path: '/projects?page=1&per_page=25' }, 'offset depth'],
      ['offset page 500', ['app'], { path: '/projects?page=500&per_page=25' }, 'offset depth'],
    ];
    const running = (group: Scenario<Side>[]) => group.map(([name, sides, ...rest]) => [name, sides.filter((x) => servers.has(x)), ...rest] as Scenario<Side>);
    await runRounds([reads, pages, writes].map(running), ROUNDS, wanted, measure);
    if (process.env.BENCH_COUNT_DOCS === '1') {
      // What the run's writes left: the collections a create grows.
      const db = (await mongoose.createConnection(MONGODB_URI).asPromise()).db!;
      for (const c of ['projects', 'events', 'audit_log', 'resource_versions']) log(`  ${c}: ${await db.collection(c).estimatedDocumentCount()} documents`);
    }
  } finally {
    for (const { child } of servers.values()) child.kill('SIGTERM');
  }

  const ratio = (a: string, b: string) => ratioOf(rates, a, b);
  const show = showRatio;
  const lines: [string, string, string][] = [
    ['GET /auth/me, defaults vs limiter off (aim >= 0.9)', 'app auth/me', 'app-nolimit auth/me'],
    ['get-one, defaults vs limiter off (aim >= 0.9)', 'app get-one', 'app-nolimit get-one'],
    ['get-one vs bare (aim >= 0.9)', 'SIDE get-one', 'bare get-one'],
    ['list vs bare (aim >= 0.84)', 'SIDE list', 'bare list'],
    ['GraphQL list vs REST list (aim >= 0.9)', 'SIDE graphql list', 'SIDE list'],
    ['list, rows rule vs the same ?where= (aim >= 0.95)', 'app access list rule', 'app access list where'],
    ['get-one, rows rule vs none (aim >= 0.95)', 'app access get-one rule', 'app access get-one plain'],
    ['create (audit on) vs bare insert', 'SIDE create', 'bare create'],
    ['update with If-Match vs bare conditional update', 'SIDE update', 'bare update'],
  ];
  const summary: Record<string, unknown> = {};
  /** Prints and records one ratio line: rates of `a` over rates of `b`. */
  const report = (label: string, a: string, b: string) => {
    const r = ratio(a, b);
    summary[label] = r;
    log(`  ${label.padEnd(52)} ${show(r)}`);
  };
  log(`\nratios (median of per-round ratios, same run, same database; load average now ${loadAvg()}):`);
  for (const [label, a, b] of lines) {
    if (!a.includes('SIDE')) {
      report(label, a, b);
      continue;
    }
    const withDefaults = ratio(a.replace('SIDE', 'app'), b.replace('SIDE', 'app'));
    const limiterOff = ratio(a.replace('SIDE', 'app-nolimit'), b.replace('SIDE', 'app-nolimit'));
    summary[label] = { defaults: withDefaults, limiter_off: limiterOff };
    log(`  ${label.padEnd(52)} ${show(withDefaults)}`);
    log(`  ${'  ... with the rate limiter off'.padEnd(52)} ${show(limiterOff)}`);
  }
  for (const b of BASE) {
    for (const [label, a, c] of [['create (audit on) vs bare insert', `${b} create`, 'bare create'], ['update with If-Match vs bare conditional update', `${b} update`, 'bare update'], ['create, new vs old code', 'app create', `${b} create`], ['update, new vs old code', 'app update', `${b} update`]] as const) {
      report(`${b}: ${label}`, a, c);
    }
  }
  if (FLOOR.length) {
    for (const op of ['create', 'update'] as const) {
      report(`${op}: durable floor (bare-durable) vs bare`, `bare-durable ${op}`, `bare ${op}`);
      report(`${op}: pipeline + floor (app-floor) vs bare`, `app-floor ${op}`, `bare ${op}`);
      report(`${op}: defaults vs durable floor`, `app ${op}`, `bare-durable ${op}`);
      report(`${op}: defaults vs pipeline + floor`, `app ${op}`, `app-floor ${op}`);
    }
  }
  // The floor of a versioned resource (`app-floor-versions`) against the app, whose `/projects` keeps versions.
  if (EXTRA.includes('app-floor-versions')) {
    for (const op of ['create', 'update'] as const) report(`${op}: defaults vs pipeline + floor with versions`, `app ${op}`, `app-floor-versions ${op}`);
  }
  for (const side of EXTRA) {
    for (const op of ['create', 'update'] as const) {
      if (FLOOR.length) report(`${op}: ${side} vs pipeline + floor`, `${side} ${op}`, `app-floor ${op}`);
      report(`${op}: ${side} vs bare`, `${side} ${op}`, `bare ${op}`);
      report(`${op}: app vs ${side}`, `app ${op}`, `${side} ${op}`);
    }
  }
  // Each side's rate by round (the rounds' trend: the collections grow with the run's writes).
  if (settled.length) {
    const sorted = [...settled].sort((a, b) => a - b);
    log(`  settling before each write measurement: median ${sorted[sorted.length >> 1]} ms, longest ${sorted.at(-1)} ms (up to ${SETTLE_MS})`);
  }
  for (const [k, xs] of Object.entries(rates)) if (/ (create|update)$/.test(k)) log(`  ${k.padEnd(40)} ${xs.map((x) => x.toFixed(0)).join(', ')} req/s by round`);
  for (const [k, c] of Object.entries(cpus)) log(`  ${k.padEnd(40)} server ${c.server.map((x) => x.toFixed(0)).join(', ')}; database ${c.db.map((x) => x.toFixed(0)).join(', ')}; machine ${c.machine.map((x) => x.toFixed(0)).join(', ')} µs/request by round`);
  // Time per page of page 500 over page 1's: page 1's rate over page 500's.
  report('cursor page 500 / page 1, time per page (aim <= 1.5)', 'app cursor page 1', 'app cursor page 500');
  report('  ... its floor (bare)', 'bare cursor page 1', 'bare cursor page 500');
  report('offset page 500 / page 1, time per page (grows)', 'app offset page 1', 'app offset page 500');
  if (wanted('webhook')) Object.assign(summary, (await benchWebhooks(MONGODB_URI, { seconds: DURATION, connections: CONNECTIONS })).summary);
  if (wanted('jobs')) Object.assign(summary, (await benchJobs(MONGODB_URI)).summary);
  if (wanted('files')) Object.assign(summary, (await benchFiles(MONGODB_URI)).summary);
  writeFileSync(new URL('./results.json', import.meta.url), JSON.stringify({ when: new Date().toISOString(), duration_s: DURATION, connections: CONNECTIONS, docs: DOCS, rounds: ROUNDS, rates, summary }, null, 2));
  await mem?.stop();
  await mongoose.disconnect();
}

runBench(main);
