/**
 * `npx tsx bench/versions.ts`: what versions cost, in one server process.
 *
 * 1. Throughput of creates and of updates (PATCH with If-Match) on two resources with the same
 *    schema, one with `versions: true` and one without, in the same run: `BENCH_ROUNDS` (5) rounds
 *    of `BENCH_SECONDS` (3) per side and operation, sides alternating, `BENCH_CONNECTIONS` (10)
 *    requests in flight. The ratios are versioned / plain of the median rounds, of throughput and of
 *    CPU time per request (plain / versioned, so that higher is better for both; aim >= 0.9), and the
 *    median of the rounds' throughput ratios (each round measures both sides back to back).
 * 2. `GET /{resource}/{id}/versions` (first page of 25) of one document with `BENCH_VERSIONS`
 *    (10,000) versions: p50 / p99 of 200 requests over loopback (an upper bound of server time), and
 *    of the page's database read alone, against a sort over the whole history.
 *
 * The database: `MONGODB_URI`, or an embedded MongoDB. The client runs in the server's process (on
 * both sides alike), so the numbers compare the sides; they are no absolute throughput.
 */
import { Schema, Types } from 'mongoose';
import { loadavg } from 'node:os';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { defineResource, resourcesPlugin } from '../plugins/resources/index.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const VERSIONS = Number(process.env.BENCH_VERSIONS ?? 10_000);
const KEY = 'bench-admin-key-0123456789abcdef';

const log = (s: string) => process.stdout.write(`${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

const schema = () => new Schema({ name: { type: String, required: true }, budget: { type: Number, default: null }, tags: { type: [String], default: [] } });
const plain = defineResource({ name: 'plain_items', schema: schema() });
const versioned = defineResource({ name: 'versioned_items', schema: schema(), versions: true });

async function main() {
  const mem = process.env.MONGODB_URI ? null : await MongoMemoryServer.create();
  const uri = new URL(process.env.MONGODB_URI ?? mem!.getUri());
  uri.pathname = `/bench_versions_${Date.now()}`;
  const plugins = builtinPlugins().map((p) => (p.name === 'resources' ? resourcesPlugin.configure({ resources: [plain, versioned] }) : p));
  const app = await createApp({ corePlugins: corePlugins(), config: loadConfig({ MONGODB_URI: uri.toString(), LOG_LEVEL: 'silent', ADMIN_API_KEY: KEY, RATE_LIMIT_ENABLED: 'false' }), plugins });
  const port = await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${port}`;
  const call = async (method: string, path: string, json?: unknown, etag?: string) => {
    const res = await fetch(base + path, {
      method,
      headers: { 'X-API-Key': KEY, ...(json !== undefined ? { 'Content-Type': 'application/json' } : {}), ...(etag ? { 'If-Match': etag } : {}) },
      ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };

  /**
   * Requests per second of `op` with CONNECTIONS workers for SECONDS, and the process's CPU time per
   * request (user + system, the relay's batches included: they are flushed before the clock stops).
   * CPU per request moves far less than throughput when other processes share the machine.
   */
  const load = async (op: (worker: number) => (() => Promise<void>) | Promise<() => Promise<void>>) => {
    const steps = await Promise.all(Array.from({ length: CONNECTIONS }, async (_, w) => op(w)));
    await app.services.get('events').flush();
    let n = 0;
    const until = Date.now() + SECONDS * 1000;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    await Promise.all(steps.map(async (step) => {
      while (Date.now() < until) {
        await step();
        n++;
      }
    }));
    await app.services.get('events').flush();
    const cpu = process.cpuUsage(cpu0);
    return { rate: n / ((performance.now() - t0) / 1000), cpuUs: (cpu.user + cpu.system) / n };
  };
  const create = (path: string) => () => async () => {
    const r = await call('POST', path, { name: 'bench', budget: 1, tags: ['a'] });
    if (r.status !== 201) throw new Error(`create ${r.status}`);
  };
  const update = (path: string) => async () => {
    const c = await call('POST', path, { name: 'bench' });
    let version = 1;
    return async () => {
      const r = await call('PATCH', `${path}/${String(c.body._id)}`, { budget: version }, `"${version}"`);
      if (r.status !== 200) throw new Error(`update ${r.status}`);
      version++;
    };
  };

  const results: Record<string, { rate: number; cpuUs: number }[]> = { 'create plain': [], 'create versions': [], 'update plain': [], 'update versions': [] };
  await load(create('/plain_items')); // warm-up
  await load(create('/versioned_items'));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? ['versions', 'plain'] : ['plain', 'versions'];
    for (const side of order) results[`create ${side}`]!.push(await load(create(side === 'plain' ? '/plain_items' : '/versioned_items')));
    for (const side of order) results[`update ${side}`]!.push(await load(update(side === 'plain' ? '/plain_items' : '/versioned_items')));
    log(`round ${round + 1}: ${Object.entries(results).map(([k, v]) => `${k} ${v.at(-1)!.rate.toFixed(0)}/s ${v.at(-1)!.cpuUs.toFixed(0)} µs`).join(', ')} (load ${loadavg()[0]!.toFixed(1)})`);
  }
  for (const op of ['create', 'update']) {
    const rate = (side: string) => median(results[`${op} ${side}`]!.map((r) => r.rate));
    const cpu = (side: string) => median(results[`${op} ${side}`]!.map((r) => r.cpuUs));
    const perRound = results[`${op} versions`]!.map((r, i) => r.rate / results[`${op} plain`]![i]!.rate);
    log(`${op}: throughput ratio per round ${perRound.map((x) => x.toFixed(2)).join(', ')}; median ${median(perRound).toFixed(2)}`);
    log(`${op}: throughput versions ${rate('versions').toFixed(0)}/s, plain ${rate('plain').toFixed(0)}/s, ratio ${(rate('versions') / rate('plain')).toFixed(2)}; ` +
      `CPU per request versions ${cpu('versions').toFixed(0)} µs, plain ${cpu('plain').toFixed(0)} µs, ratio plain/versions ${(cpu('plain') / cpu('versions')).toFixed(2)}`);
  }

  // 2. A document with VERSIONS versions: the versions written directly, as the sink writes them.
  const c = await call('POST', '/versioned_items', { name: 'long history' });
  const id = new Types.ObjectId(String(c.body._id));
  await app.services.get('events').flush();
  const coll = app.db.conn.db!.collection('resource_versions');
  const head = (await coll.findOne({ resource: 'versioned_items', doc_id: id }))!;
  for (let v = 2; v <= VERSIONS; v += 1000) {
    await coll.insertMany(Array.from({ length: Math.min(1000, VERSIONS - v + 1) }, (_, i) => ({
      ...head, _id: new Types.ObjectId(), version: v + i, operation: 'updated', changed_fields: ['budget'], event_id: `evt_${v + i}`, data: { ...head.data, budget: v + i, version: v + i },
    })));
  }
  await app.db.conn.db!.collection('versioned_items').updateOne({ _id: id }, { $set: { version: VERSIONS } });
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    const r = await call('GET', `/versioned_items/${String(id)}/versions`);
    times.push(performance.now() - t0);
    if (r.status !== 200 || (r.body.items as unknown[]).length !== 25 || r.body.next_before !== VERSIONS - 24) throw new Error(`versions page ${r.status}`);
  }
  log(`GET …/versions, ${VERSIONS} versions, first page: p50 ${pct(times, 50).toFixed(1)} ms, p99 ${pct(times, 99).toFixed(1)} ms (client-side, loopback)`);
  // The two reads of a page, alone (database time as the driver sees it).
  const filter = { tenant_id: head.tenant_id, resource: 'versioned_items', doc_id: id };
  const timed = async (fn: () => Promise<unknown>) => {
    const ts: number[] = [];
    for (let i = 0; i < 100; i++) {
      const t0 = performance.now();
      await fn();
      ts.push(performance.now() - t0);
    }
    return `p50 ${pct(ts, 50).toFixed(1)} ms, p99 ${pct(ts, 99).toFixed(1)} ms`;
  };
  log(`  page read (one range of the index): ${await timed(() => coll.find({ ...filter, version: { $gte: VERSIONS - 25, $lte: VERSIONS } }, { projection: { data: 0 } }).sort({ version: -1 }).limit(26).toArray())}`);
  log(`  the same page by a sort over the whole history: ${await timed(() => coll.find(filter, { projection: { data: 0 } }).sort({ version: -1 }).limit(26).toArray())}`);
  await app.close();
  await mem?.stop();
}

main().catch((err: unknown) => {
  process.stderr.write(`${String((err as Error).stack ?? err)}\n`);
  process.exit(1);
});
