/**
 * `npm run bench:datasize`: the same requests against a tenant of `BENCH_SMALL_DOCS` (20,000)
 * projects and one of `BENCH_BIG_DOCS` (1,000,000) projects, side by side in one run; each ratio is
 * big over small (1.0: the request's cost does not grow with the collection). Measured: get-one, the
 * first cursor page, cursor page 100, a create, and the outbox sweep's time per second of writes.
 *
 * Each is measured on the app and on its floor, the least the request needs through the raw driver
 * with no app, measured the same way in the same rounds: bench/serve.ts's bare Koa server
 * (`bare-events`) for the requests (get-one: `findOne` by id, tenant and live; a cursor page: the
 * app's filter and default sort, `limit + 1`, the boundary's range; a create: `insertOne` of a
 * document shaped as the app's, its event put in the log per 50 ms batch), and for the sweep the
 * least query that finds a window's entries ({@link sweepFloor}). When the floor's own ratio misses an
 * aim, the aim is out of reach on this database whatever the app does. The list pages run a set number
 * of requests over `PAGE_CONNECTIONS`, each waited for (on the stand-in a page sorts the whole tenant).
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
type Db = NonNullable<mongoose.Connection['db']>;
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

type Size = 'small' | 'big';
const SIZES = ['small', 'big'] as const;
/** The app (bench/serve.ts `app`) and the floor beside it (`bare-events`: raw driver, no app). */
const KINDS = ['app', 'bare'] as const;
/**
 * Connections of the list pages' runs: on the stand-in each page sorts every row the filter matches
 * (a second or more at 1,000,000 rows), and ten at once only queue on its two cores.
 */
const PAGE_CONNECTIONS = 2;

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

/** Removes what a run wrote from `since` on in the bench tenant: its projects, their events, versions and audit entries. */
async function removeRunDocs(db: Db, tenantId: string, since: Date): Promise<void> {
  const tenant = new Types.ObjectId(tenantId);
  await db.collection('projects').deleteMany({ tenant_id: tenant, is_deleted: false, created_at: { $gt: since } });
  for (const c of ['events', 'resource_versions', 'audit_log']) await db.collection(c).deleteMany({ tenant_id: tenant, created_at: { $gt: since } });
}

/**
 * The sweep's floor: the least query that finds the outbox entries stamped in [from, until), as the
 * sweep asks for them (`$elemMatch` on the indexed `_outbox.created_at`: an index range on any engine
 * that bounds a multikey path from both sides), reading only each document's id and entries' ids and
 * stamps. `oneBound`: the same with `$gte` alone on the dotted path (entries after the window too), a
 * form this stand-in serves from its index; shown for what it says about the stand-in, not a floor.
 */
async function sweepFloor(db: Db, from: Date, until: Date, oneBound: boolean): Promise<{ ms: number; docs: number }> {
  const filter = oneBound ? { [`${OUTBOX_FIELD}.created_at`]: { $gte: from } } : { [OUTBOX_FIELD]: { $elemMatch: { created_at: { $gte: from, $lt: until } } } };
  const t = performance.now();
  const docs = await db.collection('projects').find(filter, { projection: { _id: 1, [`${OUTBOX_FIELD}.id`]: 1, [`${OUTBOX_FIELD}.created_at`]: 1 } }).toArray();
  return { ms: performance.now() - t, docs: docs.length };
}

async function main() {
  const { uri, mem } = await database();
  const sizes: Record<Size, number> = { small: SMALL, big: BIG };
  const markers = {} as Record<Size, Marker>;
  for (const size of SIZES) markers[size] = await prepare(uri, sizes[size]);
  if (process.env.BENCH_SEED_ONLY === '1') return void (await mem?.stop({ doCleanup: false }));

  const servers = {} as Record<string, { child: ChildProcess; port: number }>;
  const sweepers = {} as Record<Size, Awaited<ReturnType<typeof createApp>>>;
  const floorDb = {} as Record<Size, Db>;
  const conns: mongoose.Connection[] = [];
  for (const size of SIZES) {
    const m = markers[size];
    const env = { ...process.env, MONGODB_URI: dbUri(uri, sizes[size]), BENCH_TENANT_ID: m.tenant_id, BENCH_USER_ID: m.user_id };
    servers[`app ${size}`] = await startServer('app', env);
    // The floor's create stages its event in the document and puts it in the log within 50 ms, as the
    // app's does: the app servers' sweep passes find its entries already in the log.
    servers[`bare ${size}`] = await startServer('bare-events', env);
    // In this process: the sweep is timed here, on the code path the servers' timers run.
    sweepers[size] = await createApp({ corePlugins: corePlugins(), config: loadConfig({ MONGODB_URI: dbUri(uri, sizes[size]), LOG_LEVEL: 'silent' }), plugins: builtinPlugins() });
    const conn = await mongoose.createConnection(dbUri(uri, sizes[size])).asPromise();
    conns.push(conn);
    floorDb[size] = conn.db!;
  }
  const scenarios: { name: string; load: (size: Size) => Load; page?: true }[] = [
    { name: 'get-one', load: (s) => ({ path: `/projects/${markers[s].sample_id}` }) },
    { name: 'first page', load: () => ({ path: `/projects?limit=${PAGE}` }), page: true },
    { name: 'cursor page 100', load: (s) => ({ path: `/projects?limit=${PAGE}&cursor=${encodeCursor([['created_at', -1], ['_id', -1]], markers[s].page100, sweepers[s].config.CURSOR_HMAC_SECRET)}` }), page: true },
    { name: 'create', load: (s) => ({ path: '/projects', method: 'POST', body: JSON.stringify({ name: 'bench create', tags: ['x'], budget: 1 }), headers: { 'X-API-Key': markers[s].key, 'Content-Type': 'application/json' } }) },
  ];
  /** Requests per second each side's list pages last ran at (first: one request's time), to size the next run. */
  const pace: Record<string, number> = {};
  for (const size of SIZES) {
    // Documents an interrupted run created and could not remove.
    await removeRunDocs(floorDb[size], markers[size].tenant_id, markers[size].seeded_at);
    // A process's first list page may be slow (the stand-in sorts every row the filter matches): each
    // side reads each page once before measuring; that time sizes its first measured run.
    for (const kind of KINDS) {
      for (const { name, load, page } of scenarios) {
        if (!page) continue;
        const t = performance.now();
        const res = await fetch(`http://127.0.0.1:${servers[`${kind} ${size}`]!.port}${load(size).path}`, { headers: { 'X-API-Key': markers[size].key } });
        const ms = performance.now() - t;
        pace[`${kind} ${size} ${name}`] = 1000 / ms;
        log(`${kind} ${size}: a first ${name} took ${ms.toFixed(0)} ms (${res.status})`);
      }
    }
  }
  const rates: Record<string, number[]> = {};
  const sweepMs: Record<string, number[]> = {};
  const started = new Date();
  const sidesOf = (round: number) => {
    const all = SIZES.flatMap((size) => KINDS.map((kind) => ({ kind, size })));
    return all.map((_, i) => all[(i + round) % all.length]!);
  };
  try {
    for (const key of Object.keys(servers)) {
      const size = key.split(' ')[1] as Size;
      await autocannon({ url: `http://127.0.0.1:${servers[key]!.port}/projects/${markers[size].sample_id}`, connections: CONNECTIONS, duration: 2, headers: { 'X-API-Key': markers[size].key } });
    }
    for (let round = 0; round < ROUNDS; round++) {
      log(`round ${round + 1}/${ROUNDS} (load average ${loadAvg()})`);
      for (const { name, load, page } of scenarios) {
        for (const { kind, size } of sidesOf(round)) {
          const key = `${kind} ${size}`;
          const opts = { connections: CONNECTIONS, duration: DURATION, headers: { 'X-API-Key': markers[size].key } };
          const from = new Date();
          let rate: number;
          if (page) {
            // A run of a set number of requests, about DURATION long at the side's last pace, each
            // waited for (a page of the whole tenant's sort may take longer than a run): its rate
            // counts every request; one the server gave up on counts as no answer.
            const amount = PAGE_CONNECTIONS * Math.max(1, Math.round((pace[`${key} ${name}`]! * DURATION) / PAGE_CONNECTIONS));
            rate = await measureRate(`${key} ${name}`, servers[key]!.port, { ...load(size), amount, timeout: 900 }, { ...opts, connections: PAGE_CONNECTIONS, tolerateErrors: true });
            pace[`${key} ${name}`] = Math.max(rate, 1 / 60);
          } else rate = await measureRate(`${key} ${name}`, servers[key]!.port, load(size), opts);
          (rates[`${key} ${name}`] ??= []).push(rate);
          if (name !== 'create' || kind !== 'app') continue;
          // The sweep reads windows that end `sweepAgeMs` (5 s) before now: wait until this run's writes are in one.
          const until = Date.now();
          await sleep(5_500);
          const perSecond = (ms: number) => ms / ((until - from.getTime()) / 1000);
          const windowEnd = new Date(Date.now() - 5_000);
          const timed: Record<string, () => Promise<string>> = {
            app: async () => {
              const t = performance.now();
              await sweepers[size].services.get('events').sweep(from);
              const ms = performance.now() - t;
              (sweepMs[`app ${size}`] ??= []).push(perSecond(ms));
              return `app ${ms.toFixed(1)} ms (${perSecond(ms).toFixed(2)} per s of writes)`;
            },
            floor: async () => {
              const f = await sweepFloor(floorDb[size], from, windowEnd, false);
              (sweepMs[`bare ${size}`] ??= []).push(perSecond(f.ms));
              return `floor ${f.ms.toFixed(1)} ms (${perSecond(f.ms).toFixed(2)}, ${f.docs} documents)`;
            },
            'one bound': async () => {
              const f = await sweepFloor(floorDb[size], from, windowEnd, true);
              (sweepMs[`one-bound ${size}`] ??= []).push(perSecond(f.ms));
              return `one bound ${f.ms.toFixed(1)} ms (${perSecond(f.ms).toFixed(2)}, ${f.docs} documents)`;
            },
          };
          const order = round % 2 ? ['floor', 'one bound', 'app'] : ['app', 'floor', 'one bound'];
          const out: string[] = [];
          for (const k of order) out.push(await timed[k]!());
          log(`  ${`${size} sweep of those writes`.padEnd(36)} ${out.join('; ')}`);
        }
      }
      const at = (xs: number[] | undefined) => xs?.[round];
      const r = (a?: number, b?: number) => (a !== undefined && b ? (a / b).toFixed(2) : 'n/a');
      const line = scenarios.map(({ name }) => `${name} app ${r(at(rates[`app big ${name}`]), at(rates[`app small ${name}`]))} bare ${r(at(rates[`bare big ${name}`]), at(rates[`bare small ${name}`]))}`);
      line.push(`sweep app ${r(at(sweepMs['app big']), at(sweepMs['app small']))} floor ${r(at(sweepMs['bare big']), at(sweepMs['bare small']))} one-bound ${r(at(sweepMs['one-bound big']), at(sweepMs['one-bound small']))}`);
      log(`  round ${round + 1}, big / small: ${line.join(' | ')} (load average ${loadAvg()})`);
    }
  } finally {
    for (const { child } of Object.values(servers)) child.kill('SIGTERM');
    for (const size of SIZES) {
      await removeRunDocs(floorDb[size], markers[size].tenant_id, started);
      await sweepers[size].close();
    }
    for (const c of conns) await c.close();
  }

  log(`\n${BIG} vs ${SMALL} documents, big over small (median of per-round ratios; load average now ${loadAvg()}):`);
  /** Per round, the app's big/small ratio over the floor's: how far the app's ratio is from what its floor reached. */
  const overFloor = (a: { rounds: number[] }, f: { rounds: number[] }) => {
    const rounds = a.rounds.map((x, i) => x / f.rounds[i]!);
    return rounds.length ? showRatio({ median: median(rounds), rounds }) : 'n/a';
  };
  for (const { name } of scenarios) {
    const app = ratioOf(rates, `app big ${name}`, `app small ${name}`);
    const bare = ratioOf(rates, `bare big ${name}`, `bare small ${name}`);
    log(`  ${`${name}, throughput (aim >= 0.9)`.padEnd(52)} app   ${showRatio(app)}`);
    log(`  ${''.padEnd(52)} floor ${showRatio(bare)}`);
    log(`  ${''.padEnd(52)} app / floor ${overFloor(app, bare)}   (below 1: the app loses more to size than its floor)`);
  }
  const sweep = ratioOf(sweepMs, 'app big', 'app small');
  const floor = ratioOf(sweepMs, 'bare big', 'bare small');
  const ms = (k: string) => median(sweepMs[k] ?? [0]).toFixed(2);
  log(`  ${'outbox sweep, time per second of writes (aim <= 1.2)'.padEnd(52)} app   ${showRatio(sweep)}   (small ${ms('app small')} ms, big ${ms('app big')} ms per second of writes)`);
  log(`  ${''.padEnd(52)} floor ${showRatio(floor)}   (small ${ms('bare small')} ms, big ${ms('bare big')} ms)`);
  log(`  ${''.padEnd(52)} app / floor ${overFloor(sweep, floor)}   (above 1: the app's sweep grows more than its floor)`);
  log(`  ${''.padEnd(52)} one bound (not a floor) ${showRatio(ratioOf(sweepMs, 'one-bound big', 'one-bound small'))}   (small ${ms('one-bound small')} ms, big ${ms('one-bound big')} ms)`);
  await mem?.stop({ doCleanup: false });
}

runBench(main);
