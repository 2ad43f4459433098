/**
 * `_actions` on a document over GraphQL: what the caller may do to it now, of update, delete,
 * publish, unpublish and restore_version, decided as those calls decide. Without rules: administrators publish and
 * unpublish anything, a user only the draft they saved and what they created; under rules, the
 * `publish` and `update` grants. Every action listed succeeds and every one left out is refused;
 * another tenant reads no such document.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { createRole, newTenant, userWith } from '../access/helpers.ts';
import { ifMatch } from './write-helpers.ts';

type User = { userId: string; key: string };
let t: TestApp;
let admin: User;
let pat: User; // built-in user role, no rules
let editor: User; // read, create, update: no publish
let publisher: User; // read, read_drafts, publish: no update
let elsewhere: User; // an administrator of another tenant

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [projectsResource] }), accessPlugin], checkResponses: false });
  const tenant = await newTenant(t);
  await createRole(t, { name: 'editor', permissions: { projects: { read: true, create: true, update: true } } }, { tenantId: tenant });
  await createRole(t, { name: 'publisher', permissions: { projects: { read: true, read_drafts: true, publish: true } } }, { tenantId: tenant });
  admin = await userWith(t, tenant, ['user', 'admin']);
  pat = await userWith(t, tenant, ['user']);
  editor = await userWith(t, tenant, ['editor']);
  publisher = await userWith(t, tenant, ['publisher']);
  elsewhere = await userWith(t, await newTenant(t), ['user', 'admin']);
});
afterAll(() => t?.close());

const GET = 'query($id: ID!) { project(id: $id, draft: true) { _id etag _status _actions } }';
async function allActions(id: string, who: User): Promise<string[] | null> {
  const res = await t.gql<{ project: { _actions: string[] } | null }>(GET, { id }, { key: who.key });
  expect(res.status).toBe(200);
  return res.body.data?.project?._actions ?? null;
}
/** The actions of drafts and versions (update and delete are checked on their own below). */
const actions = async (id: string, who: User) => (await allActions(id, who))?.filter((a) => a !== 'update' && a !== 'delete') ?? null;
async function post(who: User, body: object, query = ''): Promise<string> {
  const res = await t.http('POST', `/projects${query}`, { key: who.key, json: body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body._id as string;
}
const etag = async (id: string) => (await t.http('GET', `/projects/${id}?draft=true`, { key: admin.key })).headers.get('etag')!;
/** The call behind each action, as `who`: its status. */
async function attempt(action: string, id: string, who: User): Promise<number> {
  const path = action === 'restore_version' ? `/projects/${id}/versions/1/restore` : `/projects/${id}/${action}`;
  return (await t.http('POST', path, { key: who.key, headers: ifMatch(await etag(id)) })).status;
}

describe('_actions', () => {
  it('without rules: administrators may publish and unpublish; a user only their own draft and what they created', async () => {
    const adminsDraft = await post(admin, { name: 'actions one' });
    expect((await t.http('PATCH', `/projects/${adminsDraft}?draft=true`, { key: admin.key, json: { name: 'actions one changed' }, headers: ifMatch('"1"') })).status).toBe(200);
    const patsDraft = await post(pat, { name: 'actions two' }, '?draft=true');
    const patsPublished = await post(pat, { name: 'actions three' });

    expect(await actions(adminsDraft, admin)).toEqual(['publish', 'unpublish', 'restore_version']);
    expect(await actions(adminsDraft, pat)).toEqual(['restore_version']);
    expect(await actions(patsDraft, pat)).toEqual(['publish', 'restore_version']);
    expect(await actions(patsDraft, admin)).toEqual(['publish', 'restore_version']);
    expect(await actions(patsPublished, pat)).toEqual(['unpublish', 'restore_version']);

    // What is left out is refused; what is listed is done.
    expect(await attempt('publish', adminsDraft, pat)).toBe(404);
    expect(await attempt('unpublish', adminsDraft, pat)).toBe(404);
    expect(await attempt('unpublish', patsPublished, pat)).toBe(200);
    expect(await actions(patsPublished, pat)).toEqual(['publish', 'restore_version']);
    expect(await attempt('publish', patsDraft, pat)).toBe(200);
    expect(await actions(patsDraft, pat)).toEqual(['unpublish', 'restore_version']);
  });

  it('under rules: publish needs the publish grant, restore_version the update grant', async () => {
    const id = await post(editor, { name: 'actions four' });
    expect(await actions(id, editor)).toEqual(['restore_version']);
    expect(await actions(id, publisher)).toEqual(['unpublish']);
    expect(await attempt('unpublish', id, editor)).toBe(403);
    expect(await attempt('restore_version', id, publisher)).toBe(403);
    expect(await attempt('unpublish', id, publisher)).toBe(200);
    expect(await actions(id, publisher)).toEqual(['publish']);
  });

  it('update and delete: listed where the call succeeds, left out where it is refused (without rules and under rules)', async () => {
    /** Tries `action` on a fresh copy of the situation: PATCH or DELETE with the current ETag. */
    const tryIt = async (action: 'update' | 'delete', id: string, who: User) =>
      (action === 'update'
        ? await t.http('PATCH', `/projects/${id}`, { key: who.key, headers: ifMatch(await etag(id)), json: { name: `changed by ${who.userId}` } })
        : await t.http('DELETE', `/projects/${id}`, { key: who.key, headers: ifMatch(await etag(id)) })).status;
    const cases: [User, string[]][] = [[admin, ['update', 'delete']], [pat, []], [editor, ['update']], [publisher, []]];
    for (const [who, must] of cases) {
      for (const action of ['update', 'delete'] as const) {
        const id = await post(admin, { name: `actions ${action} ${who.userId}` });
        const listed = (await allActions(id, who))!.includes(action);
        if (must.includes(action)) expect(listed, `${action} listed`).toBe(true);
        const status = await tryIt(action, id, who);
        // What is listed is done; what is left out is refused (403 by the rules, 404 outside the rows).
        if (listed) expect(status, `${action} listed`).toBe(action === 'update' ? 200 : 204);
        else expect([403, 404], `${action} not listed: ${status}`).toContain(status);
      }
    }
    // An editor may change but never delete: the button the console would offer is never there.
    const id = await post(editor, { name: 'actions editor own' });
    expect(await allActions(id, editor)).toEqual(['update', 'restore_version']);
    expect(await tryIt('delete', id, editor)).toBe(403);
  });

  it('another tenant reads no such document, so no actions', async () => {
    const id = await post(admin, { name: 'actions five' });
    const res = await t.gql(GET, { id }, { key: elsewhere.key });
    expect(res.body.data?.project ?? null).toBeNull();
    expect(res.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('a deleted document offers no restore of a version (restore it from deletion first)', async () => {
    const id = await post(admin, { name: 'actions six' });
    expect((await t.http('DELETE', `/projects/${id}`, { key: admin.key, headers: ifMatch('"1"') })).status).toBe(204);
    const res = await t.gql<{ project: { _actions: string[] } }>('query($id: ID!) { project(id: $id, include_deleted: true) { _actions } }', { id }, { key: admin.key });
    expect(res.body.data?.project._actions).toEqual([]);
    expect((await t.http('POST', `/projects/${id}/versions/1/restore`, { key: admin.key, headers: ifMatch('"2"') })).status).toBe(404);
  });
});
