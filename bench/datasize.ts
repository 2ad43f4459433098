/**
 * `npm run bench:datasize`: the same requests against a tenant of `BENCH_SMALL_DOCS` (20,000)
 * projects and one of `BENCH_BIG_DOCS` (1,000,000) projects, side by side in one run; each ratio is
 * big over small (1.0: the request's cost does not grow with the collection). Measured: get-one, the
 * first cursor page, cursor page 100, a create, and the outbox sweep's time per second of writes.
 *
 * The databases are seeded in bulk through the driver (unordered `insertMany` batches), each document
 * shaped as the app leaves a created project once its event is relayed: copied from one project
 * created through HTTP (tenant, timestamps, version, the create's outbox entry with its own id and
 * time). They live under `.data/bench-datasize` (gitignored) and are reused by later runs while their
 * marker (`bench_datasize`: documents, shape version) matches; documents the run creates are removed
 * at its end. `BENCH_SEED_ONLY=1` seeds and exits.
 */
import { mkdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import mongoose, { Types } from 'mongoose';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { encodeCursor } from '../lib/cursor.ts';
import { ADMIN_KEY, benchAccount, startServer } from './seed.ts';
import { type Load, loadAvg, log, measureRate, median, ratioOf, runBench, showRatio } from './scenarios.ts';

const BIG = Number(process.env.BENCH_BIG_DOCS ?? 1_000_000);
const SMALL = Number(process.env.BENCH_SMALL_DOCS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = 10;
/** Documents per `insertMany`, and batches in flight at once. */
const BATCH = 10_000;
const PARALLEL = 2;
/** Bump when the seeded documents' shape changes: a marker of another shape makes the next run seed again. */
const SHAPE = 1;
/** Seeded creation times are this far apart (1,000,000 documents span 28 hours). */
const STEP_MS = 100;
const PAGE = 25;
/** The outbox field of the app's documents; the template project must carry it (checked). */
const OUTBOX_FIELD = '_outbox';
const newEventId = () => `evt_${new Types.ObjectId().toHexString()}`;

interface Marker {
  _id: 'seed';
  shape: number;
  docs: number;
  tenant_id: string;
  user_id: string;
  key: string;
  sample_id: string;
  /** Boundary row of cursor page 100 (the last row of page 99). */
  page100: { _id: Types.ObjectId; created_at: Date };
  seeded_at: Date;
  seed_seconds: number;
}

type Side = 'small' | 'big';

async function database(): Promise<{ uri: string; mem?: MongoMemoryServer }> {
  if (process.env.MONGODB_URI) return { uri: process.env.MONGODB_URI };
  const dbPath = new URL('../.data/bench-datasize', import.meta.url).pathname;
  mkdirSync(dbPath, { recursive: true });
  const mem = await MongoMemoryServer.create({ instance: { dbPath, storageEngine: 'wiredTiger' } });
  return { uri: mem.getUri(), mem };
}

const dbUri = (base: string, docs: number) => {
  const u = new URL(base);
  u.pathname = `/datasize_${docs}`;
  return u.toString();
};

/** The marker of a database seeded with `docs` documents of this shape; seeds it first when there is none. */
async function prepare(base: string, docs: number): Promise<Marker> {
  const uri = dbUri(base, docs);
  const conn = await mongoose.createConnection(uri).asPromise();
  try {
    const found = await conn.db!.collection<Marker>('bench_datasize').findOne({ _id: 'seed' });
    if (found?.shape === SHAPE && found.docs === docs) {
      log(`${docs} documents: reusing the database seeded ${found.seeded_at.toISOString()} (${found.seed_seconds.toFixed(0)} s, ${(docs / found.seed_seconds).toFixed(0)} documents/s)`);
      return found;
    }
    await conn.dropDatabase();
  } finally {
    await conn.close();
  }
  return seedDatabase(uri, docs);
}

async function seedDatabase(uri: string, docs: number): Promise<Marker> {
  const started = Date.now();
  const app = await createApp({ corePlugins: corePlugins(), config: loadConfig({ MONGODB_URI: uri, LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY }), plugins: builtinPlugins() });
  const { tenant, user, key } = await benchAccount(app);
  const port = await app.listen(0, '127.0.0.1');
  const res = await fetch(`http://127.0.0.1:${port}/projects`, { method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'template', tags: ['t0'], budget: 1 }) });
  if (res.status !== 201) throw new Error(`template project: ${res.status} ${await res.text()}`);
  await app.services.get('events').flush();
  const db = app.db.conn.db!;
  const template = (await db.collection('projects').findOne({ _id: new Types.ObjectId(((await res.json()) as { _id: string })._id) }))!;
  const entries = template[OUTBOX_FIELD] as Record<string, unknown>[] | undefined;
  if (!entries?.length) throw new Error('the template project kept no outbox entry after its relay: the seed shape is out of date');
  // Every seeded entry is older than this: no sweep pass reads them (their events are not in the log).
  const horizon = new Date();
  await app.close();

  const conn = await mongoose.createConnection(uri).asPromise();
  try {
    for (const pass of ['recent', 'late']) {
      await conn.db!.collection<{ _id: string }>('event_sweeps').updateOne({ _id: pass }, { $max: { horizon }, $setOnInsert: { lease_until: new Date(0), owner: null } }, { upsert: true });
    }
    const projects = conn.db!.collection('projects');
    const newest = (template.created_at as Date).getTime() - STEP_MS;
    const ids = Array.from({ length: docs - 1 }, () => new Types.ObjectId());
    // Row r of the default sort (newest first) is the template for r = 0, then n = docs - 1 - r.
    const nOfRow = (r: number) => docs - 1 - r;
    const at = (n: number) => new Date(newest - (docs - 2 - n) * STEP_MS);
    const doc = (n: number) => {
      const t = at(n);
      return {
        ...template, _id: ids[n]!, name: `Project ${n}`, description: `seeded project number ${n}`, status: n % 7 ? 'active' : 'archived', tags: [`t${n % 10}`], budget: n % 1000,
        created_at: t, updated_at: t, [OUTBOX_FIELD]: entries.map((e) => ({ ...e, id: newEventId(), created_at: t })),
      };
    };
    let next = 0;
    let done = 0;
    const t0 = Date.now();
    const worker = async () => {
      while (next < docs - 1) {
        const from = next;
        const to = Math.min(docs - 1, from + BATCH);
        next = to;
        await projects.insertMany(Array.from({ length: to - from }, (_, j) => doc(from + j)), { ordered: false });
        done += to - from;
        if (Math.floor(done / 100_000) !== Math.floor((done - (to - from)) / 100_000)) {
          const rate = done / ((Date.now() - t0) / 1000);
          log(`  seeded ${done} of ${docs - 1} (${rate.toFixed(0)} documents/s, ${((docs - 1 - done) / rate / 60).toFixed(1)} min to go)`);
        }
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    const seconds = (Date.now() - started) / 1000;
    const boundary = nOfRow(99 * PAGE - 1);
    const marker: Marker = {
      _id: 'seed', shape: SHAPE, docs, tenant_id: tenant.id, user_id: user.id, key, sample_id: String(ids[Math.floor(docs / 2)]),
      page100: { _id: ids[boundary]!, created_at: at(boundary) }, seeded_at: new Date(), seed_seconds: seconds,
    };
    await conn.db!.collection<Marker>('bench_datasize').replaceOne({ _id: 'seed' }, marker, { upsert: true });
    log(`${docs} documents seeded in ${seconds.toFixed(0)} s (${(docs / seconds).toFixed(0)} documents/s, inserts alone ${((docs - 1) / ((Date.now() - t0) / 1000)).toFixed(0)}/s)`);
    return marker;
  } finally {
    await conn.close();
  }
}

async function main() {
  const { uri, mem } = await database();
  const sizes: Record<Side, number> = { small: SMALL, big: BIG };
  const markers = {} as Record<Side, Marker>;
  for (const side of ['small', 'big'] as const) markers[side] = await prepare(uri, sizes[side]);
  if (process.env.BENCH_SEED_ONLY === '1') return void (await mem?.stop({ doCleanup: false }));

  const servers = {} as Record<Side, { child: ChildProcess; port: number }>;
  const sweepers = {} as Record<Side, Awaited<ReturnType<typeof createApp>>>;
  for (const side of ['small', 'big'] as const) {
    const m = markers[side];
    servers[side] = await startServer('app', { ...process.env, MONGODB_URI: dbUri(uri, sizes[side]), BENCH_TENANT_ID: m.tenant_id, BENCH_USER_ID: m.user_id });
    // In this process: the sweep is timed here, on the code path the servers' timers run.
    sweepers[side] = await createApp({ corePlugins: corePlugins(), config: loadConfig({ MONGODB_URI: dbUri(uri, sizes[side]), LOG_LEVEL: 'silent' }), plugins: builtinPlugins() });
  }
  const loads: Record<string, (side: Side) => Load> = {
    'get-one': (s) => ({ path: `/projects/${markers[s].sample_id}` }),
    'first page': () => ({ path: `/projects?limit=${PAGE}` }),
    'cursor page 100': (s) => ({ path: `/projects?limit=${PAGE}&cursor=${encodeCursor([['created_at', -1], ['_id', -1]], markers[s].page100, sweepers[s].config.CURSOR_HMAC_SECRET)}` }),
    create: (s) => ({ path: '/projects', method: 'POST', body: JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 }), headers: { 'X-API-Key': markers[s].key, 'Content-Type': 'application/json' } }),
  };
  for (const side of ['small', 'big'] as const) {
    // Documents an interrupted run created and could not remove.
    await sweepers[side].db.conn.db!.collection('projects').deleteMany({ tenant_id: new Types.ObjectId(markers[side].tenant_id), is_deleted: false, created_at: { $gt: markers[side].seeded_at } });
    // A process's first first page of a list may be slow (the MongoDB stand-in on these machines
    // sorts every row the filter matches): read it once before measuring, as the warm-up below does for the rest.
    const t = performance.now();
    await fetch(`http://127.0.0.1:${servers[side].port}/projects?limit=${PAGE}`, { headers: { 'X-API-Key': markers[side].key } });
    log(`${side}: the process's first first page took ${(performance.now() - t).toFixed(0)} ms`);
  }
  const rates: Record<string, number[]> = {};
  const sweepMs: Record<string, number[]> = {};
  const started = new Date();
  try {
    for (const side of ['small', 'big'] as const) await autocannon({ url: `http://127.0.0.1:${servers[side].port}/projects/${markers[side].sample_id}`, connections: CONNECTIONS, duration: 2, headers: { 'X-API-Key': markers[side].key } });
    for (let round = 0; round < ROUNDS; round++) {
      log(`round ${round + 1}/${ROUNDS} (load average ${loadAvg()})`);
      for (const [name, load] of Object.entries(loads)) {
        for (const side of round % 2 ? (['big', 'small'] as const) : (['small', 'big'] as const)) {
          const from = new Date();
          const rate = await measureRate(`${side} ${name}`, servers[side].port, load(side), { connections: CONNECTIONS, duration: DURATION, headers: { 'X-API-Key': markers[side].key } });
          (rates[`${side} ${name}`] ??= []).push(rate);
          if (name !== 'create') continue;
          // The sweep reads windows that end `sweepAgeMs` (5 s) before now: wait until this run's writes are in one.
          const until = Date.now();
          await sleep(5_500);
          const t = performance.now();
          await sweepers[side].services.get('events').sweep(from);
          const ms = performance.now() - t;
          (sweepMs[side] ??= []).push(ms / ((until - from.getTime()) / 1000));
          log(`  ${`${side} sweep of those writes`.padEnd(36)} ${ms.toFixed(1)} ms (${(ms / ((until - from.getTime()) / 1000)).toFixed(2)} ms per second of writes)`);
        }
      }
    }
  } finally {
    for (const side of ['small', 'big'] as const) {
      servers[side].child.kill('SIGTERM');
      await sweepers[side].db.conn.db!.collection('projects').deleteMany({ tenant_id: new Types.ObjectId(markers[side].tenant_id), is_deleted: false, created_at: { $gte: started } });
      await sweepers[side].close();
    }
  }

  log(`\n${BIG} vs ${SMALL} documents, big over small (median of per-round ratios; load average now ${loadAvg()}):`);
  for (const name of Object.keys(loads)) log(`  ${`${name}, throughput (aim >= 0.9)`.padEnd(52)} ${showRatio(ratioOf(rates, `big ${name}`, `small ${name}`))}`);
  const sweep = ratioOf(sweepMs, 'big', 'small');
  log(`  ${'outbox sweep, time per second of writes (aim <= 1.2)'.padEnd(52)} ${showRatio(sweep)}   (small ${median(sweepMs.small ?? [0]).toFixed(2)} ms, big ${median(sweepMs.big ?? [0]).toFixed(2)} ms per second of writes)`);
  await mem?.stop({ doCleanup: false });
}

runBench(main);
