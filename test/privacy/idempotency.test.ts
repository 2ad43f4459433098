/**
 * Erasure and the stored answers of `Idempotency-Key` requests: an administrator's idempotent
 * creation of the subject keeps its answer (a replay still dedupes) but no longer holds the
 * subject's email and name; the subject's own stored answers are deleted; another tenant's answer
 * with the same email and name, and the answer about a bystander, are untouched.
 */
import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { bytesOf } from '../../plugins/idempotency/model.ts';

let t: TestApp;
let adminA: Awaited<ReturnType<typeof createTenantUser>>;
let adminB: Awaited<ReturnType<typeof createTenantUser>>;
const tag = randomBytes(4).toString('hex');
const email = `yara.${tag}@example.com`;
const name = `Yara Lindqvist ${tag}`;
const subjectBody = (tenantId: string) => ({ email, name, tenant_id: tenantId, roles: ['user'] });
const bystanderBody = (tenantId: string) => ({ email: `bystander.${tag}@example.com`, name: `Bystander ${tag}`, tenant_id: tenantId, roles: ['user'] });
let subjectId: string;
let subjectKey: string;
let created: { A: any; B: any; bystander: any };

const createUser = (key: string, idem: string, json: object) => t.http('POST', '/admin/users', { key, json, headers: { 'Idempotency-Key': idem } });
const keys = () => t.app.db.conn.db!.collection('idempotency_keys');
/** The stored answers of a tenant, each as its text (body and error). */
const storedTexts = async (tenantId: string) =>
  (await keys().find({ tenant_id: tenantId }).toArray()).map((r) => `${bytesOf(r.body)?.toString('utf8') ?? ''} ${JSON.stringify(r.error ?? null)}`.toLowerCase());

beforeAll(async () => {
  t = await buildTestApp({ plugins: [privacyPlugin] });
  adminA = await createTenantUser(t, { roles: ['admin'] });
  adminB = await createTenantUser(t, { roles: ['admin'] });
  const a = await createUser(adminA.key, `create-${tag}`, subjectBody(adminA.tenantId));
  expect(a.status).toBe(201);
  subjectId = a.body.id;
  // The same person in another tenant, created with the same key by that tenant's administrator.
  const b = await createUser(adminB.key, `create-${tag}`, subjectBody(adminB.tenantId));
  expect(b.status).toBe(201);
  const by = await createUser(adminA.key, `bystander-${tag}`, bystanderBody(adminA.tenantId));
  expect(by.status).toBe(201);
  created = { A: a.body, B: b.body, bystander: by.body };
  const kr = await t.http('POST', '/admin/api-keys', { json: { user_id: subjectId, name: 'subject key' } });
  expect(kr.status).toBe(201);
  subjectKey = kr.body.key;
  // The subject's own idempotent request: its stored answer is theirs.
  const own = await t.http('POST', '/privacy/consents', { key: subjectKey, json: { purpose: 'newsletter' }, headers: { 'Idempotency-Key': `own-${tag}` } });
  expect(own.status).toBe(201);
  expect(await keys().countDocuments({ actor_id: subjectId })).toBe(1);
  expect((await storedTexts(adminA.tenantId)).some((x) => x.includes(email))).toBe(true);

  const r = await t.http('POST', '/privacy/erasure-requests', { key: adminA.key, json: { user_id: subjectId } });
  expect(r.status).toBe(201);
  const ex = await t.http('POST', `/privacy/erasure-requests/${r.body.id}/execute`, { key: adminA.key });
  expect(ex.status).toBe(200);
  expect(ex.body.status).toBe('completed');
});
afterAll(() => t?.close());

describe('erasure and stored idempotent answers', () => {
  it('a replay of the administrator’s creation still dedupes but answers the erased account’s values, not the personal ones', async () => {
    const replay = await createUser(adminA.key, `create-${tag}`, subjectBody(adminA.tenantId));
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body.id).toBe(subjectId);
    const text = JSON.stringify(replay.body).toLowerCase();
    expect(text).not.toContain(email);
    expect(text).not.toContain(name.toLowerCase());
    // The values the erased account holds now.
    const users = t.app.db.conn.db!.collection('users');
    const now = await users.findOne({ _id: new Types.ObjectId(subjectId) });
    expect(replay.body.email).toBe(now!.email);
    expect(replay.body.name).toBe(now!.name);
    // Nothing ran again: no user holds the old email.
    expect(await users.countDocuments({ email })).toBe(1); // tenant B's
  });

  it('no stored answer of the subject’s tenant holds the email or the name; the subject’s own answers are gone', async () => {
    const texts = await storedTexts(adminA.tenantId);
    expect(texts.length).toBeGreaterThan(0);
    for (const text of texts) {
      expect(text).not.toContain(email);
      expect(text).not.toContain(name.toLowerCase());
    }
    expect(await keys().countDocuments({ actor_id: subjectId })).toBe(0);
  });

  it('another tenant’s answer with the same email and name, and a bystander’s, are untouched', async () => {
    const b = await createUser(adminB.key, `create-${tag}`, subjectBody(adminB.tenantId));
    expect(b.status).toBe(201);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.body).toEqual(created.B);
    expect(b.body.email).toBe(email);
    expect(b.body.name).toBe(name);
    const by = await createUser(adminA.key, `bystander-${tag}`, bystanderBody(adminA.tenantId));
    expect(by.headers.get('idempotent-replayed')).toBe('true');
    expect(by.body).toEqual(created.bystander);
  });
});
