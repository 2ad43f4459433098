/**
 * Who sees what: system callers see every tenant, other
 * administrators only their own tenant's entries (per caller, never per X-Tenant-Id), regular
 * users nothing — on every REST endpoint and GraphQL field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { seedTenants } from './helpers.ts';

let t: TestApp;
let s: Awaited<ReturnType<typeof seedTenants>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin] });
  s = await seedTenants(t);
});
afterAll(() => t?.close());

const get = (path: string, key?: string, headers?: Record<string, string>) => t.http('GET', path, { ...(key ? { key } : {}), ...(headers ? { headers } : {}) });
const tenantsOf = (items: any[]) => [...new Set(items.map((e) => e.tenant_id))];
const csvRows = (body: string) => body.trimEnd().split('\r\n').slice(1);

describe('tenant administrators see only their own tenant', () => {
  it('list and total', async () => {
    const a = await get('/admin/audit-log', s.a.key);
    expect(a.status).toBe(200);
    expect(a.body.total).toBe(s.counts.a);
    expect(tenantsOf(a.body.items)).toEqual([s.a.tenantId]);
    const b = await get('/admin/audit-log', s.b.key);
    expect(b.body.total).toBe(s.counts.b);
    expect(tenantsOf(b.body.items)).toEqual([s.b.tenantId]);
  });

  it('a filter naming another tenant\'s document or user finds nothing', async () => {
    const byItem = await get(`/admin/audit-log?resource_id=${s.b1}`, s.a.key);
    expect(byItem.body).toMatchObject({ items: [], total: 0 });
    const byUser = await get(`/admin/audit-log?user_id=${s.b.userId}`, s.a.key);
    expect(byUser.body).toMatchObject({ items: [], total: 0 });
  });

  it('stats', async () => {
    const res = await get('/admin/audit-log/stats', s.a.key);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      total_entries: s.counts.a,
      by_operation: { insert: 2, update: 1 },
      by_resource: { projects: 3 },
      by_user: [{ user_id: s.a.userId, user_name: 'Test User', count: 3 }],
    });
    expect(res.body.timeline.reduce((n: number, p: any) => n + p.count, 0)).toBe(s.counts.a);
  });

  it('export, JSON and CSV', async () => {
    const json = await get('/admin/audit-log/export', s.a.key);
    expect(json.status).toBe(200);
    expect(json.body).toHaveLength(s.counts.a);
    expect(tenantsOf(json.body)).toEqual([s.a.tenantId]);
    const csv = await get('/admin/audit-log/export?format=csv', s.a.key);
    expect(csvRows(csv.body)).toHaveLength(s.counts.a);
    expect(csv.body).not.toContain(s.b.userId);
  });

  it('GraphQL auditLog and auditStats', async () => {
    const res = await t.gql('{ auditLog(per_page: 500) { total items { tenant_id } } auditStats { total_entries by_resource } }', {}, { key: s.a.key });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.auditLog.total).toBe(s.counts.a);
    expect(tenantsOf(res.body.data.auditLog.items)).toEqual([s.a.tenantId]);
    expect(res.body.data.auditStats).toEqual({ total_entries: s.counts.a, by_resource: { projects: 3 } });
  });
});

describe('system administrators see every tenant', () => {
  it('on every endpoint without X-Tenant-Id', async () => {
    const list = await get('/admin/audit-log');
    expect(list.body.total).toBe(s.counts.all);
    expect(tenantsOf(list.body.items)).toEqual(expect.arrayContaining([s.a.tenantId, s.b.tenantId, null]));
    expect((await get('/admin/audit-log/stats')).body.total_entries).toBe(s.counts.all);
    expect((await get('/admin/audit-log/export')).body).toHaveLength(s.counts.all);
    expect(csvRows((await get('/admin/audit-log/export?format=csv')).body)).toHaveLength(s.counts.all);
    const g = await t.gql('{ auditLog { total } auditStats { total_entries } }', {});
    expect(g.body.data).toEqual({ auditLog: { total: s.counts.all }, auditStats: { total_entries: s.counts.all } });
  });

  it('acting in one tenant with X-Tenant-Id, on every endpoint: the core tenant filter, as for resources', async () => {
    const headers = { 'X-Tenant-Id': s.b.tenantId };
    const list = await get('/admin/audit-log', undefined, headers);
    expect(list.body.total).toBe(s.counts.b);
    expect(tenantsOf(list.body.items)).toEqual([s.b.tenantId]);
    expect((await get('/admin/audit-log/stats', undefined, headers)).body.total_entries).toBe(s.counts.b);
    expect((await get('/admin/audit-log/export', undefined, headers)).body).toHaveLength(s.counts.b);
    expect(csvRows((await get('/admin/audit-log/export?format=csv', undefined, headers)).body)).toHaveLength(s.counts.b);
    const g = await t.gql('{ auditLog { total } auditStats { total_entries } }', {}, { headers });
    expect(g.body.data).toEqual({ auditLog: { total: s.counts.b }, auditStats: { total_entries: s.counts.b } });
  });
});

describe('regular users and anonymous callers', () => {
  it.each([
    ['GET', '/admin/audit-log'],
    ['GET', '/admin/audit-log/stats'],
    ['GET', '/admin/audit-log/export'],
    ['GET', '/admin/audit-log/export?format=csv'],
    ['DELETE', '/admin/audit-log/retention?older_than_days=1'],
  ])('%s %s: 403 for a regular user, 401 without credentials', async (method, path) => {
    const user = await t.http(method, path, { key: s.aUser.key });
    expect(user.status).toBe(403);
    expect(envelope(user).code).toBe('ACCESS_DENIED');
    const anon = await t.http(method, path, { key: null });
    expect(anon.status).toBe(401);
    expect(envelope(anon).code).toBe('AUTH_REQUIRED');
  });

  it('GraphQL auditLog and auditStats: ACCESS_DENIED', async () => {
    for (const q of ['{ auditLog { total } }', '{ auditStats { total_entries } }']) {
      const res = await t.gql(q, {}, { key: s.aUser.key });
      expect(res.body.data ?? null).toBeNull();
      expect(res.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    }
  });

  it('GraphQL auditLog and auditStats: AUTH_REQUIRED without credentials, answered for an administrator', async () => {
    for (const q of ['{ auditLog { total } }', '{ auditStats { total_entries } }']) {
      const anon = await t.gql(q, {}, { key: null });
      expect(anon.body.data ?? null).toBeNull();
      expect(anon.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    }
    const admin = await t.gql('{ auditLog { total } auditStats { total_entries } }', {}, { key: s.a.key });
    expect(admin.body.errors).toBeUndefined();
    expect(admin.body.data.auditLog.total).toBe(s.counts.a);
    expect(admin.body.data.auditStats.total_entries).toBe(s.counts.a);
  });
});
