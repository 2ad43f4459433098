/** The erasure flow end to end: preview, execution, what is left in the database, audit entries, login, re-execution, export. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { pdModels, privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { auditEntries, collectionsHolding, createSubject, declaredData, expectExportCovers, oid, seedSubject, type Subject } from './helpers.ts';

let t: TestApp;
let admin: { key: string; tenantId: string; userId: string };
let s: Subject;
let seeded: Awaited<ReturnType<typeof seedSubject>>;
let bystander: Subject;
let exported: any;
let raw: Awaited<ReturnType<typeof declaredData>>;
let phoneBefore: string[];
let token: string;
let request: any;
let executed: any;
let entriesBefore: number;
let holdingBefore: string[];

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, privacyPlugin, privacyDataPlugin] });
  admin = await createTenantUser(t, { roles: ['admin'] });
  s = await createSubject(t, admin.tenantId);
  bystander = await createSubject(t, admin.tenantId);
  seeded = await seedSubject(t, s);
  // Someone else's note in the same tenant must survive untouched.
  await pdModels(t.app.db.conn).Note.create({ tenant_id: admin.tenantId, author_id: bystander.userId, author_name: bystander.name, author_email: bystander.email, amount: 7 });
  const tr = await t.http('POST', '/auth/token', { key: s.key });
  expect(tr.status).toBe(200);
  token = tr.body.token;

  const ex = await t.http('GET', `/privacy/users/${s.userId}/export`, { key: s.key });
  expect(ex.status).toBe(200);
  exported = ex.body;
  raw = await declaredData(t, s.userId);

  phoneBefore = await collectionsHolding(t, [s.phone]);
  holdingBefore = await collectionsHolding(t, [s.email, s.name, seeded.oldName]);
  const created = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
  expect(created.status).toBe(201);
  request = created.body;
  entriesBefore = (await auditEntries(t)).length;
  const res = await t.http('POST', `/privacy/erasure-requests/${request.id}/execute`, { key: admin.key });
  expect(res.status).toBe(200);
  executed = res.body;
});
afterAll(() => t?.close());

describe('preview', () => {
  it('counts per collection, with the fields it will depersonalize, consents, keys and the account', () => {
    expect(request).toMatchObject({ status: 'pending', user_id: s.userId, tenant_id: admin.tenantId, requested_by: admin.userId, result: null });
    expect(request.preview).toEqual({
      collections: [
        { name: 'projects', action: 'depersonalize', count: 2, fields: ['owner_email'] },
        { name: 'pd_notes', action: 'depersonalize', count: 2, fields: ['author_name', 'author_email'] },
        { name: 'pd_credentials', action: 'delete', count: 1, fields: ['device_name'] },
        { name: 'users', action: 'depersonalize', count: 1, fields: ['email', 'name', 'attributes'] },
      ],
      consents: 2,
      api_keys: 1,
      account: true,
    });
  });

  it('holds no personal value of the subject', () => {
    const text = JSON.stringify(request).toLowerCase();
    for (const v of [s.email, s.name, seeded.oldName]) expect(text).not.toContain(v.toLowerCase());
  });
});

describe('execution', () => {
  it('completes with a result matching the preview', () => {
    expect(executed).toMatchObject({
      id: request.id, status: 'completed', error: null, attempts: 1,
      result: { documents_depersonalized: 5, documents_deleted: 1, consents_revoked: 2, api_keys_revoked: 1, account_disabled: true },
    });
    expect(executed.result.audit_entries_scrubbed).toBeGreaterThan(0);
    expect(executed.completed_at).not.toBeNull();
  });

  it('before, the raw search finds the subject in every place its data went (the search works)', () => {
    // `tasks`: a task the subject created keeps its create's outbox entry, with the subject's name
    // as the audit's actor name (docs/events.md, "Relayed entries without an object stay").
    // `resource_versions`: projects keep versions, which hold `owner_email` as the projects did.
    expect(holdingBefore.sort()).toEqual(['audit_log', 'events', 'pd_credentials', 'pd_notes', 'projects', 'resource_versions', 'tasks', 'users']);
  });

  it('no collection of the database holds the subject’s email, any of its names or its attributes afterwards', async () => {
    // The account's events hold it as the admin API showed it (attributes), until the erasure.
    expect(phoneBefore.sort()).toEqual(['events', 'users']);
    expect(await collectionsHolding(t, [s.email, s.name, seeded.oldName, `alt.${s.email}`, s.phone])).toEqual([]);
  });

  it('kept documents keep their non-personal fields; neutral values are the documented ones', async () => {
    const { Note, Credential } = pdModels(t.app.db.conn);
    const notes = await Note.find({ author_id: s.userId }).sort({ amount: 1 }).lean();
    expect(notes.map((n) => [n.author_name, n.author_email, n.amount])).toEqual([['deleted-user', null, 100], ['deleted-user', null, 101]]);
    expect(await Credential.countDocuments({ user_id: s.userId })).toBe(0);
    const p = await t.http('GET', `/projects/${seeded.projects[1]}`);
    expect(p.body).toMatchObject({ name: 'Project 2', owner_email: null, created_by: s.userId, version: 2 });
    const task = await t.http('GET', `/tasks/${seeded.task}`);
    expect(task.body).toMatchObject({ title: 'Write report', created_by: s.userId });
  });

  it('the user document stays, disabled, with a pseudonym', async () => {
    const u = await t.app.db.conn.db!.collection('users').findOne({ _id: new (await import('mongoose')).Types.ObjectId(s.userId) });
    expect(u).toMatchObject({ name: 'deleted-user', email: `erased-${s.userId}@deleted.invalid`, is_active: false });
    expect(u!.attributes).toEqual({});
  });

  it('someone else’s data is untouched', async () => {
    const other = await pdModels(t.app.db.conn).Note.findOne({ author_id: bystander.userId }).lean();
    expect(other).toMatchObject({ author_name: bystander.name, author_email: bystander.email });
    expect((await t.http('GET', '/auth/me', { key: bystander.key })).status).toBe(200);
  });

  it('every consent is revoked and listed as such', async () => {
    const res = await t.http('GET', `/privacy/consents?user_id=${s.userId}`, { key: admin.key });
    expect(res.body.items).toHaveLength(2);
    for (const c of res.body.items) expect(c).toMatchObject({ active: false, revoked_at: expect.any(String) });
  });
});

describe('audit entries: one per changed item, naming the subject, the actor only when a service account', () => {
  it('one depersonalize entry per depersonalized document, changes {gdpr_fields, user_id}, actor null', async () => {
    const entries = await auditEntries(t, { operation: 'depersonalize' });
    expect(entries).toHaveLength(5);
    const byDoc = entries.map((e) => `${e.resource}:${e.item_id}`).sort();
    expect(byDoc).toEqual([...seeded.projects.map((id) => `projects:${id}`), ...seeded.notes.map((id) => `pd_notes:${id}`), `users:${s.userId}`].sort());
    for (const e of entries) {
      expect(e.user_id).toBeNull();
      expect(e.user_name).toBeNull();
      expect(e.tenant_id).toBe(admin.tenantId);
      expect(Object.keys(e.changes).sort()).toEqual(['gdpr_fields', 'user_id']);
      expect(e.changes.user_id).toBe(s.userId);
    }
    expect(entries.find((e) => e.resource === 'pd_notes').changes.gdpr_fields).toEqual(['author_name', 'author_email']);
    expect(entries.find((e) => e.resource === 'users').changes.gdpr_fields).toEqual(['email', 'name', 'attributes']);
  });

  it('one entry per revoked consent and one for the account disable, actor null; the deleted credential has a delete entry without personal fields', async () => {
    const all = await auditEntries(t);
    const fresh = all.slice(0, all.length - entriesBefore);
    const consents = fresh.filter((e) => e.resource === 'privacy_consents');
    expect(consents).toHaveLength(2);
    for (const e of consents) expect(e).toMatchObject({ operation: 'update', user_id: null, changes: { revoked_at: { old: null } } });
    const disable = fresh.filter((e) => e.resource === 'users' && e.operation === 'update');
    expect(disable).toHaveLength(1);
    expect(disable[0]).toMatchObject({ item_id: s.userId, user_id: null, changes: { is_active: { old: true, new: false } } });
    const deleted = fresh.filter((e) => e.operation === 'delete');
    expect(deleted).toHaveLength(1);
    expect(deleted[0]).toMatchObject({ resource: 'pd_credentials', item_id: seeded.credential, user_id: null });
    expect(deleted[0].snapshot).not.toHaveProperty('device_name');
    expect(deleted[0].snapshot).not.toHaveProperty('secret');
    // The subject's API key, revoked through identity: its `api_key.revoked` event carries the entry.
    expect(fresh.filter((e) => e.resource === 'api_keys')).toEqual([expect.objectContaining({ operation: 'update', user_id: null, changes: { revoked_at: expect.objectContaining({ old: null }) } })]);
    expect(fresh).toHaveLength(5 + 2 + 1 + 1 + 1);
  });

  it('earlier entries are kept but scrubbed: the subject’s own entries lose its name, changes lose the values', async () => {
    const own = await auditEntries(t, { user_id: s.userId });
    expect(own.length).toBeGreaterThanOrEqual(5); // 2 project inserts, 1 update, 1 task insert, 2 consent grants
    for (const e of own) expect(e.user_name).toBe('deleted-user');
    const update = (await auditEntries(t, { resource: 'projects', resource_id: seeded.projects[0]!, operation: 'update' }))[0];
    expect(update.changes.owner_email).toEqual({ old: 'deleted-user', new: 'deleted-user' });
    const rename = (await auditEntries(t, { resource: 'users', resource_id: s.userId, operation: 'update' })).find((e) => e.changes.name);
    expect(rename.changes.name).toEqual({ old: 'deleted-user', new: 'deleted-user' });
  });
});

describe('the account is cut off', () => {
  it('its API key and a token issued before are refused', async () => {
    expect((await t.http('GET', '/auth/me', { key: s.key })).status).toBe(401);
    expect((await t.http('GET', '/auth/me', { token })).status).toBe(401);
    expect((await t.http('POST', '/auth/token', { key: s.key })).status).toBe(401);
  });

  it('its API key is revoked, not only suspended: re-enabling the account does not bring it back', async () => {
    const keys = await t.app.db.conn.db!.collection('api_keys').find({ user_id: new (await import('mongoose')).Types.ObjectId(s.userId) }).toArray();
    expect(keys.every((k) => k.revoked_at instanceof Date)).toBe(true);
  });
});

describe('re-execution', () => {
  it('is a no-op: same request, no new audit entry, no document touched', async () => {
    const before = await auditEntries(t);
    const version = (await t.http('GET', `/projects/${seeded.projects[1]}`)).body.version;
    const again = await t.http('POST', `/privacy/erasure-requests/${request.id}/execute`, { key: admin.key });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(executed);
    await t.app.services.get('audit').flush();
    expect(await auditEntries(t)).toHaveLength(before.length);
    expect((await t.http('GET', `/projects/${seeded.projects[1]}`)).body.version).toBe(version);
  });

  it('a new request for the same user may be created once the first completed; it previews nothing and changes nothing', async () => {
    const r2 = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(r2.status).toBe(201);
    expect(r2.body.preview).toEqual({
      collections: [
        { name: 'projects', action: 'depersonalize', count: 0, fields: ['owner_email'] },
        { name: 'pd_notes', action: 'depersonalize', count: 0, fields: ['author_name', 'author_email'] },
        { name: 'pd_credentials', action: 'delete', count: 0, fields: ['device_name'] },
        { name: 'users', action: 'depersonalize', count: 0, fields: ['email', 'name', 'attributes'] },
      ],
      consents: 0, api_keys: 0, account: false,
    });
    const before = (await auditEntries(t)).length;
    const ex = await t.http('POST', `/privacy/erasure-requests/${r2.body.id}/execute`, { key: admin.key });
    expect(ex.body).toMatchObject({
      status: 'completed',
      result: { documents_depersonalized: 0, documents_deleted: 0, consents_revoked: 0, api_keys_revoked: 0, account_disabled: true },
    });
    await t.app.services.get('audit').flush();
    expect(await auditEntries(t)).toHaveLength(before);
  });
});

describe('export before erasure', () => {
  it('contains everything the erasure removed or depersonalized', () => {
    expect(exported.user).toMatchObject({ id: s.userId, email: s.email, name: s.name });
    expect(exported.consents.map((c: any) => c.purpose).sort()).toEqual(['analytics', 'marketing']);
    const projects = exported.collections.projects;
    expect(projects.map((p: any) => p._id).sort()).toEqual([...seeded.projects].sort());
    expect(projects.map((p: any) => p.owner_email).sort()).toEqual([s.email, `alt.${s.email}`].sort());
    expect(exported.collections.tasks.map((x: any) => x._id)).toEqual([seeded.task]);
    expect(exported.collections.pd_notes.map((n: any) => [n._id, n.author_name, n.author_email])).toEqual(seeded.notes.map((id) => [id, seeded.oldName, s.email]));
    expect(exported.collections.pd_credentials).toEqual([expect.objectContaining({ _id: seeded.credential, device_name: `${seeded.oldName}'s phone` })]);
    expect(exported.collections.pd_credentials[0]).not.toHaveProperty('secret');
  });

  it('for every collection and field the erasure preview lists, the export holds the subject’s values', () => {
    expectExportCovers(exported, request.preview, raw);
  });

  it('the account with its attributes (erased by the request) is exported', () => {
    expect(exported.user).toMatchObject({ id: s.userId, tenant_id: admin.tenantId, roles: ['user'], features: ['tasks'], is_active: true, is_deleted: false });
    expect(exported.user.attributes).toEqual(s.attributes);
  });

  it('has every declared collection, and only the subject’s documents', () => {
    expect(Object.keys(exported.collections)).toEqual(['projects', 'tasks', 'pd_notes', 'pd_credentials']);
    expect(JSON.stringify(exported)).not.toContain(bystander.email);
  });
});

describe('a service account drives it', () => {
  it('the entries carry the service account as user_id (system users only)', async () => {
    const me = await t.http('GET', '/auth/me', { key: ADMIN_KEY });
    const other = await createSubject(t, admin.tenantId);
    await t.http('POST', '/projects', { key: other.key, json: { name: 'x', owner_email: other.email } });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: ADMIN_KEY, json: { user_id: other.userId } });
    expect(r.body.requested_by).toBe(me.body.id);
    const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: ADMIN_KEY });
    expect(ex.body.status).toBe('completed');
    const entries = (await auditEntries(t, { operation: 'depersonalize' })).filter((e) => e.changes.user_id === other.userId);
    expect(entries).toHaveLength(2);
    for (const e of entries) expect(e.user_id).toBe(me.body.id);
  });
});

describe('the actor on every entry of an execution: consents, account disable, depersonalizations, deletions', () => {
  let serviceAccount: string;
  let human: { userId: string; key: string };

  beforeAll(async () => {
    const me = await t.http('GET', '/auth/me', { key: ADMIN_KEY });
    expect(me.body).toMatchObject({ scope: 'system', is_system_user: true });
    serviceAccount = me.body.id;
    // A human system administrator: `scope: system` without `is_system_user`. No API makes one
    // (only the bootstrap sets scope, and then also is_system_user), so the field is set directly.
    const u = await t.http('POST', '/admin/users', { json: { email: `ops.${Date.now()}@example.com`, name: 'Olga Ops', tenant_id: me.body.tenant_id, roles: ['admin'] } });
    expect(u.status).toBe(201);
    await t.app.db.conn.db!.collection('users').updateOne({ _id: oid(u.body.id) }, { $set: { scope: 'system' } });
    const k = await t.http('POST', '/admin/api-keys', { json: { user_id: u.body.id, name: 'ops' } });
    expect(k.status).toBe(201);
    human = { userId: u.body.id, key: k.body.key };
    expect((await t.http('GET', '/auth/me', { key: human.key })).body).toMatchObject({ scope: 'system', is_system_user: false });
  });

  /** A subject with a project and a consent, erased with the credential; the entries that execution wrote about it. */
  const eraseWith = async (cred: { key: string } | { token: string }) => {
    const subject = await createSubject(t, admin.tenantId);
    expect((await t.http('POST', '/projects', { key: subject.key, json: { name: 'x', owner_email: subject.email } })).status).toBe(201);
    const consent = await t.http('POST', '/privacy/consents', { key: subject.key, json: { purpose: 'marketing' } });
    expect(consent.status).toBe(201);
    const credential = await pdModels(t.app.db.conn).Credential.create({ tenant_id: subject.tenantId, user_id: subject.userId, device_name: 'phone', secret: 's' });
    const r = await t.http('POST', '/privacy/erasure-requests', { ...cred, json: { user_id: subject.userId } });
    expect(r.status).toBe(201);
    const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, cred);
    expect(ex.body).toMatchObject({ status: 'completed', result: { consents_revoked: 1, documents_deleted: 1, account_disabled: true } });
    await t.app.services.get('audit').flush();
    const all = await auditEntries(t);
    const entries = {
      depersonalize: all.filter((e) => e.operation === 'depersonalize' && e.changes.user_id === subject.userId),
      consent: all.filter((e) => e.resource === 'privacy_consents' && e.item_id === consent.body.id && e.operation === 'update'),
      disable: all.filter((e) => e.resource === 'users' && e.item_id === subject.userId && e.operation === 'update' && e.changes.is_active),
      deleted: all.filter((e) => e.resource === 'pd_credentials' && e.item_id === String(credential._id) && e.operation === 'delete'),
    };
    expect(entries.depersonalize).toHaveLength(2);
    expect(entries.consent).toHaveLength(1);
    expect(entries.consent[0].changes.revoked_at).toMatchObject({ old: null });
    expect(entries.disable).toHaveLength(1);
    expect(entries.disable[0].changes.is_active).toEqual({ old: true, new: false });
    expect(entries.deleted).toHaveLength(1);
    return [...entries.depersonalize, ...entries.consent, ...entries.disable, ...entries.deleted];
  };
  const tokenOf = async (key: string) => {
    const r = await t.http('POST', '/auth/token', { key });
    expect(r.status).toBe(200);
    return r.body.token as string;
  };

  it('a service account (is_system_user) with its API key: every entry carries its id', async () => {
    for (const e of await eraseWith({ key: ADMIN_KEY })) expect(e.user_id).toBe(serviceAccount);
  });

  it('a service account with a bearer token: every entry carries its id', async () => {
    for (const e of await eraseWith({ token: await tokenOf(ADMIN_KEY) })) expect(e.user_id).toBe(serviceAccount);
  });

  it('a human system administrator (scope system, not is_system_user), with its API key or a token: every entry null', async () => {
    for (const cred of [{ key: human.key }, { token: await tokenOf(human.key) }]) {
      for (const e of await eraseWith(cred)) expect(e).toMatchObject({ user_id: null, user_name: null });
    }
  });
});
