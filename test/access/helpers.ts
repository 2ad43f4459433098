import { Schema } from 'mongoose';
import { ADMIN_KEY, buildTestApp, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { accessPlugin } from '../../plugins/access/index.ts';

/** A resource with a field of each kind the rules use; `owner_id` ties a row to a user. */
export const notes = defineResource({
  name: 'notes',
  schema: new Schema({
    title: { type: String, required: true },
    status: { type: String },
    level: { type: Number },
    secret: { type: String },
    owner_id: { type: Schema.Types.ObjectId },
    project_id: { type: Schema.Types.ObjectId, ref: 'folders' },
  }),
  searchable_fields: ['title', 'secret'],
  allow_bulk_create: true,
  allow_bulk_delete: true,
});

export const folders = defineResource({
  name: 'folders',
  schema: new Schema({ name: { type: String, required: true }, code: { type: String }, public: { type: Boolean } }),
  access: {
    // Code rules: a reader of folders sees public ones, and only their name.
    reader: { read: { rows: { public: true }, fields: ['name'] } },
  },
});

/** An app with the access plugin and the two resources; masked documents leave required fields out, so no response check. */
export const accessApp = (config: Record<string, string> = {}): Promise<TestApp> =>
  buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [notes, folders] }), accessPlugin], config, checkResponses: false });

export async function createRole(t: TestApp, body: Record<string, unknown>, opts: { key?: string; tenantId?: string } = {}) {
  const res = await t.http('POST', '/admin/roles', { key: opts.key ?? ADMIN_KEY, json: body, headers: opts.tenantId ? { 'X-Tenant-Id': opts.tenantId } : {} });
  if (res.status !== 201) throw new Error(`role: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; name: string };
}

/** A user of `tenantId` holding `roles`, with an API key. */
export async function userWith(t: TestApp, tenantId: string, roles: string[], attributes: Record<string, unknown> = {}) {
  const u = await t.http('POST', '/admin/users', { json: { email: `u${Math.random().toString(36).slice(2)}@example.com`, name: 'U', tenant_id: tenantId, roles, attributes } });
  if (u.status !== 201) throw new Error(`user: ${u.status} ${JSON.stringify(u.body)}`);
  const k = await t.http('POST', '/admin/api-keys', { json: { user_id: u.body.id, name: 'k' } });
  return { userId: u.body.id as string, key: k.body.key as string };
}

export async function newTenant(t: TestApp): Promise<string> {
  const r = await t.http('POST', '/admin/tenants', { json: { name: `t${Math.random().toString(36).slice(2)}` } });
  return r.body.id as string;
}
