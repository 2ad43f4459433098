import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import type { CollectionRecord, CommandRecord, LogRecord } from '../helpers/command-log.ts';
import { ALLOWED_CROSS_TENANT, ALLOWED_UNINDEXED, type AllowedQuery } from './allowlist.ts';

/** What the check found; empty lists = ready for a cluster sharded by tenant. */
export interface ShardingReport {
  /** Queries on tenant-scoped collections without `tenant_id`, not on the allowlist. */
  crossTenant: CommandRecord[];
  /** Queries with `tenant_id` on a collection that has no index led by `tenant_id`. */
  unindexed: CommandRecord[];
  tenantScoped: string[];
}

export function readRecords(dir: string): LogRecord[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as LogRecord));
}

export const allowed = (c: CommandRecord, list: readonly AllowedQuery[] = ALLOWED_CROSS_TENANT) =>
  list.some(
    (a) =>
      (a.origin ?? c.origin) === c.origin && (a.collection ?? c.collection) === c.collection && (a.op ?? c.op) === c.op &&
      (a.shape === undefined || (typeof a.shape === 'string' ? a.shape === c.shape : a.shape.test(c.shape))),
  );

/**
 * Decides from the records alone: `collections` (from the models' schemas) says which are
 * tenant-scoped and which indexes they declare; `extraIndexes` adds indexes found in the databases.
 */
export function analyse(records: LogRecord[], extraIndexes: Map<string, string[][]> = new Map(), list: readonly AllowedQuery[] = ALLOWED_CROSS_TENANT): ShardingReport {
  const collections = new Map<string, CollectionRecord>();
  for (const r of records) if (r.kind === 'collection') collections.set(r.collection, { ...r, indexes: [...(collections.get(r.collection)?.indexes ?? []), ...r.indexes] });
  const tenantScoped = [...collections.values()].filter((c) => c.tenantScoped).map((c) => c.collection).sort();
  const commands = uniq(records.filter((r): r is CommandRecord => r.kind === 'command' && tenantScoped.includes(r.collection)));
  // A request of a tenant's user (or without a credential) must name the tenant; system-scope
  // requests and background work (jobs, sweeps, start-up) are cross-tenant by design, and listed.
  const tenantLed = (name: string) => [...(collections.get(name)?.indexes ?? []), ...(extraIndexes.get(name) ?? [])].some((keys) => keys[0] === 'tenant_id');
  return {
    tenantScoped,
    crossTenant: commands.filter((c) => !c.tenant && !allowed(c, list)),
    unindexed: commands.filter((c) => c.tenant && !tenantLed(c.collection) && !allowed(c, ALLOWED_UNINDEXED)),
  };
}

function uniq(list: CommandRecord[]): CommandRecord[] {
  const out = new Map<string, CommandRecord>();
  for (const c of list) out.set(`${c.collection}|${c.op}|${c.shape}|${c.tenant}|${c.origin}`, c);
  return [...out.values()].sort((a, b) => `${a.collection}${a.op}${a.shape}`.localeCompare(`${b.collection}${b.op}${b.shape}`));
}

/** Indexes of every collection in the run's test databases (`t_…`), by collection name. */
async function databaseIndexes(uri: string): Promise<Map<string, string[][]>> {
  const out = new Map<string, string[][]>();
  const client = await MongoClient.connect(uri);
  try {
    const { databases } = await client.db().admin().listDatabases({ nameOnly: true });
    for (const { name } of databases.filter((d) => d.name.startsWith('t_'))) {
      for (const c of await client.db(name).listCollections({}, { nameOnly: true }).toArray()) {
        const idx = await client.db(name).collection(c.name).listIndexes().toArray().catch(() => []);
        out.set(c.name, [...(out.get(c.name) ?? []), ...idx.map((i) => Object.keys(i.key as object))]);
      }
    }
  } finally {
    await client.close();
  }
  return out;
}

const line = (c: CommandRecord) => `  ${c.collection} ${c.op} {${c.shape}} ${c.origin}  (first seen in ${c.file})`;

/** The global teardown's check: throws with every finding, so the run fails. */
export async function checkSharding(dir: string, uri: string): Promise<void> {
  const records = readRecords(dir);
  if (!records.length) return;
  const report = analyse(records, await databaseIndexes(uri));
  const problems: string[] = [];
  if (report.crossTenant.length) {
    problems.push(
      `Queries on tenant-scoped collections without tenant_id (add the tenant to the filter, or list the query with a reason in test/sharding/allowlist.ts):\n${report.crossTenant.map(line).join('\n')}`,
    );
  }
  if (report.unindexed.length) problems.push(`Queries by tenant on a collection with no index led by tenant_id:\n${report.unindexed.map(line).join('\n')}`);
  if (problems.length) throw new Error(`Sharding check failed.\n${problems.join('\n')}`);
}
