import { Types } from 'mongoose';
import type { AuditEntryInput } from '../../plugins/audit/model.ts';
import { ADMIN_KEY, createTenantUser, type TestApp } from '../helpers/app.ts';

/** The raw `audit_log` collection of a test app, for seeding and for checks behind the API's back. */
export const auditCollection = (t: TestApp) => t.app.db.conn.collection('audit_log');

/** Every entry visible to the caller (`key`, default the system admin), newest first. */
export async function listEntries(t: TestApp, query: Record<string, string> = {}, key?: string) {
  const res = await t.http('GET', `/admin/audit-log?${new URLSearchParams({ per_page: '500', ...query })}`, key ? { key } : {});
  if (res.status !== 200) throw new Error(`list: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.items as any[];
}

/** The entries of identity changes (a test tenant, user and key each have one). */
export const IDENTITY_ENTRIES = { resource: { $in: ['tenants', 'users', 'api_keys'] } };

/** Any stored fields of an entry (the model's own type); the rest gets neutral defaults. */
export type SeedEntry = Partial<AuditEntryInput>;

/** Inserts entries directly (fixed `created_at` and the like); returns their ids as strings. */
export async function seedEntries(t: TestApp, entries: SeedEntry[]): Promise<string[]> {
  const docs = entries.map((e) => ({
    resource: 'seeded', item_id: new Types.ObjectId(), operation: 'insert', user_id: null, user_name: null, ip: null,
    changes: null, snapshot: null, created_at: new Date(), tenant_id: null, ...e,
  }));
  const res = await auditCollection(t).insertMany(docs);
  return Object.values(res.insertedIds).map(String);
}

/**
 * Two tenants with an admin each (and a regular user in A), entries of each tenant written through
 * the doc-writer fixture, one entry of the system admin's tenant and one without tenant.
 */
export async function seedTenants(t: TestApp) {
  const a = await createTenantUser(t, { roles: ['admin'] });
  const aUser = await createTenantUser(t, { tenantId: a.tenantId, roles: ['user'] });
  const b = await createTenantUser(t, { roles: ['admin'] });
  const post = async (key: string, path: string, json: unknown) => {
    const res = await t.http('POST', path, { key, json });
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return String(res.body._id);
  };
  // The tenants, users and keys created above have their own entries: not what these tests count.
  await auditCollection(t).deleteMany(IDENTITY_ENTRIES);
  const a1 = await post(a.key, '/dw/projects', { name: 'a1' });
  await post(a.key, '/dw/projects', { name: 'a2' });
  const patched = await t.http('PATCH', `/dw/projects/${a1}`, { key: a.key, json: { name: 'a1!' } });
  if (patched.status !== 200) throw new Error(`patch: ${patched.status}`);
  const b1 = await post(b.key, '/dw/tasks', { title: 'b1' });
  await post(ADMIN_KEY, '/dw/tasks', { title: 'system tenant' });
  // An entry of no tenant (a system collection's change), written as the audit sink writes one.
  await auditCollection(t).insertOne({ resource: 'payments', item_id: new Types.ObjectId(), operation: 'insert', user_id: null, user_name: null, ip: null, changes: null, snapshot: null, created_at: new Date(), tenant_id: null });
  return { a, aUser, b, a1, b1, counts: { a: 3, b: 1, all: 6 } };
}
