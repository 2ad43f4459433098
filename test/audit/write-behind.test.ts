/**
 * The write-behind buffer: a request does not wait for its audit write, reads flush first so a
 * process reads its own writes, and shutdown writes what is still queued.
 */
import mongoose from 'mongoose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { auditCollection, listEntries } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  // An interval far beyond the test's run time: only a read, a full batch or close() writes.
  t = await buildTestApp({ plugins: [auditPlugin.configure({ flush_interval_ms: 60_000, batch_size: 3 }), docWriterPlugin] });
});
afterAll(() => t?.close());

it('queues entries off the request path; a read flushes them first', async () => {
  const res = await t.http('POST', '/dw/projects', { json: { name: 'queued' } });
  expect(res.status).toBe(201);
  expect(await auditCollection(t).countDocuments()).toBe(0);
  const items = await listEntries(t);
  expect(items.map((e) => [e.operation, e.item_id])).toEqual([['insert', String(res.body._id)]]);
  expect(await auditCollection(t).countDocuments()).toBe(1);
});

it('writes a full batch without waiting for the interval', async () => {
  const before = await auditCollection(t).countDocuments();
  const res = await t.http('POST', '/dw/tasks/bulk-create', { json: { items: [{ n: 1 }, { n: 2 }, { n: 3 }] } });
  expect(res.status).toBe(201);
  await expect.poll(() => auditCollection(t).countDocuments(), { timeout: 5000 }).toBe(before + 3);
});

it('close() writes what is still queued', async () => {
  const res = await t.http('POST', '/dw/projects', { json: { name: 'at shutdown' } });
  expect(res.status).toBe(201);
  expect(await auditCollection(t).countDocuments({ item_id: new mongoose.Types.ObjectId(String(res.body._id)) })).toBe(0);
  await t.app.close();
  const conn = await mongoose.createConnection(t.config.MONGODB_URI!).asPromise();
  try {
    expect(await conn.collection('audit_log').countDocuments({ item_id: new mongoose.Types.ObjectId(String(res.body._id)) })).toBe(1);
  } finally {
    await conn.close();
  }
});
