/**
 * End to end with the real resources plugin: the demo `/projects` resource and a resource with a
 * private field produce an audit entry per write, with the private field's value never stored.
 */
import { Schema } from 'mongoose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { projectsResource } from '../../plugins/resources/sample-resources.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import { listEntries } from './helpers.ts';

const vaults = defineResource({
  name: 'vaults',
  schema: new Schema({ label: { type: String, required: true }, code: { type: String, private: true } }),
});

/** Clients cannot write private fields; the server sets `code` from the label, as a real resource might. */
const keeper = definePlugin({
  name: 'vault-keeper',
  dependsOn: ['resources'],
  setup: () => ({
    hooks: [
      onHook('BEFORE_CREATE', (p) => (p.resource === 'vaults' ? { ...p, data: { ...p.data, code: `c-${String(p.data.label)}` } } : undefined)),
      onHook('BEFORE_UPDATE', (p) => (p.resource === 'vaults' ? { ...p, data: { ...p.data, code: `c-${String(p.data.label)}` } } : undefined)),
    ],
  }),
});

let t: TestApp;
let alice: Awaited<ReturnType<typeof createTenantUser>>;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, resourcesPlugin.configure({ resources: [projectsResource, vaults] }), keeper] });
  alice = await createTenantUser(t);
});
afterAll(() => t?.close());

const call = async (method: string, path: string, json?: unknown, etag?: string) => {
  const res = await t.http(method, path, { key: alice.key, ...(json !== undefined ? { json } : {}), ...(etag ? { headers: { 'If-Match': etag } } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return { body: res.body, etag: res.headers.get('etag') ?? '' };
};

it('records insert, update, replace and soft delete of a resource', async () => {
  const created = await call('POST', '/projects', { name: 'Apollo', tags: ['a'] });
  const id = String(created.body._id);
  const patched = await call('PATCH', `/projects/${id}`, { tags: ['a', 'b'] }, created.etag);
  const same = await call('PATCH', `/projects/${id}`, { tags: ['a', 'b'] }, patched.etag);
  const replaced = await call('PUT', `/projects/${id}`, { name: 'Apollo 2', tags: ['a', 'b'] }, same.etag);
  await call('DELETE', `/projects/${id}`, undefined, replaced.etag);

  const entries = await listEntries(t, { resource_id: id, sort: 'created_at' });
  expect(entries.map((e) => e.operation)).toEqual(['insert', 'update', 'replace', 'delete']);
  for (const e of entries) expect(e).toMatchObject({ resource: 'projects', user_id: alice.userId, tenant_id: alice.tenantId });
  expect(entries[1].changes).toEqual({ tags: { old: ['a'], new: ['a', 'b'] } });
  expect(entries[2].changes).toMatchObject({ name: { old: 'Apollo', new: 'Apollo 2' } });
  expect(entries[3].snapshot).toMatchObject({ _id: id, name: 'Apollo 2', tags: ['a', 'b'], is_deleted: false });
});

it('one entry per document of a bulk create', async () => {
  const res = await call('POST', '/projects/bulk', { items: [{ name: 'b1' }, { name: 'b2' }] });
  const ids: string[] = res.body.items.map((d: any) => String(d._id));
  expect(ids).toHaveLength(2);
  for (const id of ids) expect((await listEntries(t, { resource_id: id })).map((e) => e.operation)).toEqual(['insert']);
});

it('leaves private fields out of changes and snapshot', async () => {
  const created = await call('POST', '/vaults', { label: 'v' });
  const id = String(created.body._id);
  const patched = await call('PATCH', `/vaults/${id}`, { label: 'w' }, created.etag);
  await call('DELETE', `/vaults/${id}`, undefined, patched.etag);
  expect((await t.app.db.conn.collection('vaults').findOne({ label: 'w' }))?.code).toBe('c-w');
  const entries = await listEntries(t, { resource_id: id, sort: 'created_at' });
  expect(entries.map((e) => e.operation)).toEqual(['insert', 'update', 'delete']);
  expect(entries[1].changes).toEqual({ label: { old: 'v', new: 'w' } });
  expect(entries[2].snapshot).not.toHaveProperty('code');
  expect(JSON.stringify(entries)).not.toContain('c-');
});
