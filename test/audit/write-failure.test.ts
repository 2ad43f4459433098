/**
 * A failing audit write never fails the client's request. The database itself rejects the writes
 * here (a collection validator that no entry satisfies): the relay's audit sink logs the entries it
 * could not write and the change and its event stand.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { listEntries } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin] });
});
afterAll(() => t?.close());

const setValidator = (validator: Record<string, unknown>) => t.app.db.conn.db!.command({ collMod: 'audit_log', validator, validationLevel: 'strict', validationAction: 'error' });

it('answers the request normally when the audit write fails, and records again once the database accepts', async () => {
  await setValidator({ never_present: { $exists: true } });
  const created = await t.http('POST', '/dw/projects', { json: { name: 'unaudited' } });
  expect(created.status).toBe(201);
  const patched = await t.http('PATCH', `/dw/projects/${created.body._id}`, { json: { name: 'still fine' } });
  expect(patched.status).toBe(200);
  expect(patched.body.name).toBe('still fine');
  expect(await listEntries(t)).toEqual([]);

  await setValidator({});
  const later = await t.http('POST', '/dw/projects', { json: { name: 'audited' } });
  expect(later.status).toBe(201);
  expect((await listEntries(t)).map((e) => e.item_id)).toEqual([String(later.body._id)]);
});
