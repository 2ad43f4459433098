/**
 * `npx tsx bench/versions-insert.ts`: what an insert into `resource_versions` costs the database as
 * the collection grows, by its indexes: the same version records (a `projects` create's, 50 per
 * insertMany as the relay's batches) into three collections side by side, one with the store's
 * indexes (the unique key and the purge index), one with the same key not unique, one with `_id`
 * only. Prints, per `BENCH_STEP` (20,000) rows, the database's CPU per row (bench/db-cpu.ts) and
 * the time per batch of each. Bench only.
 */
import { MongoMemoryServer } from 'mongodb-memory-server';
import { MongoClient, ObjectId } from 'mongodb';
import { loadavg } from 'node:os';
import { dbCpuMeter } from './db-cpu.ts';

const STEPS = Number(process.env.BENCH_STEPS ?? 8);
const STEP = Number(process.env.BENCH_STEP ?? 20_000);
const BATCH = 50;
const log = (s: string) => process.stdout.write(`${s}\n`);
const mem = await MongoMemoryServer.create();
const client = await new MongoClient(mem.getUri()).connect();
const db = client.db('vbench');
const meter = dbCpuMeter(mem.getUri(), 100);
const KEY = { tenant_id: 1, resource: 1, doc_id: -1, version: -1 } as const;
const sides = {
  unique: db.collection('v_unique'),
  plain: db.collection('v_plain'),
  idonly: db.collection('v_idonly'),
};
await sides.unique.createIndex(KEY, { unique: true });
await sides.unique.createIndex({ resource: 1, created_at: 1 });
await sides.plain.createIndex(KEY);
await sides.plain.createIndex({ resource: 1, created_at: 1 });
await db.createCollection('v_idonly');
const tenant = new ObjectId();
const record = () => {
  const id = new ObjectId();
  const now = new Date();
  return {
    tenant_id: tenant, resource: 'projects', doc_id: id, version: 1, operation: 'created', created_at: now, actor: String(new ObjectId()), request_id: crypto.randomUUID(),
    changed_fields: ['budget', 'name', 'tags'], restored_from: null, event_id: `evt_${String(new ObjectId())}`,
    data: { _id: id, name: 'bench create', tags: ['x'], budget: 1, description: null, status: 'active', owner_email: null, tenant_id: tenant, created_at: now, updated_at: now, created_by: tenant, updated_by: tenant, is_deleted: false, deleted_at: null, deleted_by: null, version: 1, _status: 'published' },
  };
};
log(`rows per step ${STEP}, batches of ${BATCH}; µs of database CPU per row and ms per batch (load ${loadavg().map((l) => l.toFixed(1)).join(' ')})`);
for (let step = 1; step <= STEPS; step++) {
  const out: string[] = [];
  for (const [name, col] of Object.entries(sides)) {
    // Alternate which collection goes first within the step.
    void name;
    const d0 = meter.micros()!;
    const t0 = performance.now();
    for (let i = 0; i < STEP; i += BATCH) await col.insertMany(Array.from({ length: BATCH }, record), { ordered: false });
    const ms = performance.now() - t0;
    out.push(`${name} ${((meter.micros()! - d0) / STEP).toFixed(0)} µs/row ${(ms / (STEP / BATCH)).toFixed(1)} ms/batch`);
  }
  log(`rows ${step * STEP}: ${out.join('; ')} (load ${loadavg().map((l) => l.toFixed(1)).join(' ')})`);
}
meter.stop();
await client.close();
await mem.stop();
