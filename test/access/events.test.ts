/**
 * Access rules on the event surfaces: an actor whose reads of a resource are restricted (a custom
 * role, or a role the resource's code rules name, and no built-in role without rules) gets, over
 * `GET /events/stream`, graphql-ws and GraphQL over SSE, only the events of rows its rules let it
 * read, with `data` masked as REST masks the row, in committed order; a plain `user` of the tenant
 * gets every event whole; other tenants get none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { EVENT_FIELDS, eventStream, sleep, sseSubscribe, until, wsTracker, type SseStream } from '../realtime/helpers.ts';
import { accessApp, createRole, newTenant, userWith } from './helpers.ts';

type User = { userId: string; key: string };
let t: TestApp;
const ws = wsTracker(() => t.url);
const streams: SseStream[] = [];
let a: string;
let b: string;
let own: User;
let own2: User;
let reader: User;
let ownAndUser: User;
let plain: User;
let otherTenant: User;

const CHANGED = `subscription($resource: String!) { resourceChanged(resource: $resource) { ${EVENT_FIELDS} } }`;
const asAdmin = (tenant: string) => ({ 'X-Tenant-Id': tenant });
const create = async (path: string, tenant: string, body: Record<string, unknown>) => {
  const res = await t.http('POST', path, { json: body, headers: asAdmin(tenant) });
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { _id: string };
};
const stream = async (u: User, types: string) => {
  const s = await eventStream(t.url, { key: u.key, query: `types=${types}` });
  streams.push(s);
  expect(s.status).toBe(200);
  return s;
};
const listening = (n: number) => until(() => t.app.services.get('realtime').stats().listeners >= n, 10_000, `${n} listeners`);

beforeAll(async () => {
  t = await accessApp({ EVENTS_POLL_INTERVAL_MS: '50' });
  a = await newTenant(t);
  b = await newTenant(t);
  await createRole(t, { name: 'own', permissions: { notes: { read: { rows: { owner_id: '$actor.id' }, fields: { except: ['secret'] } } } } }, { tenantId: a });
  own = await userWith(t, a, ['own']);
  own2 = await userWith(t, a, ['own']);
  reader = await userWith(t, a, ['reader']);
  ownAndUser = await userWith(t, a, ['own', 'user']);
  plain = await userWith(t, a, ['user']);
  otherTenant = await userWith(t, b, ['user']);
});
afterAll(async () => {
  for (const s of streams) s.close();
  await ws.disposeAll();
  await t?.close();
});

describe('resource events under access rules', () => {
  it('GET /events/stream: a restricted custom role gets the events of the rows it may read, masked, in order, and none of other rows; plain users and roles REST leaves unrestricted get every one whole; another tenant gets none', async () => {
    const sOwn = await stream(own, 'notes.created');
    const sOwnAndUser = await stream(ownAndUser, 'notes.created');
    const sPlain = await stream(plain, 'notes.created');
    const sOther = await stream(otherTenant, 'notes.created');
    await listening(4);
    await create('/notes', a, { title: 'mine 1', secret: 's1', owner_id: own.userId });
    await create('/notes', a, { title: 'theirs', secret: 's2', owner_id: plain.userId });
    await create('/notes', a, { title: 'mine 2', secret: 's3', owner_id: own.userId });
    await create('/notes', a, { title: 'mine 3', secret: 's4', owner_id: own.userId });
    await create('/notes', b, { title: 'tenant b', secret: 's5' });

    await until(() => sPlain.events.length >= 4 && sOwnAndUser.events.length >= 4 && sOther.events.length >= 1 && sOwn.events.length >= 3, 15_000, 'events delivered');
    expect(sPlain.data().map((e) => [e.data.title, e.data.secret])).toEqual([['mine 1', 's1'], ['theirs', 's2'], ['mine 2', 's3'], ['mine 3', 's4']]);
    // A built-in role without rules keeps the access it always had, as on REST.
    expect(sOwnAndUser.data().map((e) => e.data.title)).toEqual(['mine 1', 'theirs', 'mine 2', 'mine 3']);
    expect(sOther.data().map((e) => e.data.title)).toEqual(['tenant b']);
    // The same push reached every listener; a grace period for anything more on the restricted stream.
    await sleep(300);
    const got = sOwn.data();
    expect(got.map((e) => [e.data.title, 'secret' in e.data])).toEqual([['mine 1', false], ['mine 2', false], ['mine 3', false]]);
    // The masked data is the row as REST answers it.
    const rest = await t.http('GET', `/notes/${got[0].data._id ?? got[0].data.id}`, { key: own.key });
    expect(rest.status).toBe(200);
    expect(Object.keys(got[0].data).sort()).toEqual(Object.keys(rest.body).sort());
  });

  it('a role named by the resource\'s code rules: only the events of rows they let it read, with their fields only', async () => {
    const sReader = await stream(reader, 'folders.created');
    const sPlain = await stream(plain, 'folders.created');
    await listening(6);
    await create('/folders', a, { name: 'pub', code: 'P1', public: true });
    await create('/folders', a, { name: 'priv', code: 'P2', public: false });
    await until(() => sPlain.events.length >= 2 && sReader.events.length >= 1, 15_000, 'folder events');
    expect(sPlain.data().map((e) => e.data.code)).toEqual(['P1', 'P2']);
    await sleep(300);
    expect(sReader.data().map((e) => [e.data.name, e.data.code, e.data.public])).toEqual([['pub', undefined, undefined]]);
  });

  it('GraphQL subscriptions (graphql-ws and GraphQL over SSE): resourceChanged delivers the restricted role its rows masked (not another holder of the role in its group), everything to a plain user of the tenant, nothing across tenants', async () => {
    const before = t.app.services.get('realtime').stats().listeners;
    const wsOwn = ws.sub(ws.client({ apiKey: own.key }), CHANGED, { resource: 'notes' });
    // The same roles, so the same visibility key and subscription group as `own`, but other rows.
    const wsOwn2 = ws.sub(ws.client({ apiKey: own2.key }), CHANGED, { resource: 'notes' });
    const wsPlain = ws.sub(ws.client({ apiKey: plain.key }), CHANGED, { resource: 'notes' });
    const wsOther = ws.sub(ws.client({ apiKey: otherTenant.key }), CHANGED, { resource: 'notes' });
    const sseOwn = await sseSubscribe(t.url, CHANGED, { resource: 'notes' }, { 'X-API-Key': own.key });
    const ssePlain = await sseSubscribe(t.url, CHANGED, { resource: 'notes' }, { 'X-API-Key': plain.key });
    streams.push(sseOwn, ssePlain);
    await listening(before + 6);
    await create('/notes', a, { title: 'live theirs', secret: 's6', owner_id: plain.userId });
    await create('/notes', a, { title: 'live mine', secret: 's7', owner_id: own.userId });

    await until(() => wsPlain.values('resourceChanged').length >= 2 && ssePlain.results().length >= 2 && wsOwn.results.length >= 1 && sseOwn.results().length >= 1, 15_000, 'subscription events');
    expect(wsPlain.values('resourceChanged').map((e) => [e.type, e.data.title, e.data.secret])).toEqual([['notes.created', 'live theirs', 's6'], ['notes.created', 'live mine', 's7']]);
    expect(ssePlain.results().map((r) => r.data.resourceChanged.data.title)).toEqual(['live theirs', 'live mine']);
    await sleep(300);
    expect(wsOwn.errors).toEqual([]);
    expect(wsOwn.values('resourceChanged').map((e) => [e.data.title, 'secret' in e.data])).toEqual([['live mine', false]]);
    expect(sseOwn.results().map((r) => [r.data.resourceChanged.data.title, 'secret' in r.data.resourceChanged.data])).toEqual([['live mine', false]]);
    expect(wsOwn2.errors).toEqual([]);
    expect(wsOwn2.results).toEqual([]);
    expect(wsOther.errors).toEqual([]);
    expect(wsOther.done).toBe(false);
    expect(wsOther.results).toEqual([]);
  });
});
