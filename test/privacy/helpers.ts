import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import { expect } from 'vitest';
import { ADMIN_KEY, createTenantUser, type TestApp } from '../helpers/app.ts';
import { pdModels } from '../fixtures/privacy-data-plugin.ts';

/**
 * A user with a distinctive email, name and attributes (so a raw search finds nothing else) and an
 * API key. `phone` is the distinctive value held in the user's `attributes` only.
 */
export async function createSubject(t: TestApp, tenantId: string, opts: { roles?: ('user' | 'admin')[]; features?: string[] } = {}) {
  const tag = randomBytes(4).toString('hex');
  const email = `zelda.${tag}@example.com`;
  const name = `Zelda Quintero ${tag}`;
  const phone = `+46 70 555 ${tag}`;
  const attributes = { phone, department: 'finance' };
  const ur = await t.http('POST', '/admin/users', { json: { email, name, tenant_id: tenantId, roles: opts.roles ?? ['user'], features: opts.features ?? ['tasks'], attributes } });
  expect(ur.status).toBe(201);
  const kr = await t.http('POST', '/admin/api-keys', { json: { user_id: ur.body.id, name: 'subject key' } });
  expect(kr.status).toBe(201);
  return { userId: ur.body.id as string, tenantId, email, name, phone, attributes, key: kr.body.key as string, keyId: kr.body.id as string };
}

export type Subject = Awaited<ReturnType<typeof createSubject>>;

/**
 * Personal data of a subject across the stack: two projects (owner_email) of which one updated
 * (audit `changes` hold the email), a task, two consents, notes (depersonalized, amount kept), a
 * credential (deleted), and a rename of the user by an admin (audit `changes` hold both names).
 */
export async function seedSubject(t: TestApp, s: Subject, opts: { notes?: number } = {}) {
  const projects: string[] = [];
  const etags: string[] = [];
  for (const n of [1, 2]) {
    const r = await t.http('POST', '/projects', { key: s.key, json: { name: `Project ${n}`, owner_email: s.email } });
    expect(r.status).toBe(201);
    projects.push(r.body._id);
    etags.push(r.headers.get('etag')!);
  }
  const up = await t.http('PATCH', `/projects/${projects[0]}`, { key: s.key, json: { owner_email: `alt.${s.email}` }, headers: { 'If-Match': etags[0]! } });
  expect(up.status).toBe(200);
  const task = await t.http('POST', '/tasks', { key: s.key, json: { project_id: projects[1], title: 'Write report' } });
  expect(task.status).toBe(201);
  for (const purpose of ['marketing', 'analytics']) expect((await t.http('POST', '/privacy/consents', { key: s.key, json: { purpose } })).status).toBe(201);
  const { Note, Credential } = pdModels(t.app.db.conn);
  const notes = [];
  for (let i = 0; i < (opts.notes ?? 2); i++) {
    notes.push(await Note.create({ tenant_id: s.tenantId, author_id: s.userId, author_name: s.name, author_email: s.email, amount: 100 + i }));
  }
  const credential = await Credential.create({ tenant_id: s.tenantId, user_id: s.userId, device_name: `${s.name}'s phone`, secret: 'pk-secret-bytes' });
  const oldName = s.name;
  const newName = `${s.name} Renamed`;
  expect((await t.http('PATCH', `/admin/users/${s.userId}`, { json: { name: newName } })).status).toBe(200);
  s.name = newName;
  return { projects, task: task.body._id as string, notes: notes.map((n) => String(n._id)), credential: String(credential._id), oldName };
}

/** Every document of every collection of the app's database, raw (no model, no projection), as one lowercase JSON text per collection. */
export async function rawDump(t: TestApp): Promise<Record<string, string>> {
  const db = t.app.db.conn.db!;
  const out: Record<string, string> = {};
  for (const c of await db.listCollections().toArray()) {
    const docs = await db.collection(c.name).find({}).toArray();
    out[c.name] = JSON.stringify(docs).toLowerCase();
  }
  return out;
}

/** Collections whose raw content contains any of the needles (case-insensitive). */
export async function collectionsHolding(t: TestApp, needles: string[]): Promise<string[]> {
  const dump = await rawDump(t);
  return Object.entries(dump)
    .filter(([, text]) => needles.some((n) => text.includes(n.toLowerCase())))
    .map(([name]) => name);
}

/** Audit entries as the admin API returns them (system admin: every tenant). */
export async function auditEntries(t: TestApp, query: Record<string, string> = {}) {
  const qs = new URLSearchParams({ per_page: '500', ...query }).toString();
  const res = await t.http('GET', `/admin/audit-log?${qs}`, { key: ADMIN_KEY });
  expect(res.status).toBe(200);
  return res.body.items as any[];
}

export const oid = (s: string) => new Types.ObjectId(s);

/** JSON as the export writes it (object ids as hex strings, dates as ISO strings, undefined as null). */
const asJson = (v: unknown): unknown => JSON.parse(JSON.stringify(v ?? null));

/**
 * What erasure will work on, read raw before it runs: for every personal-data declaration, the
 * documents linked to the subject by its `subject_field` (object id or hex string), and under
 * `users` the raw user document.
 */
export async function declaredData(t: TestApp, userId: string): Promise<Record<string, Record<string, unknown>[]>> {
  const conn = t.app.db.conn;
  const out: Record<string, Record<string, unknown>[]> = {};
  for (const d of t.app.kernel.personalData()) {
    out[d.name] = await conn.models[d.model]!.collection.find({ [d.subject_field ?? 'created_by']: { $in: [oid(userId), userId] } }).toArray();
  }
  out.users = [(await conn.db!.collection('users').findOne({ _id: oid(userId) }))!];
  return out;
}

/**
 * The export holds everything erasure removes: for every collection the erasure preview lists, each
 * linked document (read raw by `declaredData` before erasure) is in the export with the subject's
 * value of every field the preview names; for `users`, the exported account holds them. A preview
 * entry counting more documents than the export holds, a missing collection, or a previewed field
 * left out of the export fails.
 */
export function expectExportCovers(exported: any, preview: { collections: { name: string; count: number; fields: string[] }[] }, raw: Record<string, Record<string, unknown>[]>) {
  expect(preview.collections.length).toBeGreaterThan(0);
  for (const c of preview.collections) {
    const docs = raw[c.name];
    expect(docs, `raw documents of ${c.name}`).toBeDefined();
    expect(docs!.length, `linked documents of ${c.name}`).toBeGreaterThanOrEqual(c.count);
    if (c.name === 'users') {
      for (const f of c.fields) expect(asJson(exported.user[f]), `users.${f}`).toEqual(asJson(docs![0]![f]));
      continue;
    }
    const byId = new Map<string, any>((exported.collections[c.name] ?? []).map((x: any) => [String(x._id), x]));
    expect(byId.size, `exported documents of ${c.name}`).toBeGreaterThanOrEqual(c.count);
    for (const doc of docs!) {
      const x = byId.get(String(doc._id));
      expect(x, `${c.name} ${String(doc._id)} is exported`).toBeDefined();
      for (const f of c.fields) {
        expect(x, `${c.name}.${f} is exported`).toHaveProperty(f);
        expect(asJson(x[f]), `${c.name}.${f}`).toEqual(asJson(doc[f]));
      }
    }
  }
}

export { createTenantUser };

/**
 * The flow the cross-plugin tests share: the subject exports their data, the raw declared data is
 * read, an admin requests the erasure (201) and executes it (200). Returns what was seen before.
 */
export async function exportThenErase(t: TestApp, s: Subject, adminKey: string) {
  const ex = await t.http('GET', `/privacy/users/${s.userId}/export`, { key: s.key });
  expect(ex.status).toBe(200);
  const raw = await declaredData(t, s.userId);
  const req = await t.http('POST', '/privacy/erasure-requests', { key: adminKey, json: { user_id: s.userId } });
  expect(req.status).toBe(201);
  expect((await t.http('POST', `/privacy/erasure-requests/${req.body.id}/execute`, { key: adminKey })).status).toBe(200);
  return { exported: ex.body, raw, preview: req.body.preview };
}
