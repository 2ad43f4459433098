/** Crash safety: a failed execution is `failed`, never `completed`; executing again resumes and audits every item exactly once. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, expectError, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { ERASURE_COLLECTION } from '../../plugins/privacy/model.ts';
import { pdCrash, pdModels, privacyDataPlugin, resetPdCrash } from '../fixtures/privacy-data-plugin.ts';
import { auditEntries, collectionsHolding, createSubject, oid, seedSubject } from './helpers.ts';

let t: TestApp;
let admin: { key: string; tenantId: string };

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin, privacyDataPlugin] });
  admin = await createTenantUser(t, { roles: ['admin'] });
});
afterEach(() => resetPdCrash());
afterAll(() => t?.close());

const requestFor = async (userId: string) => {
  const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: userId } });
  expect(r.status).toBe(201);
  return r.body.id as string;
};
const execute = (id: string) => t.http('POST', `/privacy/erasure-requests/${id}/execute`, { key: admin.key });
const get = async (id: string) => (await t.http('GET', `/privacy/erasure-requests/${id}`, { key: admin.key })).body;
const entriesAbout = async (userId: string) => {
  await t.app.services.get('audit').flush();
  const all = await auditEntries(t);
  return {
    depersonalize: all.filter((e) => e.operation === 'depersonalize' && e.changes.user_id === userId),
    consents: all.filter((e) => e.resource === 'privacy_consents' && e.operation === 'update' && e.user_id === null),
  };
};

describe.each(['before', 'after'] as const)('a crash %s the write of the second note', (when) => {
  it('fails the request, then resumes it: completed, every item audited exactly once, nothing personal left', async () => {
    const s = await createSubject(t, admin.tenantId);
    const seeded = await seedSubject(t, s, { notes: 3 });
    const id = await requestFor(s.userId);
    const consentEntriesBefore = (await entriesAbout(s.userId)).consents.length;

    Object.assign(pdCrash, { afterUpdates: 1, when });
    const first = await execute(id);
    expectError(first, 500, 'INTERNAL_ERROR');
    const failed = await get(id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, result: null, completed_at: null });
    expect(failed.error).toMatch(/simulated crash/);
    // Half-erased and reported as such: notes still hold the name, the account still works.
    const { Note } = pdModels(t.app.db.conn);
    expect(await Note.countDocuments({ author_id: s.userId, author_name: { $ne: 'deleted-user' } })).toBe(when === 'before' ? 2 : 1);
    expect((await t.http('GET', '/auth/me', { key: s.key })).status).toBe(200);

    resetPdCrash();
    const second = await execute(id);
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ status: 'completed', attempts: 2, error: null, result: { documents_depersonalized: 2 + 3 + 1, consents_revoked: 2, documents_deleted: 1 } });
    const { depersonalize, consents } = await entriesAbout(s.userId);
    const ids = depersonalize.map((e) => e.item_id).sort();
    expect(ids).toEqual([...seeded.projects, ...seeded.notes, s.userId].sort());
    expect(new Set(ids).size).toBe(ids.length);
    expect(consents.length - consentEntriesBefore).toBe(2);
    // Every entry came from the event log: the item's `erasure.item_recorded` (or the consent's own
    // `consent.revoked`) event, whose id the entry shares, once.
    const events = t.app.db.conn.collection('events');
    for (const e of depersonalize) expect(await events.countDocuments({ _id: `evt_${e.id}` as never, type: 'erasure.item_recorded' })).toBe(1);
    for (const e of consents.slice(consentEntriesBefore)) expect(await events.countDocuments({ _id: `evt_${e.id}` as never, type: 'consent.revoked' })).toBe(1);
    expect(await collectionsHolding(t, [s.email, s.name, seeded.oldName])).toEqual([]);
    expect((await t.http('GET', '/auth/me', { key: s.key })).status).toBe(401);
  });
});

describe('a crash after deleting a document, before its entry', () => {
  it('the resumed execution writes the delete entry from the ledger, once', async () => {
    const s = await createSubject(t, admin.tenantId);
    const seeded = await seedSubject(t, s, { notes: 1 });
    const id = await requestFor(s.userId);
    pdCrash.afterDelete = true;
    expectError(await execute(id), 500, 'INTERNAL_ERROR');
    expect(await pdModels(t.app.db.conn).Credential.countDocuments({ user_id: s.userId })).toBe(0);
    expect((await get(id)).status).toBe('failed');
    expect((await execute(id)).body).toMatchObject({ status: 'completed', result: { documents_deleted: 1 } });
    expect((await execute(id)).status).toBe(200);
    await t.app.services.get('audit').flush();
    const deletes = (await auditEntries(t, { operation: 'delete', resource: 'pd_credentials' })).filter((e) => e.item_id === seeded.credential);
    expect(deletes).toHaveLength(1);
    expect(deletes[0]).toMatchObject({ user_id: null, tenant_id: admin.tenantId });
    expect(deletes[0].snapshot).toMatchObject({ _id: seeded.credential, user_id: s.userId });
    expect(deletes[0].snapshot).not.toHaveProperty('device_name');
  });
});

describe('never completed while data remains', () => {
  it('a write that silently did not take leaves the request failed, naming what remains', async () => {
    const s = await createSubject(t, admin.tenantId);
    await seedSubject(t, s, { notes: 2 });
    const id = await requestFor(s.userId);
    pdCrash.swallow = true;
    expectError(await execute(id), 500, 'INTERNAL_ERROR');
    const r = await get(id);
    expect(r.status).toBe('failed');
    expect(r.error).toBe('Personal data remains after erasure (pd_notes: 2)');
    // No depersonalize entry for what was not depersonalized.
    const { depersonalize } = await entriesAbout(s.userId);
    expect(depersonalize.filter((e) => e.resource === 'pd_notes')).toHaveLength(0);
    resetPdCrash();
    expect((await execute(id)).body.status).toBe('completed');
    expect((await entriesAbout(s.userId)).depersonalize.filter((e) => e.resource === 'pd_notes')).toHaveLength(2);
  });
});

describe('one execution at a time', () => {
  it('a running request whose lease is live answers 409; once the lease expired, executing resumes it', async () => {
    const s = await createSubject(t, admin.tenantId);
    const id = await requestFor(s.userId);
    const coll = t.app.db.conn.db!.collection(ERASURE_COLLECTION);
    await coll.updateOne({ _id: oid(id) }, { $set: { status: 'running', lease_until: new Date(Date.now() + 60_000) } });
    const busy = await execute(id);
    expect(expectError(busy, 409, 'CONFLICT').details).toEqual({ status: 'running' });
    expect(await coll.findOne({ _id: oid(id) })).toMatchObject({ status: 'running' });
    // The runner died: its lease passed.
    await coll.updateOne({ _id: oid(id) }, { $set: { lease_until: new Date(Date.now() - 1000) } });
    const resumed = await execute(id);
    expect(resumed.status).toBe(200);
    expect(resumed.body.status).toBe('completed');
  });

  it('two concurrent executions: one completes, the other is refused with 409 or sees it completed', async () => {
    const s = await createSubject(t, admin.tenantId);
    await seedSubject(t, s, { notes: 3 });
    const id = await requestFor(s.userId);
    const [a, b] = await Promise.all([execute(id), execute(id)]);
    const statuses = [a.status, b.status].sort();
    expect([[200, 200], [200, 409]]).toContainEqual(statuses);
    expect((await get(id)).status).toBe('completed');
    const { depersonalize } = await entriesAbout(s.userId);
    expect(depersonalize).toHaveLength(2 + 3 + 1);
  });
});
