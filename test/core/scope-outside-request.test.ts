/**
 * Tenant scope outside requests: services called directly (as a job or a webhook handler would)
 * take the scope from the actor they are given, never from ambient request state. A tenant-A user
 * never reads, counts or touches tenant B; `systemActor(B)` stays in B; `systemActor()` sees every
 * tenant but cannot create a tenant-scoped document; system writes are audited with a null user.
 * (A forged `X-Tenant-Id` inside a request: test/resources/isolation.test.ts and write-isolation.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { requestOf, systemActor, type Actor } from '../../core/context.ts';
import { AccessDeniedError, ConflictError, NotFoundError } from '../../core/errors.ts';
import type { Doc } from '../../core/hooks.ts';
import type { CursorPage, OffsetPage } from '../../plugins/resources/service.ts';
import type { AuditService } from '../../plugins/audit/service.ts';
import { exportQuery, listQuery, statsQuery } from '../../plugins/audit/schemas.ts';

type Side = Awaited<ReturnType<typeof createTenantUser>> & { actor: Actor; projects: string[]; task: string };
let t: TestApp;
let A: Side;
let B: Side;

const col = (name: string) => t.app.db.conn.collection(name);
const resources = () => t.app.services.get('resources');
const projects = () => resources().get('projects')!;
const tasks = () => resources().get('tasks')!;
// The registered service is the AuditService; other plugins see only its AuditLogger face.
const audit = () => t.app.services.get('audit') as AuditService;
const identity = () => t.app.services.get('identity');

/** Every stored document of tenant B (projects, tasks, audit entries, users, keys), exactly as stored. */
const bRaw = async () => {
  const tid = new Types.ObjectId(B.tenantId);
  const out: Record<string, unknown[]> = {};
  for (const c of ['projects', 'tasks', 'audit_log', 'users', 'api_keys']) out[c] = await col(c).find({ tenant_id: tid }).sort({ _id: 1 }).toArray();
  return out;
};
let bBefore: Awaited<ReturnType<typeof bRaw>>;
const expectBUnchanged = async () => expect(await bRaw()).toEqual(bBefore);

const tenantsOf = (items: Doc[]) => [...new Set(items.map((d) => String(d.tenant_id)))];
const listQ = listQuery.parse({ per_page: '500' });
const statsQ = statsQuery.parse({});
const exportQ = exportQuery.parse({ format: 'json' });

async function readStream(s: NodeJS.ReadableStream): Promise<string> {
  let out = '';
  for await (const chunk of s) out += String(chunk);
  return out;
}

async function seed(): Promise<Side> {
  const u = await createTenantUser(t, { roles: ['admin'], features: ['tasks'] });
  const post = async (path: string, json: unknown) => {
    const res = await t.http('POST', path, { key: u.key, json });
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return String(res.body._id);
  };
  const p1 = await post('/projects', { name: 'one' });
  const p2 = await post('/projects', { name: 'two' });
  const task = await post('/tasks', { title: 'task', project_id: p1 });
  const me = await t.http('GET', '/auth/me', { key: u.key });
  return { ...u, actor: me.body as Actor, projects: [p1, p2], task };
}

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin] });
  A = await seed();
  B = await seed();
  await audit().flush();
  bBefore = await bRaw();
  expect(bBefore.projects).toHaveLength(2);
  expect(bBefore.audit_log?.length).toBeGreaterThan(0);
});
afterAll(() => t?.close());

describe('a tenant-A user outside any request', () => {
  it('runs outside a request context (the premise of this file)', () => {
    expect(requestOf(A.actor)).toBeUndefined();
    expect(A.actor.tenant_id).toBe(A.tenantId);
    expect(A.actor.scope).toBeNull();
  });

  it('list, count (offset totals) and cursor pages see tenant A only', async () => {
    const off = (await projects().list(A.actor, { per_page: '100' })) as OffsetPage;
    expect(off.mode).toBe('offset');
    expect(tenantsOf(off.items)).toEqual([A.tenantId]);
    expect(off.total).toBe(await col('projects').countDocuments({ tenant_id: new Types.ObjectId(A.tenantId), is_deleted: false }));
    const cur = (await projects().list(A.actor, { limit: '100' })) as CursorPage;
    expect(cur.mode).toBe('cursor');
    expect(tenantsOf(cur.items)).toEqual([A.tenantId]);
    // Walking the cursor one by one never steps into B either.
    const seen: string[] = [];
    let next: string | null = '';
    while (next !== null) {
      const page = (await projects().list(A.actor, { limit: '1', cursor: next })) as CursorPage;
      seen.push(...page.items.map((d) => String(d.tenant_id)));
      next = page.cursors.next;
    }
    expect(new Set(seen)).toEqual(new Set([A.tenantId]));
    expect(seen).toHaveLength(off.total);
    const taskCount = (await tasks().list(A.actor, {})) as OffsetPage;
    expect(taskCount.total).toBe(1);
  });

  it('get of a B document: not found', async () => {
    await expect(projects().get(A.actor, B.projects[0]!)).rejects.toBeInstanceOf(NotFoundError);
    await expect(tasks().get(A.actor, B.task)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('the other read entry points (listArgs as GraphQL calls it, getOne and read as REST does) stay in A', async () => {
    const page = (await projects().listArgs(A.actor, { per_page: 100 })) as OffsetPage;
    expect(tenantsOf(page.items)).toEqual([A.tenantId]);
    expect(page.total).toBe(await col('projects').countDocuments({ tenant_id: new Types.ObjectId(A.tenantId), is_deleted: false }));
    const cursor = (await projects().listArgs(A.actor, { limit: 100 })) as CursorPage;
    expect(tenantsOf(cursor.items)).toEqual([A.tenantId]);
    expect(String((await projects().getOne(A.actor, A.projects[0]!)).doc.tenant_id)).toBe(A.tenantId);
    await expect(projects().getOne(A.actor, B.projects[0]!)).rejects.toBeInstanceOf(NotFoundError);
    await expect(projects().getOne(A.actor, B.projects[0]!, { include_deleted: 'true' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(projects().read(A.actor, B.projects[0]!, { includeDeleted: true })).rejects.toBeInstanceOf(NotFoundError);
    // Populating from A never reaches B's documents.
    const withTask = await tasks().read(A.actor, A.task, { populate: ['project_id'] });
    expect(String((withTask.doc.project_id as Doc).tenant_id)).toBe(A.tenantId);
  });

  it('a forged acting tenant on a non-system user is ignored', async () => {
    const forged: Actor = { ...A.actor, acting_tenant_id: B.tenantId };
    const page = (await projects().list(forged, { per_page: '100' })) as OffsetPage;
    expect(tenantsOf(page.items)).toEqual([A.tenantId]);
    const made = await projects().create(forged, { name: 'forged' });
    expect(String(made.tenant_id)).toBe(A.tenantId);
    await expectBUnchanged();
  });

  it('a non-system user without a tenant is refused, never widened to all tenants', async () => {
    const orphan: Actor = { ...A.actor, tenant_id: '' };
    await expect(projects().list(orphan, {})).rejects.toBeInstanceOf(AccessDeniedError);
    await expect(audit().list(orphan, listQ)).rejects.toBeInstanceOf(AccessDeniedError);
    await expect(identity().listUsers(orphan, { page: 1, per_page: 100 })).rejects.toBeInstanceOf(AccessDeniedError);
  });

  it('create and bulkCreate land in A', async () => {
    const one = await projects().create(A.actor, { name: 'made-outside' });
    expect(String(one.tenant_id)).toBe(A.tenantId);
    expect(String(one.created_by)).toBe(A.userId);
    const bulk = await projects().bulkCreate(A.actor, [{ name: 'bulk-1' }, { name: 'bulk-2' }]);
    expect(bulk.created_count).toBe(2);
    expect(tenantsOf(bulk.items)).toEqual([A.tenantId]);
    // A reference into B is refused: the task would point across tenants.
    await expect(tasks().create(A.actor, { title: 'x', project_id: B.projects[0] })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
    await expectBUnchanged();
  });

  it('update, replace, delete, bulkDelete of B documents: not found, B unchanged', async () => {
    const id = B.projects[1]!;
    await expect(projects().update(A.actor, id, '"1"', { name: 'pwned' }, false)).rejects.toBeInstanceOf(NotFoundError);
    await expect(projects().update(A.actor, id, '"1"', { name: 'pwned' }, true)).rejects.toBeInstanceOf(NotFoundError);
    await expect(projects().remove(A.actor, id, '"1"')).rejects.toBeInstanceOf(NotFoundError);
    const err = await projects().bulkDelete(A.actor, [{ id, etag: '"1"' }, { id: B.projects[0]!, etag: '"1"' }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).details.errors).toMatchObject([{ error: { code: 'NOT_FOUND' } }, { error: { code: 'NOT_FOUND' } }]);
    await expectBUnchanged();
  });

  it('update, replace and delete of A documents work', async () => {
    const p = await projects().create(A.actor, { name: 'to-change' });
    const id = String(p._id);
    const u = await projects().update(A.actor, id, '"1"', { budget: 5 }, false);
    expect(u.budget).toBe(5);
    const r = await projects().update(A.actor, id, '"2"', { name: 'replaced' }, true);
    expect(r).toMatchObject({ name: 'replaced', budget: null, version: 3 });
    const d = await projects().remove(A.actor, id, '"3"');
    expect(d.is_deleted).toBe(true);
    const bulk = await projects().bulkCreate(A.actor, [{ name: 'bd' }]);
    const bd = await projects().bulkDelete(A.actor, [{ id: String(bulk.items[0]!._id), etag: '"1"' }]);
    expect(bd.deleted_count).toBe(1);
  });

  it('populate of a project in B (planted behind the API) comes back null, in get and list', async () => {
    const planted = await col('tasks').insertOne({
      project_id: new Types.ObjectId(B.projects[0]), title: 'planted', done: false, priority: null, due_at: null, tags: [],
      tenant_id: new Types.ObjectId(A.tenantId), created_at: new Date(), updated_at: new Date(), created_by: null, updated_by: null,
      is_deleted: false, deleted_at: null, deleted_by: null, version: 1,
    });
    const one = await tasks().get(A.actor, String(planted.insertedId), { populate: ['project_id'] });
    expect(one.project_id).toBeNull();
    const page = (await tasks().list(A.actor, { populate: 'project_id', per_page: '100' })) as OffsetPage;
    const row = page.items.find((d) => String(d._id) === String(planted.insertedId))!;
    expect(row.project_id).toBeNull();
    // The task of A whose project is in A is populated.
    const own = page.items.find((d) => String(d._id) === A.task)!;
    expect((own.project_id as Doc).name).toBe('one');
    await col('tasks').deleteOne({ _id: planted.insertedId });
  });

  it('audit list, stats and export: only A entries and A totals', async () => {
    const aCount = await (async () => {
      await audit().flush();
      return col('audit_log').countDocuments({ tenant_id: new Types.ObjectId(A.tenantId) });
    })();
    expect(aCount).toBeGreaterThan(0);
    const list = await audit().list(A.actor, listQ);
    expect(list.total).toBe(aCount);
    expect(new Set(list.items.map((e) => e.tenant_id))).toEqual(new Set([A.tenantId]));
    const stats = await audit().stats(A.actor, statsQ);
    expect(stats.total_entries).toBe(aCount);
    const exp = JSON.parse(await readStream((await audit().export(A.actor, exportQ)).stream)) as { tenant_id: string }[];
    expect(exp).toHaveLength(aCount);
    expect(new Set(exp.map((e) => e.tenant_id))).toEqual(new Set([A.tenantId]));
    // Asking for a B item by id finds nothing.
    expect((await audit().list(A.actor, { ...listQ, resource_id: B.projects[0]! })).total).toBe(0);
  });
});

describe('systemActor(B) outside any request', () => {
  it('reads only B: list, cursor, count, get; A documents are not found', async () => {
    const actor = systemActor(B.tenantId);
    const off = (await projects().list(actor, { per_page: '100' })) as OffsetPage;
    expect(tenantsOf(off.items)).toEqual([B.tenantId]);
    expect(off.total).toBe(await col('projects').countDocuments({ tenant_id: new Types.ObjectId(B.tenantId), is_deleted: false }));
    const cur = (await projects().list(actor, { limit: '100' })) as CursorPage;
    expect(tenantsOf(cur.items)).toEqual([B.tenantId]);
    expect((await projects().get(actor, B.projects[0]!)).name).toBe('one');
    await expect(projects().get(actor, A.projects[0]!)).rejects.toBeInstanceOf(NotFoundError);
    await expect(projects().update(actor, A.projects[0]!, '"1"', { name: 'x' }, false)).rejects.toBeInstanceOf(NotFoundError);
    await expect(projects().remove(actor, A.projects[0]!, '"1"')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('writes land in B, with created_by null, audited with user_id and user_name null', async () => {
    const actor = systemActor(B.tenantId);
    const made = await projects().create(actor, { name: 'by-job' });
    expect(String(made.tenant_id)).toBe(B.tenantId);
    expect(made.created_by).toBeNull();
    expect(made.updated_by).toBeNull();
    const task = await tasks().create(actor, { title: 'job task', project_id: String(made._id) });
    expect(String(task.tenant_id)).toBe(B.tenantId);
    const bulk = await projects().bulkCreate(actor, [{ name: 'job-bulk' }]);
    expect(tenantsOf(bulk.items)).toEqual([B.tenantId]);
    const upd = await projects().update(actor, String(made._id), '"1"', { budget: 9 }, false);
    expect(upd.updated_by).toBeNull();
    const del = await projects().bulkDelete(actor, [{ id: String(bulk.items[0]!._id), etag: '"1"' }]);
    expect(del.deleted_count).toBe(1);
    expect(await col('projects').findOne({ _id: bulk.items[0]!._id as Types.ObjectId })).toMatchObject({
      is_deleted: true, deleted_by: null, tenant_id: new Types.ObjectId(B.tenantId),
    });
    await audit().flush();
    const entries = await col('audit_log').find({ item_id: made._id }).sort({ _id: 1 }).toArray();
    expect(entries.map((e) => e.operation)).toEqual(['insert', 'update']);
    for (const e of entries) expect(e).toMatchObject({ user_id: null, user_name: null, tenant_id: new Types.ObjectId(B.tenantId) });
    // A's documents were not touched by B's job.
    expect(await col('projects').countDocuments({ tenant_id: new Types.ObjectId(A.tenantId), name: { $in: ['by-job', 'job-bulk'] } })).toBe(0);
    bBefore = await bRaw();
  });

  it('audit list, stats and export: only B', async () => {
    const actor = systemActor(B.tenantId);
    await audit().flush();
    const bCount = await col('audit_log').countDocuments({ tenant_id: new Types.ObjectId(B.tenantId) });
    const list = await audit().list(actor, listQ);
    expect(list.total).toBe(bCount);
    expect(new Set(list.items.map((e) => e.tenant_id))).toEqual(new Set([B.tenantId]));
    expect((await audit().stats(actor, statsQ)).total_entries).toBe(bCount);
    const exp = JSON.parse(await readStream((await audit().export(actor, exportQ)).stream)) as unknown[];
    expect(exp).toHaveLength(bCount);
  });
});

describe('systemActor() outside any request', () => {
  it('sees every tenant: list totals, audit totals', async () => {
    const actor = systemActor();
    const off = (await projects().list(actor, { per_page: '100' })) as OffsetPage;
    expect(off.total).toBe(await col('projects').countDocuments({ is_deleted: false }));
    expect(tenantsOf(off.items)).toEqual(expect.arrayContaining([A.tenantId, B.tenantId]));
    await audit().flush();
    expect((await audit().list(actor, listQ)).total).toBe(await col('audit_log').countDocuments({}));
    expect((await audit().stats(actor, statsQ)).total_entries).toBe(await col('audit_log').countDocuments({}));
  });

  it('creating a tenant-scoped document fails with a clear error, and writes nothing', async () => {
    const before = await col('projects').countDocuments({});
    await expect(projects().create(systemActor(), { name: 'nowhere' })).rejects.toThrow(/systemActor\(tenantId\)/);
    const bulk = await projects().bulkCreate(systemActor(), [{ name: 'nowhere' }]).catch((e: unknown) => e);
    expect(bulk).toBeInstanceOf(Error);
    expect(await col('projects').countDocuments({})).toBe(before);
  });

  it('updates a B document in place (it stays in B), audited with a null user', async () => {
    const id = B.projects[1]!;
    const doc = await projects().update(systemActor(), id, '"1"', { description: 'fixed by migration' }, false);
    expect(String(doc.tenant_id)).toBe(B.tenantId);
    expect(doc.updated_by).toBeNull();
    await audit().flush();
    const e = await col('audit_log').findOne({ item_id: new Types.ObjectId(id), operation: 'update' });
    expect(e).toMatchObject({ user_id: null, user_name: null, tenant_id: new Types.ObjectId(B.tenantId) });
    bBefore = await bRaw();
  });
});

describe('identity outside any request', () => {
  it('a tenant admin of A lists only A users and tenants, whatever tenant it asks for', async () => {
    const users = await identity().listUsers(A.actor, { page: 1, per_page: 100, tenant_id: B.tenantId });
    expect(users.items.length).toBeGreaterThan(0);
    expect(new Set(users.items.map((u) => String(u.tenant_id)))).toEqual(new Set([A.tenantId]));
    expect(users.total).toBe(await col('users').countDocuments({ tenant_id: new Types.ObjectId(A.tenantId) }));
    const tenants = await identity().listTenants(A.actor, { page: 1, per_page: 100 });
    expect(tenants.total).toBe(1);
    expect(tenants.items.map((x) => String(x.id))).toEqual([A.tenantId]);
  });

  it('a tenant admin of A cannot create a key for, revoke a key of, or create a user in B', async () => {
    const keysBefore = await col('api_keys').countDocuments({});
    await expect(identity().createApiKey(A.actor, { user_id: B.userId, name: 'steal' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(identity().revokeApiKey(A.actor, B.keyId)).rejects.toBeInstanceOf(NotFoundError);
    await expect(identity().createUser(A.actor, { email: 'x@example.com', name: 'x', tenant_id: B.tenantId })).rejects.toBeInstanceOf(AccessDeniedError);
    expect(await col('api_keys').countDocuments({})).toBe(keysBefore);
    await expectBUnchanged();
    // B's key still works.
    expect((await t.http('GET', '/auth/me', { key: B.key })).status).toBe(200);
  });

  it('systemActor(B) lists B users only; systemActor() mints a key with created_by null', async () => {
    const users = await identity().listUsers(systemActor(B.tenantId), { page: 1, per_page: 100, tenant_id: A.tenantId });
    expect(new Set(users.items.map((u) => String(u.tenant_id)))).toEqual(new Set([B.tenantId]));
    const key = await identity().createApiKey(systemActor(), { user_id: B.userId, name: 'by-system' });
    const stored = await col('api_keys').findOne({ _id: new Types.ObjectId(key.id) });
    expect(stored).toMatchObject({ created_by: null, tenant_id: new Types.ObjectId(B.tenantId) });
  });
});
