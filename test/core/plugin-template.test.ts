/**
 * The plugin template of docs/plugins.md (docs/examples/notes) compiles, loads and works: REST and
 * GraphQL share one validation and one tenant scope, its hook can change or veto a write, another
 * plugin reacts to its `note.created` event with a durable consumer (the event exists with the note:
 * on the log, in the note's tenant), another plugin registers a formatter through the typed service, and its per-tenant job
 * `archive_old_notes` keeps to the `JobDefinition` contract: called directly, `ctx.actor` alone
 * decides the scope and `ctx.signal` stops it; through the real jobs plugin (Agenda, job_runs,
 * HTTP), its zod `params` are the registry's and refuse bad values with 422, and a run fans out
 * into one run per tenant, each archiving only its own tenant's notes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, expectError, jobContext, type TestApp } from '../helpers/app.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { AppError } from '../../core/errors.ts';
import { createApp } from '../../core/kernel.ts';
import { systemActor } from '../../core/context.ts';
import { loadConfig } from '../../config/index.ts';
import { loadPlugins, corePlugins } from '../../builtin-plugins.ts';
import { uniqueDbUri } from '../helpers/app.ts';
import { notesPlugin, type NoteView } from '../../docs/examples/notes/index.ts';
import { archiveJobParams } from '../../docs/examples/notes/schemas.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { FAST, waitRun, type Run } from '../jobs/helpers.ts';
import { waitFor } from '../helpers/wait.ts';

/** What the dependent plugin's consumer received: `note.created` events. */
const created: { id: string; tenant_id: string | null; actor: string | null; data: Record<string, unknown> }[] = [];

/** A second plugin, as another team would write it: depends on notes and uses only its service, hook and event. */
const shoutPlugin = definePlugin({
  name: 'shout',
  dependsOn: ['notes'],
  setup({ services }) {
    services.get('notes').registerFormatter('shout', (n) => `${n.title.toUpperCase()}!`);
    return {
      hooks: [
        onHook('BEFORE_NOTE_CREATE', (e) => {
          if (e.data.title === 'forbidden') throw new AppError(422, 'NOTE_VETOED', 'That title is not allowed', { title: e.data.title });
          return { ...e, data: { ...e.data, body: e.data.body || '(empty)' } };
        }),
      ],
      // Reacting to a stored note: a durable consumer of the event log, never a hook.
      eventConsumers: [{ name: 'shout.notes', types: ['note.created'], handle: async (e) => void created.push(e) }],
    };
  },
});

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let A2: Awaited<ReturnType<typeof createTenantUser>>;
let B: Awaited<ReturnType<typeof createTenantUser>>;
const notesCol = () => t.app.db.conn.collection('notes');

const post = async (key: string, json: unknown) => {
  const res = await t.http('POST', '/notes', { key, json });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as NoteView;
};

beforeAll(async () => {
  // Listed before the plugin it depends on: the kernel orders by dependsOn. The jobs plugin is
  // loaded but off (JOBS_ENABLED defaults to false).
  t = await buildTestApp({ plugins: [shoutPlugin, notesPlugin.configure({ archive_after_days: 10, default_per_page: 2 }), jobsPlugin] });
  A = await createTenantUser(t);
  A2 = await createTenantUser(t, { tenantId: A.tenantId });
  B = await createTenantUser(t);
  for (const title of ['a1', 'a2', 'a3']) await post(A.key, { title });
  await post(A2.key, { title: 'a4', body: 'by a colleague' });
  for (const title of ['b1', 'b2']) await post(B.key, { title });
});
afterAll(() => t?.close());

describe('loading', () => {
  it('PLUGINS=./docs/examples/notes/index.ts loads the template by path (its default export)', async () => {
    const list = await loadPlugins(loadConfig({ NODE_ENV: 'test', PLUGINS: './docs/examples/notes/index.ts' }));
    expect(list.map((p) => p.name)).toContain('notes');
  });

  it('bad options stop start-up naming the plugin and the option', async () => {
    const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri() });
    await expect(createApp({ corePlugins: corePlugins(), config, plugins: [notesPlugin.configure({ archive_after_days: 0 })] })).rejects.toThrow(/"notes"[\s\S]*archive_after_days/);
  });
});

describe('REST', () => {
  it('POST /notes stores the note in the caller\'s tenant, with its author', async () => {
    const n = await post(A.key, { title: '  spaced  ', body: 'x' });
    expect(n).toMatchObject({ title: 'spaced', body: 'x', archived: false, tenant_id: A.tenantId, created_by: A.userId, formatted: null });
    const stored = await notesCol().findOne({ _id: new Types.ObjectId(n.id) });
    expect(stored).toMatchObject({ tenant_id: new Types.ObjectId(A.tenantId), created_by: new Types.ObjectId(A.userId) });
    await notesCol().deleteOne({ _id: new Types.ObjectId(n.id) });
  });

  it('bad input: 422 envelope listing every problem, nothing written', async () => {
    const before = await notesCol().countDocuments({});
    const res = await t.http('POST', '/notes', { key: A.key, json: { title: '', extra: 1, tenant_id: B.tenantId } });
    expect(res.status).toBe(422);
    const err = envelope(res);
    expect(err.code).toBe('VALIDATION_ERROR');
    expect((err.details.errors as { loc: unknown[] }[]).map((e) => e.loc)).toEqual(expect.arrayContaining([['body', 'title'], ['body', 'extra'], ['body', 'tenant_id']]));
    expect(await notesCol().countDocuments({})).toBe(before);
    const noAuth = await t.http('POST', '/notes', { key: null, json: { title: 'x' } });
    expect(noAuth.status).toBe(401);
  });

  it('GET /notes lists only the caller\'s tenant, with totals and the option\'s page size', async () => {
    const a = await t.http('GET', '/notes', { key: A.key });
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ total: 4, page: 1, per_page: 2, total_pages: 2 });
    expect(a.body.items).toHaveLength(2);
    // pageOf + setPageHeaders (lib/page.ts): the page's numbers as headers too.
    expect([a.headers.get('x-total-count'), a.headers.get('x-page'), a.headers.get('x-per-page'), a.headers.get('x-total-pages')]).toEqual(['4', '1', '2', '2']);
    const all = await t.http('GET', '/notes?per_page=100', { key: A2.key });
    expect(all.body.items.map((n: NoteView) => n.title).sort()).toEqual(['a1', 'a2', 'a3', 'a4']);
    expect(new Set(all.body.items.map((n: NoteView) => n.tenant_id))).toEqual(new Set([A.tenantId]));
    const b = await t.http('GET', '/notes?per_page=100', { key: B.key, headers: { 'X-Tenant-Id': A.tenantId } });
    expect(b.body.total).toBe(2);
    expect(b.body.items.map((n: NoteView) => n.title).sort()).toEqual(['b1', 'b2']);
    expect((await t.http('GET', '/notes?per_page=0', { key: A.key })).status).toBe(422);
    expect((await t.http('GET', '/notes?nope=1', { key: A.key })).status).toBe(422);
  });

  it('the system administrator sees every tenant, or one with X-Tenant-Id', async () => {
    expect((await t.http('GET', '/notes?per_page=100')).body.total).toBe(6);
    const one = await t.http('GET', '/notes?per_page=100', { headers: { 'X-Tenant-Id': B.tenantId } });
    expect(one.body.total).toBe(2);
  });
});

describe('the hook and the event declared by the plugin', () => {
  it('BEFORE_NOTE_CREATE changes the payload; a consumer of note.created gets the stored note, its tenant and its author', async () => {
    const n = await post(B.key, { title: 'empty body' });
    expect(n.body).toBe('(empty)');
    const e = await waitFor(() => created.find((c) => c.data.id === n.id), 'the note.created event of the note');
    expect(e).toMatchObject({ tenant_id: B.tenantId, actor: B.userId, data: { id: n.id, body: '(empty)', tenant_id: B.tenantId } });
    // On the log, in the note's tenant only.
    const ids = async (tenantId: string) => (await t.http('GET', '/events?type=note.created&limit=100', { headers: { 'X-Tenant-Id': tenantId } })).body.items.map((x: { id: string }) => x.id);
    expect(await ids(B.tenantId)).toContain(e.id);
    expect(await ids(A.tenantId)).not.toContain(e.id);
    await notesCol().deleteOne({ _id: new Types.ObjectId(n.id) });
  });

  it('a BEFORE_NOTE_CREATE veto is the client\'s error envelope, and nothing is written (REST and GraphQL)', async () => {
    const before = await notesCol().countDocuments({});
    const res = await t.http('POST', '/notes', { key: A.key, json: { title: 'forbidden' } });
    expect(res.status).toBe(422);
    expect(envelope(res)).toMatchObject({ code: 'NOTE_VETOED', details: { title: 'forbidden' } });
    const g = await t.gql('mutation { createNote(title: "forbidden") { id } }', {}, { key: A.key });
    expect(g.body.errors?.[0]?.extensions?.code).toBe('NOTE_VETOED');
    expect(await notesCol().countDocuments({})).toBe(before);
  });
});

describe('provider registry: another plugin\'s formatter', () => {
  it('format=shout uses the formatter registered by the dependent plugin (REST and GraphQL)', async () => {
    const res = await t.http('GET', '/notes?format=shout&per_page=100', { key: B.key });
    expect(res.body.items.map((n: NoteView) => n.formatted).sort()).toEqual(['B1!', 'B2!']);
    const g = await t.gql('{ notes(format: "shout", per_page: 100) { items { formatted } } }', {}, { key: B.key });
    expect(g.body.data.notes.items.map((n: { formatted: string }) => n.formatted).sort()).toEqual(['B1!', 'B2!']);
  });

  it('an unknown format is a 422 naming the registered ones', async () => {
    const res = await t.http('GET', '/notes?format=whisper', { key: A.key });
    expect(res.status).toBe(422);
    const err = envelope(res);
    expect(err.details.errors).toMatchObject([{ loc: ['query', 'format'], msg: expect.stringContaining('shout') }]);
    const g = await t.gql('{ notes(format: "whisper") { total } }', {}, { key: A.key });
    expect(g.body.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { errors: [{ loc: ['args', 'format'] }] } });
    // A direct caller of the service (a job, another plugin) gets the same refusal.
    await expect(t.app.services.get('notes').list(systemActor(A.tenantId), { page: 1, per_page: 5, format: 'whisper' })).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });

  it('registering after start-up is refused', () => {
    const notes = t.app.services.get('notes');
    expect(() => notes.registerFormatter('late', () => '')).toThrow(/after start-up/);
  });

  it('a duplicate formatter name stops start-up; so does a missing notes plugin', async () => {
    const twice = definePlugin({
      name: 'shout-again', dependsOn: ['notes'],
      setup({ services }) {
        services.get('notes').registerFormatter('shout', () => '');
        return {};
      },
    });
    const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri() });
    await expect(createApp({ corePlugins: corePlugins(), config, plugins: [notesPlugin, shoutPlugin, twice] })).rejects.toThrow(/already registered/);
    await expect(createApp({ corePlugins: corePlugins(), config, plugins: [shoutPlugin] })).rejects.toThrow(/notes/);
  });
});

describe('GraphQL', () => {
  it('notes and createNote: same scope and validation as REST', async () => {
    const g = await t.gql('{ notes(per_page: 100) { total items { title tenant_id } } }', {}, { key: B.key });
    expect(g.body.data.notes.total).toBe(2);
    expect(new Set(g.body.data.notes.items.map((n: { tenant_id: string }) => n.tenant_id))).toEqual(new Set([B.tenantId]));
    const m = await t.gql('mutation($t: String!) { createNote(title: $t, body: "via gql") { id tenant_id created_by } }', { t: 'g1' }, { key: B.key });
    expect(m.body.data.createNote).toMatchObject({ tenant_id: B.tenantId, created_by: B.userId });
    const bad = await t.gql('mutation { createNote(title: "") { id } }', {}, { key: B.key });
    expect(bad.body.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_ERROR' });
    const anon = await t.gql('{ notes { total } }', {}, { key: null });
    expect(anon.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    // A's view did not change.
    expect((await t.gql('{ notes { total } }', {}, { key: A.key })).body.data.notes.total).toBe(4);
    await notesCol().deleteOne({ _id: new Types.ObjectId(m.body.data.createNote.id) });
  });
});

describe('permissions declared once (NOTES_PERMISSIONS)', () => {
  const archivedCount = () => notesCol().countDocuments({ archived: true });

  it('archive: anonymous callers get AUTH_REQUIRED and users ACCESS_DENIED on REST and GraphQL alike, before validation, archiving nothing', async () => {
    const before = await archivedCount();
    const anon = await t.http('POST', '/notes/archive', { key: null, json: { older_than_days: 'not a number' } });
    expect(anon.status, JSON.stringify(anon.body)).toBe(401);
    expect(anon.body).toMatchObject({ error: { code: 'AUTH_REQUIRED' } });
    const anonG = await t.gql('mutation { archiveNotes(older_than_days: 0) }', {}, { key: null });
    expect(anonG.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    const user = await t.http('POST', '/notes/archive', { key: A.key, json: { older_than_days: 'not a number' } });
    expect(user.status).toBe(403);
    expect(user.body).toMatchObject({ error: { code: 'ACCESS_DENIED', message: 'Administrator role required' } });
    const userG = await t.gql('mutation { archiveNotes(older_than_days: 0) }', {}, { key: A.key });
    expect(userG.body.errors?.[0]).toMatchObject({ message: 'Administrator role required', extensions: { code: 'ACCESS_DENIED' } });
    expect(await archivedCount()).toBe(before);
  });

  it('archive: a tenant administrator passes on both surfaces and archives only in its own tenant', async () => {
    const admin = await createTenantUser(t, { tenantId: B.tenantId, roles: ['admin'] });
    const old = new Date(Date.now() - 40 * 86_400_000);
    await notesCol().updateMany({ tenant_id: new Types.ObjectId(B.tenantId) }, { $set: { created_at: old } });
    await notesCol().updateMany({ tenant_id: new Types.ObjectId(A.tenantId) }, { $set: { created_at: old } });
    const g = await t.gql('mutation { archiveNotes(older_than_days: 30) }', {}, { key: admin.key });
    expect(g.body.errors, JSON.stringify(g.body.errors)).toBeUndefined();
    expect(g.body.data).toEqual({ archiveNotes: 2 });
    const rest = await t.http('POST', '/notes/archive', { key: admin.key, json: { older_than_days: 30 } });
    expect(rest.status).toBe(200);
    expect(rest.body).toEqual({ archived: 0 });
    expect(await notesCol().countDocuments({ tenant_id: new Types.ObjectId(A.tenantId), archived: true })).toBe(0);
    await notesCol().updateMany({}, { $set: { archived: false, created_at: new Date() } });
  });
});

describe('job archive_old_notes, called directly (no jobs plugin)', () => {
  const job = () => t.app.kernel.jobs().find((j) => j.name === 'archive_old_notes')!;
  const archivedOf = async (tenantId: string) =>
    (await notesCol().find({ tenant_id: new Types.ObjectId(tenantId), archived: true }).toArray()).map((n) => n.title).sort();

  it('is offered to the kernel as a per-tenant job with its zod params; with JOBS_ENABLED=false nothing runs it', async () => {
    expect(job()).toMatchObject({ plugin: 'notes', timeout: 600, per_tenant: true, params: archiveJobParams });
    expect(t.app.services.maybe('jobs')).toBeUndefined();
    expectError(await t.http('POST', '/jobs/run/archive_old_notes', { json: {} }), 404, 'NOT_FOUND');
    expect(await notesCol().countDocuments({ archived: true })).toBe(0);
  });

  it('ctx.actor alone decides the scope: as systemActor(A) it archives only A\'s old notes', async () => {
    const old = new Date(Date.now() - 20 * 86_400_000);
    await notesCol().updateMany({ title: { $in: ['a1', 'a2', 'b1'] } }, { $set: { created_at: old } });
    const bBefore = await notesCol().find({ tenant_id: new Types.ObjectId(B.tenantId) }).sort({ _id: 1 }).toArray();
    const progress: [number, number | null | undefined][] = [];
    const ctx = jobContext({ actor: systemActor(A.tenantId), tenant_id: A.tenantId, progress: (c, total) => void progress.push([c, total]) });
    expect(await job().run(ctx, archiveJobParams.parse({ batch_size: 1 }))).toMatchObject({ archived: 2 });
    expect(progress).toEqual([[1, 2], [2, 2]]);
    expect(ctx.lines).toEqual(['archived 2 notes older than 10 days']);
    expect(await archivedOf(A.tenantId)).toEqual(['a1', 'a2']);
    expect(await notesCol().find({ tenant_id: new Types.ObjectId(B.tenantId) }).sort({ _id: 1 }).toArray()).toEqual(bBefore);
    // The tenant sees it through the API.
    const listed = await t.http('GET', '/notes?archived=true', { key: A.key });
    expect(listed.body.total).toBe(2);
    const g = await t.gql('{ yes: notes(archived: true) { total } no: notes(archived: false) { total } }', {}, { key: A.key });
    expect(g.body.data).toEqual({ yes: { total: 2 }, no: { total: 2 } });
  });

  it('stops before its next write once ctx.signal aborts (cancel or timeout)', async () => {
    await notesCol().updateMany({ title: 'b2' }, { $set: { created_at: new Date(Date.now() - 20 * 86_400_000) } });
    const ac = new AbortController();
    const ctx = jobContext({ actor: systemActor(B.tenantId), tenant_id: B.tenantId, signal: ac.signal, progress: () => ac.abort(new Error('cancelled')) });
    await expect(job().run(ctx, archiveJobParams.parse({ batch_size: 1 }))).rejects.toThrow('cancelled');
    // One batch of one (the oldest, b1) was written before the abort; b2 was not.
    expect(await archivedOf(B.tenantId)).toEqual(['b1']);
    expect(await archivedOf(A.tenantId)).toEqual(['a1', 'a2']);
  });
});

describe('job archive_old_notes through the jobs plugin (JOBS_ENABLED=true)', () => {
  let j: TestApp;
  let JA: Awaited<ReturnType<typeof createTenantUser>>;
  let JB: Awaited<ReturnType<typeof createTenantUser>>;
  let adminA: Awaited<ReturnType<typeof createTenantUser>>;
  const jNotes = () => j.app.db.conn.collection('notes');
  /** A note posted by `key`, then aged `days` days in the database. */
  const seed = async (key: string, title: string, days: number) => {
    const res = await j.http('POST', '/notes', { key, json: { title } });
    expect(res.status).toBe(201);
    await jNotes().updateOne({ _id: new Types.ObjectId(res.body.id as string) }, { $set: { created_at: new Date(Date.now() - days * 86_400_000) } });
  };
  const titles = async (tenantId: string, archived: boolean) =>
    (await jNotes().find({ tenant_id: new Types.ObjectId(tenantId), archived }).toArray()).map((n) => n.title).sort();
  const tenantCount = async () => (await j.http('GET', '/admin/tenants?per_page=100')).body.total as number;

  beforeAll(async () => {
    j = await buildTestApp({ plugins: [notesPlugin.configure({ archive_after_days: 10 }), jobsPlugin], config: FAST });
    JA = await createTenantUser(j);
    JB = await createTenantUser(j);
    adminA = await createTenantUser(j, { tenantId: JA.tenantId, roles: ['admin'] });
    for (const [title, days] of [['a-old-1', 30], ['a-old-2', 20], ['a-old-3', 15], ['a-new', 0]] as const) await seed(JA.key, title, days);
    for (const [title, days] of [['b-old', 30], ['b-new', 0]] as const) await seed(JB.key, title, days);
  });
  afterAll(() => j?.close());

  it('the registry lists it as per-tenant, with params derived from its zod schema', async () => {
    const res = await j.http('GET', '/jobs/registry/archive_old_notes');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'archive_old_notes', plugin: 'notes', per_tenant: true, timeout: 600, max_attempts: 3 });
    expect(res.body.params).toEqual({
      older_than_days: { type: 'integer', required: false, description: expect.stringContaining('older than this many days') },
      batch_size: { type: 'integer', required: false, description: expect.stringContaining('Notes archived per write') },
    });
    // A per-tenant job is one a tenant administrator may see (and run for their tenant).
    const asTenantAdmin = await j.http('GET', '/jobs/registry', { key: adminA.key });
    expect(asTenantAdmin.body.map((e: { name: string }) => e.name)).toContain('archive_old_notes');
  });

  it('bad params are a 422 listing each problem, and nothing is queued or archived', async () => {
    const bad = await j.http('POST', '/jobs/run/archive_old_notes', { json: { parameters: { older_than_days: 0, batch_size: 'all' } } });
    const err = expectError(bad, 422, 'VALIDATION_ERROR');
    expect((err.details.errors as { loc: unknown[] }[]).map((e) => e.loc)).toEqual(
      expect.arrayContaining([['body', 'parameters', 'older_than_days'], ['body', 'parameters', 'batch_size']]),
    );
    // The tenant is the run's, never a parameter: the schema is strict.
    const tenantParam = await j.http('POST', '/jobs/run', { json: { job: 'archive_old_notes', params: { tenant_id: JB.tenantId } } });
    expect(expectError(tenantParam, 422, 'VALIDATION_ERROR').details.errors).toMatchObject([{ loc: ['body', 'params', 'tenant_id'] }]);
    expect(await j.app.db.conn.collection('job_runs').countDocuments({})).toBe(0);
    expect(await jNotes().countDocuments({ archived: true })).toBe(0);
  });

  it('a system administrator\'s run fans out: one run per tenant, each archiving only its own tenant\'s old notes', async () => {
    const res = await j.http('POST', '/jobs/run', { json: { job: 'archive_old_notes', params: { batch_size: 2 } } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ run_id: expect.any(String), status: 'pending' });
    const parent = await waitRun(j, res.body.run_id as string);
    const n = await tenantCount();
    expect(n).toBeGreaterThanOrEqual(3); // the bootstrap tenant, A and B
    expect(parent).toMatchObject({ status: 'completed', tenant_id: null, result: { tenants: n, completed: n, failed: 0, failed_tenants: [] } });

    const children = (await j.http('GET', `/jobs/runs?parent_job_id=${parent.id}&per_page=100`)).body.items as Run[];
    expect(children).toHaveLength(n);
    const byTenant = Object.fromEntries(children.map((c) => [c.tenant_id as string, c]));
    expect(Object.keys(byTenant)).toHaveLength(n);
    // Each child acted as its tenant's system actor: had one of them acted in every tenant, it
    // would have archived other tenants' notes and the others would report 0.
    for (const c of children) {
      expect(c).toMatchObject({ status: 'completed', job_name: 'archive_old_notes' });
      expect(c.result.archived).toBe(c.tenant_id === JA.tenantId ? 3 : c.tenant_id === JB.tenantId ? 1 : 0);
    }
    expect(await titles(JA.tenantId, true)).toEqual(['a-old-1', 'a-old-2', 'a-old-3']);
    expect(await titles(JA.tenantId, false)).toEqual(['a-new']);
    expect(await titles(JB.tenantId, true)).toEqual(['b-old']);
    expect(await titles(JB.tenantId, false)).toEqual(['b-new']);

    // Two batches of at most 2 in A, reported through ctx.progress and ctx.log on A's run.
    const a = (await j.http('GET', `/jobs/runs/${byTenant[JA.tenantId]!.id}`)).body as Run;
    expect(a).toMatchObject({ progress_current: 3, progress_total: 3, percentage: 100 });
    expect(a.logs.map((l: { message: string }) => l.message)).toContain('archived 3 notes older than 10 days');
  });

  it('a tenant\'s run can be watched as a server-sent event stream: its log lines, then the end', async () => {
    const children = (await j.http('GET', `/jobs/runs?job_name=archive_old_notes&tenant_id=${JA.tenantId}&per_page=100`)).body.items as Run[];
    expect(children.length).toBeGreaterThan(0);
    const res = await j.http('GET', `/jobs/runs/${children[0]!.id}/logs`, { headers: { Accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = res.body as unknown as string;
    expect(text).toMatch(/event: log\ndata: .*archived 3 notes older than 10 days/);
    expect(text).toMatch(/event: end\ndata: \{"status":"completed","result":\{"archived":3,/);
  });

  it('a tenant administrator runs it for their own tenant only, with a parameter overriding the option', async () => {
    await seed(JA.key, 'a-week', 7);
    await seed(JB.key, 'b-week', 7);
    const res = await j.http('POST', '/jobs/run/archive_old_notes', { key: adminA.key, json: { parameters: { older_than_days: 5 } } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ tenant_id: JA.tenantId, parameters: { older_than_days: 5, batch_size: 200 } });
    const run = await waitRun(j, res.body.id as string, undefined, adminA.key);
    expect(run).toMatchObject({ status: 'completed', tenant_id: JA.tenantId, parent_job_id: null, result: { archived: 1 } });
    expect(await titles(JA.tenantId, false)).toEqual(['a-new']);
    expect(await titles(JB.tenantId, false)).toEqual(['b-new', 'b-week']);
    expectError(await j.http('POST', '/jobs/run', { key: adminA.key, json: { job: 'archive_old_notes', tenant_id: JB.tenantId } }), 403, 'ACCESS_DENIED');
  });

  it('the guide\'s schedule is validated against the same schema; run now, it fans out over every tenant', async () => {
    const body = { name: 'archive-old-notes', target: 'archive_old_notes', cron: '0 3 * * *', params: { batch_size: 500 } };
    expectError(await j.http('POST', '/jobs/schedules', { json: { ...body, params: { batch_size: 0 } } }), 422, 'VALIDATION_ERROR');
    const created = await j.http('POST', '/jobs/schedules', { json: body });
    expect(created.status).toBe(201);
    const now = await j.http('POST', `/jobs/schedules/${created.body.id}/run`, { json: {} });
    expect(now.status).toBe(202);
    const n = await tenantCount();
    expect(await waitRun(j, now.body.id as string)).toMatchObject({ status: 'completed', result: { tenants: n, completed: n, failed: 0 } });
    // Default archive_after_days (10): B's week-old note stays.
    expect(await titles(JB.tenantId, false)).toEqual(['b-new', 'b-week']);
  });
});

describe('archiveNotes: the role check lives in the service (requireRole)', () => {
  let s: TestApp;
  let SA: Awaited<ReturnType<typeof createTenantUser>>;
  let SAdmin: Awaited<ReturnType<typeof createTenantUser>>;
  let SB: Awaited<ReturnType<typeof createTenantUser>>;
  const old = () => new Date(Date.now() - 40 * 86_400_000);
  const col = () => s.app.db.conn.collection('notes');
  const archivedTitles = async () => (await col().find({ archived: true }).toArray()).map((n) => n.title).sort();

  beforeAll(async () => {
    s = await buildTestApp({ plugins: [notesPlugin] });
    SA = await createTenantUser(s);
    SAdmin = await createTenantUser(s, { tenantId: SA.tenantId, roles: ['admin'] });
    SB = await createTenantUser(s, { roles: ['admin'] });
    for (const [key, title] of [[SA.key, 'sa-old'], [SA.key, 'sa-new'], [SB.key, 'sb-old']] as const) {
      expect((await s.http('POST', '/notes', { key, json: { title } })).status).toBe(201);
    }
    await col().updateMany({ title: { $in: ['sa-old', 'sb-old'] } }, { $set: { created_at: old() } });
  });
  afterAll(() => s?.close());

  it('a user without the admin role gets 403 ACCESS_DENIED, REST and GraphQL alike, and nothing changes', async () => {
    expectError(await s.http('POST', '/notes/archive', { key: SA.key, json: { older_than_days: 30 } }), 403, 'ACCESS_DENIED');
    const g = await s.gql('mutation { archiveNotes(older_than_days: 30) }', {}, { key: SA.key });
    expect(g.body.errors?.[0]).toMatchObject({ message: 'Administrator role required', extensions: { code: 'ACCESS_DENIED' } });
    expect(await archivedTitles()).toEqual([]);
  });

  it('bad input is 422 before anything is written', async () => {
    expectError(await s.http('POST', '/notes/archive', { key: SAdmin.key, json: { older_than_days: 0 } }), 422, 'VALIDATION_ERROR');
    expect(await archivedTitles()).toEqual([]);
  });

  it('a tenant administrator archives only their own tenant\'s old notes (REST), another tenant\'s through GraphQL', async () => {
    const res = await s.http('POST', '/notes/archive', { key: SAdmin.key, json: { older_than_days: 30 } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ archived: 1 });
    expect(await archivedTitles()).toEqual(['sa-old']);
    const g = await s.gql('mutation { archiveNotes(older_than_days: 30) }', {}, { key: SB.key });
    expect(g.body.data).toEqual({ archiveNotes: 1 });
    expect(await archivedTitles()).toEqual(['sa-old', 'sb-old']);
  });
});

describe('MULTI_TENANT_ENABLED=false: ctx.tenancy adds no tenant term', () => {
  it('a user lists every tenant\'s notes; writes still stamp the author\'s tenant', async () => {
    const s = await buildTestApp({ plugins: [notesPlugin], config: { MULTI_TENANT_ENABLED: 'false' } });
    try {
      const [X, Y] = [await createTenantUser(s), await createTenantUser(s)];
      const x = await s.http('POST', '/notes', { key: X.key, json: { title: 'x' } });
      expect(x.body.tenant_id).toBe(X.tenantId);
      await s.http('POST', '/notes', { key: Y.key, json: { title: 'y' } });
      expect((await s.http('GET', '/notes', { key: X.key })).body.total).toBe(2);
      expect((await s.gql('{ notes { total } }', {}, { key: Y.key })).body.data.notes.total).toBe(2);
    } finally {
      await s.close();
    }
  });
});
