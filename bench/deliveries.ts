/**
 * `npm run bench:deliveries`: the outbound webhook sender against a local receiver answering 2xx at
 * once, in the same run:
 *
 * (a) Deliveries per second of the sender draining a backlog: `BENCH_EVENTS` (400) events x
 *     `BENCH_ENDPOINTS` (5) endpoints, fanned out and pending before the sender starts, through the
 *     app (one process), against a bare floor sender in this process doing the least durable work
 *     on the same number of pending rows: claim a batch of `BENCH_BATCH` (the app's
 *     `WEBHOOK_DELIVERY_CONCURRENCY`, 10) with one update, POST each signed (Standard Webhooks, a
 *     new connection each, as the app does), record the batch with one bulk write. Both sides are
 *     timed the same way, from the receiver's first receipt to its last, and both start from the
 *     same point: every delivery pending and due, the sender running. The app's backlog is made by a first app process
 *     whose first attempt is an hour away (`WEBHOOK_DELIVERY_RETRY_SCHEDULE=3600,...`): its fan-out
 *     on store creates the deliveries as it does for any write; that process stops, the deliveries
 *     are made due once a second app process with the default settings has started (its start-up,
 *     the GraphQL schema and the routes, is not the sender's work, as the floor's set-up is not the
 *     floor's), and that process sends them. (Creating the events while the sender runs, as this
 *     bench once did, timed the create path: the app could send no faster than the creates came,
 *     which the floor, starting with every row pending, never waits for.) `BENCH_ROUNDS` (2) rounds, floor and app alternating. Aim: app / floor >= 0.7.
 * (b) Write -> receiver 2xx (receipt time - event timestamp), p50 / p99, creates at 100 and at 200
 *     per second for `BENCH_SECONDS` (5) on one process. Aim: p99 <= 1 s.
 * (c) The same with two processes at 100 creates/s each: every delivery counted by event id, none
 *     lost, none twice (the receiver reports duplicates). Aim: p99 <= 1 s.
 *
 * `BENCH_PARTS` (abc) runs some parts only (any string naming them: `a`, `b,c`). The database:
 * `MONGODB_URI`, or an embedded MongoDB. Prints the load average with each part, and with (a) the
 * CPU time per delivery of each sender and of the database's gateway process (embedded database
 * only). `BENCH_DRAIN_FLAGS`: node flags of the app processes measured, e.g.
 * `--import ./bench/commands-preload.ts` (their database commands, printed at exit) or `--cpu-prof`.
 */
import { createServer, request, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import mongoose, { Types } from 'mongoose';
import { Webhook } from 'standardwebhooks';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { startServer } from './seed.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 400);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 5);
const BATCH = Number(process.env.BENCH_BATCH ?? 10);
/** Which parts to run: any of `a`, `b`, `c` (all by default). */
const PARTS = process.env.BENCH_PARTS ?? 'abc';
/** Node flags of the processes measured ((a)'s draining one, (b)'s and (c)'s), e.g. `--cpu-prof --import ./bench/commands-preload.ts` (where its time and round trips go). */
const DRAIN_FLAGS = (process.env.BENCH_DRAIN_FLAGS ?? '').split(' ').filter(Boolean);
const KEY = 'bench-admin-key-0123456789abcdef';
const SECRET = `whsec_${Buffer.from('bench-floor-secret-0123456789abcd').toString('base64')}`;
const WEBHOOKS = { WEBHOOKS_ENABLED: 'true', WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1' };

const log = (s: string) => process.stdout.write(`${s}\n`);
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

interface Got { at: number; delayMs: number; key: string; eventId: string }
/** A loopback receiver answering 204 at once; `key` (path + event id) counts each delivery. */
async function receiver(): Promise<{ server: Server; port: number; got: Got[]; duplicates: () => number }> {
  const got: Got[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; timestamp: string };
      got.push({ at, delayMs: at - Date.parse(body.timestamp), key: `${req.url} ${String(req.headers['webhook-id'] ?? body.id)}`, eventId: body.id });
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, got, duplicates: () => got.length - new Set(got.map((g) => g.key)).size };
}

async function call(port: number, method: string, path: string, json?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** One signed POST on a new connection; resolves with the status. */
const post = (port: number, path: string, id: string, body: string) =>
  new Promise<number>((resolve, reject) => {
    const at = new Date();
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(SECRET).sign(id, at, body), 'content-type': 'application/json' };
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', agent: false, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });

/** The floor: `n` pending rows, claimed `BATCH` at a time by one update, posted, recorded by one bulk write per batch. */
async function floor(uri: string, port: number, n: number): Promise<void> {
  const conn = await mongoose.createConnection(uri).asPromise();
  const rows = conn.collection('floor_deliveries');
  await rows.deleteMany({});
  await rows.createIndex({ status: 1, next_attempt_at: 1 });
  const now = new Date();
  await rows.insertMany(Array.from({ length: n }, (_, i) => ({ endpoint: `/e${i % ENDPOINTS}`, event_id: `evt_${i}`, status: 'pending', next_attempt_at: now, lease_until: null, lease_owner: null, attempts: 0 })));
  for (;;) {
    const due = { status: 'pending', next_attempt_at: { $lte: new Date() }, lease_until: null };
    const ids = (await rows.find(due, { projection: { _id: 1 } }).limit(BATCH).toArray()).map((r) => r._id);
    if (!ids.length) break;
    const owner = new Types.ObjectId().toHexString();
    await rows.updateMany({ _id: { $in: ids }, ...due }, { $set: { lease_until: new Date(Date.now() + 30_000), lease_owner: owner } });
    const batch = await rows.find({ _id: { $in: ids }, lease_owner: owner }).toArray();
    const results = await Promise.all(batch.map((d) => post(port, String(d.endpoint), String(d.event_id), JSON.stringify({ id: d.event_id, type: 'projects.created', timestamp: new Date().toISOString(), data: { name: 'floor' } }))));
    const at = new Date();
    await rows.bulkWrite(batch.map((d, i) => ({ updateOne: { filter: { _id: d._id, lease_owner: owner }, update: { $set: { status: results[i]! < 300 ? 'delivered' : 'pending', attempts: 1, last_attempt: { status: results[i], attempted_at: at }, lease_until: null, lease_owner: null } } } })), { ordered: false });
  }
  await conn.close();
}

/** CPU time (ms) of a process so far, from /proc (NaN where unknown). */
const cpuOf = (pid: number | undefined): number => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  } catch {
    return Number.NaN;
  }
};
/** CPU time (ms) of this process (the floor sender and the receivers) so far. */
const benchCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** Receipts a second from the first receipt to the last. */
const rateOf = (got: Got[]) => got.length / Math.max((got[got.length - 1]!.at - got[0]!.at) / 1000, 0.001);

async function main() {
  const mem = process.env.MONGODB_URI ? null : await MongoMemoryServer.create();
  const base = process.env.MONGODB_URI ?? mem!.getUri();
  const dbUri = (name: string) => Object.assign(new URL(base), { pathname: `/${name}` }).toString();
  const children: ChildProcess[] = [];
  // The database's gateway process (the stand-in's `mongod`), whose CPU time counts each command's translation.
  const gateway = mem?.instanceInfo?.instance.mongodProcess?.pid;
  const start = async (db: string, env: Record<string, string> = {}, flags: string[] = []) => {
    const s = await startServer('app', { ...process.env, MONGODB_URI: dbUri(db), ADMIN_API_KEY: KEY, NODE_ENV: 'development', ...WEBHOOKS, ...env }, flags);
    children.push(s.child);
    return s;
  };
  const stopAll = async () => {
    await Promise.all(children.splice(0).map((c) => new Promise((r) => { c.once('exit', r); c.kill('SIGINT'); })));
  };
  try {
    // --- (a) deliveries per second: floor vs app ---------------------------------------------
    const ratios: number[] = [];
    for (let round = 1; round <= (PARTS.includes('a') ? ROUNDS : 0); round++) {
      const rf = await receiver();
      const [fb0, fg0] = [benchCpu(), cpuOf(gateway)];
      await floor(dbUri(`bench_deliveries_floor_${round}`), rf.port, EVENTS * ENDPOINTS);
      const [fb1, fg1] = [benchCpu(), cpuOf(gateway)];
      const floorRate = rateOf(rf.got);
      rf.server.close();
      const rcv = await receiver();
      const db = `bench_deliveries_app_${round}`;
      // The backlog: a process whose first attempt is an hour away fans the creates out, and stops.
      const seeder = await start(db, { WEBHOOK_DELIVERY_RETRY_SCHEDULE: '3600,5,300' });
      for (let i = 0; i < ENDPOINTS; i++) {
        const ep = await call(seeder.port, 'POST', '/webhook-endpoints', { url: `http://127.0.0.1:${rcv.port}/e${i}`, event_types: ['projects.created'] });
        if (ep.status !== 201) throw new Error(`endpoint: ${ep.status} ${JSON.stringify(ep.body)}`);
      }
      const c0 = Date.now();
      const r = await autocannon({ url: `http://127.0.0.1:${seeder.port}/projects`, method: 'POST', connections: 10, amount: EVENTS, headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'fanout' }) });
      const createRate = EVENTS / ((Date.now() - c0) / 1000);
      const expected = (r.requests.total - r.non2xx - r.errors) * ENDPOINTS;
      const conn = await mongoose.createConnection(dbUri(db)).asPromise();
      const deliveries = conn.collection('webhook_deliveries');
      for (const until = Date.now() + 120_000; (await deliveries.countDocuments({ status: 'pending' })) < expected && Date.now() < until;) await sleep(100);
      await stopAll();
      // The sender's process starts first: its start-up (the GraphQL schema, the routes) is not the
      // sender's work, as the floor's set-up is not the floor's. Its timer's poll finds the deliveries
      // once they are due.
      const drain = await start(db, {}, DRAIN_FLAGS);
      await deliveries.updateMany({ status: 'pending' }, { $set: { next_attempt_at: new Date() } });
      await conn.close();
      const deadline = Date.now() + 300_000;
      // CPU from the first receipt on (the drain process's start-up is not the sender's work).
      while (!rcv.got.length && Date.now() < deadline) await sleep(5);
      const [from, ab0, ag0, ap0] = [rcv.got.length, benchCpu(), cpuOf(gateway), cpuOf(drain.child.pid)];
      while (rcv.got.length < expected && Date.now() < deadline) await sleep(100);
      const [to, ab1, ag1, ap1] = [rcv.got.length, benchCpu(), cpuOf(gateway), cpuOf(drain.child.pid)];
      await sleep(500); // a duplicate would have come by now
      const appRate = rateOf(rcv.got);
      ratios.push(appRate / floorRate);
      log(`# (a) round ${round}: floor ${floorRate.toFixed(0)} deliveries/s; app ${appRate.toFixed(0)} deliveries/s (${rcv.got.length}/${expected} delivered, ${rcv.duplicates()} duplicates); app/floor ${(appRate / floorRate).toFixed(2)} (aim >= 0.7); the backlog's creates came at ${createRate.toFixed(0)}/s; load ${load()}`);
      // Machine time per delivery: the sender's process, and the database gateway (its SQL's PostgreSQL time is not counted).
      const per = (ms: number, n: number) => ((ms * 1000) / Math.max(n, 1)).toFixed(0);
      const receiving = (ab1 - ab0) / Math.max(to - from, 1);
      log(`#     CPU µs per delivery: sender: floor ${per(fb1 - fb0 - receiving * rf.got.length, rf.got.length)}, app ${per(ap1 - ap0, to - from)}; database gateway: floor ${per(fg1 - fg0, rf.got.length)}, app ${per(ag1 - ag0, to - from)}; the receiver ${per(receiving, 1)}`);
      await stopAll();
      rcv.server.close();
    }
    if (ratios.length) log(`# (a) app/floor by round: ${ratios.map((x) => x.toFixed(2)).join(', ')}`);

    // --- (b), (c) write -> receiver 2xx -------------------------------------------------------
    for (const [procs, rate] of ([[1, 100], [1, 200], [2, 100]] as const).filter(([p]) => PARTS.includes(p === 1 ? 'b' : 'c'))) {
      const rcv = await receiver();
      const db = `bench_deliveries_delay_${procs}_${rate}`;
      const servers = [];
      for (let i = 0; i < procs; i++) servers.push(await start(db, {}, DRAIN_FLAGS));
      const ep = await call(servers[0]!.port, 'POST', '/webhook-endpoints', { url: `http://127.0.0.1:${rcv.port}/delay`, event_types: ['projects.created'] });
      if (ep.status !== 201) throw new Error(`endpoint: ${ep.status}`);
      await sleep(1000);
      const runs = await Promise.all(servers.map((s) => autocannon({
        url: `http://127.0.0.1:${s.port}/projects`, method: 'POST', connections: 4, overallRate: rate, duration: SECONDS,
        headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'delay' }),
      })));
      const sent = runs.reduce((n, r) => n + r.requests.total - r.non2xx - r.errors, 0);
      const deadline = Date.now() + 60_000;
      while (rcv.got.length < sent && Date.now() < deadline) await sleep(100);
      await sleep(2000); // a duplicate would have come by now
      const delays = rcv.got.map((g) => g.delayMs);
      const distinct = new Set(rcv.got.map((g) => g.key)).size;
      log(`# (${procs === 1 ? 'b' : 'c'}) ${procs} process(es) x ${rate} creates/s: ${sent} created in the window, ${distinct} delivered (creates answered after the window count too), ${Math.max(0, sent - distinct)} lost, ${rcv.duplicates()} twice; p50 ${pct(delays, 50)} ms, p99 ${pct(delays, 99)} ms, max ${Math.max(...delays)} ms (aim p99 <= 1000); load ${load()}`);
      // Where the delay went: event -> its delivery's creation (the fan-out), creation -> receipt (the sender).
      const conn = await mongoose.createConnection(dbUri(db)).asPromise();
      const made = new Map((await conn.collection('webhook_deliveries').find({}, { projection: { event_id: 1, created_at: 1 } }).toArray()).map((d) => [String(d.event_id), (d.created_at as Date).getTime()]));
      await conn.close();
      const split = rcv.got.filter((g) => made.has(g.eventId)).map((g) => ({ fan: g.at - g.delayMs, made: made.get(g.eventId)!, at: g.at }));
      log(`#     event -> delivery created: p99 ${pct(split.map((x) => x.made - x.fan), 99)} ms; created -> received: p50 ${pct(split.map((x) => x.at - x.made), 50)} ms, p99 ${pct(split.map((x) => x.at - x.made), 99)} ms`);
      await stopAll();
      rcv.server.close();
    }
  } finally {
    for (const c of children) c.kill('SIGINT');
    await mem?.stop();
  }
}

await main();
process.exit(0);
