import { AsyncLocalStorage } from 'node:async_hooks';
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { CommandStartedEvent, Document } from 'mongodb';
import type { Connection } from 'mongoose';

/**
 * Command recording for the sharding check (test/sharding/check.ts, run by the global teardown):
 * every query-bearing command a test app sends is reduced to its collection, operation and filter
 * shape (field names only, no values) and appended, once per distinct shape, to a file of this
 * worker under the run's directory. The models' collections (tenant-scoped or not, their indexes
 * as declared) are recorded beside them.
 */
export interface CommandRecord {
  kind: 'command';
  collection: string;
  op: string;
  /** Field names of the filter, sorted; `$or[a|b]` for alternatives. */
  shape: string;
  /** Whether every document the filter can match is confined to one tenant_id. */
  tenant: boolean;
  /**
   * Who caused it: a request with the bootstrap administrator's key (system scope), another
   * request (a tenant's user, or no credential), or no request at all (start-up, jobs, timers);
   * `single-tenant` for any command of an app with MULTI_TENANT_ENABLED=false (no tenant term by design).
   */
  origin: Origin;
  file: string;
}
export type Origin = 'system-request' | 'request' | 'background' | 'single-tenant';

/** The origin of the request being handled, set by the test app's first middleware (see `tagRequests`). */
const origin = new AsyncLocalStorage<Origin>();

/**
 * Koa middleware, mounted first on a test app: tags the request's async context with its origin,
 * which the command monitor reads (commands are started in the context of the code that awaits them).
 */
export const tagRequests = (adminKey: string) => (ctx: { get(h: string): string }, next: () => Promise<unknown>) =>
  origin.run(ctx.get('X-API-Key') === adminKey ? 'system-request' : 'request', next);
export interface CollectionRecord {
  kind: 'collection';
  collection: string;
  tenantScoped: boolean;
  indexes: string[][];
}
export type LogRecord = CommandRecord | CollectionRecord;

/** The query-bearing commands and where each keeps its filters. */
const FILTERS: Record<string, (cmd: Document) => Document[]> = {
  find: (c) => [c.filter ?? {}],
  count: (c) => [c.query ?? {}],
  distinct: (c) => [c.query ?? {}],
  findAndModify: (c) => [c.query ?? {}],
  update: (c) => (c.updates ?? []).map((u: Document) => u.q ?? {}),
  delete: (c) => (c.deletes ?? []).map((d: Document) => d.q ?? {}),
  aggregate: (c) => [firstMatch(c.pipeline)],
};

function firstMatch(pipeline: Document[] | undefined): Document {
  const stage = pipeline?.[0];
  return stage && '$match' in stage ? (stage.$match as Document) : {};
}

/** Field names of a filter, sorted, operators folded in: `{ tenant_id, $or: [{a}, {b}] }` → `$or[a|b],tenant_id`. */
export function filterShape(filter: Document): string {
  return Object.keys(filter)
    .sort()
    .map((k) => (k === '$or' || k === '$and' || k === '$nor' ? `${k}[${(filter[k] as Document[]).map(filterShape).join('|')}]` : k))
    .join(',');
}

/** True when the filter pins `tenant_id` (directly, in one `$and` branch, or in every `$or` branch). */
export function carriesTenant(filter: Document): boolean {
  if ('tenant_id' in filter && filter.tenant_id !== undefined) return true;
  if (Array.isArray(filter.$and) && filter.$and.some((f: Document) => carriesTenant(f))) return true;
  return Array.isArray(filter.$or) && filter.$or.length > 0 && filter.$or.every((f: Document) => carriesTenant(f));
}

/**
 * A recorder for one test app: pass it as `onDatabaseCommand` to createApp, and call `collections`
 * with the app's connection once its models exist.
 */
export function commandRecorder(dir: string, testFile: () => string) {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `worker-${process.pid}.jsonl`);
  const seen = new Set<string>();
  const write = (r: LogRecord, key: string) => {
    if (seen.has(key)) return;
    seen.add(key);
    appendFileSync(file, `${JSON.stringify(r)}\n`);
  };
  return {
    onCommand(event: CommandStartedEvent, multiTenant = true) {
      const filtersOf = FILTERS[event.commandName];
      if (!filtersOf) return;
      const collection = String(event.command[event.commandName]);
      for (const filter of filtersOf(event.command)) {
        const shape = filterShape(filter);
        const rec: CommandRecord = {
          kind: 'command', collection, op: event.commandName, shape, tenant: carriesTenant(filter), origin: multiTenant ? (origin.getStore() ?? 'background') : 'single-tenant', file: testFile(),
        };
        write(rec, `c|${collection}|${rec.op}|${shape}|${rec.tenant}|${rec.origin}`);
      }
    },
    collections(conn: Connection) {
      for (const model of Object.values(conn.models)) {
        const indexes = model.schema.indexes().map(([keys]) => Object.keys(keys));
        const rec: CollectionRecord = { kind: 'collection', collection: model.collection.collectionName, tenantScoped: !!model.schema.path('tenant_id'), indexes };
        write(rec, `m|${rec.collection}|${JSON.stringify(indexes)}`);
      }
    },
  };
}
