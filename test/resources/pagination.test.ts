/** Read path, "Pagination": mode detection, offset headers and body, cursor rules. */
import { createHmac } from 'node:crypto';
import { Schema } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, envelope, type HttpResult, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { idsOf, items, qs, seed, seedProjects, type Doc } from './read-helpers.ts';

const widgets = defineResource({
  name: 'widgets',
  schema: new Schema({ name: { type: String, required: true } }),
  default_page_size: 7,
  max_page_size: 10,
  default_sort: 'name',
});

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
const N = 30;

type Params = Record<string, string | undefined>;
const list = (params: Params, path = '/projects') => t.http('GET', `${path}${qs({ tags__in: path === '/projects' ? 'main' : undefined, ...params })}`, { key: alice.key });

/** Every project of the `main` set in `sort` order, by offset mode. */
async function fullRead(sort: string): Promise<string[]> {
  return idsOf(items(await list({ sort, per_page: '100' })));
}

const OFFSET_HEADERS = ['x-total-count', 'x-page', 'x-per-page', 'x-total-pages'];

function expectCursorShape(res: HttpResult<any>) {
  expect(res.status).toBe(200);
  expect(Object.keys(res.body).sort()).toEqual(['cursors', 'items']);
  expect(Object.keys(res.body.cursors).sort()).toEqual(['has_next', 'has_prev', 'next', 'prev']);
  for (const h of OFFSET_HEADERS) expect(res.headers.get(h)).toBeNull();
}

function expectOffset(res: HttpResult<any>, page: number, perPage: number, total: number) {
  expect(res.status).toBe(200);
  const totalPages = Math.ceil(total / perPage);
  expect(res.body).toEqual({ items: expect.any(Array), page, per_page: perPage, total, total_pages: totalPages, mode: 'offset' });
  expect(res.headers.get('x-total-count')).toBe(String(total));
  expect(res.headers.get('x-page')).toBe(String(page));
  expect(res.headers.get('x-per-page')).toBe(String(perPage));
  expect(res.headers.get('x-total-pages')).toBe(String(totalPages));
  expect(res.body.items).toHaveLength(Math.max(0, Math.min(perPage, total - (page - 1) * perPage)));
}

/** A cursor of the default sort (the `next` of the first page of 5). */
async function firstCursor(params: Params = {}): Promise<string> {
  const res = await list({ limit: '5', ...params });
  expect(res.body.cursors.next).toEqual(expect.any(String));
  return res.body.cursors.next as string;
}

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, widgets] })] });
  alice = await createTenantUser(t);
  await seedProjects(
    t,
    alice.key,
    Array.from({ length: N }, (_, i) => ({ name: `p${String(i).padStart(2, '0')}`, budget: i % 4, tags: ['main'] })),
  );
});
afterAll(() => t?.close());

describe('mode detection (cursor or offset, by the parameters given)', () => {
  it.each<[string, Params | 'CURSOR', 'offset' | 'cursor', number?, number?]>([
    ['none → offset page 1 per_page 25', {}, 'offset', 1, 25],
    ['page → offset', { page: '2' }, 'offset', 2, 25],
    ['per_page → offset', { per_page: '10' }, 'offset', 1, 10],
    ['page and per_page → offset', { page: '3', per_page: '10' }, 'offset', 3, 10],
    ['page past the end → offset, empty page', { page: '4', per_page: '10' }, 'offset', 4, 10],
    ['page with limit → offset (limit ignored)', { page: '1', limit: '5' }, 'offset', 1, 25],
    ['direction alone does not select cursor mode', { direction: 'next' }, 'offset', 1, 25],
    ['limit without page → cursor', { limit: '5' }, 'cursor'],
    // Rows 2 and 3 of the table both match; the first row wins.
    ['limit with per_page (no page) → cursor', { limit: '5', per_page: '10' }, 'cursor'],
    ['empty cursor → cursor, first page', { cursor: '' }, 'cursor'],
    ['cursor → cursor', 'CURSOR', 'cursor'],
  ])('%s', async (_l, params, mode, page, perPage) => {
    const p: Params = params === 'CURSOR' ? { cursor: await firstCursor() } : params;
    const res = await list(p);
    if (mode === 'offset') expectOffset(res, page!, perPage!, N);
    else {
      expectCursorShape(res);
      expect(res.body.items).toHaveLength(p.limit ? Number(p.limit) : 25);
    }
  });

  it.each<[string, Params]>([
    ['cursor with page', { page: '1' }],
    ['cursor with per_page', { per_page: '10' }],
    ['cursor with page, per_page and limit', { page: '2', per_page: '10', limit: '3' }],
  ])('%s → cursor (cursor with anything)', async (_l, extra) => {
    const cursor = await firstCursor();
    const res = await list({ cursor, ...extra });
    expectCursorShape(res);
    const full = await fullRead('-created_at');
    const size = extra.limit ? Number(extra.limit) : 25;
    expect(idsOf(res.body.items)).toEqual(full.slice(5, 5 + size));
  });

  it('offset pages concatenate to the full sorted list', async () => {
    const full = await fullRead('-created_at');
    const pages: string[] = [];
    for (let page = 1; page <= 4; page++) pages.push(...idsOf(items(await list({ page: String(page), per_page: '8' }))));
    expect(pages).toEqual(full);
    expect(new Set(full).size).toBe(N);
  });

  it('the resource default_page_size and max_page_size apply', async () => {
    await seed(t, '/widgets', alice.key, Array.from({ length: 12 }, (_, i) => ({ name: `w${String(i).padStart(2, '0')}` })));
    const res = await list({}, '/widgets');
    expectOffset(res, 1, 7, 12);
    expect(res.body.items.map((d: Doc) => d.name)).toEqual(['w00', 'w01', 'w02', 'w03', 'w04', 'w05', 'w06']);
    expectOffset(await list({ per_page: '10' }, '/widgets'), 1, 10, 12);
    const over = await list({ per_page: '11' }, '/widgets');
    expect(over.status).toBe(422);
    expect(envelope(over).code).toBe('VALIDATION_ERROR');
  });

  it('an empty result: total 0 and 0 pages', async () => {
    const res = await list({ name: 'nothing' });
    expectOffset(res, 1, 25, 0);
  });
});

describe('limits', () => {
  it('per_page 100 is accepted', async () => {
    expectOffset(await list({ per_page: '100' }), 1, 100, N);
  });

  it('per_page above max_page_size (101) → 422 VALIDATION_ERROR naming per_page, and limit above its ceiling alike', async () => {
    for (const [param, value] of [['per_page', '101'], ['per_page', '100000'], ['limit', '100000']] as const) {
      const res = await list({ [param]: value });
      expect(res.status).toBe(422);
      const e = envelope(res);
      expect(e.code).toBe('VALIDATION_ERROR');
      expect(e.details).toEqual({ param, errors: [{ loc: ['query', param], msg: `${param} must be at most 100`, type: 'too_big' }] });
    }
  });

  it('per_page 101 is a 422 even in cursor mode', async () => {
    expect((await list({ per_page: '101', limit: '5' })).status).toBe(422);
  });

  it('limit 100 is accepted', async () => {
    const res = await list({ limit: '100' });
    expectCursorShape(res);
    expect(res.body.items).toHaveLength(N);
  });

  it.each([
    ['limit 0', { limit: '0' }],
    ['negative limit', { limit: '-1' }],
    ['non-numeric limit', { limit: 'ten' }],
    ['per_page 0', { per_page: '0' }],
    ['page 0', { page: '0' }],
    ['fractional page', { page: '1.5' }],
    ['bad direction', { limit: '5', direction: 'back' }],
  ])('400: %s', async (_l, params) => {
    const res = await list(params);
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });
});

describe('cursor rules', () => {
  it('a walk with next returns every row once, in the offset order, with correct flags', async () => {
    for (const sort of ['-created_at', 'budget', '-budget,name', 'name']) {
      const full = await fullRead(sort);
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      for (;;) {
        const res = await list({ sort, limit: '7', ...(cursor ? { cursor } : {}) });
        expectCursorShape(res);
        const c = res.body.cursors;
        expect(c.has_prev).toBe(pages > 0);
        expect(c.prev === null).toBe(pages === 0);
        seen.push(...idsOf(res.body.items));
        pages++;
        if (!c.has_next) {
          expect(c.next).toBeNull();
          break;
        }
        expect(res.body.items).toHaveLength(7);
        cursor = c.next;
      }
      expect(pages).toBe(Math.ceil(N / 7));
      expect(seen).toEqual(full);
    }
  });

  it('direction=prev returns the previous page in forward order', async () => {
    const full = await fullRead('-created_at');
    const p1 = await list({ limit: '5' });
    const p2 = await list({ limit: '5', cursor: p1.body.cursors.next });
    expect(idsOf(p2.body.items)).toEqual(full.slice(5, 10));
    const back = await list({ limit: '5', cursor: p2.body.cursors.prev, direction: 'prev' });
    expectCursorShape(back);
    expect(idsOf(back.body.items)).toEqual(full.slice(0, 5));
    expect(back.body.cursors).toMatchObject({ has_prev: false, prev: null, has_next: true });
    // ...and its next cursor leads to page 2 again.
    const again = await list({ limit: '5', cursor: back.body.cursors.next });
    expect(idsOf(again.body.items)).toEqual(full.slice(5, 10));
  });

  it('direction=prev from the middle: the rows just before the cursor, forward order', async () => {
    const full = await fullRead('budget');
    let res = await list({ sort: 'budget', limit: '4' });
    for (let i = 0; i < 3; i++) res = await list({ sort: 'budget', limit: '4', cursor: res.body.cursors.next });
    expect(idsOf(res.body.items)).toEqual(full.slice(12, 16));
    const back = await list({ sort: 'budget', limit: '6', cursor: res.body.cursors.prev, direction: 'prev' });
    expect(idsOf(back.body.items)).toEqual(full.slice(6, 12));
    expect(back.body.cursors).toMatchObject({ has_prev: true, has_next: true });
  });

  it('direction=prev without a cursor returns the last page', async () => {
    const full = await fullRead('-created_at');
    const res = await list({ limit: '4', direction: 'prev' });
    expect(idsOf(res.body.items)).toEqual(full.slice(-4));
    expect(res.body.cursors).toMatchObject({ has_next: false, next: null, has_prev: true });
  });

  it('no skipping: removing a row of an earlier page does not shift the next page', async () => {
    const group = await seedProjects(t, alice.key, Array.from({ length: 6 }, (_, i) => ({ name: `s${i}`, tags: ['skip'] })));
    const walk = (params: Params) => t.http('GET', `/projects${qs({ tags__in: 'skip', sort: 'name', limit: '3', ...params })}`, { key: alice.key });
    const p1 = await walk({});
    expect(p1.body.items.map((d: Doc) => d.name)).toEqual(['s0', 's1', 's2']);
    const del = await t.http('DELETE', `/projects/${group[0]!._id}`, { key: alice.key, headers: { 'If-Match': '"1"' } });
    expect(del.status).toBe(204);
    const p2 = await walk({ cursor: p1.body.cursors.next });
    // An offset-based page 2 would now start at s4.
    expect(p2.body.items.map((d: Doc) => d.name)).toEqual(['s3', 's4', 's5']);
    expect(p2.body.cursors.has_next).toBe(false);
  });

  // BUG (query.ts/cursor.ts): `sort` accepts an array field, but a range query on an array does not
  // follow the array sort order (min element ascending, max element descending), so cursor walks
  // skip rows. Fix: refuse array fields in `sort` (400) or make the walk complete; then drop `.fails`.
  it.each(['tags', '-tags', 'tags,name'])('sort=%s on an array field is refused with 400 (keyset cursors need single values)', async (sort) => {
    for (const params of [{ limit: '1' }, { per_page: '10' }]) {
      const res = await t.http('GET', `/projects${qs({ sort, ...params })}`, { key: alice.key });
      expect(res.status).toBe(400);
      expect(envelope(res)).toMatchObject({ code: 'BAD_REQUEST', details: { param: 'sort' } });
    }
  });

  it('an empty result in cursor mode', async () => {
    const res = await list({ limit: '5', name: 'nothing' });
    expectCursorShape(res);
    expect(res.body).toEqual({ items: [], cursors: { next: null, prev: null, has_next: false, has_prev: false } });
  });

  it('exactly limit rows: has_next is false', async () => {
    const res = await list({ limit: String(N) });
    expect(res.body.items).toHaveLength(N);
    expect(res.body.cursors).toMatchObject({ has_next: false, next: null });
  });

  it('the cursor is base64url payload + HMAC-SHA256 signature with CURSOR_HMAC_SECRET', async () => {
    const cursor = await firstCursor();
    const [body, sig] = cursor.split('.') as [string, string];
    expect(body).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(sig).toBe(createHmac('sha256', t.config.CURSOR_HMAC_SECRET).update(body).digest('base64url'));
  });

  describe('invalid cursors → 400', () => {
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);

    it.each([
      ['one character of the payload changed', (c: string) => flip(c, 3)],
      ['last character of the payload changed', (c: string) => flip(c, c.indexOf('.') - 1)],
      ['one character of the signature changed', (c: string) => flip(c, c.length - 5)],
      ['last character of the signature changed', (c: string) => flip(c, c.length - 1)],
      ['signature removed', (c: string) => c.split('.')[0]!],
      ['signature of another secret', (c: string) => {
        const body = c.split('.')[0]!;
        return `${body}.${createHmac('sha256', 'another-secret-another-secret-0123').update(body).digest('base64url')}`;
      }],
      ['payload forged and re-signed with another secret', (c: string) => {
        const payload = JSON.parse(Buffer.from(c.split('.')[0]!, 'base64url').toString('utf8'));
        payload.v[0] = { $date: '2000-01-01T00:00:00.000Z' };
        const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
        return `${body}.${createHmac('sha256', 'wrong').update(body).digest('base64url')}`;
      }],
      ['garbage', () => 'not-a-cursor'],
      ['not base64url', () => '!!!.???'],
    ])('%s', async (_l, mutate) => {
      const res = await list({ limit: '5', cursor: mutate(await firstCursor()) });
      expect(res.status).toBe(400);
      expect(envelope(res)).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringMatching(/cursor/i) });
    });

    it.each([
      ['another field', { sort: 'name' }],
      ['another direction', { sort: 'created_at' }],
      ['an extra field', { sort: '-created_at,name' }],
    ])('a cursor used with a different sort (%s)', async (_l, params) => {
      const cursor = await firstCursor(); // issued for the default -created_at
      const res = await list({ limit: '5', cursor, ...params });
      expect(res.status).toBe(400);
      expect(envelope(res).message).toBe('Cursor was issued for a different sort');
    });

    it('a cursor of an explicit sort equal to the default is accepted', async () => {
      const res = await list({ limit: '5', cursor: await firstCursor(), sort: '-created_at' });
      expect(res.status).toBe(200);
    });
  });
});
