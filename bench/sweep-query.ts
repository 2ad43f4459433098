/**
 * `npx tsx bench/sweep-query.ts`: the outbox sweep's window query (plugins/events/relay.ts,
 * `sweepWindow`) on this database as the collection grows, against other forms that select the
 * same entries (or a superset: the relay keeps only the window's entries itself). A collection with
 * the resources' sparse `_outbox.created_at` index gets `BENCH_STEP` (50,000) documents per step,
 * each with one staged entry as a create leaves it, stamped 1 ms apart; the window is the last
 * `BENCH_WINDOW` (5,000) entries but one second's worth at the end (as the recent pass's, 5 s
 * behind). Per form: ms per query and the database's CPU per query (bench/db-cpu.ts), and the rows
 * it returns. Bench only.
 */
import { loadavg } from 'node:os';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { MongoClient, ObjectId, type Document } from 'mongodb';
import { dbCpuMeter } from './db-cpu.ts';

const STEPS = Number(process.env.BENCH_STEPS ?? 4);
const STEP = Number(process.env.BENCH_STEP ?? 50_000);
const WINDOW = Number(process.env.BENCH_WINDOW ?? 5000);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 5);
const log = (s: string) => process.stdout.write(`${s}\n`);
const mem = await MongoMemoryServer.create();
const client = await new MongoClient(mem.getUri()).connect();
const col = client.db('sweepq').collection('projects');
await col.createIndex({ '_outbox.created_at': 1 }, { sparse: true });
await col.createIndex({ tenant_id: 1, is_deleted: 1, created_at: -1, _id: -1 });
const meter = dbCpuMeter(mem.getUri(), 100);
const t0 = Date.now() - 3_600_000;
const tenant = new ObjectId();
let n = 0;

const forms: Record<string, (from: Date, until: Date) => Document> = {
  'elemMatch both bounds (today)': (from, until) => ({ _outbox: { $elemMatch: { created_at: { $gte: from, $lt: until } } } }),
  'one bound': (from) => ({ '_outbox.created_at': { $gte: from } }),
  'both bounds, no elemMatch': (from, until) => ({ '_outbox.created_at': { $gte: from, $lt: until } }),
  'one bound and elemMatch': (from, until) => ({ '_outbox.created_at': { $gte: from }, _outbox: { $elemMatch: { created_at: { $gte: from, $lt: until } } } }),
};
const projection = { _id: 1, tenant_id: 1, _outbox: 1, _removed: 1 };

for (let step = 1; step <= STEPS; step++) {
  for (let i = 0; i < STEP; i += 1000) {
    await col.insertMany(Array.from({ length: 1000 }, () => {
      const at = new Date(t0 + n++);
      return {
        name: 'bench create', tags: ['x'], budget: 1, tenant_id: tenant, created_at: at, updated_at: at, is_deleted: false, version: 1,
        _outbox: [{ id: `evt_${String(new ObjectId())}`, type: 'projects.created', tenant_id: tenant, created_at: at, actor: String(tenant), request_id: crypto.randomUUID(), version: 1, meta: { resource: 'projects', ip: '127.0.0.1', bulk: false } }],
      };
    }));
  }
  const until = new Date(t0 + n - 1000);
  const from = new Date(until.getTime() - WINDOW);
  const out: string[] = [];
  for (const [name, filter] of Object.entries(forms)) {
    let rows = 0;
    const [d0, w0] = [meter.micros()!, performance.now()];
    for (let r = 0; r < REPEAT; r++) rows = (await col.find(filter(from, until), { projection }).batchSize(500).toArray()).length;
    out.push(`${name}: ${((performance.now() - w0) / REPEAT).toFixed(0)} ms, database ${((meter.micros()! - d0) / REPEAT / 1000).toFixed(0)} ms, ${rows} rows`);
  }
  log(`${n} documents (load ${loadavg().map((l) => l.toFixed(1)).join(' ')}):\n  ${out.join('\n  ')}`);
}
meter.stop();
await client.close();
await mem.stop();
