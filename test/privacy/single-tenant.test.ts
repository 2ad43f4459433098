/**
 * `MULTI_TENANT_ENABLED=false`: the deployment is one tenant, so no privacy filter has a tenant
 * term. A tenant administrator acts on users, consents and erasure requests of every tenant, and a
 * subject's linked documents are found whatever tenant they were stamped with. With the setting on,
 * the isolation of isolation.test.ts holds, and a linked document of another tenant is left alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { ERASURE_COLLECTION } from '../../plugins/privacy/model.ts';
import { pdModels, privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { collectionsHolding, createSubject, seedSubject, type Subject } from './helpers.ts';

const plugins = [resourcesPlugin, auditPlugin, privacyPlugin, privacyDataPlugin];

/** A note linked to the subject but stamped with another tenant (e.g. written for them by a process of that tenant). */
const strayNote = (t: TestApp, s: Subject, tenantId: string) =>
  pdModels(t.app.db.conn).Note.create({ tenant_id: tenantId, author_id: s.userId, author_name: s.name, author_email: s.email, amount: 7 });

describe('MULTI_TENANT_ENABLED=false', () => {
  let t: TestApp;
  let adminA: Awaited<ReturnType<typeof createTenantUser>>;
  let adminB: Awaited<ReturnType<typeof createTenantUser>>;
  let userA: Awaited<ReturnType<typeof createTenantUser>>;
  let subjectB: Subject;
  let seeded: Awaited<ReturnType<typeof seedSubject>>;
  beforeAll(async () => {
    t = await buildTestApp({ plugins, config: { MULTI_TENANT_ENABLED: 'false' } });
    adminA = await createTenantUser(t, { roles: ['admin'] });
    adminB = await createTenantUser(t, { roles: ['admin'] });
    userA = await createTenantUser(t, { tenantId: adminA.tenantId });
    subjectB = await createSubject(t, adminB.tenantId);
    seeded = await seedSubject(t, subjectB);
    await strayNote(t, subjectB, adminA.tenantId);
  });
  afterAll(() => t?.close());

  it('consents: an administrator of tenant A reads those of a user of tenant B (REST and GraphQL); a plain user still may not', async () => {
    const rest = await t.http('GET', `/privacy/consents?user_id=${subjectB.userId}`, { key: adminA.key });
    expect(rest.status).toBe(200);
    expect(rest.body.total).toBe(2);
    expect(rest.body.items.map((c: any) => c.tenant_id)).toEqual([subjectB.tenantId, subjectB.tenantId]);
    const g = await t.gql('query($u: String) { consents(user_id: $u) { total } }', { u: subjectB.userId }, { key: adminA.key });
    expect(g.body.data.consents.total).toBe(2);
    expectError(await t.http('GET', `/privacy/consents?user_id=${subjectB.userId}`, { key: userA.key }), 403, 'ACCESS_DENIED');
  });

  it('export: an administrator of tenant A downloads the data of a user of tenant B, including a linked document stamped with tenant A', async () => {
    const ex = await t.http('GET', `/privacy/users/${subjectB.userId}/export`, { key: adminA.key });
    expect(ex.status).toBe(200);
    expect(ex.body.user).toMatchObject({ id: subjectB.userId, tenant_id: subjectB.tenantId });
    expect(ex.body.consents).toHaveLength(2);
    expect(ex.body.collections.pd_notes.map((n: any) => n.tenant_id).sort()).toEqual([adminA.tenantId, ...seeded.notes.map(() => subjectB.tenantId)].sort());
    expectError(await t.http('GET', `/privacy/users/${subjectB.userId}/export`, { key: userA.key }), 403, 'ACCESS_DENIED');
  });

  it('erasure: an administrator of tenant A requests, lists, reads and executes the erasure of a user of tenant B; nothing personal is left anywhere', async () => {
    const plain = await t.http('POST', '/privacy/erasure-requests', { key: userA.key, json: { user_id: subjectB.userId } });
    expectError(plain, 403, 'ACCESS_DENIED');
    const created = await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json: { user_id: subjectB.userId } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ tenant_id: subjectB.tenantId, user_id: subjectB.userId, status: 'pending' });
    expect(created.body.preview.collections).toContainEqual(expect.objectContaining({ name: 'pd_notes', count: seeded.notes.length + 1 }));
    const id = created.body.id as string;
    for (const key of [adminA.key, adminB.key]) {
      const list = await t.http('GET', '/privacy/erasure-requests', { key });
      expect(list.body.items.map((r: any) => r.id)).toContain(id);
    }
    expect((await t.http('GET', `/privacy/erasure-requests/${id}`, { key: adminA.key })).body.status).toBe('pending');
    const g = await t.gql('query($id: String!) { erasureRequests { total } erasureRequest(id: $id) { user_id } }', { id }, { key: adminA.key });
    expect(g.body.data).toEqual({ erasureRequests: { total: 1 }, erasureRequest: { user_id: subjectB.userId } });

    const done = await t.http('POST', `/privacy/erasure-requests/${id}/execute`, { key: adminA.key });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'completed', result: { consents_revoked: 2, account_disabled: true } });
    expect(await pdModels(t.app.db.conn).Note.countDocuments({ author_id: subjectB.userId, author_name: { $ne: 'deleted-user' } })).toBe(0);
    expect(await collectionsHolding(t, [subjectB.email, subjectB.name, seeded.oldName, subjectB.phone])).toEqual([]);
  });

  it('a tenant administrator still cannot erase the system administrator: 403, nothing written', async () => {
    const me = await t.http('GET', '/auth/me', { key: ADMIN_KEY });
    const before = await t.app.db.conn.db!.collection(ERASURE_COLLECTION).countDocuments();
    const err = expectError(await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json: { user_id: me.body.id } }), 403, 'ACCESS_DENIED');
    expect(err.message).toBe('Only system administrators erase system administrators');
    expect(await t.app.db.conn.db!.collection(ERASURE_COLLECTION).countDocuments()).toBe(before);
  });
});

describe('MULTI_TENANT_ENABLED on (the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins });
  });
  afterAll(() => t?.close());

  it('a document linked to the subject but stamped with another tenant is neither previewed, exported nor erased', async () => {
    const admin = await createTenantUser(t, { roles: ['admin'] });
    const other = await createTenantUser(t, { roles: ['admin'] });
    const s = await createSubject(t, admin.tenantId);
    const stray = await strayNote(t, s, other.tenantId);
    const ex = await t.http('GET', `/privacy/users/${s.userId}/export`, { key: admin.key });
    expect(ex.body.collections.pd_notes).toEqual([]);
    const created = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(created.body.preview.collections).toContainEqual(expect.objectContaining({ name: 'pd_notes', count: 0 }));
    expect((await t.http('POST', `/privacy/erasure-requests/${created.body.id}/execute`, { key: admin.key })).body.status).toBe('completed');
    expect(await pdModels(t.app.db.conn).Note.findById(stray._id).lean()).toMatchObject({ author_name: s.name, author_email: s.email });
  });
});
