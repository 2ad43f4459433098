import type { Origin } from '../helpers/command-log.ts';

/**
 * Queries on tenant-scoped collections that do not carry `tenant_id`, on purpose: on a cluster
 * sharded by tenant each of them goes to every shard (scatter-gather), unless the collection stays
 * unsharded. An entry matches on every field it gives: `origin` (who caused it, see
 * test/helpers/command-log.ts), `collection`, `op` (the driver's command name) and `shape` (the
 * filter's field names, sorted, as recorded; a RegExp matches a family of shapes).
 * docs/operations.md ("Sharding") sums up what they cost.
 */
export interface AllowedQuery {
  origin?: Origin;
  collection?: string;
  op?: string;
  shape?: string | RegExp;
  reason: string;
}

/** A shape naming `_id` at its top level. */
const BY_ID = /(^|,)_id(,|$)/;

export const ALLOWED_CROSS_TENANT: AllowedQuery[] = [
  // --- whole categories --------------------------------------------------------------------
  {
    origin: 'system-request',
    reason: 'The bootstrap administrator (system scope) lists, reads and changes documents of every tenant: the admin API is cross-tenant by design.',
  },
  {
    origin: 'background',
    reason: 'Outside a request: start-up (index builds, bootstrap), jobs (retention purges, queue polls, sweeps, erasures) and the event log work across tenants.',
  },
  {
    origin: 'single-tenant',
    reason: 'MULTI_TENANT_ENABLED=false: a single-tenant deployment has no tenant term in any filter (core/tenancy.ts).',
  },
  {
    origin: 'request', shape: BY_ID,
    reason:
      'By _id: a document the service already read inside the actor\'s tenant, then written by its id (read-then-write, compare-and-set on status or version), or a lookup by a unique id. ' +
      'On a sharded collection each is a broadcast (or a two-phase write without the shard key): add tenant_id to these filters before sharding the collection (docs/operations.md).',
  },

  // --- requests: keys that belong to one tenant -----------------------------------------------
  { origin: 'request', collection: 'api_keys', shape: /^(key_hash|key_hash,revoked_at|revoked_at,user_id)$/, reason: 'Authentication finds a key by its hash before the tenant is known; revoking by user (a user is in one tenant). api_keys stays unsharded.' },
  { origin: 'request', collection: 'users', shape: 'email,is_active,is_deleted', reason: 'Passkey sign-in finds the user by email before the tenant is known. users stays unsharded.' },
  { origin: 'request', collection: 'invitations', shape: 'token_hash', reason: "Accepting an invitation finds it by its link's token (unique) before the tenant is known: one document, by a unique index. invitations stays unsharded." },
  { origin: 'request', collection: 'users', shape: /^\$or\[person_id\|_id,person_id\](,is_active)?,is_deleted$/, reason: "A person's memberships span tenants (GET /auth/me, a passkey sign-in choosing its tenant): found by person_id. users stays unsharded." },
  { origin: 'request', collection: 'webauthn_credentials', shape: /^(credential_id|disabled_at,user_id|user_id|credential_id,user_id)$/, reason: 'Passkeys of one person (its memberships\' user ids, across tenants), and at sign-in the one credential presented (its id is globally unique, by a unique index): it names the tenant. webauthn_credentials stays unsharded.' },
  { origin: 'request', collection: 'privacy_consents', shape: /(^|,)user_id(,|$)/, reason: 'Consents of one user (a user is in one tenant); the service checked the actor may act on that user.' },
  { origin: 'request', collection: 'privacy_erasure_requests', shape: 'open,user_id', reason: 'The open erasure request of one user (a user is in one tenant).' },
  { origin: 'request', collection: 'privacy_erasure_items', shape: /(^|,)request_id(,|$)/, reason: 'Items of one erasure request (in one tenant), run as the system actor inside the execute request.' },
  { origin: 'request', collection: 'audit_log', op: 'find', shape: /^\$or\[user_id(\|item_id,resource)*\]$/, reason: 'Erasure: entries about one user and their documents (one tenant), run as the system actor inside the execute request.' },
  { origin: 'request', collection: 'payment_refunds', shape: 'payment_id', reason: 'Refunds of one payment (in one tenant), after the payment was read inside the actor\'s tenant.' },
  { origin: 'request', collection: 'payments', shape: 'is_deleted,provider,provider_reference', reason: 'A provider webhook names a payment by its provider reference (unique) before the tenant is known.' },
  { origin: 'request', collection: 'job_runs', shape: /^parent_job_id(,status)?$/, reason: 'Children of one run (in one tenant, or a system fan-out\'s across tenants), after the parent was read inside the actor\'s tenant; also read by a coordinating run that Agenda starts in the async context of the request that triggered it (timing-dependent, so seen in some runs only).' },
  { origin: 'request', collection: 'job_schedules', op: 'find', shape: 'dependency_unmet,depends_on_schedules,is_enabled', reason: 'Schedules waiting on the one whose run just ended, found by its id in their dependency lists. job_schedules stays unsharded (small).' },
  { origin: 'request', collection: 'pd_credentials', shape: 'user_id', reason: 'Test fixture (test/fixtures/privacy-data-plugin.ts): personal data of one user, found by the erasure as the system actor.' },
  { origin: 'request', collection: 'pd_notes', shape: /author_id/, reason: 'Test fixture (test/fixtures/privacy-data-plugin.ts): personal data of one user, found by the erasure as the system actor.' },
  { origin: 'request', collection: 'job_runs', op: 'aggregate', shape: 'status', reason: 'The /metrics scrape counts pending and running runs of every tenant (an operator\'s gauge), once per scrape, over the status index.' },
  { origin: 'request', collection: 'events', op: 'find', shape: '', reason: 'The /metrics scrape reads the newest event of the whole log for consumer lag (an operator\'s gauge), once per scrape, over the committed_at index.' },
  { origin: 'request', collection: 'shared_notes', op: 'update', shape: '_outbox', reason: 'Test fixture (test/privacy/declarations.test.ts): a resource with tenant_scoped: false, whose documents belong to no tenant; erasure scrubs the subject\'s name from the outbox entries left in them.' },
  { origin: 'request', collection: 'projects', shape: /^(\$or\[owner_email\],created_by|created_by)$/, reason: 'Erasure: documents of one user (one tenant), found as the system actor.' },
];

/** Queries by tenant on collections without an index led by `tenant_id`, with the reason. */
export const ALLOWED_UNINDEXED: AllowedQuery[] = [
  { collection: 'pd_credentials', reason: 'Test fixture collection (test/fixtures/privacy-data-plugin.ts) with a handful of documents.' },
  { collection: 'pd_notes', reason: 'Test fixture collection (test/fixtures/privacy-data-plugin.ts) with a handful of documents.' },
  { collection: 'pd_gated', reason: 'Test fixture collection (test/fixtures/privacy-data-plugin.ts) with a handful of documents.' },
  { collection: 'ew_notes', reason: 'Test fixture collection (test/fixtures/event-writer-plugin.ts) with a handful of documents.' },
];
