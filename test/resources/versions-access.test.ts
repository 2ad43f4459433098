/**
 * Versions under the access rules: history shows only what the caller may read now. A role that
 * reads only `title` sees only `title` in an old version, in its diff and among its changed fields;
 * a row outside the caller's read rows has no history for it (404), REST and GraphQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { userWith } from '../access/helpers.ts';
import { ifMatch } from './write-helpers.ts';

const memos = defineResource({
  name: 'memos',
  schema: new Schema({ title: { type: String, required: true }, secret: { type: String, default: null }, public: { type: Boolean, default: true } }),
  versions: true,
  access: { reader: { read: { rows: { public: true }, fields: ['title', 'public'] } } },
});

let t: TestApp;
let owner: { key: string; tenantId: string };
let reader: { key: string };

beforeAll(async () => {
  // Masked documents leave required fields out: no response check.
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [memos] }), accessPlugin], checkResponses: false });
  owner = await createTenantUser(t);
  reader = await userWith(t, owner.tenantId, ['reader']);
});
afterAll(() => t?.close());

describe('history under the caller\'s read rules', () => {
  it('masks old documents, diffs and changed fields to the readable fields', async () => {
    const c = await t.http('POST', '/memos', { key: owner.key, json: { title: 't1', secret: 's1' } });
    const id = c.body._id as string;
    expect((await t.http('PATCH', `/memos/${id}`, { key: owner.key, json: { title: 't2', secret: 's2' }, headers: ifMatch('"1"') })).status).toBe(200);

    const full = await t.http('GET', `/memos/${id}/versions/1`, { key: owner.key });
    expect(full.body.document).toMatchObject({ title: 't1', secret: 's1' });

    const one = await t.http('GET', `/memos/${id}/versions/1`, { key: reader.key });
    expect(one.status).toBe(200);
    expect(one.body.document.title).toBe('t1');
    expect(one.body.document).not.toHaveProperty('secret');
    const list = await t.http('GET', `/memos/${id}/versions`, { key: reader.key });
    expect(list.body.items[0].changed_fields).toEqual(['title']);
    const diff = await t.http('GET', `/memos/${id}/versions/2/diff`, { key: reader.key });
    expect(diff.body.changes).toEqual([{ field: 'title', before: 't1', after: 't2' }]);
    const g = await t.gql(`query($id: ID!) { memo(id: $id) { versionAt(n: 1) { document { title secret } } } }`, { id }, { key: reader.key });
    expect(g.body.data.memo.versionAt.document).toEqual({ title: 't1', secret: null });
  });

  it('a restore goes through the write rules: a reader without an update rule gets 403 and nothing is written', async () => {
    const c = await t.http('POST', '/memos', { key: owner.key, json: { title: 'a' } });
    const id = c.body._id as string;
    expect((await t.http('PATCH', `/memos/${id}`, { key: owner.key, json: { title: 'b' }, headers: ifMatch('"1"') })).status).toBe(200);
    expectError(await t.http('POST', `/memos/${id}/versions/1/restore`, { key: reader.key, headers: ifMatch('"2"') }), 403, 'ACCESS_DENIED');
    const now = await t.http('GET', `/memos/${id}`, { key: owner.key });
    expect(now.body).toMatchObject({ title: 'b', version: 2 });
  });

  it('a row the caller may not read now has no history for it, even if an old version was readable', async () => {
    const c = await t.http('POST', '/memos', { key: owner.key, json: { title: 'open' } });
    const id = c.body._id as string;
    expect((await t.http('PATCH', `/memos/${id}`, { key: owner.key, json: { public: false }, headers: ifMatch('"1"') })).status).toBe(200);
    for (const path of ['versions', 'versions/1', 'versions/2/diff']) expectError(await t.http('GET', `/memos/${id}/${path}`, { key: reader.key }), 404, 'NOT_FOUND');
  });
});
