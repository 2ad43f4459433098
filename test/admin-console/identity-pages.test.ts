/**
 * Users and tenants with their totals for every client (docs/console.md, "GraphQL additions"):
 * `usersPage` and `tenantsPage` answer core's page as GET /admin/users and /admin/tenants do (which
 * gain `total_pages` and the page headers), through gql(). A tenant administrator's pages, totals
 * included, never count another tenant; the bare lists `users` and `tenants` keep their shape.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';

let t: TestApp;
let a: Awaited<ReturnType<typeof createTenantUser>>;
let b: Awaited<ReturnType<typeof createTenantUser>>;
let plain: Awaited<ReturnType<typeof createTenantUser>>;
const inA: string[] = [];
beforeAll(async () => {
  t = await buildTestApp();
  a = await createTenantUser(t, { roles: ['user', 'admin'] });
  b = await createTenantUser(t, { roles: ['user', 'admin'] });
  plain = await createTenantUser(t, { tenantId: a.tenantId });
  inA.push(a.userId, plain.userId);
  // Tenant A: 12 users (a, plain and 10 more); tenant B: 3 (b and 2 more).
  const more = (tenant: string, n: number, tag: string) => {
    const idx = Array.from({ length: n }, (_, i) => i);
    const doc = `mutation(${idx.map((i) => `$i${i}: JSON!`).join(', ')}) { ${idx.map((i) => `u${i}: createUser(input: $i${i}) { id }`).join(' ')} }`;
    return t.gql(doc, Object.fromEntries(idx.map((i) => [`i${i}`, { email: `${tag}${i}@example.com`, name: `${tag} ${i}`, tenant_id: tenant }])));
  };
  const ra = await more(a.tenantId, 10, 'a');
  inA.push(...Object.values(ra.body.data as Record<string, { id: string }>).map((u) => u.id));
  await more(b.tenantId, 2, 'b');
});
afterAll(() => t?.close());

const code = (res: { body: { errors?: { extensions?: { code?: string } }[] } }) => res.body.errors?.[0]?.extensions?.code;
const USERS = 'query($p: Int, $pp: Int, $t: String) { usersPage(page: $p, per_page: $pp, tenant_id: $t) { total page per_page total_pages items { id tenant_id email } } }';
const TENANTS = 'query($p: Int, $pp: Int) { tenantsPage(page: $p, per_page: $pp) { total page per_page total_pages items { id name is_system } } }';

describe('usersPage', () => {
  it('pages a tenant administrator through their own tenant only, with its total', async () => {
    const seen: string[] = [];
    for (const p of [1, 2, 3]) {
      const res = await t.gql(USERS, { p, pp: 5 }, { key: a.key });
      expect(res.body.errors).toBeUndefined();
      const page = res.body.data.usersPage;
      expect(page).toMatchObject({ total: 12, page: p, per_page: 5, total_pages: 3 });
      expect(page.items).toHaveLength(p < 3 ? 5 : 2);
      expect(page.items.every((u: { tenant_id: string }) => u.tenant_id === a.tenantId)).toBe(true);
      seen.push(...page.items.map((u: { id: string }) => u.id));
    }
    expect(seen.sort()).toEqual([...inA].sort());
    // Past the last page: no rows, the same total.
    expect((await t.gql(USERS, { p: 4, pp: 5 }, { key: a.key })).body.data.usersPage).toMatchObject({ total: 12, items: [] });
  });

  it('ignores another tenant\'s id for a tenant administrator: neither its users nor its count', async () => {
    const res = await t.gql(USERS, { pp: 50, t: b.tenantId }, { key: a.key });
    expect(res.body.data.usersPage.total).toBe(12);
    expect(res.body.data.usersPage.items.map((u: { tenant_id: string }) => u.tenant_id)).not.toContain(b.tenantId);
    const fromB = await t.gql(USERS, { pp: 50 }, { key: b.key });
    expect(fromB.body.data.usersPage.total).toBe(3);
    expect(fromB.body.data.usersPage.items.every((u: { tenant_id: string }) => u.tenant_id === b.tenantId)).toBe(true);
  });

  it('gives a system administrator one tenant with tenant_id, and every tenant without', async () => {
    const one = await t.gql(USERS, { t: b.tenantId });
    expect(one.body.data.usersPage).toMatchObject({ total: 3, page: 1, per_page: 50, total_pages: 1 });
    const all = await t.gql(USERS, { pp: 500 });
    // 12 + 3 and the bootstrap system administrator.
    expect(all.body.data.usersPage.total).toBe(16);
    expect(all.body.data.usersPage.items).toHaveLength(16);
  });

  it('refuses a plain user, and a page size above 500 or a malformed tenant id like REST (VALIDATION_ERROR)', async () => {
    expect(code(await t.gql(USERS, {}, { key: plain.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql(USERS, { pp: 501 }, { key: a.key }))).toBe('VALIDATION_ERROR');
    expect(code(await t.gql(USERS, { p: 0 }, { key: a.key }))).toBe('VALIDATION_ERROR');
    expect(code(await t.gql(USERS, { t: 'nope' }))).toBe('VALIDATION_ERROR');
  });

  it('leaves `users` a bare list, as existing clients read it', async () => {
    const res = await t.gql('{ users(per_page: 5) { id } }', {}, { key: a.key });
    expect(res.body.data.users).toHaveLength(5);
  });
});

describe('tenantsPage', () => {
  it('shows a tenant administrator their own tenant, counted alone', async () => {
    const res = await t.gql(TENANTS, {}, { key: a.key });
    expect(res.body.data.tenantsPage).toMatchObject({ total: 1, page: 1, per_page: 50, total_pages: 1, items: [{ id: a.tenantId }] });
  });

  it('pages a system administrator through every tenant', async () => {
    const first = (await t.gql(TENANTS, { pp: 2 })).body.data.tenantsPage;
    // The system tenant, A and B.
    expect(first).toMatchObject({ total: 3, page: 1, per_page: 2, total_pages: 2 });
    const second = (await t.gql(TENANTS, { p: 2, pp: 2 })).body.data.tenantsPage;
    expect(second.items).toHaveLength(1);
    const ids = [...first.items, ...second.items].map((x: { id: string }) => x.id);
    expect(ids).toEqual(expect.arrayContaining([a.tenantId, b.tenantId]));
    expect(first.items[0].is_system).toBe(true);
  });

  it('refuses a plain user and a page size above 500', async () => {
    expect(code(await t.gql(TENANTS, {}, { key: plain.key }))).toBe('ACCESS_DENIED');
    expect(code(await t.gql(TENANTS, { pp: 501 }))).toBe('VALIDATION_ERROR');
  });
});

describe('the REST twins answer the same page', () => {
  it('GET /admin/users and /admin/tenants: total_pages and the page headers, within the tenant', async () => {
    const users = await t.http('GET', '/admin/users?per_page=5&page=2', { key: a.key });
    expect(users.status).toBe(200);
    expect(users.body).toMatchObject({ total: 12, page: 2, per_page: 5, total_pages: 3 });
    expect(users.headers.get('x-total-count')).toBe('12');
    expect(users.headers.get('x-total-pages')).toBe('3');
    const gql = (await t.gql(USERS, { p: 2, pp: 5 }, { key: a.key })).body.data.usersPage;
    expect(gql.items.map((u: { id: string }) => u.id)).toEqual(users.body.items.map((u: { id: string }) => u.id));
    const tenants = await t.http('GET', '/admin/tenants', { key: a.key });
    expect(tenants.body).toMatchObject({ total: 1, total_pages: 1 });
    expect(tenants.headers.get('x-total-count')).toBe('1');
    expectError(await t.http('GET', '/admin/users?per_page=501', { key: a.key }), 422, 'VALIDATION_ERROR');
  });
});
