/**
 * `npx tsx bench/update-pipeline.ts`: what the forms of a conditional update with its outbox entry
 * cost the database, per update: the same PATCH of `{budget}` (with `updated_at`, `updated_by` and
 * `version`) of documents shaped as the app's `projects`, each holding one relayed entry, 10 in
 * flight, `BENCH_UPDATES` (5,000) per form and round, `BENCH_ROUNDS` (3) rounds, forms rotating:
 * - `operators`: `$set`, `$inc` and `$push` with `$slice` (an entry without the replaced values);
 * - `values+keys`: an update pipeline whose entry keeps the replaced values and the changed keys as
 *   a literal list (the floor's form);
 * - `values+absent`: the same with the absent fields found by `$type` per key;
 * - `app`: the app's expression (`outboxInWrite`): known entries dropped, waiting ones frozen as the
 *   view, the new entry with `before.values` and `before.keys` (the changed fields, a literal list).
 * Prints the database's CPU (bench/db-cpu.ts) and the wall time per update. Bench only.
 */
import { MongoMemoryServer } from 'mongodb-memory-server';
import { MongoClient, ObjectId, type Document } from 'mongodb';
import { loadavg } from 'node:os';
import { dbCpuMeter } from './db-cpu.ts';
import { outboxInWrite } from '../plugins/events/known.ts';
import type { OutboxEntry } from '../plugins/events/public/outbox.ts';

const UPDATES = Number(process.env.BENCH_UPDATES ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const IN_FLIGHT = 10;
const log = (s: string) => process.stdout.write(`${s}\n`);
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
const mem = process.env.MONGODB_URI ? null : await MongoMemoryServer.create();
const uri = process.env.MONGODB_URI ?? mem!.getUri();
const client = await new MongoClient(uri).connect();
const db = client.db('upbench');
const meter = dbCpuMeter(uri, 100);
const tenant = new ObjectId();
const actor = new ObjectId();

const entryOf = (version: number) => ({
  id: `evt_${String(new ObjectId())}`, type: 'projects.updated', tenant_id: tenant, created_at: new Date(), actor: String(actor), request_id: crypto.randomUUID(), version,
  meta: { resource: 'projects', ip: '127.0.0.1', bulk: false, replace: false, audit: { operation: 'update', resource: 'projects', actor_name: 'Bench', ip: '127.0.0.1' } },
});
const HIDDEN = ['_outbox', '_draft', '_published'];
const VIEW = { $arrayToObject: { $filter: { input: { $objectToArray: '$$ROOT' }, as: 'f', cond: { $not: [{ $in: ['$$f.k', HIDDEN] }] } } } };
const KEYS = ['budget', 'updated_at', 'updated_by', 'version'];

type Entry = ReturnType<typeof entryOf>;
type Form = (version: number, knownId: string, entry: Entry) => Document | Document[];
const literals = (version: number) => ({ budget: { $literal: version }, updated_at: { $literal: new Date() }, updated_by: { $literal: actor }, version: { $literal: version + 1 } });
const values = Object.fromEntries(KEYS.map((k) => [k, `$${k}`]));
const forms: Record<string, Form> = {
  operators: (version, _known, entry) => ({ $set: { budget: version, updated_at: new Date(), updated_by: actor }, $inc: { version: 1 }, $push: { _outbox: { $each: [entry], $slice: -4 } } }),
  'values+keys': (version, _known, entry) => [
    { $set: { _outbox: { $concatArrays: [{ $slice: [{ $ifNull: ['$_outbox', []] }, -3] }, [{ $mergeObjects: [{ $literal: entry }, { before: { values, keys: { $literal: KEYS } } }] }]] } } },
    { $set: literals(version) },
  ],
  'values+absent': (version, _known, entry) => [
    { $set: { _outbox: { $concatArrays: [{ $slice: [{ $ifNull: ['$_outbox', []] }, -3] }, [{ $mergeObjects: [{ $literal: entry }, { before: { values, absent: { $concatArrays: KEYS.map((k) => ({ $cond: [{ $eq: [{ $type: `$${k}` }, 'missing'] }, [k], []] })) } } }] }]] } } },
    { $set: literals(version) },
  ],
  // The app's own expression, from the events plugin (what `outbox.inWrite` gives the update).
  app: (version, knownId, entry) => [
    { $set: { _outbox: outboxInWrite(null as never, entry as unknown as OutboxEntry, VIEW, { ids: [knownId], before: Date.now() - 600_000 }, KEYS).expression } },
    { $set: literals(version) },
  ],
};

const names = Object.keys(forms);
const docsPer = IN_FLIGHT * 50;
/** Per form: its documents, their current versions and the id of each one's entry (known to be relayed). */
const state = new Map<string, { ids: ObjectId[]; version: Map<string, number>; entry: Map<string, string> }>();
for (const name of names) {
  const col = db.collection(`p_${name.replace(/\W/g, '_')}`);
  await col.deleteMany({});
  await col.createIndex({ tenant_id: 1, is_deleted: 1, created_at: -1, _id: -1 });
  const now = new Date();
  const docs = Array.from({ length: docsPer }, (_, i) => {
    const e = entryOf(1);
    return {
      _id: new ObjectId(), name: `Project ${i}`, description: null, status: 'active', tags: ['x'], budget: 1, owner_email: null, tenant_id: tenant,
      created_at: now, updated_at: now, created_by: actor, updated_by: actor, is_deleted: false, deleted_at: null, deleted_by: null, version: 1, _published: true, _draft: null, _outbox: [e],
    };
  });
  await col.insertMany(docs);
  state.set(name, { ids: docs.map((d) => d._id), version: new Map(docs.map((d) => [String(d._id), 1])), entry: new Map(docs.map((d) => [String(d._id), d._outbox[0]!.id])) });
}

const results = new Map<string, { db: number[]; ms: number[] }>(names.map((n) => [n, { db: [], ms: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  const order = names.map((_, i) => names[(i + round) % names.length]!);
  for (const name of order) {
    const col = db.collection(`p_${name.replace(/\W/g, '_')}`);
    const s = state.get(name)!;
    let next = 0;
    const d0 = meter.micros();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (next < UPDATES) {
        const id = s.ids[next++ % s.ids.length]!;
        const key = String(id);
        const v = s.version.get(key)!;
        const entry = entryOf(v + 1);
        const update = forms[name]!(v, s.entry.get(key)!, entry);
        const before = await col.findOneAndUpdate({ _id: id, tenant_id: tenant, is_deleted: false, _published: { $ne: false }, version: v }, update, { returnDocument: 'before' });
        if (!before) throw new Error(`${name}: no document at version ${v}`);
        s.version.set(key, v + 1);
        // Relayed at once: the next update of the document knows this entry is in the log.
        s.entry.set(key, entry.id);
      }
    }));
    const ms = performance.now() - t0;
    const d1 = meter.micros();
    const r = results.get(name)!;
    r.db.push(d0 !== null && d1 !== null ? (d1 - d0) / UPDATES : NaN);
    r.ms.push((ms * 1000) / UPDATES);
  }
  log(`round ${round + 1}/${ROUNDS} (load ${load()}): ${names.map((n) => `${n} ${results.get(n)!.db.at(-1)!.toFixed(0)} µs db, ${results.get(n)!.ms.at(-1)!.toFixed(0)} µs wall`).join('; ')}`);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
log(`\nmedian per update (database CPU, wall time / update at ${IN_FLIGHT} in flight):`);
for (const n of names) log(`  ${n.padEnd(14)} ${median(results.get(n)!.db).toFixed(0).padStart(5)} µs db  ${median(results.get(n)!.ms).toFixed(0).padStart(5)} µs wall`);
meter.stop();
await client.close();
await mem?.stop();
