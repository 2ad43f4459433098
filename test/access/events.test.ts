/**
 * Access rules on the event surfaces: an actor whose reads of a resource are restricted (a custom
 * role, or a role the resource's code rules name, and no built-in role without rules) gets none of
 * that resource's events over `GET /events/stream`, graphql-ws or GraphQL over SSE, until events can
 * be masked per row; a plain `user` of the tenant still gets them; other tenants get none.
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
  it('GET /events/stream: a restricted custom role gets no event of the resource (not even of rows it may read); plain users and roles REST leaves unrestricted get every one; another tenant gets none', async () => {
    const sOwn = await stream(own, 'notes.created');
    const sOwnAndUser = await stream(ownAndUser, 'notes.created');
    const sPlain = await stream(plain, 'notes.created');
    const sOther = await stream(otherTenant, 'notes.created');
    await listening(4);
    // One row the custom role may read (its own, secret masked by REST), one it may not.
    await create('/notes', a, { title: 'mine', secret: 's1', owner_id: own.userId });
    await create('/notes', a, { title: 'theirs', secret: 's2', owner_id: plain.userId });
    await create('/notes', b, { title: 'tenant b', secret: 's3' });

    await until(() => sPlain.events.length >= 2 && sOwnAndUser.events.length >= 2 && sOther.events.length >= 1, 15_000, 'events delivered');
    expect(sPlain.data().map((e) => e.data.title)).toEqual(['mine', 'theirs']);
    expect(sPlain.data()[0].data.secret).toBe('s1');
    // A built-in role without rules keeps the access it always had, as on REST.
    expect(sOwnAndUser.data().map((e) => e.data.title)).toEqual(['mine', 'theirs']);
    expect(sOther.data().map((e) => e.data.title)).toEqual(['tenant b']);
    // The same push reached every listener; a grace period for the restricted stream's bytes.
    await sleep(300);
    expect(sOwn.ended).toBe(false);
    expect(sOwn.events).toEqual([]);
    // REST agrees the rows exist for this user (its own one, masked): the stream withholds, it does not mask.
    const rest = await t.http('GET', '/notes', { key: own.key });
    expect(rest.body.items.map((n: { title: string; secret?: string }) => [n.title, n.secret])).toEqual([['mine', undefined]]);
  });

  it('a role named by the resource\'s code rules: no event of that resource', async () => {
    const sReader = await stream(reader, 'folders.created');
    const sPlain = await stream(plain, 'folders.created');
    await listening(6);
    await create('/folders', a, { name: 'pub', code: 'P1', public: true });
    await create('/folders', a, { name: 'priv', code: 'P2', public: false });
    await until(() => sPlain.events.length >= 2, 15_000, 'folder events');
    expect(sPlain.data().map((e) => e.data.code)).toEqual(['P1', 'P2']);
    await sleep(300);
    expect(sReader.ended).toBe(false);
    expect(sReader.events).toEqual([]);
  });

  it('GraphQL subscriptions (graphql-ws and GraphQL over SSE): resourceChanged delivers nothing to the restricted role, everything to a plain user of the tenant, nothing across tenants', async () => {
    const before = t.app.services.get('realtime').stats().listeners;
    const wsOwn = ws.sub(ws.client({ apiKey: own.key }), CHANGED, { resource: 'notes' });
    const wsPlain = ws.sub(ws.client({ apiKey: plain.key }), CHANGED, { resource: 'notes' });
    const wsOther = ws.sub(ws.client({ apiKey: otherTenant.key }), CHANGED, { resource: 'notes' });
    const sseOwn = await sseSubscribe(t.url, CHANGED, { resource: 'notes' }, { 'X-API-Key': own.key });
    const ssePlain = await sseSubscribe(t.url, CHANGED, { resource: 'notes' }, { 'X-API-Key': plain.key });
    streams.push(sseOwn, ssePlain);
    await listening(before + 5);
    await create('/notes', a, { title: 'live mine', secret: 's4', owner_id: own.userId });

    await until(() => wsPlain.values('resourceChanged').length >= 1 && ssePlain.results().length >= 1, 15_000, 'subscription events');
    expect(wsPlain.values('resourceChanged').map((e) => [e.type, e.data.title, e.data.secret])).toEqual([['notes.created', 'live mine', 's4']]);
    expect(ssePlain.results().map((r) => r.data.resourceChanged.data.title)).toEqual(['live mine']);
    await sleep(300);
    for (const s of [wsOwn, wsOther]) {
      expect(s.errors).toEqual([]);
      expect(s.done).toBe(false);
      expect(s.results).toEqual([]);
    }
    expect(sseOwn.ended).toBe(false);
    expect(sseOwn.results()).toEqual([]);
  });
});
