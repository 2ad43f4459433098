/**
 * The plugin template of docs/plugins.md (docs/examples/notes) compiles, loads and works: REST and
 * GraphQL share one validation and one tenant scope, its hook events can change or veto a write,
 * another plugin registers a formatter through the typed service, and its job runs tenant by
 * tenant as `systemActor(tenantId)` without leaving that tenant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, jobContext, type TestApp } from '../helpers/app.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { AppError } from '../../core/errors.ts';
import { createApp } from '../../core/kernel.ts';
import { systemActor } from '../../core/context.ts';
import { loadConfig } from '../../config/index.ts';
import { loadPlugins } from '../../config/plugins.ts';
import { uniqueDbUri } from '../helpers/app.ts';
import { notesPlugin, type NoteView } from '../../docs/examples/notes/index.ts';

const created: NoteView[] = [];

/** A second plugin, as another team would write it: depends on notes and uses only its service and events. */
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
        onHook('AFTER_NOTE_CREATE', (e) => {
          created.push(e.note);
        }),
      ],
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
  // Listed before the plugin it depends on: the kernel orders by dependsOn.
  t = await buildTestApp({ plugins: [shoutPlugin, notesPlugin.configure({ archive_after_days: 10, default_per_page: 2 })] });
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
    await expect(createApp({ config, plugins: [notesPlugin.configure({ archive_after_days: 0 })] })).rejects.toThrow(/"notes"[\s\S]*archive_after_days/);
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
    expect(a.body).toMatchObject({ total: 4, page: 1, per_page: 2 });
    expect(a.body.items).toHaveLength(2);
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

describe('hook events declared by the plugin', () => {
  it('BEFORE_NOTE_CREATE changes the payload; AFTER_NOTE_CREATE sees the stored note', async () => {
    const n = await post(B.key, { title: 'empty body' });
    expect(n.body).toBe('(empty)');
    expect(created.at(-1)).toMatchObject({ id: n.id, body: '(empty)', tenant_id: B.tenantId });
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
    await expect(createApp({ config, plugins: [notesPlugin, shoutPlugin, twice] })).rejects.toThrow(/already registered/);
    await expect(createApp({ config, plugins: [shoutPlugin] })).rejects.toThrow(/notes/);
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

describe('job archive_old_notes', () => {
  const job = () => t.app.kernel.jobs().find((j) => j.name === 'archive_old_notes')!;
  const lines: string[] = [];
  const ctx = jobContext({ log: (l: string) => void lines.push(l) });
  const archivedOf = async (tenantId: string) =>
    (await notesCol().find({ tenant_id: new Types.ObjectId(tenantId), archived: true }).toArray()).map((n) => n.title).sort();

  it('is offered to the kernel by the plugin', () => {
    expect(job()).toMatchObject({ plugin: 'notes', timeout: 600 });
  });

  it('run for one tenant (systemActor(tenantId)) archives only that tenant\'s old notes', async () => {
    const old = new Date(Date.now() - 20 * 86_400_000);
    await notesCol().updateMany({ title: { $in: ['a1', 'a2', 'b1'] } }, { $set: { created_at: old } });
    const bBefore = await notesCol().find({ tenant_id: new Types.ObjectId(B.tenantId) }).sort({ _id: 1 }).toArray();
    expect(await job().run(ctx, { tenant_id: A.tenantId })).toEqual({ tenants: 1, archived: 2 });
    expect(await archivedOf(A.tenantId)).toEqual(['a1', 'a2']);
    expect(await notesCol().find({ tenant_id: new Types.ObjectId(B.tenantId) }).sort({ _id: 1 }).toArray()).toEqual(bBefore);
    // The tenant sees it through the API.
    const listed = await t.http('GET', '/notes?archived=true', { key: A.key });
    expect(listed.body.total).toBe(2);
    const g = await t.gql('{ yes: notes(archived: true) { total } no: notes(archived: false) { total } }', {}, { key: A.key });
    expect(g.body.data).toEqual({ yes: { total: 2 }, no: { total: 2 } });
  });

  it('run without a tenant walks every tenant, each as its own system actor', async () => {
    expect(await job().run(ctx, {})).toEqual({ tenants: 2, archived: 1 });
    expect(await archivedOf(B.tenantId)).toEqual(['b1']);
    expect(await archivedOf(A.tenantId)).toEqual(['a1', 'a2']);
    expect(lines.some((l) => l.includes(B.tenantId))).toBe(true);
  });

  it('bad job parameters are refused before any write', async () => {
    await expect(job().run(ctx, { tenant_id: 'nope' })).rejects.toThrow();
    await expect(job().run(ctx, { other: 1 })).rejects.toThrow();
  });
});
