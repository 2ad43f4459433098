/**
 * `GET /events`, `GET /events/{id}` and GraphQL `events` under access rules: an administrator
 * whose reads of a resource a rule restricts lists only the events of rows the rule lets it read,
 * with `data` masked; pages stay full and cursors walk every readable event once. Events of no
 * resource are listed as before; unrestricted administrators get every event whole.
 */
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, expectError, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { accessPlugin } from '../../plugins/access/index.ts';
import { createRole, folders, newTenant, notes, userWith } from './helpers.ts';

/** Code rules restrict the built-in `admin`: open memos only, title and status only. */
const memos = defineResource({
  name: 'memos',
  schema: new Schema({ title: { type: String, required: true }, status: { type: String }, secret: { type: String } }),
  access: { admin: { read: { rows: { status: 'open' }, fields: ['title', 'status'] } } },
});

type Doc = Record<string, any>;
let t: TestApp;
let a: string;
let restricted: { key: string };
let adminAndUser: { key: string };
const titles: string[] = [];

const page = async (key: string, query: string) => {
  const res = await t.http('GET', `/events?${query}`, { key });
  expect(res.status).toBe(200);
  return res.body as { items: Doc[]; cursors: { next: string | null; has_next: boolean } };
};

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [notes, folders, memos] }), accessPlugin], checkResponses: false });
  a = await newTenant(t);
  restricted = await userWith(t, a, ['admin']);
  // A built-in role without rules for memos keeps its usual access, as on REST.
  adminAndUser = await userWith(t, a, ['admin', 'user']);
  for (let i = 0; i < 9; i++) {
    const title = `m${i}`;
    titles.push(title);
    const res = await t.http('POST', '/memos', { json: { title, status: i % 3 === 0 ? 'open' : 'closed', secret: `s${i}` }, headers: { 'X-Tenant-Id': a } });
    expect(res.status).toBe(201);
  }
  await createRole(t, { name: 'viewer', permissions: { notes: { read: true } } }, { tenantId: a });
  await t.app.services.get('events').flush();
});
afterAll(async () => {
  await t?.close();
});

describe('GET /events under access rules', () => {
  it('lists only the readable rows\' events, masked, in full pages whose cursors walk each once', async () => {
    const seen: Doc[] = [];
    let cursor: string | null = null;
    const sizes: number[] = [];
    do {
      const p = await page(restricted.key, `type=memos.created&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      sizes.push(p.items.length);
      seen.push(...p.items);
      cursor = p.cursors.has_next ? p.cursors.next : null;
    } while (cursor);
    // m0, m3, m6 are open; newest first.
    expect(seen.map((e) => e.data.title)).toEqual(['m6', 'm3', 'm0']);
    expect(sizes).toEqual([2, 1]);
    for (const e of seen) expect(Object.keys(e.data).filter((k) => ['title', 'status', 'secret'].includes(k)).sort()).toEqual(['status', 'title']);
    expect(seen.every((e) => typeof e.data._id === 'string')).toBe(true);

    const whole = await page(adminAndUser.key, 'type=memos.created&limit=100');
    expect(whole.items.map((e) => e.data.title)).toEqual([...titles].reverse());
    expect(whole.items[0]!.data.secret).toBe('s8');
    const system = await t.http('GET', '/events?type=memos.created&limit=100', { key: ADMIN_KEY, headers: { 'X-Tenant-Id': a } });
    expect(system.body.items).toHaveLength(9);
  });

  it('events of no resource are listed as before; the listing without a type skips the withheld ones', async () => {
    const all = await page(restricted.key, 'limit=100');
    const types = all.items.map((e) => e.type);
    expect(types).toContain('role.created');
    expect(all.items.filter((e) => e.type === 'memos.created').map((e) => e.data.title)).toEqual(['m6', 'm3', 'm0']);
  });

  it('GET /events/{id}: an event of a row outside the rules is 404, as a missing one; a readable one is masked', async () => {
    const whole = await page(adminAndUser.key, 'type=memos.created&limit=100');
    const closed = whole.items.find((e) => e.data.title === 'm1')!;
    const open = whole.items.find((e) => e.data.title === 'm3')!;
    const hidden = await t.http('GET', `/events/${closed.id}`, { key: restricted.key });
    expectError(hidden, 404, 'NOT_FOUND');
    const shown = await t.http('GET', `/events/${open.id}`, { key: restricted.key });
    expect(shown.status).toBe(200);
    expect(shown.body.data.title).toBe('m3');
    expect('secret' in shown.body.data).toBe(false);
  });

  it('GraphQL events: the same rows and masks', async () => {
    const res = await t.gql<{ events: { items: Doc[] } }>('{ events(type: "memos.created", limit: 2) { items { data } cursors { has_next } } }', {}, { key: restricted.key });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data!.events.items.map((e) => [e.data.title, 'secret' in e.data])).toEqual([['m6', false], ['m3', false]]);
  });
});
