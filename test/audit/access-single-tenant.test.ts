/** `MULTI_TENANT_ENABLED=false`: the tenant filter no longer applies to tenant administrators. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { seedTenants } from './helpers.ts';

let t: TestApp;
let s: Awaited<ReturnType<typeof seedTenants>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin], config: { MULTI_TENANT_ENABLED: 'false' } });
  s = await seedTenants(t);
});
afterAll(() => t?.close());

it('a tenant administrator sees every tenant on every endpoint', async () => {
  const list = await t.http('GET', '/admin/audit-log', { key: s.a.key });
  expect(list.body.total).toBe(s.counts.all);
  expect(list.body.items.map((e: any) => e.tenant_id)).toEqual(expect.arrayContaining([s.a.tenantId, s.b.tenantId, null]));
  expect((await t.http('GET', `/admin/audit-log?resource_id=${s.b1}`, { key: s.a.key })).body.total).toBe(1);
  expect((await t.http('GET', '/admin/audit-log/stats', { key: s.a.key })).body.total_entries).toBe(s.counts.all);
  expect((await t.http('GET', '/admin/audit-log/export', { key: s.a.key })).body).toHaveLength(s.counts.all);
  const g = await t.gql('{ auditLog { total } auditStats { total_entries } }', {}, { key: s.a.key });
  expect(g.body.data).toEqual({ auditLog: { total: s.counts.all }, auditStats: { total_entries: s.counts.all } });
});

it('regular users are still refused', async () => {
  expect((await t.http('GET', '/admin/audit-log', { key: s.aUser.key })).status).toBe(403);
  expect((await t.gql('{ auditLog { total } }', {}, { key: s.aUser.key })).body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
});
