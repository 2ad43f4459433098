/**
 * The privacy export under access rules: the documents of a resource are read under the
 * requesting actor's read rules, as `GET /<resource>` reads them. A subject exporting their own
 * data gets the rows and fields their roles let them read; an administrator without rules exports
 * everything about the subject; a role that may not read a resource exports none of it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { createRole, folders, newTenant, notes, userWith } from './helpers.ts';

type Doc = Record<string, any>;
let t: TestApp;
let a: string;
let subject: { userId: string; key: string };
let admin: { userId: string; key: string };
let writer: { userId: string; key: string };

const exportOf = async (userId: string, key: string) => {
  const res = await t.http('GET', `/privacy/users/${userId}/export`, { key });
  expect(res.status).toBe(200);
  return (typeof res.body === 'string' ? JSON.parse(res.body) : res.body) as { collections: Record<string, Doc[]> };
};

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [notes, folders] }), accessPlugin, privacyPlugin], checkResponses: false });
  a = await newTenant(t);
  await createRole(t, { name: 'open-notes', permissions: { notes: { read: { rows: { status: 'open' }, fields: { except: ['secret'] } }, create: true } } }, { tenantId: a });
  await createRole(t, { name: 'writer', permissions: { notes: { create: true } } }, { tenantId: a });
  subject = await userWith(t, a, ['open-notes']);
  writer = await userWith(t, a, ['writer']);
  admin = await userWith(t, a, ['admin']);
  for (const [title, status] of [['o1', 'open'], ['c1', 'closed'], ['o2', 'open']]) {
    const res = await t.http('POST', '/notes', { key: subject.key, json: { title, status, secret: `s-${title}` } });
    expect(res.status).toBe(201);
  }
  const w = await t.http('POST', '/notes', { key: writer.key, json: { title: 'w1', status: 'open', secret: 's-w1' } });
  expect(w.status).toBe(201);
});
afterAll(async () => {
  await t?.close();
});

describe('privacy export under access rules', () => {
  it("the subject's own export: only the rows their rules let them read, masked to their fields (as GET /notes)", async () => {
    const body = await exportOf(subject.userId, subject.key);
    const got = body.collections.notes!;
    expect(got.map((n) => n.title).sort()).toEqual(['o1', 'o2']);
    for (const n of got) expect('secret' in n).toBe(false);
    const list = await t.http('GET', '/notes', { key: subject.key });
    expect(list.body.items.filter((n: Doc) => n.created_by === subject.userId).map((n: Doc) => n.title).sort()).toEqual(['o1', 'o2']);
  });

  it("an administrator's export of the same subject: every document whole (the administrator's rules, not the subject's)", async () => {
    const got = (await exportOf(subject.userId, admin.key)).collections.notes!;
    expect(got.map((n) => [n.title, n.secret]).sort()).toEqual([['c1', 's-c1'], ['o1', 's-o1'], ['o2', 's-o2']]);
  });

  it('a role that may not read the resource exports none of it', async () => {
    const body = await exportOf(writer.userId, writer.key);
    expect(body.collections.notes).toEqual([]);
    const admins = await exportOf(writer.userId, admin.key);
    expect(admins.collections.notes!.map((n) => n.title)).toEqual(['w1']);
  });
});
