/**
 * What the audit plugin records for the core document events and for direct AuditLogger calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { listEntries } from './helpers.ts';

let t: TestApp;
let tenant: Awaited<ReturnType<typeof createTenantUser>>;
let adminId: string;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin] });
  tenant = await createTenantUser(t, { roles: ['admin'] });
  adminId = (await t.http('GET', '/auth/me')).body.id;
});
afterAll(() => t?.close());

const write = async (method: string, path: string, json?: unknown, key = tenant.key) => {
  const res = await t.http(method, path, { key, ...(json !== undefined ? { json } : {}) });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
};
const entriesOf = (itemId: string) => listEntries(t, { resource_id: itemId, sort: 'created_at' });

describe('document events', () => {
  it('writes an insert entry with actor, ip, tenant and time', async () => {
    const before = Date.now();
    const doc = await write('POST', '/dw/projects', { name: 'Apollo' });
    const [e, ...rest] = await entriesOf(String(doc._id));
    expect(rest).toEqual([]);
    expect(Object.keys(e).sort()).toEqual(
      ['changes', 'created_at', 'id', 'ip', 'item_id', 'operation', 'resource', 'snapshot', 'tenant_id', 'user_id', 'user_name'],
    );
    expect(e).toMatchObject({
      resource: 'projects', item_id: String(doc._id), operation: 'insert', user_id: tenant.userId, user_name: 'Test User',
      tenant_id: tenant.tenantId, changes: null, snapshot: null,
    });
    expect(e.ip).toMatch(/127\.0\.0\.1$/);
    expect(new Date(e.created_at).getTime()).toBeGreaterThanOrEqual(before - 1000);
  });

  it('writes an update entry with only the changed fields, nested objects and arrays by value', async () => {
    const doc = await write('POST', '/dw/projects', {
      name: 'Gemini', tags: ['a', 'b'], address: { city: 'Oslo', geo: { lat: 1, lng: 2 } }, meta: { x: 1, y: [1, 2] }, same: { k: [1, { z: 2 }] },
    });
    const id = String(doc._id);
    await write('PATCH', `/dw/projects/${id}`, {
      name: 'Gemini', tags: ['a', 'b', 'c'], address: { city: 'Oslo', geo: { lat: 1, lng: 3 } }, meta: { y: [1, 2], x: 1 }, same: { k: [1, { z: 2 }] }, added: 5,
    });
    const [, upd] = await entriesOf(id);
    expect(upd).toMatchObject({ operation: 'update', user_id: tenant.userId, tenant_id: tenant.tenantId, snapshot: null });
    expect(upd.changes).toEqual({
      tags: { old: ['a', 'b'], new: ['a', 'b', 'c'] },
      address: { old: { city: 'Oslo', geo: { lat: 1, lng: 2 } }, new: { city: 'Oslo', geo: { lat: 1, lng: 3 } } },
      added: { old: null, new: 5 },
    });
  });

  it('writes a replace entry, with removed fields as new null', async () => {
    const doc = await write('POST', '/dw/tasks', { title: 'T', done: false, notes: 'n' });
    const id = String(doc._id);
    await write('PUT', `/dw/tasks/${id}`, { title: 'T2', done: false });
    const [, rep] = await entriesOf(id);
    expect(rep.operation).toBe('replace');
    expect(rep.changes).toEqual({ title: { old: 'T', new: 'T2' }, notes: { old: 'n', new: null } });
  });

  it('skips an update that changes nothing, and one that only moves updated_at/updated_by/version', async () => {
    const doc = await write('POST', '/dw/projects', { name: 'Same', list: [{ a: 1 }], when: '2026-01-01' });
    const id = String(doc._id);
    await write('PATCH', `/dw/projects/${id}?touch=false`, { name: 'Same', list: [{ a: 1 }] });
    await write('PATCH', `/dw/projects/${id}`, {});
    const body = await write('PATCH', `/dw/projects/${id}`, { name: 'Same' }, ADMIN_KEY);
    expect(body.version).toBe(3);
    expect((await entriesOf(id)).map((e) => e.operation)).toEqual(['insert']);
  });

  it('writes a delete entry whose snapshot is the whole document before deletion', async () => {
    const doc = await write('POST', '/dw/projects', { name: 'Doomed', tags: ['x'], nested: { a: [1, 2] } });
    const id = String(doc._id);
    await write('DELETE', `/dw/projects/${id}`, undefined, ADMIN_KEY);
    const [, del] = await entriesOf(id);
    expect(del).toMatchObject({ operation: 'delete', user_id: adminId, user_name: 'System Administrator', tenant_id: tenant.tenantId, changes: null });
    expect(del.snapshot).toEqual({
      _id: id, name: 'Doomed', tags: ['x'], nested: { a: [1, 2] }, tenant_id: tenant.tenantId,
      created_at: doc.created_at, updated_at: doc.updated_at, created_by: tenant.userId, updated_by: tenant.userId, version: 1,
    });
    const g = await t.gql<{ auditLog: any }>('query($id: String) { auditLog(resource_id: $id, operation: "delete") { items { snapshot } } }', { id });
    expect(g.body.data!.auditLog.items).toEqual([{ snapshot: del.snapshot }]);
  });

  it('never writes secret or deny-listed fields into changes or snapshot', async () => {
    const doc = await write('POST', '/dw/projects', {
      name: 'S', pin: '1234', password: 'p1', profile: { ssn: '111', city: 'A' },
      settings: { apiKey: 'k1', theme: 'dark', deep: [{ token: 't1', ok: 1 }] },
    });
    const id = String(doc._id);
    await write('PATCH', `/dw/projects/${id}`, {
      pin: '9999', password: 'p2', profile: { ssn: '222', city: 'B' }, settings: { apiKey: 'k2', theme: 'light', deep: [{ token: 't2', ok: 1 }] },
    });
    // A change of secret fields alone is no recordable change.
    await write('PATCH', `/dw/projects/${id}`, { pin: '0000', password: 'p3', profile: { ssn: '333', city: 'B' } });
    await write('DELETE', `/dw/projects/${id}`);
    const entries = await entriesOf(id);
    expect(entries.map((e) => e.operation)).toEqual(['insert', 'update', 'delete']);
    expect(entries[1].changes).toEqual({
      profile: { old: { city: 'A' }, new: { city: 'B' } },
      settings: { old: { theme: 'dark', deep: [{ ok: 1 }] }, new: { theme: 'light', deep: [{ ok: 1 }] } },
    });
    expect(entries[2].snapshot).toMatchObject({ name: 'S', profile: { city: 'B' }, settings: { theme: 'light', deep: [{ ok: 1 }] } });
    const text = JSON.stringify(entries);
    for (const leaked of ['1234', '9999', '0000', 'p1', 'p2', 'p3', '111', '222', '333', 'k1', 'k2', 't1', 't2', 'pin', 'password', 'ssn', 'apiKey', 'token']) {
      expect(text).not.toContain(`"${leaked}"`);
    }
  });

  it('writes one entry per document of a bulk call', async () => {
    const created = await write('POST', '/dw/tasks/bulk-create', { items: [{ title: 'b1' }, { title: 'b2' }, { title: 'b3' }] });
    const ids = (created.items as any[]).map((d) => String(d._id));
    await write('POST', '/dw/tasks/bulk-delete', { ids: ids.slice(0, 2) });
    for (const [i, id] of ids.entries()) {
      const ops = (await entriesOf(id)).map((e) => e.operation);
      expect(ops).toEqual(i < 2 ? ['insert', 'delete'] : ['insert']);
    }
  });
});
