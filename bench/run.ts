/**
 * `npm run bench`: seeds a database, then measures the server against baselines in the same run
 * and prints ratios (never absolute targets: the database here may be a stand-in whose absolute
 * speed says nothing). Results also go to bench/results.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import autocannon from 'autocannon';
import mongoose, { Types } from 'mongoose';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins } from '../config/plugins.ts';
import { createApp } from '../core/kernel.ts';
import { encodeCursor } from '../plugins/resources/cursor.ts';
import { benchWebhooks } from './webhooks.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const DOCS = Number(process.env.BENCH_DOCS ?? 20_000);
const ADMIN_KEY = 'bench-admin-key-0123456789abcdef';

const log = (s: string) => process.stdout.write(`${s}\n`);

async function main() {
  const mem = process.env.MONGODB_URI ? undefined : await MongoMemoryServer.create();
  const base = process.env.MONGODB_URI ?? mem!.getUri();
  const uri = new URL(base);
  uri.pathname = '/bench';
  const MONGODB_URI = uri.toString();

  log(`seeding ${DOCS} projects ...`);
  const seedApp = await createApp({ config: loadConfig({ MONGODB_URI, LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY }), plugins: builtinPlugins() });
  const identity = seedApp.services.get('identity');
  const admin = await identity.authenticateApiKey(ADMIN_KEY);
  const tenant = await identity.createTenant(admin, { name: 'bench' });
  const user = await identity.createUser(admin, { email: 'bench@example.com', name: 'Bench', tenant_id: tenant.id, roles: ['user'], features: ['tasks'] });
  const { key } = await identity.createApiKey(admin, { user_id: user.id, name: 'bench' });
  const projects = seedApp.db.conn.db!.collection('projects');
  await projects.deleteMany({});
  const t0 = Date.now() - DOCS * 1000;
  for (let i = 0; i < DOCS; i += 1000) {
    await projects.insertMany(
      Array.from({ length: Math.min(1000, DOCS - i) }, (_, j) => {
        const n = i + j;
        const at = new Date(t0 + n * 1000);
        return {
          name: `Project ${n}`, description: `seeded project number ${n}`, status: n % 7 ? 'active' : 'archived', tags: [`t${n % 10}`],
          budget: n % 1000, owner_email: null, tenant_id: new Types.ObjectId(tenant.id), created_at: at, updated_at: at,
          created_by: new Types.ObjectId(user.id), updated_by: new Types.ObjectId(user.id), is_deleted: false, deleted_at: null, deleted_by: null, version: 1,
        };
      }),
    );
  }
  const sample = await projects.find({}).sort({ created_at: -1, _id: -1 }).skip(Math.floor(DOCS / 2)).limit(1).next();
  const sortSpec: [string, 1 | -1][] = [['created_at', -1], ['_id', -1]];
  const depthDoc = await projects.find({}).sort({ created_at: -1, _id: -1 }).skip(499 * 25 - 1).limit(1).next();
  const cursor500 = encodeCursor(sortSpec, depthDoc as Record<string, unknown>, seedApp.config.CURSOR_HMAC_SECRET);
  // Updates each hit their own document at version 1 (an ETag needs no round trip then).
  const updIds = (await projects.find({}).sort({ _id: 1 }).limit(20000).project({ _id: 1 }).toArray()).map((d) => String(d._id));
  await seedApp.close();

  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id };
  const headers = { 'X-API-Key': key };
  const results: Record<string, number> = {};

  const id = String(sample!._id);
  const measure = async (name: string, mode: string, opts: Omit<autocannon.Options, 'url'> & { path: string }) => {
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

  await measure('bare get-one', 'bare', { path: `/projects/${id}` });
  await measure('app get-one', 'app', { path: `/projects/${id}` });
  await measure('bare list per_page=25', 'bare', { path: '/projects?per_page=25' });
  await measure('app list per_page=25', 'app', { path: '/projects?per_page=25' });
  await measure('offset page 1', 'app', { path: '/projects?page=1&per_page=25' });
  await measure('offset page 500', 'app', { path: '/projects?page=500&per_page=25' });
  await measure('cursor page 1', 'app', { path: '/projects?limit=25' });
  await measure('cursor page 500', 'app', { path: `/projects?limit=25&cursor=${cursor500}` });

  // Audit pairs alternate off/on twice and average, so drift in the database (growing collections,
  // vacuum, cache) cannot favour whichever side runs first.
  const pair = async (label: string, opts: (round: number, audit: boolean) => Omit<autocannon.Options, 'url'> & { path: string }) => {
    for (const round of [0, 1]) {
      await measure(`${label}, audit off #${round}`, 'app-noaudit', opts(round, false));
      await measure(`${label}, audit on #${round}`, 'app', opts(round, true));
    }
    for (const side of ['off', 'on']) {
      results[`${label}, audit ${side}`] = (results[`${label}, audit ${side} #0`]! + results[`${label}, audit ${side} #1`]!) / 2;
    }
  };
  const createBody = JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 });
  await pair('create', () => ({ path: '/projects', method: 'POST', body: createBody, headers: { ...headers, 'Content-Type': 'application/json' } }));
  // Updates each hit their own document at version 1 (no ETag round trip): four disjoint slices.
  const quarter = Math.floor(updIds.length / 4);
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

  const ratio = (a: string, b: string) => (results[a]! / results[b]!).toFixed(2);
  const summary = {
    'get-one vs bare (aim >= 0.6)': ratio('app get-one', 'bare get-one'),
    'list vs bare (aim >= 0.5)': ratio('app list per_page=25', 'bare list per_page=25'),
    'cursor page 500 / page 1 throughput (aim: flat, cost within 1.5x)': ratio('cursor page 500', 'cursor page 1'),
    'offset page 500 / page 1 throughput (grows with depth)': ratio('offset page 500', 'offset page 1'),
    'create audit on / off (aim >= 0.8)': ratio('create, audit on', 'create, audit off'),
    'update audit on / off (aim >= 0.8)': ratio('update, audit on', 'update, audit off'),
  };
  log('\nratios (same run, same database):');
  for (const [k, v] of Object.entries(summary)) log(`  ${k.padEnd(66)} ${v}`);
  Object.assign(summary, (await benchWebhooks(MONGODB_URI, { seconds: DURATION, connections: CONNECTIONS })).summary);
  writeFileSync(new URL('./results.json', import.meta.url), JSON.stringify({ when: new Date().toISOString(), duration_s: DURATION, connections: CONNECTIONS, docs: DOCS, results, summary }, null, 2));
  await mem?.stop();
  await mongoose.disconnect();
}

function startServer(mode: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', new URL('./serve.ts', import.meta.url).pathname], { env: { ...env, BENCH_MODE: mode }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.once('exit', (code) => reject(new Error(`server (${mode}) exited with ${code}`)));
  });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
