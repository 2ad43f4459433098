/**
 * `npm run bench`: seeds a database, then measures the server against baselines in the same run
 * and prints ratios (never absolute targets: the database here may be a stand-in whose absolute
 * speed says nothing). Results also go to bench/results.json.
 */
import { writeFileSync } from 'node:fs';
import autocannon from 'autocannon';
import mongoose from 'mongoose';
import { seed, startServer } from './seed.ts';
import { benchWebhooks } from './webhooks.ts';
import { benchJobs } from './jobs.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const DOCS = Number(process.env.BENCH_DOCS ?? 20_000);
/** Alternating rounds per pair: the stand-in database's throughput drifts by ±30% between runs, so more rounds average it out. */
const ROUNDS = Array.from({ length: Number(process.env.BENCH_ROUNDS ?? 3) }, (_, i) => i);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const log = (s: string) => process.stdout.write(`${s}\n`);

async function main() {
  const { mem, MONGODB_URI, tenant, key, sample, cursor500, updIds } = await seed(DOCS, log);
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id };
  const headers = { 'X-API-Key': key };
  const results: Record<string, number> = {};

  const id = String(sample._id);
  // BENCH_ONLY=get,list runs only the scenarios whose name contains one of the words (quick checks).
  const only = process.env.BENCH_ONLY?.split(',').filter(Boolean) ?? [];
  const measure = async (name: string, mode: string, opts: Omit<autocannon.Options, 'url'> & { path: string }) => {
    if (only.length && !only.some((w) => name.includes(w))) return;
    const { child, port } = await startServer(mode, env);
    try {
      const url = `http://127.0.0.1:${port}${opts.path}`;
      // Warm up (JIT, connection pools, auth cache) on a read so writes are not spent twice.
      await autocannon({ url: `http://127.0.0.1:${port}/projects/${id}`, connections: CONNECTIONS, duration: 1, headers });
      const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers, ...opts });
      const bad = r.non2xx + r.errors;
      // total / duration: per-second samples are coarse for runs bounded by `amount`.
      const seconds = (new Date(r.finish).getTime() - new Date(r.start).getTime()) / 1000;
      const rate = r.requests.total / seconds;
      results[name] = rate;
      log(`${name.padEnd(28)} ${rate.toFixed(0).padStart(7)} req/s   p99 ${r.latency.p99} ms${bad ? `   (${bad} non-2xx/errors!)` : ''}`);
      if (bad) throw new Error(`${name}: ${bad} non-2xx responses or errors; the measurement is invalid`);
    } finally {
      child.kill('SIGTERM');
    }
  };

  // App and bare alternate twice and are averaged, so load from other processes on the machine
  // weighs on both sides alike.
  const versus = async (label: string, path: string) => {
    if (only.length && !only.some((w) => label.includes(w))) return;
    for (const round of ROUNDS) {
      await measure(`bare ${label} #${round}`, 'bare', { path });
      await measure(`app ${label} #${round}`, 'app', { path });
    }
    for (const side of ['bare', 'app']) results[`${side} ${label}`] = mean(ROUNDS.map((r) => results[`${side} ${label} #${r}`]!));
  };
  await versus('get-one', `/projects/${id}`);
  await versus('list per_page=25', '/projects?per_page=25');
  // GraphQL asks for every field REST returns, so both serialize the same documents.
  const gqlFields = '_id etag name description status tags budget owner_email tenant_id created_at updated_at created_by updated_by is_deleted deleted_at deleted_by version';
  const gqlBody = JSON.stringify({ query: `{ projects(per_page: 25) { total page per_page total_pages items { ${gqlFields} } } }` });
  await measure('graphql list per_page=25', 'app', { path: '/graphql', method: 'POST', body: gqlBody, headers: { ...headers, 'Content-Type': 'application/json' } });
  await measure('offset page 1', 'app', { path: '/projects?page=1&per_page=25' });
  await measure('offset page 500', 'app', { path: '/projects?page=500&per_page=25' });
  await measure('cursor page 1', 'app', { path: '/projects?limit=25' });
  await measure('cursor page 500', 'app', { path: `/projects?limit=25&cursor=${cursor500}` });

  // Audit pairs alternate off/on twice and average, so drift in the database (growing collections,
  // vacuum, cache) cannot favour whichever side runs first.
  const pair = async (label: string, opts: (round: number, audit: boolean) => Omit<autocannon.Options, 'url'> & { path: string }) => {
    for (const round of ROUNDS) {
      await measure(`${label}, audit off #${round}`, 'app-noaudit', opts(round, false));
      await measure(`${label}, audit on #${round}`, 'app', opts(round, true));
    }
    if (only.length && !only.some((w) => label.includes(w))) return;
    for (const side of ['off', 'on']) {
      results[`${label}, audit ${side}`] = mean(ROUNDS.map((r) => results[`${label}, audit ${side} #${r}`]!));
    }
  };
  const createBody = JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 });
  await pair('create', () => ({ path: '/projects', method: 'POST', body: createBody, headers: { ...headers, 'Content-Type': 'application/json' } }));
  // Updates each hit their own document at version 1 (no ETag round trip): one disjoint slice per run.
  const quarter = Math.floor(updIds.length / (ROUNDS.length * 2));
  const updates = (ids: string[]) => {
    let i = 0;
    return {
      path: '/projects',
      amount: ids.length,
      requests: [
        {
          method: 'PATCH' as const,
          headers: { ...headers, 'Content-Type': 'application/json', 'If-Match': '"1"' },
          body: JSON.stringify({ budget: 42 }),
          setupRequest: (req: autocannon.Request) => ({ ...req, path: `/projects/${ids[i++ % ids.length]}` }),
        },
      ],
    };
  };
  await pair('update', (round, audit) => updates(updIds.slice((round * 2 + (audit ? 1 : 0)) * quarter, (round * 2 + (audit ? 1 : 0) + 1) * quarter)));

  const ratio = (a: string, b: string) => (results[a] && results[b] ? (results[a] / results[b]).toFixed(2) : 'n/a');
  const summary = {
    'get-one vs bare (aim >= 0.85)': ratio('app get-one', 'bare get-one'),
    'list vs bare (aim >= 0.84)': ratio('app list per_page=25', 'bare list per_page=25'),
    'GraphQL list vs REST list (aim >= 0.80)': ratio('graphql list per_page=25', 'app list per_page=25'),
    'cursor page 500 / page 1 throughput (aim: flat, cost within 1.5x)': ratio('cursor page 500', 'cursor page 1'),
    'offset page 500 / page 1 throughput (grows with depth)': ratio('offset page 500', 'offset page 1'),
    'create audit on / off (aim >= 0.83)': ratio('create, audit on', 'create, audit off'),
    'update audit on / off (aim >= 0.83)': ratio('update, audit on', 'update, audit off'),
  };
  log('\nratios (same run, same database):');
  for (const [k, v] of Object.entries(summary)) log(`  ${k.padEnd(66)} ${v}`);
  Object.assign(summary, (await benchWebhooks(MONGODB_URI, { seconds: DURATION, connections: CONNECTIONS })).summary);
  Object.assign(summary, (await benchJobs(MONGODB_URI)).summary);
  writeFileSync(new URL('./results.json', import.meta.url), JSON.stringify({ when: new Date().toISOString(), duration_s: DURATION, connections: CONNECTIONS, docs: DOCS, results, summary }, null, 2));
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
