/** `AUDIT_LOG_ENABLED=false`: the changes' events write no entry. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { auditCollection, listEntries } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin], config: { AUDIT_LOG_ENABLED: 'false' } });
});
afterAll(() => t?.close());

it('writes no entry', async () => {
  const doc = await t.http('POST', '/dw/projects', { json: { name: 'a' } });
  expect(doc.status).toBe(201);
  expect((await t.http('PATCH', `/dw/projects/${doc.body._id}`, { json: { name: 'b' } })).status).toBe(200);
  expect((await t.http('DELETE', `/dw/projects/${doc.body._id}`)).status).toBe(204);
  await t.app.services.get('audit').flush();
  expect(await listEntries(t)).toEqual([]);
  expect(await auditCollection(t).countDocuments()).toBe(0);
});
