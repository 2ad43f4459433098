/** Personal data is declared, not guessed: resource options, the resources plugin's declarations, /admin/schema, start-up checks. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { systemActor } from '../../core/context.ts';
import { Tenancy } from '../../core/tenancy.ts';
import { PrivacyService } from '../../plugins/privacy/service.ts';
import { privacyModels } from '../../plugins/privacy/model.ts';
import { auditEntries, collectionsHolding, createSubject, oid } from './helpers.ts';

/** A resource linked to its subject by `owner_id` (not the creator), with a required personal field and a private one. */
const profiles = defineResource({
  name: 'profiles',
  schema: new Schema({
    owner_id: { type: Schema.Types.ObjectId, required: true },
    display_name: { type: String, required: true },
    phone: { type: String, default: null },
    nicknames: { type: [String], default: [] },
    bio: { type: String, default: null },
    pin: { type: String, default: null, private: true },
  }),
  gdpr_fields: ['display_name', 'phone', 'nicknames'],
  subject_field: 'owner_id',
});
const shared = defineResource({ name: 'shared_notes', schema: new Schema({ text: String }), tenant_scoped: false });

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, profiles, shared] }), auditPlugin, privacyPlugin] });
});
afterAll(() => t?.close());

describe('resource options', () => {
  it.each([
    ['an unknown gdpr field', () => defineResource({ name: 'x', schema: new Schema({ a: String }), gdpr_fields: ['b'] }), /gdpr field "b" does not exist/],
    ['a required gdpr field that is not a free string', () => defineResource({ name: 'x', schema: new Schema({ n: { type: Number, required: true } }), gdpr_fields: ['n'] }), /no neutral value/],
    ['a required enum gdpr field', () => defineResource({ name: 'x', schema: new Schema({ k: { type: String, enum: ['a'], required: true } }), gdpr_fields: ['k'] }), /no neutral value/],
    ['a subject_field that is neither an object id nor a string', () => defineResource({ name: 'x', schema: new Schema({ a: Number }), subject_field: 'a' }), /subject_field "a"/],
    ['an unknown subject_field', () => defineResource({ name: 'x', schema: new Schema({ a: String }), subject_field: 'b' }), /subject_field "b"/],
  ])('%s is refused at definition', (_label, fn, message) => {
    expect(fn).toThrow(message);
  });

  it('defaults: no gdpr fields, linked by created_by', () => {
    expect(shared).toMatchObject({ gdpr_fields: [], subject_field: 'created_by' });
  });
});

describe('declarations the resources plugin contributes', () => {
  it('one per resource, with neutral values by field kind, private fields excluded from exports', () => {
    const decl = Object.fromEntries(t.app.kernel.personalData().map((d) => [d.name, d]));
    expect(Object.keys(decl)).toEqual(['users', 'idempotency_keys', 'projects', 'tasks', 'profiles', 'shared_notes', 'resource_versions']);
    // Old versions of versioned resources (projects): scrubbed by erasure (test/privacy/erasure.test.ts).
    expect(decl.resource_versions).toMatchObject({ plugin: 'resources', model: 'ResourceVersion', on_erasure: 'scrub', scrub: expect.any(Function) });
    // The kernel's store of idempotent answers: scrubbed by erasure (test/privacy/idempotency.test.ts).
    expect(decl.idempotency_keys).toMatchObject({ plugin: 'idempotency', model: 'IdempotencyKey', subject_field: 'actor_id', on_erasure: 'scrub', scrub: expect.any(Function) });
    expect(decl.projects).toEqual({
      name: 'projects', plugin: 'resources', model: 'projects', subject_field: 'created_by', gdpr_fields: ['owner_email'], tenant_field: 'tenant_id',
      neutral: { owner_email: null }, on_erasure: 'depersonalize', export_exclude: [],
    });
    expect(decl.profiles).toMatchObject({
      subject_field: 'owner_id', gdpr_fields: ['display_name', 'phone', 'nicknames'],
      neutral: { display_name: 'deleted-user', phone: null, nicknames: [] }, export_exclude: ['pin'],
    });
    expect(decl.shared_notes).toMatchObject({ tenant_field: null, gdpr_fields: [] });
  });

  it('/admin/schema shows gdpr_fields and subject_field', async () => {
    const res = await t.http('GET', '/admin/schema');
    const byName = Object.fromEntries(res.body.resources.map((r: any) => [r.name, r]));
    expect(byName.profiles).toMatchObject({ gdpr_fields: ['display_name', 'phone', 'nicknames'], subject_field: 'owner_id' });
    expect(byName.projects).toMatchObject({ gdpr_fields: ['owner_email'], subject_field: 'created_by' });
    expect(byName.tasks).toMatchObject({ gdpr_fields: [], subject_field: 'created_by' });
  });
});

describe('the account is declared by identity', () => {
  const account = () => t.app.kernel.personalData().find((d) => d.name === 'users')!;

  it("users: the account itself (subject_field _id), on_erasure 'account', email, name and attributes", () => {
    expect(account()).toEqual({
      name: 'users', plugin: 'identity', model: 'User', subject_field: '_id', gdpr_fields: ['email', 'name', 'attributes'], tenant_field: 'tenant_id',
      neutral: { attributes: {} }, on_erasure: 'account',
    });
    expect(t.app.kernel.personalData().filter((d) => d.on_erasure === 'account')).toHaveLength(1);
  });

  it("the preview's users row names the declared fields; the export keeps the account as `user`, not under collections", async () => {
    const admin = await createTenantUser(t, { roles: ['admin'] });
    const s = await createSubject(t, admin.tenantId);
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(r.status).toBe(201);
    const users = r.body.preview.collections.filter((c: any) => c.name === 'users');
    expect(users).toEqual([{ name: 'users', action: 'depersonalize', count: 1, fields: account().gdpr_fields }]);
    // The account comes last, after every linked declaration.
    expect(r.body.preview.collections.at(-1).name).toBe('users');
    const ex = await t.http('GET', `/privacy/users/${s.userId}/export`, { key: admin.key });
    expect(ex.status).toBe(200);
    const body = typeof ex.body === 'string' ? JSON.parse(ex.body) : ex.body;
    expect(body.user).toMatchObject({ id: s.userId, email: s.email, name: s.name, attributes: s.attributes });
    expect(Object.keys(body.collections)).not.toContain('users');
  });

  it('without an account declaration, privacy still erases the other declarations and leaves the account alone', async () => {
    const admin = await createTenantUser(t, { roles: ['admin'] });
    const s = await createSubject(t, admin.tenantId);
    const p = await t.http('POST', '/projects', { key: s.key, json: { name: 'p', owner_email: s.email } });
    expect(p.status).toBe(201);
    const conn = t.app.db.conn;
    const svc = new PrivacyService(privacyModels(conn), {
      db: conn,
      identity: t.app.services.get('identity'),
      events: t.app.services.get('events'),
      tenancy: new Tenancy(true),
      audit: () => t.app.services.maybe('audit'),
      jobs: () => undefined,
      declarations: () => t.app.kernel.personalData().filter((d) => d.on_erasure !== 'account'),
      log: t.app.log,
      settings: { pseudonym: 'deleted-user', emailDomain: 'erased.invalid', leaseMs: 60_000, purposes: [] },
    });
    const req = await svc.erasures.create(systemActor(), s.userId);
    // No users row, no keys to revoke, no account to disable.
    expect(req.preview.collections.map((c: any) => [c.name, c.count])).toEqual([['projects', 1], ['profiles', 0]]);
    expect(req.preview).toMatchObject({ consents: 0, api_keys: 0, account: false });
    const done = await svc.erasures.run(systemActor(), req.id);
    expect(done.status).toBe('completed');
    expect(done.result).toMatchObject({ documents_depersonalized: 1, api_keys_revoked: 0, account_disabled: false });
    expect(await conn.db!.collection('projects').findOne({ created_by: oid(s.userId) })).toMatchObject({ owner_email: null });
    expect(await conn.db!.collection('users').findOne({ _id: oid(s.userId) })).toMatchObject({ email: s.email, name: s.name, is_active: true });
  });
});

describe('erasure follows subject_field and the neutral values', () => {
  it('a profile an admin created for the subject is found by owner_id and neutralised; bio (undeclared) and the private pin stay', async () => {
    const admin = await createTenantUser(t, { roles: ['admin'] });
    const s = await createSubject(t, admin.tenantId);
    const p = await t.http('POST', '/profiles', {
      key: admin.key,
      json: { owner_id: s.userId, display_name: s.name, phone: '+33 6 12 34 56 78', nicknames: [s.email], bio: 'likes tea' },
    });
    expect(p.status).toBe(201);
    // Private fields are server-set; put one in place directly.
    await t.app.db.conn.db!.collection('profiles').updateOne({}, { $set: { pin: '1234' } });
    const r = await t.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    expect(r.body.preview.collections.find((c: any) => c.name === 'profiles')).toEqual({ name: 'profiles', action: 'depersonalize', count: 1, fields: ['display_name', 'phone', 'nicknames'] });
    // Resources without gdpr fields have nothing to erase and are not previewed.
    expect(r.body.preview.collections.map((c: any) => c.name)).toEqual(['projects', 'profiles', 'users']);
    const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(ex.body.status).toBe('completed');
    const raw = await t.app.db.conn.db!.collection('profiles').findOne({});
    expect(raw).toMatchObject({ display_name: 'deleted-user', phone: null, nicknames: [], bio: 'likes tea', pin: '1234', version: 2 });
    expect(await collectionsHolding(t, [s.email, s.name, '+33 6 12 34 56 78'])).toEqual([]);
    const entry = (await auditEntries(t, { resource: 'profiles', operation: 'depersonalize' }))[0];
    expect(entry.changes).toEqual({ gdpr_fields: ['display_name', 'phone', 'nicknames'], user_id: s.userId });
  });
});

describe('PRIVACY_PSEUDONYM', () => {
  let u: TestApp;
  beforeAll(async () => {
    u = await buildTestApp({
      plugins: [resourcesPlugin.configure({ resources: [...sampleResources, profiles] }), auditPlugin, privacyPlugin],
      config: { PRIVACY_PSEUDONYM: 'anonymous' },
    });
  });
  afterAll(() => u?.close());

  it("is the neutral value of a resource's required gdpr field, as of the account's name and the audit entries", async () => {
    expect(u.app.kernel.personalData().find((d) => d.name === 'profiles')!.neutral).toEqual({ display_name: 'anonymous', phone: null, nicknames: [] });
    const admin = await createTenantUser(u, { roles: ['admin'] });
    const s = await createSubject(u, admin.tenantId);
    const p = await u.http('POST', '/profiles', { key: admin.key, json: { owner_id: s.userId, display_name: s.name, phone: '+33 6 12 34 56 78' } });
    expect(p.status).toBe(201);
    const r = await u.http('POST', '/privacy/erasure-requests', { key: admin.key, json: { user_id: s.userId } });
    const ex = await u.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: admin.key });
    expect(ex.body.status).toBe('completed');
    expect(await u.app.db.conn.db!.collection('profiles').findOne({ _id: oid(p.body._id) })).toMatchObject({ display_name: 'anonymous', phone: null });
    expect(await u.app.db.conn.db!.collection('users').findOne({ _id: oid(s.userId) })).toMatchObject({ name: 'anonymous' });
    expect(await collectionsHolding(u, [s.email, s.name, 'deleted-user'])).toEqual([]);
  });
});

describe('start-up checks', () => {
  it('a declaration naming a model nobody registered stops start-up', async () => {
    const bad = definePlugin({ name: 'bad-decl', setup: () => ({ personalData: [{ name: 'ghosts', model: 'Ghost', gdpr_fields: ['x'] }] }) });
    await expect(buildTestApp({ plugins: [privacyPlugin, bad] })).rejects.toThrow(/model "Ghost" is not registered/);
  });
});
