/**
 * Purges take their tenant scope from the actor they are given, as
 * every other service call: `systemActor(A)` purges tenant A only, `systemActor()` every tenant, a
 * tenant-A user (administrator or not) is refused and nothing is deleted. Covered: audit entries
 * (`AuditService.purge`), soft-deleted documents (`resources.purgeSoftDeleted` and one
 * `ResourceService.purgeSoftDeleted`), finished job runs (`JobsService.purgeRuns`) and dead API
 * keys (`identity.purgeDeadApiKeys`); outside any request, through `DELETE /admin/audit-log/retention`
 * with and without `X-Tenant-Id`, and through the four purge jobs run for one tenant (their
 * `ctx.actor` is `systemActor(tenant)`). Documents are written through the API; only ages are
 * backdated in the collections, and audit entries and runs are inserted with their old dates.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { FAST, waitRun } from '../jobs/helpers.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { requestOf, systemActor, type Actor } from '../../core/context.ts';
import { AccessDeniedError } from '../../core/errors.ts';
import type { AuditService } from '../../plugins/audit/service.ts';
import type { JobsService } from '../../plugins/jobs/service.ts';

const DAY = 86_400_000;
const DAYS = 30;
const ago = (days: number) => new Date(Date.now() - days * DAY);

type Label = 'A' | 'B' | 'none';
type Kind = 'audit' | 'docs' | 'runs' | 'keys';
const COLLECTION: Record<Kind, string> = { audit: 'audit_log', docs: 'projects', runs: 'job_runs', keys: 'api_keys' };
type Side = Awaited<ReturnType<typeof createTenantUser>> & { admin: Actor; plain: Actor };

let t: TestApp;
let A: Side;
let B: Side;

const col = (name: string) => t.app.db.conn.collection(name);
const audit = () => t.app.services.get('audit') as AuditService;
const resources = () => t.app.services.get('resources');
const jobs = () => t.app.services.get('jobs') as JobsService;
const identity = () => t.app.services.get('identity');

/** What one seeding wrote: old items per tenant (what purges may delete), and items no purge may touch. */
interface World {
  old: Record<Kind, Record<Label, Types.ObjectId[]>>;
  kept: Record<Kind, Types.ObjectId[]>;
}

async function me(key: string): Promise<Actor> {
  const res = await t.http('GET', '/auth/me', { key });
  expect(res.status).toBe(200);
  return res.body as Actor;
}

async function side(): Promise<Side> {
  const admin = await createTenantUser(t, { roles: ['admin'], features: ['tasks'] });
  const plain = await createTenantUser(t, { tenantId: admin.tenantId, roles: ['user'] });
  return { ...admin, admin: await me(admin.key), plain: await me(plain.key) };
}

const oidOf = (label: Label) => (label === 'none' ? null : new Types.ObjectId(label === 'A' ? A.tenantId : B.tenantId));

/** Per tenant: 2 old audit entries, 2 old soft-deleted projects, 2 old finished runs, 2 dead keys; plus recent ones that stay. */
async function seed(): Promise<World> {
  const w: World = {
    old: { audit: { A: [], B: [], none: [] }, docs: { A: [], B: [], none: [] }, runs: { A: [], B: [], none: [] }, keys: { A: [], B: [], none: [] } },
    kept: { audit: [], docs: [], runs: [], keys: [] },
  };
  for (const label of ['A', 'B', 'none'] as const) {
    const tenant_id = oidOf(label);
    // Audit entries, with their created_at (the audit API writes only "now").
    const entry = (days: number) => ({
      resource: 'purge-test', item_id: new Types.ObjectId(), operation: 'insert', user_id: null, user_name: null, ip: null,
      changes: null, snapshot: null, tenant_id, created_at: ago(days),
    });
    const [a100, a40, a1] = Object.values((await col('audit_log').insertMany([entry(100), entry(40), entry(1)])).insertedIds);
    w.old.audit[label].push(a100!, a40!);
    w.kept.audit.push(a1!);
    // Job runs: finished and old (purged); unfinished and old, or finished and recent (kept). Running, not
    // pending: the engine's sweeper re-queues old pending runs.
    const run = (status: string, days: number) => ({
      job_name: 'purge-test', job_type: 'manual', parameters: {}, attempt: 1, max_attempts: 1, timeout_seconds: 1, retry_delay_ms: 0, logs: [],
      status, tenant_id, created_at: ago(days),
    });
    const runs = Object.values((await col('job_runs').insertMany([run('completed', 100), run('failed', 40), run('running', 100), run('completed', 1)])).insertedIds);
    w.old.runs[label].push(runs[0]!, runs[1]!);
    w.kept.runs.push(runs[2]!, runs[3]!);
    if (label === 'none') continue;
    const s = label === 'A' ? A : B;
    // Projects through the API: soft-deleted long ago (purged), soft-deleted now and live (kept).
    const project = async (deletedDaysAgo?: number) => {
      const res = await t.http('POST', '/projects', { key: s.key, json: { name: `p-${label}` } });
      expect(res.status).toBe(201);
      const id = new Types.ObjectId(res.body._id as string);
      if (deletedDaysAgo !== undefined) {
        expect((await t.http('DELETE', `/projects/${id}`, { key: s.key, headers: { 'If-Match': '"1"' } })).status).toBe(204);
        if (deletedDaysAgo > 0) await col('projects').updateOne({ _id: id }, { $set: { deleted_at: ago(deletedDaysAgo) } });
      }
      return id;
    };
    w.old.docs[label].push(await project(100), await project(40));
    w.kept.docs.push(await project(0), await project());
    // API keys through the admin API: revoked long ago, and of a user deleted long ago (purged); revoked now (kept).
    const revokedLongAgo = await createTenantUser(t, { tenantId: s.tenantId });
    expect((await t.http('DELETE', `/admin/api-keys/${revokedLongAgo.keyId}`)).status).toBe(200);
    await col('api_keys').updateOne({ _id: new Types.ObjectId(revokedLongAgo.keyId) }, { $set: { revoked_at: ago(100) } });
    const deletedUser = await createTenantUser(t, { tenantId: s.tenantId });
    expect((await t.http('DELETE', `/admin/users/${deletedUser.userId}`)).status).toBe(204);
    await col('users').updateOne({ _id: new Types.ObjectId(deletedUser.userId) }, { $set: { deleted_at: ago(100) } });
    const revokedNow = await createTenantUser(t, { tenantId: s.tenantId });
    expect((await t.http('DELETE', `/admin/api-keys/${revokedNow.keyId}`)).status).toBe(200);
    w.old.keys[label].push(new Types.ObjectId(revokedLongAgo.keyId), new Types.ObjectId(deletedUser.keyId));
    w.kept.keys.push(new Types.ObjectId(revokedNow.keyId), new Types.ObjectId(s.keyId));
  }
  await audit().flush();
  return w;
}

/** How many of the old items of `kind` are still stored, per tenant. */
async function left(w: World, kind: Kind): Promise<Record<Label, number>> {
  const count = (ids: Types.ObjectId[]) => col(COLLECTION[kind]).countDocuments({ _id: { $in: ids } });
  return { A: await count(w.old[kind].A), B: await count(w.old[kind].B), none: await count(w.old[kind].none) };
}
const ALL = { A: 2, B: 2, none: 2 };
const TENANT_ONLY = { A: 2, B: 2, none: 0 };
const full = (kind: Kind) => (kind === 'docs' || kind === 'keys' ? TENANT_ONLY : ALL);

/** Every item no purge may delete is still there. */
async function expectKept(w: World) {
  for (const kind of Object.keys(w.kept) as Kind[]) {
    expect(await col(COLLECTION[kind]).countDocuments({ _id: { $in: w.kept[kind] } }), kind).toBe(w.kept[kind].length);
  }
}

/** Every purge of this file, as one actor. */
const purges: Record<Kind, (actor: Actor) => Promise<unknown>> = {
  audit: (actor) => audit().purge(actor, DAYS),
  docs: (actor) => resources().purgeSoftDeleted(actor, DAYS),
  runs: (actor) => jobs().purgeRuns(actor, DAYS),
  keys: (actor) => identity().purgeDeadApiKeys(actor, ago(DAYS)),
};

let w: World;
let previous: World | undefined;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, jobsPlugin], config: FAST });
  A = await side();
  B = await side();
});
afterAll(() => t?.close());
beforeEach(async () => {
  // What the previous test left of its old items goes, so each test counts its own seeding only.
  if (previous) for (const kind of Object.keys(COLLECTION) as Kind[]) await col(COLLECTION[kind]).deleteMany({ _id: { $in: Object.values(previous.old[kind]).flat() } });
  w = previous = await seed();
  for (const kind of Object.keys(COLLECTION) as Kind[]) expect(await left(w, kind)).toEqual(full(kind));
});

describe('systemActor(A) outside any request purges tenant A only', () => {
  it('runs outside a request context (the premise of this file)', () => {
    expect(requestOf(systemActor(A.tenantId))).toBeUndefined();
    expect(requestOf(A.admin)).toBeUndefined();
  });

  it('audit: A old entries deleted; B and tenantless entries stay', async () => {
    const res = await audit().purge(systemActor(A.tenantId), DAYS);
    expect(res.deleted_count).toBe(2);
    expect(await left(w, 'audit')).toEqual({ A: 0, B: 2, none: 2 });
    await expectKept(w);
  });

  it('resources service: A soft-deleted documents deleted; B documents stay', async () => {
    const res = await resources().purgeSoftDeleted(systemActor(A.tenantId), DAYS);
    expect(res).toMatchObject({ deleted_count: 2, resources: { projects: 2, tasks: 0 } });
    expect(await left(w, 'docs')).toEqual({ A: 0, B: 2, none: 0 });
    await expectKept(w);
  });

  it('one ResourceService: A soft-deleted projects deleted; B projects stay', async () => {
    const res = await resources().get('projects')!.purgeSoftDeleted(systemActor(A.tenantId), DAYS);
    expect(res).toMatchObject({ resource: 'projects', deleted_count: 2 });
    expect(await left(w, 'docs')).toEqual({ A: 0, B: 2, none: 0 });
    await expectKept(w);
  });

  it('job runs: A finished runs deleted; B and tenantless runs stay', async () => {
    const res = await jobs().purgeRuns(systemActor(A.tenantId), DAYS);
    expect(res.deleted_count).toBe(2);
    expect(await left(w, 'runs')).toEqual({ A: 0, B: 2, none: 2 });
    await expectKept(w);
  });

  it('dead API keys: A keys deleted; B keys stay', async () => {
    const res = await identity().purgeDeadApiKeys(systemActor(A.tenantId), ago(DAYS));
    expect(res).toEqual({ revoked_keys_deleted: 1, deleted_user_keys_deleted: 1 });
    expect(await left(w, 'keys')).toEqual({ A: 0, B: 2, none: 0 });
    await expectKept(w);
  });
});

describe('a tenant-A user outside any request is refused', () => {
  it('an administrator, a plain user and a user with a forged acting tenant: AccessDeniedError from every purge, nothing deleted', async () => {
    const actors: [string, Actor][] = [
      ['tenant admin', A.admin],
      ['plain user', A.plain],
      ['forged acting tenant', { ...A.admin, acting_tenant_id: B.tenantId }],
      ['forged acting tenant, all tenants', { ...A.admin, acting_tenant_id: null }],
    ];
    for (const [who, actor] of actors) {
      for (const kind of Object.keys(purges) as Kind[]) {
        await expect(purges[kind](actor), `${who}: ${kind}`).rejects.toBeInstanceOf(AccessDeniedError);
      }
      await expect(resources().get('projects')!.purgeSoftDeleted(actor, DAYS), who).rejects.toBeInstanceOf(AccessDeniedError);
    }
    for (const kind of Object.keys(COLLECTION) as Kind[]) expect(await left(w, kind), kind).toEqual(full(kind));
    await expectKept(w);
  });
});

describe('systemActor() outside any request purges every tenant', () => {
  it.each(Object.keys(COLLECTION) as Kind[])('%s: the old items of A, B and without tenant deleted; recent ones stay', async (kind) => {
    await purges[kind](systemActor());
    expect(await left(w, kind)).toEqual({ A: 0, B: 0, none: 0 });
    // The other kinds were not touched.
    for (const other of (Object.keys(COLLECTION) as Kind[]).filter((k) => k !== kind)) expect(await left(w, other), other).toEqual(full(other));
    await expectKept(w);
  });
});

describe('through HTTP: DELETE /admin/audit-log/retention passes its actor', () => {
  it('a system administrator with X-Tenant-Id: A deletes A entries only', async () => {
    const res = await t.http('DELETE', `/admin/audit-log/retention?older_than_days=${DAYS}`, { headers: { 'X-Tenant-Id': A.tenantId } });
    expect(res.status).toBe(200);
    expect(res.body.deleted_count).toBe(2);
    expect(await left(w, 'audit')).toEqual({ A: 0, B: 2, none: 2 });
    await expectKept(w);
  });

  it('a system administrator without X-Tenant-Id deletes in every tenant (unchanged)', async () => {
    const res = await t.http('DELETE', `/admin/audit-log/retention?older_than_days=${DAYS}`);
    expect(res.status).toBe(200);
    expect(res.body.deleted_count).toBe(6);
    expect(await left(w, 'audit')).toEqual({ A: 0, B: 0, none: 0 });
    await expectKept(w);
  });

  it('a tenant administrator of A: 403, nothing deleted', async () => {
    const res = await t.http('DELETE', `/admin/audit-log/retention?older_than_days=${DAYS}`, { key: A.key });
    expect(res.status).toBe(403);
    expect(await left(w, 'audit')).toEqual(ALL);
  });
});

describe('the purge jobs purge as their run actor', () => {
  const JOBS: Record<Kind, string> = { audit: 'cleanup_audit_log', docs: 'purge_soft_deleted', runs: 'cleanup_job_runs', keys: 'cleanup_expired_tokens' };
  const PARAMS: Record<Kind, Record<string, unknown>> = { audit: {}, docs: { days: DAYS }, runs: { days: DAYS }, keys: { days: DAYS } };

  async function runJob(kind: Kind, tenantId?: string) {
    const res = await t.http('POST', '/jobs/run', { key: ADMIN_KEY, json: { job: JOBS[kind], params: PARAMS[kind], ...(tenantId ? { tenant_id: tenantId } : {}) } });
    expect(res.status).toBe(202);
    const done = await waitRun(t, res.body.run_id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done.tenant_id).toBe(tenantId ?? null);
    return done;
  }

  it.each(Object.keys(COLLECTION) as Kind[])('%s: a run for tenant A deletes A items only; a run without tenant deletes the rest', async (kind) => {
    // cleanup_audit_log takes no days: its retention is JOBS_AUDIT_RETENTION_DAYS (365); age A's entries past it.
    if (kind === 'audit') await col('audit_log').updateMany({ _id: { $in: Object.values(w.old.audit).flat() } }, { $set: { created_at: ago(400) } });
    await runJob(kind, A.tenantId);
    expect(await left(w, kind)).toEqual({ ...full(kind), A: 0 });
    await runJob(kind);
    expect(await left(w, kind)).toEqual({ A: 0, B: 0, none: 0 });
    await expectKept(w);
  });
});
