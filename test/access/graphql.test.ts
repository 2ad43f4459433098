/**
 * GraphQL enforcement of access rules: the resource queries and mutations give the same rows, the
 * same refusals (codes in `extensions`) and never a field the caller may not read (null instead).
 */
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
const countNotes = () => t.app.db.conn.collection('notes').countDocuments({});
const stored = async (id: string) => (await t.http('GET', `/notes/${id}`, { headers: asAdmin(a) })).body as Doc;
const NOTE = '_id etag version title status level secret owner_id';

/** A GraphQL call as `u` (or `key`); the HTTP status is always 200. */
async function gql(query: string, variables: Doc = {}, key = u.key) {
  const res = await t.gql<Doc>(query, variables, { key });
  expect(res.status).toBe(200);
  return res.body;
}
const code = (body: { errors?: { extensions?: Doc }[] }) => body.errors?.[0]?.extensions;

beforeAll(async () => {
  t = await accessApp();
  a = await newTenant(t);
  b = await newTenant(t);
  await createRole(t, {
    name: 'own',
    permissions: {
      notes: {
        read: { rows: { owner_id: '$actor.id' }, fields: { except: ['secret'] } },
        create: { fields: ['title', 'status', 'project_id', 'secret'], presets: { owner_id: '$actor.id' }, check: { status: { $in: ['draft', 'hidden'] } } },
        update: { rows: { owner_id: '$actor.id' }, fields: ['title', 'status'], check: { status: { $in: ['draft', 'review', 'gone'] } } },
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
  await seedNote(b, { title: 'b1', status: 'draft', owner_id: u.userId });
});
afterAll(() => t?.close());

describe('queries', () => {
  it('a list returns only the granted rows, a hidden field as null, and counts only those rows (offset and cursor)', async () => {
    const body = await gql(`{ notes(sort: "title") { total items { ${NOTE} } } }`);
    expect(body.errors).toBeUndefined();
    expect(body.data!.notes.total).toBe(2);
    expect(body.data!.notes.items).toMatchObject([{ title: 'm1', level: 1, secret: null, owner_id: u.userId }, { title: 'm2', level: 2, secret: null }]);
    const first = await gql('{ notes(sort: "title", limit: 1) { items { title } cursors { next has_next } } }');
    expect(first.data!.notes.items).toEqual([{ title: 'm1' }]);
    const next = await gql('query($c: String) { notes(sort: "title", limit: 1, cursor: $c) { items { title } cursors { has_next } } }', { c: first.data!.notes.cursors.next });
    expect(next.data!.notes).toEqual({ items: [{ title: 'm2' }], cursors: { has_next: false } });
  });

  it('get-one of a row outside the rules is NOT_FOUND, as a missing row; an own row has the hidden field null', async () => {
    const out = await gql(`query($id: ID!) { note(id: $id) { ${NOTE} } }`, { id: theirs[0]!._id });
    expect(out.data?.note ?? null).toBeNull();
    expect(code(out)).toMatchObject({ code: 'NOT_FOUND' });
    const own = await gql(`query($id: ID!) { note(id: $id) { ${NOTE} } }`, { id: mine[0]!._id });
    expect(own.data!.note).toMatchObject({ title: 'm1', secret: null, etag: '"1"' });
  });

  it.each([
    ['filter', '{ notes(filter: { secret: "s3" }) { total } }'],
    ['filter operator', '{ notes(filter: { secret__regex: "s" }) { total } }'],
    ['where', 'query($w: JSON) { notes(where: $w) { total } }'],
    ['sort', '{ notes(sort: "secret") { total } }'],
    ['search', '{ notes(q: "s3") { total } }'],
    ['fields', '{ notes(fields: ["secret"]) { total } }'],
  ])('%s by a field the caller may not read → ACCESS_DENIED naming it', async (_l, query) => {
    const body = await gql(query, { w: { $or: [{ secret: 's3' }] } });
    expect(body.data?.notes ?? null).toBeNull();
    expect(code(body)).toMatchObject({ code: 'ACCESS_DENIED', status: 403, details: { field: 'secret' } });
  });

  it('a relation applies the related resource\'s rules: its fields masked, a row outside them null', async () => {
    const body = await gql('{ notes(sort: "title") { items { title project { _id name code public } } } }');
    expect(body.errors).toBeUndefined();
    expect(body.data!.notes.items).toEqual([
      { title: 'm1', project: { _id: pub._id, name: 'pub', code: null, public: null } },
      { title: 'm2', project: null },
    ]);
  });

  it('a user holding only the built-in role keeps today\'s access', async () => {
    const plain = await userWith(t, a, ['user']);
    const body = await gql('{ notes(sort: "title") { total items { secret } } }', {}, plain.key);
    expect(body.data!.notes.total).toBe(4);
    expect(body.data!.notes.items.map((d: Doc) => d.secret)).toEqual(['m1', 'm2', 'o1', 'o2'].map((_x, i) => `s${i + 1}`));
  });
});

describe('mutations', () => {
  const CREATE = `mutation($input: JSON!) { createNote(input: $input) { ${NOTE} } }`;
  const UPDATE = `mutation($id: ID!, $m: String, $input: JSON!) { updateNote(id: $id, if_match: $m, input: $input) { ${NOTE} } }`;
  const REPLACE = `mutation($id: ID!, $m: String, $input: JSON!) { replaceNote(id: $id, if_match: $m, input: $input) { ${NOTE} } }`;
  const DELETE = `mutation($id: ID!, $m: String) { deleteNote(id: $id, if_match: $m) { ${NOTE} is_deleted } }`;
  const RESTORE = `mutation($id: ID!, $m: String) { restoreNote(id: $id, if_match: $m) { ${NOTE} } }`;

  it('a create naming a field the role may not write is ACCESS_DENIED naming it; one failing check has reason check; nothing is written', async () => {
    const before = await countNotes();
    const field = await gql(CREATE, { input: { title: 'n', status: 'draft', level: 3 } });
    expect(code(field)).toMatchObject({ code: 'ACCESS_DENIED', details: { field: 'level' } });
    const check = await gql(CREATE, { input: { title: 'n', status: 'published' } });
    expect(code(check)).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'check' } });
    const preset = await gql(CREATE, { input: { title: 'n', status: 'draft', owner_id: theirs[0]!.owner_id } });
    expect(code(preset)).toMatchObject({ code: 'ACCESS_DENIED', details: { field: 'owner_id' } });
    expect(await countNotes()).toBe(before);
  });

  it('a create returns the document masked by the read rules: a field written but not readable is null', async () => {
    const body = await gql(CREATE, { input: { title: 'c1', status: 'draft', secret: 'kept' } });
    expect(body.errors).toBeUndefined();
    expect(body.data!.createNote).toMatchObject({ title: 'c1', owner_id: u.userId, secret: null, version: 1 });
    expect(await stored(body.data!.createNote._id)).toMatchObject({ secret: 'kept' });
  });

  it('update, replace, delete and restore of a row outside the rules are NOT_FOUND and change nothing', async () => {
    const id = theirs[1]!._id as string;
    for (const [q, v] of [[UPDATE, { input: { title: 'x' } }], [REPLACE, { input: { title: 'x' } }], [DELETE, {}]] as const) {
      const body = await gql(q, { id, m: '"1"', ...v });
      expect(code(body)).toMatchObject({ code: 'NOT_FOUND' });
    }
    expect(await stored(id)).toMatchObject({ title: 'o2', version: 1, is_deleted: false });
  });

  it('an update of a field outside the rule, or failing check, is refused; an allowed one returns the masked row', async () => {
    const id = mine[1]!._id as string;
    const lvl = await gql(UPDATE, { id, m: '"1"', input: { level: 9 } });
    expect(code(lvl)).toMatchObject({ code: 'ACCESS_DENIED', details: { field: 'level' } });
    const chk = await gql(UPDATE, { id, m: '"1"', input: { status: 'published' } });
    expect(code(chk)).toMatchObject({ code: 'ACCESS_DENIED', details: { reason: 'check' } });
    expect(await stored(id)).toMatchObject({ level: 2, status: 'draft', version: 1 });
    const ok = await gql(UPDATE, { id, m: '"1"', input: { status: 'review' } });
    expect(ok.data!.updateNote).toMatchObject({ status: 'review', secret: null, level: 2, version: 2 });
  });

  it('a delete of an own row answers the masked row; a restore needs the admin role, as without rules', async () => {
    const created = (await gql(CREATE, { input: { title: 'del', status: 'draft', secret: 'z' } })).data!.createNote;
    const del = await gql(DELETE, { id: created._id, m: created.etag });
    expect(del.data!.deleteNote).toMatchObject({ title: 'del', is_deleted: true, secret: null });
    const res = await gql(RESTORE, { id: created._id, m: '"2"' });
    expect(code(res)).toMatchObject({ code: 'ACCESS_DENIED' });
  });

  it('a write result the caller may not read keeps only _id and the base fields', async () => {
    await createRole(t, { name: 'drop', permissions: { notes: { read: { rows: { status: 'draft' } }, create: true } } }, { tenantId: a });
    const dropper = await userWith(t, a, ['drop']);
    const body = await gql(CREATE, { input: { title: 'hidden-row', status: 'hidden', secret: 'q' } }, dropper.key);
    expect(body.errors).toBeUndefined();
    expect(body.data!.createNote).toMatchObject({ title: null, status: null, secret: null, version: 1 });
    const rest = await t.http('POST', '/notes', { key: dropper.key, json: { title: 'hidden-rest', status: 'hidden' } });
    expect(rest.status).toBe(201);
    expect(rest.body.title).toBeUndefined();
    expect(rest.body._id).toBeDefined();
  });

  it('a rule never reaches another tenant over GraphQL either', async () => {
    await createRole(t, { name: 'everything', permissions: { notes: { read: { rows: {} } } } }, { tenantId: b });
    const other = await userWith(t, b, ['everything']);
    const body = await gql('{ notes(per_page: 100) { items { title } } }', {}, other.key);
    expect(body.data!.notes.items.map((d: Doc) => d.title)).toEqual(['b1']);
  });
});
