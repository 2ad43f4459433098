/** REST enforcement of access rules: every side door of the rows and fields rules, writes, presets, check, populate, explain. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { accessApp, createRole, newTenant, userWith } from './helpers.ts';

type Doc = Record<string, any>;
let t: TestApp;
let a: string;
let b: string;
let u: { userId: string; key: string };
let mine: Doc[];
let theirs: Doc[];
let pub: Doc;
let priv: Doc;

const asAdmin = (tenant: string) => ({ 'X-Tenant-Id': tenant });
const seedNote = async (tenant: string, body: Doc) => (await t.http('POST', '/notes', { json: body, headers: asAdmin(tenant) })).body as Doc;
const countNotes = async () => (await t.app.db.conn.collection('notes').countDocuments({}));

beforeAll(async () => {
  t = await accessApp();
  a = await newTenant(t);
  b = await newTenant(t);
  await createRole(t, {
    name: 'own',
    permissions: {
      notes: {
        read: { rows: { owner_id: '$actor.id' }, fields: { except: ['secret'] } },
        create: { fields: ['title', 'status', 'project_id'], presets: { owner_id: '$actor.id' }, check: { status: { $in: ['draft'] } } },
        update: { rows: { owner_id: '$actor.id' }, fields: ['title', 'status'], check: { status: { $in: ['draft', 'review'] } } },
        delete: { rows: { owner_id: '$actor.id' } },
      },
    },
  }, { tenantId: a });
  u = await userWith(t, a, ['own', 'reader']);
  pub = (await t.http('POST', '/folders', { json: { name: 'pub', code: 'P1', public: true }, headers: asAdmin(a) })).body;
  priv = (await t.http('POST', '/folders', { json: { name: 'priv', code: 'P2', public: false }, headers: asAdmin(a) })).body;
  mine = [
    await seedNote(a, { title: 'm1', status: 'draft', level: 1, secret: 's1', owner_id: u.userId, project_id: pub._id }),
    await seedNote(a, { title: 'm2', status: 'draft', level: 2, secret: 's2', owner_id: u.userId, project_id: priv._id }),
  ];
  theirs = [
    await seedNote(a, { title: 'o1', status: 'draft', level: 3, secret: 's3', owner_id: '0123456789abcdef01234567' }),
    await seedNote(a, { title: 'o2', status: 'draft', level: 4, secret: 's4' }),
  ];
  // Same owner id in another tenant: the rule never reaches it.
  await seedNote(b, { title: 'b1', status: 'draft', owner_id: u.userId });
});
afterAll(() => t?.close());

describe('reads', () => {
  it('a list returns only the rows the rule grants, without the fields it hides, and counts only those', async () => {
    const res = await t.http('GET', '/notes?sort=title', { key: u.key });
    expect(res.status).toBe(200);
    expect(res.body.items.map((d: Doc) => d.title)).toEqual(['m1', 'm2']);
    expect(res.body.items.every((d: Doc) => !('secret' in d) && d.level !== undefined && d.version !== undefined)).toBe(true);
    expect(res.headers.get('x-total-count')).toBe('2');
    expect(res.body.total).toBe(2);
    const cursor = await t.http('GET', '/notes?limit=1&sort=title', { key: u.key });
    expect(cursor.body.items.map((d: Doc) => d.title)).toEqual(['m1']);
    const next = await t.http('GET', `/notes?limit=1&sort=title&cursor=${encodeURIComponent(cursor.body.cursors.next)}`, { key: u.key });
    expect(next.body.items.map((d: Doc) => d.title)).toEqual(['m2']);
    expect(next.body.cursors.has_next).toBe(false);
  });

  it('a row outside the rules is 404 on get, update and delete, as if it did not exist', async () => {
    const id = theirs[0]!._id as string;
    expect((await t.http('GET', `/notes/${id}`, { key: u.key })).status).toBe(404);
    expect((await t.http('PATCH', `/notes/${id}`, { key: u.key, json: { title: 'x' }, headers: { 'If-Match': '"1"' } })).status).toBe(404);
    expect((await t.http('DELETE', `/notes/${id}`, { key: u.key, headers: { 'If-Match': '"1"' } })).status).toBe(404);
    const still = await t.http('GET', `/notes/${id}`, { headers: asAdmin(a) });
    expect(still.body).toMatchObject({ title: 'o1', version: 1, is_deleted: false });
    const own = await t.http('GET', `/notes/${mine[0]!._id}`, { key: u.key });
    expect(own.status).toBe(200);
    expect(own.body.secret).toBeUndefined();
  });

  it.each([
    ['filter', '/notes?secret=s3'],
    ['filter suffix', '/notes?secret__regex=s'],
    ['where', `/notes?where=${encodeURIComponent(JSON.stringify({ $or: [{ secret: 's3' }] }))}`],
    ['sort', '/notes?sort=secret'],
    ['search', '/notes?q=s3'],
    ['fields', '/notes?fields=secret'],
  ])('%s by a field the caller may not read → 403 naming it', async (_l, path) => {
    const res = await t.http('GET', path, { key: u.key });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'ACCESS_DENIED', details: { field: 'secret' } });
  });

  it('populate applies the related resource\'s rules (code rules: public folders, name only)', async () => {
    const res = await t.http('GET', '/notes?sort=title&populate=project_id', { key: u.key });
    const [m1, m2] = res.body.items as Doc[];
    expect(m1!.project_id).toEqual({ _id: pub._id, name: 'pub', ...pick(m1!.project_id) });
    expect(m1!.project_id.code).toBeUndefined();
    expect(m2!.project_id).toBeNull();
  });
});

const pick = (d: Doc) => Object.fromEntries(Object.entries(d).filter(([k]) => !['name', 'code', 'public'].includes(k)));

describe('writes', () => {
  it('a create naming a field the role may not write is 403 naming it; nothing is written', async () => {
    const before = await countNotes();
    const res = await t.http('POST', '/notes', { key: u.key, json: { title: 'n', status: 'draft', secret: 'x' } });
    expect(res.status).toBe(403);
    expect(res.body.error.details.field).toBe('secret');
    expect(await countNotes()).toBe(before);
  });

  it('a create failing check is 403 with reason check; nothing is written', async () => {
    const before = await countNotes();
    const res = await t.http('POST', '/notes', { key: u.key, json: { title: 'n', status: 'published' } });
    expect(res.status).toBe(403);
    expect(res.body.error.details.reason).toBe('check');
    expect(await countNotes()).toBe(before);
  });

  it('presets are set by the server and cannot be changed', async () => {
    const ok = await t.http('POST', '/notes', { key: u.key, json: { title: 'preset', status: 'draft' } });
    expect(ok.status).toBe(201);
    expect(ok.body.owner_id).toBe(u.userId);
    const other = await t.http('POST', '/notes', { key: u.key, json: { title: 'p2', status: 'draft', owner_id: theirs[0]!.owner_id } });
    expect(other.status).toBe(403);
    expect(other.body.error.details.field).toBe('owner_id');
  });

  it('an update of a field outside the rule, or failing check, is refused and changes nothing', async () => {
    const id = mine[1]!._id as string;
    const lvl = await t.http('PATCH', `/notes/${id}`, { key: u.key, json: { level: 9 }, headers: { 'If-Match': '"1"' } });
    expect(lvl.status).toBe(403);
    expect(lvl.body.error.details.field).toBe('level');
    const chk = await t.http('PATCH', `/notes/${id}`, { key: u.key, json: { status: 'published' }, headers: { 'If-Match': '"1"' } });
    expect(chk.body.error.details.reason).toBe('check');
    expect((await t.http('GET', `/notes/${id}`, { headers: asAdmin(a) })).body).toMatchObject({ level: 2, status: 'draft', version: 1 });
    const ok = await t.http('PATCH', `/notes/${id}`, { key: u.key, json: { status: 'review' }, headers: { 'If-Match': '"1"' } });
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe('review');
  });

  it('bulk create reports refused items and writes only the allowed ones', async () => {
    const res = await t.http('POST', '/notes/bulk', { key: u.key, json: { items: [{ title: 'b-ok', status: 'draft' }, { title: 'b-no', status: 'draft', level: 1 }] } });
    expect(res.status).toBe(207);
    expect(res.body.created_count).toBe(1);
    expect(res.body.errors[0]).toMatchObject({ index: 1, error: { code: 'ACCESS_DENIED', details: { field: 'level' } } });
  });

  it('an action without a rule is denied (403)', async () => {
    const reader = await userWith(t, a, ['reader']);
    const res = await t.http('POST', '/folders', { key: reader.key, json: { name: 'x' } });
    expect(res.status).toBe(403);
  });
});

describe('tenants and built-in roles', () => {
  it('a rule granting every row never reaches another tenant', async () => {
    await createRole(t, { name: 'all', permissions: { notes: { read: { rows: {} } } } }, { tenantId: a });
    const all = await userWith(t, a, ['all']);
    const res = await t.http('GET', '/notes?per_page=100', { key: all.key });
    expect(res.body.items.map((d: Doc) => d.title)).not.toContain('b1');
    expect(res.body.items.length).toBeGreaterThanOrEqual(4);
  });

  it('a user with the built-in role only keeps today\'s access', async () => {
    const plain = await userWith(t, a, ['user']);
    const res = await t.http('GET', '/notes?per_page=100', { key: plain.key });
    expect(res.body.items.some((d: Doc) => d.secret === 's3')).toBe(true);
  });
});

describe('explain', () => {
  it('gives the effective rule, and it agrees with what the user gets', async () => {
    const res = await t.http('POST', '/admin/access/explain', { json: { user_id: u.userId, resource: 'notes', action: 'read' }, headers: asAdmin(a) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ allowed: true, restricted: true, rows: { owner_id: u.userId } });
    expect(res.body.roles).toEqual(['own', 'reader']);
    expect(res.body.fields).not.toContain('secret');
    const list = await t.http('GET', '/notes?per_page=100', { key: u.key });
    for (const d of list.body.items as Doc[]) {
      expect(d.owner_id).toBe(res.body.rows.owner_id);
      for (const k of Object.keys(d)) if (!['_id', 'tenant_id', 'created_at', 'updated_at', 'created_by', 'updated_by', 'is_deleted', 'deleted_at', 'deleted_by', 'version'].includes(k)) expect(res.body.fields).toContain(k);
    }
    const folders = await t.http('POST', '/admin/access/explain', { json: { user_id: u.userId, resource: 'folders', action: 'create' }, headers: asAdmin(a) });
    expect(folders.body.allowed).toBe(false);
    const other = await t.http('POST', '/admin/access/explain', { json: { user_id: u.userId, resource: 'notes', action: 'read' }, headers: asAdmin(b) });
    expect(other.status).toBe(404);
  });
});
