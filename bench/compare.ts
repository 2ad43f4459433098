/**
 * `npm run bench:compare`: this tree against another checkout, in one run on one database.
 *
 * Three servers run side by side: `head` (this tree's bench/serve.ts in `BENCH_HEAD_MODE`), `base`
 * (the other checkout's bench/serve.ts in `BENCH_BASE_MODE`) and `bare` (this tree's bare Koa +
 * driver handler). Every scenario of the headline bench (bench/scenarios.ts) runs on each side in
 * `BENCH_ROUNDS` rounds with the order rotating; each side's ratio against bare, and head against
 * base, is the median of the per-round ratios. This answers "is the change no slower?" with both
 * trees measured in the same minutes, which separate runs on a shared machine cannot.
 *
 *   git worktree add ../base <commit> && ln -s "$PWD/node_modules" ../base/node_modules
 *   BENCH_BASE_DIR=../base BENCH_BASE_MODE=app BENCH_HEAD_MODE=app-nolimit-noevents npm run bench:compare
 *
 * Modes are each tree's own bench/serve.ts modes (the base tree's may be older names): pick the
 * pair that runs the same settings on both sides.
 */
import { resolve } from 'node:path';
import { writeFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import mongoose from 'mongoose';
import { seed, startServer, versionsOf } from './seed.ts';
import { type Load, type Scenario, loadAvg, log, measureRate, ratioOf, runBench, runRounds, scenarios, showRatio } from './scenarios.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const DOCS = Number(process.env.BENCH_DOCS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const BASE_DIR = process.env.BENCH_BASE_DIR;
const HEAD_MODE = process.env.BENCH_HEAD_MODE ?? 'app';
const BASE_MODE = process.env.BENCH_BASE_MODE ?? 'app';
const SIDES = ['head', 'base', 'bare'] as const;
type Side = (typeof SIDES)[number];

async function main() {
  if (!BASE_DIR) throw new Error('BENCH_BASE_DIR must name another checkout (a git worktree with node_modules)');
  const { mem, MONGODB_URI, tenant, user, key, sample, updIds } = await seed(DOCS, log);
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  const headers = { 'X-API-Key': key };
  const only = process.env.BENCH_ONLY?.split(',').filter(Boolean) ?? [];
  const wanted = (name: string) => !only.length || only.some((w) => name.includes(w));
  log(`head: this tree, mode ${HEAD_MODE}; base: ${resolve(BASE_DIR)}, mode ${BASE_MODE}`);

  const servers = new Map<Side, { child: ChildProcess; port: number }>([
    ['head', await startServer(HEAD_MODE, env)],
    // `base:` runs the mode from BENCH_BASE_DIR's own bench/serve.ts, so its imports resolve there.
    ['base', await startServer(`base:${BASE_MODE}`, env)],
    ['bare', await startServer('bare', env)],
  ]);
  const rates: Record<string, number[]> = {};
  const measure = async (name: string, side: Side, opts: Load) => {
    const rate = await measureRate(`${side} ${name}`, servers.get(side)!.port, opts, { connections: CONNECTIONS, duration: DURATION, headers });
    (rates[`${side} ${name}`] ??= []).push(rate);
  };

  const { reads, create, update } = scenarios({ key, sampleId: String(sample._id), updIds }, versionsOf(MONGODB_URI));
  const groups: Scenario<Side>[][] = [
    [
      ['get-one', [...SIDES], reads['get-one']],
      ['list', [...SIDES], reads.list],
      ['graphql list', ['head', 'base'], reads['graphql list']],
    ],
    // Writes last: the documents they add would otherwise weigh on the lists.
    [
      ['create', [...SIDES], create],
      ['update', [...SIDES], update(SIDES)],
    ],
  ];
  try {
    for (const { port } of servers.values()) await autocannon({ url: `http://127.0.0.1:${port}/projects/${String(sample._id)}`, connections: CONNECTIONS, duration: 2, headers });
    await runRounds(groups, ROUNDS, wanted, measure);
  } finally {
    for (const { child } of servers.values()) child.kill('SIGTERM');
  }

  const summary: Record<string, ReturnType<typeof ratioOf>> = {};
  const line = (label: string, a: string, b: string) => {
    const r = ratioOf(rates, a, b);
    if (r.median === null) return;
    summary[label] = r;
    log(`  ${label.padEnd(44)} ${showRatio(r)}`);
  };
  log(`\nratios (median of per-round ratios, same run, same database; load average now ${loadAvg()}):`);
  for (const name of ['get-one', 'list', 'create', 'update']) {
    line(`${name}: head vs bare`, `head ${name}`, `bare ${name}`);
    line(`${name}: base vs bare`, `base ${name}`, `bare ${name}`);
    line(`${name}: head vs base`, `head ${name}`, `base ${name}`);
  }
  line('graphql list vs REST list: head', 'head graphql list', 'head list');
  line('graphql list vs REST list: base', 'base graphql list', 'base list');
  line('graphql list: head vs base', 'head graphql list', 'base graphql list');
  writeFileSync(new URL('./compare-results.json', import.meta.url), JSON.stringify({ when: new Date().toISOString(), head_mode: HEAD_MODE, base_tree: resolve(BASE_DIR), base_mode: BASE_MODE, duration_s: DURATION, connections: CONNECTIONS, docs: DOCS, rounds: ROUNDS, rates, summary }, null, 2));
  await mem?.stop();
  await mongoose.disconnect();
}

runBench(main);
