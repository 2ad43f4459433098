/**
 * Write path, permanent removal: the `purge_soft_deleted` job and the `resources` service's
 * `purgeSoftDeleted(actor, days)` remove only documents soft-deleted longer ago than the window,
 * here as `systemActor()` (every resource and tenant; per-tenant scope: test/core/purge-scope.test.ts),
 * and never live documents. Deletion times are backdated in the collection for set-up.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, jobContext, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import type { JobRunContext } from '../../core/plugin.ts';
import { systemActor } from '../../core/context.ts';
import { col, ifMatch, oid } from './write-helpers.ts';

const DAY = 86_400_000;
type User = { key: string; tenantId: string; userId: string };
let t: TestApp;
let alice: User;
let bob: User;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin], config: { SOFT_DELETE_RETENTION_DAYS: '7' } });
  alice = await createTenantUser(t, { features: ['tasks'] });
  bob = await createTenantUser(t, { features: ['tasks'] });
});
afterAll(() => t?.close());
beforeEach(async () => {
  await col(t, 'projects').deleteMany({});
  await col(t, 'tasks').deleteMany({});
});

const ctx: JobRunContext = jobContext();
const job = () => t.app.kernel.jobs().find((j) => j.name === 'purge_soft_deleted')!;

/** Creates a document through the API; `deletedDaysAgo` soft-deletes it through the API and backdates deleted_at. */
async function seed(path: '/projects' | '/tasks', json: Record<string, unknown>, user: User, deletedDaysAgo?: number): Promise<string> {
  const res = await t.http('POST', path, { key: user.key, json });
  expect(res.status).toBe(201);
  const id = res.body._id as string;
  if (deletedDaysAgo !== undefined) {
    expect((await t.http('DELETE', `${path}/${id}`, { key: user.key, headers: ifMatch('"1"') })).status).toBe(204);
    await col(t, path.slice(1)).updateOne({ _id: oid(id) }, { $set: { deleted_at: new Date(Date.now() - deletedDaysAgo * DAY) } });
  }
  return id;
}
const exists = async (name: string, id: string) => (await col(t, name).countDocuments({ _id: oid(id) })) === 1;

describe('purge_soft_deleted', () => {
  it('is a job of the resources plugin', () => {
    expect(job()).toMatchObject({ name: 'purge_soft_deleted', plugin: 'resources' });
  });

  it('the job removes documents soft-deleted longer ago than `days`, in every resource and tenant, and nothing else', async () => {
    const liveOld = await seed('/projects', { name: 'live' }, alice);
    await col(t, 'projects').updateOne({ _id: oid(liveOld) }, { $set: { created_at: new Date(Date.now() - 400 * DAY), updated_at: new Date(Date.now() - 400 * DAY) } });
    const parent = await seed('/projects', { name: 'parent' }, alice);
    const liveTask = await seed('/tasks', { project_id: parent, title: 'live task' }, alice);
    const oldA = await seed('/projects', { name: 'old A' }, alice, 40);
    const oldB = await seed('/projects', { name: 'old B' }, bob, 31);
    const oldTask = await seed('/tasks', { project_id: parent, title: 'old task' }, alice, 100);
    const recentA = await seed('/projects', { name: 'recent A' }, alice, 29);
    const recentTask = await seed('/tasks', { project_id: parent, title: 'recent task' }, alice, 0);

    const res = (await job().run(ctx, { days: 30 })) as { deleted_count: number; cutoff_date: Date; resources: Record<string, number> };
    expect(res.deleted_count).toBe(3);
    expect(res.resources).toEqual({ projects: 2, tasks: 1 });
    expect(Math.abs(res.cutoff_date.getTime() - (Date.now() - 30 * DAY))).toBeLessThan(60_000);

    for (const id of [oldA, oldB]) expect(await exists('projects', id)).toBe(false);
    expect(await exists('tasks', oldTask)).toBe(false);
    for (const id of [liveOld, parent, recentA]) expect(await exists('projects', id)).toBe(true);
    for (const id of [liveTask, recentTask]) expect(await exists('tasks', id)).toBe(true);
    expect(await col(t, 'projects').countDocuments({ is_deleted: false })).toBe(2);

    const again = (await job().run(ctx, { days: 30 })) as { deleted_count: number };
    expect(again.deleted_count).toBe(0);
  });

  it('never removes a live document, even one carrying an old deleted_at', async () => {
    const odd = await seed('/projects', { name: 'live with stale deleted_at' }, alice);
    await col(t, 'projects').updateOne({ _id: oid(odd) }, { $set: { deleted_at: new Date(Date.now() - 1000 * DAY) } });
    const res = await t.app.services.get('resources').purgeSoftDeleted(systemActor(), 1);
    expect(res.deleted_count).toBe(0);
    expect(await exists('projects', odd)).toBe(true);
  });

  it('the service honours its window: 10 days removes the 15-day-old deletion, keeps the 5-day-old one', async () => {
    const p15 = await seed('/projects', { name: '15' }, bob, 15);
    const p5 = await seed('/projects', { name: '5' }, bob, 5);
    const res = await t.app.services.get('resources').purgeSoftDeleted(systemActor(), 10);
    expect(res).toMatchObject({ deleted_count: 1, resources: { projects: 1, tasks: 0 } });
    expect(await exists('projects', p15)).toBe(false);
    expect(await exists('projects', p5)).toBe(true);
  });

  it('without `days` the window is SOFT_DELETE_RETENTION_DAYS (7 here), for the job and the service', async () => {
    const p8 = await seed('/projects', { name: '8' }, alice, 8);
    const p6 = await seed('/projects', { name: '6' }, alice, 6);
    const res = (await job().run(ctx, {})) as { deleted_count: number };
    expect(res.deleted_count).toBe(1);
    expect(await exists('projects', p8)).toBe(false);
    expect(await exists('projects', p6)).toBe(true);

    const p9 = await seed('/projects', { name: '9' }, alice, 9);
    expect((await t.app.services.get('resources').purgeSoftDeleted(systemActor())).deleted_count).toBe(1);
    expect(await exists('projects', p9)).toBe(false);
    expect(await exists('projects', p6)).toBe(true);
  });

  it('a purged document is gone for admins too (include_deleted)', async () => {
    const admin = await createTenantUser(t, { tenantId: alice.tenantId, roles: ['admin'] });
    const id = await seed('/projects', { name: 'vanishing' }, alice, 60);
    expect((await t.http('GET', `/projects/${id}?include_deleted=true`, { key: admin.key })).status).toBe(200);
    await t.app.services.get('resources').purgeSoftDeleted(systemActor(), 30);
    expect((await t.http('GET', `/projects/${id}?include_deleted=true`, { key: admin.key })).status).toBe(404);
  });
});
