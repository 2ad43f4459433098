import type { Origin } from '../helpers/command-log.ts';

/**
 * Queries on tenant-scoped collections that do not carry `tenant_id`, on purpose: on a cluster
 * sharded by tenant each of them goes to every shard (scatter-gather), unless it is a lookup by a
 * unique key that a secondary index could route. An entry matches on every field it gives:
 * `origin` (who caused it, see test/helpers/command-log.ts), `collection`, `op` (the driver's
 * command name) and `shape` (the filter's field names, sorted). docs/operations.md ("Sharding")
 * sums up what they cost.
 */
export interface AllowedQuery {
  origin?: Origin;
  collection?: string;
  op?: string;
  shape?: string;
  reason: string;
}

export const ALLOWED_CROSS_TENANT: AllowedQuery[] = [
  // --- whole categories --------------------------------------------------------------------
  {
    origin: 'system-request',
    reason: 'The bootstrap administrator (system scope) lists, reads and changes documents of every tenant: the admin API is cross-tenant by design.',
  },
  {
    origin: 'background',
    reason: 'Outside a request: start-up (index builds, bootstrap), jobs (retention purges, queue polls, sweeps) and the event log work across tenants.',
  },

  // --- requests of a tenant's user: lookups by a unique key ----------------------------------
  { origin: 'request', collection: 'api_keys', op: 'find', shape: 'key_hash,revoked_at', reason: 'Authentication: the API key is found by its hash before the tenant is known (unique key).' },
  { origin: 'request', collection: 'api_keys', op: 'update', shape: 'key_hash', reason: 'Authentication: last-used stamp by the key hash (unique key).' },
  { origin: 'request', collection: 'api_keys', op: 'update', shape: '_id', reason: 'Authentication: last-used stamp of the key just found, by _id (unique key).' },
  { origin: 'request', collection: 'api_keys', op: 'find', shape: '_id,revoked_at', reason: 'A key by id, after the service checked the actor may see it (unique key).' },
  { origin: 'request', collection: 'api_keys', op: 'update', shape: 'revoked_at,user_id', reason: 'Revoking the keys of one user (a user belongs to one tenant; user_id implies it).' },
  { origin: 'request', collection: 'users', op: 'find', shape: '_id,is_active,is_deleted', reason: 'Authentication: the user behind a key or token, by _id (unique key), before the tenant is known.' },

  // --- requests of system administrators (their own keys, not the bootstrap key) -------------
  // The recorder cannot tell a system administrator's key from a tenant user's; these shapes are
  // the services' system-scope branches (tenancy.filter gives no tenant term for system scope) and
  // the single-tenant deployment (MULTI_TENANT_ENABLED=false: no tenant term anywhere).
  { origin: 'request', collection: 'projects', op: 'find', shape: 'is_deleted', reason: 'System scope or single-tenant deployment: list across tenants.' },
  { origin: 'request', collection: 'projects', op: 'aggregate', shape: 'is_deleted', reason: 'System scope or single-tenant deployment: count across tenants.' },
  { origin: 'request', collection: 'projects', op: 'find', shape: '_id,is_deleted', reason: 'System scope or single-tenant deployment: one document by _id.' },
  { origin: 'request', collection: 'projects', op: 'findAndModify', shape: '_id,is_deleted,version', reason: 'System scope or single-tenant deployment: update by _id.' },
  { origin: 'request', collection: 'tasks', op: 'aggregate', shape: 'is_deleted,project_id', reason: 'System scope or single-tenant deployment: children of one parent (cascade check).' },
];
