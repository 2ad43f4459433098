/**
 * `GET /admin/audit-log`, `GET /admin/audit-log/stats` and their GraphQL twins over a fixed set
 * of seeded entries (fixed `created_at`, so orders and periods are known).
 */
import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { seedEntries, type SeedEntry } from './helpers.ts';

let t: TestApp;
const u1 = new Types.ObjectId();
const u2 = new Types.ObjectId();
const P1 = new Types.ObjectId();
const P2 = new Types.ObjectId();
const T1 = new Types.ObjectId();
const T2 = new Types.ObjectId();
const tenant = new Types.ObjectId();
/** Seed name → entry id. Seeds are inserted in this order, so their `_id`s ascend in it. */
const ids: Record<string, string> = {};

beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin] });
  const seeds = {
    A: { resource: 'projects', item_id: P1, operation: 'insert', user_id: u1, user_name: 'Ann', created_at: new Date('2026-11-16T09:00:00Z') },
    B: { resource: 'projects', item_id: P1, operation: 'update', user_id: u1, user_name: 'Ann Lee', created_at: new Date('2026-11-21T10:00:00Z'), changes: { name: { old: 'a', new: 'b' } } },
    G: { resource: 'projects', item_id: P1, operation: 'update', user_id: u1, user_name: 'Ann Lee', created_at: new Date('2026-11-21T10:00:00Z'), changes: { name: { old: 'b', new: 'c' } } },
    C: { resource: 'tasks', item_id: T1, operation: 'insert', user_id: u2, user_name: 'Bob', ip: '10.0.0.2', created_at: new Date('2026-11-21T12:00:00Z') },
    D: { resource: 'tasks', item_id: T1, operation: 'delete', created_at: new Date('2026-11-23T00:00:00Z'), snapshot: { title: 'x' } },
    E: { resource: 'projects', item_id: P2, operation: 'replace', user_id: u2, user_name: 'Bob', created_at: new Date('2026-12-01T00:00:00Z') },
    F: { resource: 'tasks', item_id: T2, operation: 'depersonalize', created_at: new Date('2025-12-29T08:00:00Z') },
  } satisfies Record<string, SeedEntry>;
  const inserted = await seedEntries(t, Object.values(seeds).map((s) => ({ tenant_id: tenant, ...s })));
  Object.keys(seeds).forEach((name, i) => (ids[name] = inserted[i]!));
});
afterAll(() => t?.close());

const list = async (query: Record<string, string> = {}) => {
  const res = await t.http('GET', `/admin/audit-log?${new URLSearchParams(query)}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { items: any[]; total: number; page: number; per_page: number };
};
/** Seed names of a listing, in order. */
const names = async (query: Record<string, string> = {}) => {
  const byId = Object.fromEntries(Object.entries(ids).map(([k, v]) => [v, k]));
  return (await list(query)).items.map((e) => byId[e.id]).join('');
};

describe('GET /admin/audit-log', () => {
  it('answers {items, total, page, per_page, total_pages} with the entry fields, newest first by default', async () => {
    const body = await list();
    expect(Object.keys(body).sort()).toEqual(['items', 'page', 'per_page', 'total', 'total_pages']);
    expect(body).toMatchObject({ total: 7, page: 1, per_page: 50 });
    expect(await names()).toBe('EDCGBAF');
    const c = body.items.find((e) => e.id === ids.C);
    expect(c).toEqual({
      id: ids.C, resource: 'tasks', item_id: String(T1), operation: 'insert', user_id: String(u2), user_name: 'Bob', ip: '10.0.0.2',
      changes: null, snapshot: null, created_at: '2026-11-21T12:00:00.000Z', tenant_id: String(tenant),
    });
  });

  it('filters by each parameter', async () => {
    expect(await names({ resource: 'tasks' })).toBe('DCF');
    expect(await names({ resource_id: String(P1) })).toBe('GBA');
    expect(await names({ user_id: String(u2) })).toBe('EC');
    expect(await names({ operation: 'insert' })).toBe('CA');
    expect(await names({ operation: 'depersonalize' })).toBe('F');
    expect(await names({ date_from: '2026-11-21T11:00:00Z' })).toBe('EDC');
    expect(await names({ date_to: '2026-11-16T09:00:00Z' })).toBe('AF');
    expect(await names({ date_from: '2026-11-21T11:00:00.000+01:00', date_to: '2026-11-21T11:00:00Z' })).toBe('GB');
  });

  it('treats a bare date_to as the end of that UTC day', async () => {
    expect(await names({ date_from: '2026-11-21', date_to: '2026-11-21' })).toBe('CGB');
  });

  it('ANDs the filters', async () => {
    expect(await names({ resource: 'projects', user_id: String(u1), operation: 'update' })).toBe('GB');
    expect(await names({ resource: 'tasks', date_from: '2026-11-22' })).toBe('D');
    expect(await names({ resource: 'tasks', user_id: String(u1) })).toBe('');
    expect((await list({ resource: 'tasks', user_id: String(u1) })).total).toBe(0);
  });

  it('pages with the total of the whole filter', async () => {
    const p2 = await list({ page: '2', per_page: '3' });
    expect(p2).toMatchObject({ total: 7, page: 2, per_page: 3 });
    expect(await names({ page: '2', per_page: '3' })).toBe('GBA');
    expect(await names({ page: '3', per_page: '3' })).toBe('F');
    expect(await names({ page: '4', per_page: '3' })).toBe('');
    expect(await names({ page: '1', per_page: '2', resource: 'tasks' })).toBe('DC');
  });

  it('sorts by created_at either way and by other entry fields, _id breaking ties in the same direction', async () => {
    expect(await names({ sort: 'created_at' })).toBe('FABGCDE');
    expect(await names({ sort: '-created_at' })).toBe('EDCGBAF');
    expect(await names({ sort: 'resource' })).toBe('ABGECDF');
    expect(await names({ sort: '-resource' })).toBe('FDCEGBA');
    expect(await names({ sort: 'operation', resource: 'projects' })).toBe('AEBG');
    expect(await names({ sort: '-user_name', resource: 'projects' })).toBe('EGBA');
  });

  it.each([
    ['per_page', { per_page: '501' }],
    ['per_page', { per_page: '0' }],
    ['page', { page: '0' }],
    ['page', { page: 'two' }],
    ['date_from', { date_from: 'yesterday' }],
    ['date_from', { date_from: '2026-13-01' }],
    ['date_to', { date_to: '2026-11-21T10:00:00' }],
    ['date_from', { date_from: '2026-11-22', date_to: '2026-11-21' }],
    ['operation', { operation: 'upsert' }],
    ['resource_id', { resource_id: 'abc' }],
    ['user_id', { user_id: '123' }],
    ['sort', { sort: 'name' }],
    ['sort', { sort: '-changes' }],
  ])('answers 422 VALIDATION_ERROR for a bad %s (%o)', async (field, query) => {
    const res = await t.http('GET', `/admin/audit-log?${new URLSearchParams(query)}`);
    expect(res.status).toBe(422);
    const err = envelope(res);
    expect(err.code).toBe('VALIDATION_ERROR');
    expect((err.details.errors as any[]).map((e) => e.loc)).toContainEqual(['query', field]);
  });

  it('answers 422 for an unknown parameter', async () => {
    const res = await t.http('GET', '/admin/audit-log?operaton=insert');
    expect(res.status).toBe(422);
    expect(envelope(res).details.errors).toEqual([expect.objectContaining({ type: 'unrecognized_keys' })]);
  });
});

describe('GET /admin/audit-log/stats', () => {
  const stats = async (query: Record<string, string> = {}) => {
    const res = await t.http('GET', `/admin/audit-log/stats?${new URLSearchParams(query)}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };

  it('counts by operation, resource and user (latest name, most active first) with a daily timeline', async () => {
    expect(await stats()).toEqual({
      total_entries: 7,
      by_operation: { insert: 2, update: 2, delete: 1, replace: 1, depersonalize: 1 },
      by_resource: { projects: 4, tasks: 3 },
      by_user: [
        { user_id: String(u1), user_name: 'Ann Lee', count: 3 },
        { user_id: null, user_name: null, count: 2 },
        { user_id: String(u2), user_name: 'Bob', count: 2 },
      ],
      timeline: [
        { period: '2025-12-29', count: 1 },
        { period: '2026-11-16', count: 1 },
        { period: '2026-11-21', count: 3 },
        { period: '2026-11-23', count: 1 },
        { period: '2026-12-01', count: 1 },
      ],
    });
  });

  it('labels ISO weeks as YYYY-Www (ISO week-numbering year) and months as YYYY-MM, ascending', async () => {
    expect((await stats({ group_by: 'week' })).timeline).toEqual([
      { period: '2026-W01', count: 1 },
      { period: '2026-W47', count: 4 },
      { period: '2026-W48', count: 1 },
      { period: '2026-W49', count: 1 },
    ]);
    expect((await stats({ group_by: 'month' })).timeline).toEqual([
      { period: '2025-12', count: 1 },
      { period: '2026-11', count: 5 },
      { period: '2026-12', count: 1 },
    ]);
  });

  it('applies resource, user and date filters', async () => {
    expect(await stats({ resource: 'tasks', group_by: 'month' })).toEqual({
      total_entries: 3,
      by_operation: { insert: 1, delete: 1, depersonalize: 1 },
      by_resource: { tasks: 3 },
      by_user: [{ user_id: null, user_name: null, count: 2 }, { user_id: String(u2), user_name: 'Bob', count: 1 }],
      timeline: [{ period: '2025-12', count: 1 }, { period: '2026-11', count: 2 }],
    });
    const mine = await stats({ user_id: String(u1), date_from: '2026-11-20', date_to: '2026-11-30' });
    expect(mine).toMatchObject({ total_entries: 2, by_operation: { update: 2 }, timeline: [{ period: '2026-11-21', count: 2 }] });
    expect(await stats({ resource: 'nothing' })).toEqual({ total_entries: 0, by_operation: {}, by_resource: {}, by_user: [], timeline: [] });
  });

  it.each([
    ['group_by', { group_by: 'year' }],
    ['date_to', { date_to: 'soon' }],
    ['user_id', { user_id: 'me' }],
    ['operation', { operation: 'insert' }],
  ])('answers 422 for a bad %s', async (_field, query) => {
    const res = await t.http('GET', `/admin/audit-log/stats?${new URLSearchParams(query)}`);
    expect(res.status).toBe(422);
    expect(envelope(res).code).toBe('VALIDATION_ERROR');
  });
});

describe('GraphQL', () => {
  it('auditLog filters, pages and sorts like the REST listing', async () => {
    const res = await t.gql<{ auditLog: any }>(
      `query($r: String, $s: String) { auditLog(resource: $r, page: 1, per_page: 2, sort: $s) {
        total page per_page items { id resource item_id operation user_id user_name ip changes snapshot created_at tenant_id } } }`,
      { r: 'projects', s: 'created_at' },
    );
    expect(res.body.errors).toBeUndefined();
    const page = res.body.data!.auditLog;
    expect(page).toMatchObject({ total: 4, page: 1, per_page: 2 });
    expect(page.items.map((e: any) => e.id)).toEqual([ids.A, ids.B]);
    expect(page.items[1]).toEqual({
      id: ids.B, resource: 'projects', item_id: String(P1), operation: 'update', user_id: String(u1), user_name: 'Ann Lee', ip: null,
      changes: { name: { old: 'a', new: 'b' } }, snapshot: null, created_at: '2026-11-21T10:00:00.000Z', tenant_id: String(tenant),
    });
  });

  it('auditStats answers like the REST stats', async () => {
    const res = await t.gql<{ auditStats: any }>(
      '{ auditStats(group_by: "week", resource: "projects") { total_entries by_operation by_resource by_user { user_id user_name count } timeline { period count } } }',
    );
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data!.auditStats).toEqual({
      total_entries: 4,
      by_operation: { insert: 1, update: 2, replace: 1 },
      by_resource: { projects: 4 },
      by_user: [{ user_id: String(u1), user_name: 'Ann Lee', count: 3 }, { user_id: String(u2), user_name: 'Bob', count: 1 }],
      timeline: [{ period: '2026-W47', count: 3 }, { period: '2026-W49', count: 1 }],
    });
  });

  it('validates arguments with the REST schemas (422 VALIDATION_ERROR)', async () => {
    const res = await t.gql('{ auditLog(per_page: 501, operation: "upsert") { total } }');
    const err = res.body.errors?.[0];
    expect(err?.extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 422 });
    expect((err?.extensions?.details?.errors as any[]).map((e) => e.loc)).toEqual(expect.arrayContaining([['args', 'per_page'], ['args', 'operation']]));
    const stats = await t.gql('{ auditStats(group_by: "year") { total_entries } }');
    expect(stats.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
  });
});
