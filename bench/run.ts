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
import { loadavg } from 'node:os';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import mongoose from 'mongoose';
import { seed, startServer } from './seed.ts';
import { benchWebhooks } from './webhooks.ts';
import { benchJobs } from './jobs.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const DOCS = Number(process.env.BENCH_DOCS ?? 20_000);
/** Rounds per scenario: the stand-in database's throughput drifts by ±30% between runs, so the median of several rounds says more than one. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/**
 * `BENCH_BASE_DIR=<checkout of older code>` adds a fourth side, `base:app`: the old code's server with
 * the defaults, measured in the same rounds on the same database (before/after in one run).
 */
const SIDES = ['app', 'app-nolimit', 'bare', ...(process.env.BENCH_BASE_DIR ? ['base:app'] : [])];
type Side = string;
const BASE: Side[] = SIDES.filter((s) => s.startsWith('base:'));

const log = (s: string) => process.stdout.write(`${s}\n`);
const loadAvg = () => loadavg().map((l) => l.toFixed(1)).join(' ');
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

type Load = Omit<autocannon.Options, 'url'> & { path: string };

async function main() {
  const { mem, MONGODB_URI, tenant, user, key, sample, cursor500, updIds } = await seed(DOCS, log);
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  const headers = { 'X-API-Key': key };
  const json = { ...headers, 'Content-Type': 'application/json' };
  const id = String(sample._id);
  // BENCH_ONLY=get,list runs only the scenarios whose name contains one of the words (quick checks).
  const only = process.env.BENCH_ONLY?.split(',').filter(Boolean) ?? [];
  const wanted = (name: string) => !only.length || only.some((w) => name.includes(w));

  const servers = new Map<Side, { child: ChildProcess; port: number }>();
  for (const side of SIDES) servers.set(side, await startServer(side, env));
  /** Rates per scenario and side, one per round. */
  const rates: Record<string, number[]> = {};

  const measure = async (name: string, side: Side, opts: Load) => {
    const { port } = servers.get(side)!;
    const r = await autocannon({ url: `http://127.0.0.1:${port}${opts.path}`, connections: CONNECTIONS, duration: DURATION, headers, ...opts });
    const bad = r.non2xx + r.errors;
    // total / duration: per-second samples are coarse for runs bounded by `amount`.
    const rate = r.requests.total / ((new Date(r.finish).getTime() - new Date(r.start).getTime()) / 1000);
    (rates[`${side} ${name}`] ??= []).push(rate);
    log(`  ${`${side} ${name}`.padEnd(32)} ${rate.toFixed(0).padStart(7)} req/s   p99 ${r.latency.p99} ms${bad ? `   (${bad} non-2xx/errors!)` : ''}`);
    if (bad) throw new Error(`${side} ${name}: ${bad} non-2xx responses or errors; the measurement is invalid`);
  };

  try {
    // Warm up (JIT, connection pools, auth cache) on a read so writes are not spent twice.
    for (const { port } of servers.values()) await autocannon({ url: `http://127.0.0.1:${port}/projects/${id}`, connections: CONNECTIONS, duration: 2, headers });

    // GraphQL asks for every field REST returns, so both serialize the same documents.
    const gqlFields = '_id etag name description status tags budget owner_email tenant_id created_at updated_at created_by updated_by is_deleted deleted_at deleted_by version';
    const gqlBody = JSON.stringify({ query: `{ projects(per_page: 25) { total page per_page total_pages items { ${gqlFields} } } }` });
    const reads: [string, Side[], Load][] = [
      ['auth/me', ['app', 'app-nolimit'], { path: '/auth/me' }],
      ['get-one', ['app', 'app-nolimit', 'bare'], { path: `/projects/${id}` }],
      ['list', ['app', 'app-nolimit', 'bare'], { path: '/projects?per_page=25' }],
      ['graphql list', ['app', 'app-nolimit'], { path: '/graphql', method: 'POST', body: gqlBody, headers: json }],
    ];
    // Writes last: the documents they add would otherwise weigh on the later lists.
    const createBody = JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 });
    // Updates each hit their own document at version 1 (no ETag round trip): one disjoint slice per run.
    const slice = Math.floor(updIds.length / (ROUNDS * (3 + BASE.length)));
    let nextSlice = 0;
    const updates = (): Load => {
      const ids = updIds.slice(nextSlice * slice, ++nextSlice * slice);
      let i = 0;
      return {
        path: '/projects', amount: ids.length,
        requests: [{
          method: 'PATCH', headers: { ...json, 'If-Match': '"1"' }, body: JSON.stringify({ budget: 42 }),
          setupRequest: (req: autocannon.Request) => ({ ...req, path: `/projects/${ids[i++ % ids.length]}` }),
        }],
      };
    };
    const writes: [string, Side[], Load | (() => Load)][] = [
      ['create', ['app', 'app-nolimit', 'bare', ...BASE], { path: '/projects', method: 'POST', body: createBody, headers: json }],
      ['update', ['app', 'app-nolimit', 'bare', ...BASE], updates],
    ];
    for (const group of [reads, writes]) {
      for (let round = 0; round < ROUNDS; round++) {
        log(`round ${round + 1}/${ROUNDS} (load average ${loadAvg()})`);
        for (const [name, sides, load] of group) {
          if (!wanted(name)) continue;
          // Rotate the order so no side always runs first (database drift, caches).
          const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
          for (const side of order) await measure(name, side, typeof load === 'function' ? load() : load);
        }
      }
    }
    for (const [name, path] of [['offset page 1', '/projects?page=1&per_page=25'], ['offset page 500', '/projects?page=500&per_page=25'], ['cursor page 1', '/projects?limit=25'], ['cursor page 500', `/projects?limit=25&cursor=${cursor500}`]] as const) {
      if (wanted(name)) await measure(name, 'app', { path });
    }
  } finally {
    for (const { child } of servers.values()) child.kill('SIGTERM');
  }

  /** Median of the per-round ratios a / b, with the rounds. */
  const ratio = (a: string, b: string) => {
    const xs = rates[a], ys = rates[b];
    if (!xs?.length || !ys?.length) return { median: null, rounds: [] as number[] };
    const rounds = xs.map((x, i) => x / ys[i]!);
    return { median: median(rounds), rounds };
  };
  const show = (r: { median: number | null; rounds: number[] }) =>
    r.median === null ? 'n/a' : `${r.median.toFixed(2)}  (rounds ${r.rounds.map((x) => x.toFixed(2)).join(', ')})`;
  const lines: [string, string, string][] = [
    ['GET /auth/me, defaults vs limiter off (aim >= 0.9)', 'app auth/me', 'app-nolimit auth/me'],
    ['get-one, defaults vs limiter off (aim >= 0.9)', 'app get-one', 'app-nolimit get-one'],
    ['get-one vs bare (aim >= 0.85)', 'SIDE get-one', 'bare get-one'],
    ['list vs bare (aim >= 0.84)', 'SIDE list', 'bare list'],
    ['GraphQL list vs REST list (aim >= 0.9)', 'SIDE graphql list', 'SIDE list'],
    ['create (audit on) vs bare insert', 'SIDE create', 'bare create'],
    ['update with If-Match vs bare conditional update', 'SIDE update', 'bare update'],
  ];
  const summary: Record<string, unknown> = {};
  log(`\nratios (median of per-round ratios, same run, same database; load average now ${loadAvg()}):`);
  for (const [label, a, b] of lines) {
    if (!a.includes('SIDE')) {
      const r = ratio(a, b);
      summary[label] = r;
      log(`  ${label.padEnd(52)} ${show(r)}`);
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
      const r = ratio(a, c);
      summary[`${b}: ${label}`] = r;
      log(`  ${`${b}: ${label}`.padEnd(52)} ${show(r)}`);
    }
  }
  const single = (a: string, b: string) => (rates[a]?.[0] && rates[b]?.[0] ? (rates[a][0] / rates[b][0]).toFixed(2) : 'n/a');
  summary['cursor page 500 / page 1 throughput (aim: flat, cost within 1.5x)'] = single('app cursor page 500', 'app cursor page 1');
  summary['offset page 500 / page 1 throughput (grows with depth)'] = single('app offset page 500', 'app offset page 1');
  log(`  ${'cursor page 500 / page 1 throughput (flat)'.padEnd(52)} ${String(summary['cursor page 500 / page 1 throughput (aim: flat, cost within 1.5x)'])}`);
  log(`  ${'offset page 500 / page 1 throughput (grows)'.padEnd(52)} ${String(summary['offset page 500 / page 1 throughput (grows with depth)'])}`);
  if (wanted('webhook')) Object.assign(summary, (await benchWebhooks(MONGODB_URI, { seconds: DURATION, connections: CONNECTIONS })).summary);
  if (wanted('jobs')) Object.assign(summary, (await benchJobs(MONGODB_URI)).summary);
  writeFileSync(new URL('./results.json', import.meta.url), JSON.stringify({ when: new Date().toISOString(), duration_s: DURATION, connections: CONNECTIONS, docs: DOCS, rounds: ROUNDS, rates, summary }, null, 2));
  await mem?.stop();
  await mongoose.disconnect();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
