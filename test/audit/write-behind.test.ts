/**
 * When an audit entry is stored. Every audited change carries its event (resources, a plugin's own
 * documents): it gets its entry from the event log, in the relay's batch, with the event, never
 * twice, so an acknowledged change keeps its entry if the process dies right after. There is no
 * other way in: the audit service offers no direct recording.
 */
import mongoose from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditCollection, listEntries } from './helpers.ts';

describe('a plugin\'s own documents', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin] });
  });
  afterAll(() => t?.close());

  it('the audit service records nothing directly: it has no recording method', () => {
    const audit = t.app.services.get('audit') as unknown as Record<string, unknown>;
    expect(['logInsert', 'logUpdate', 'logDelete', 'logDepersonalize'].filter((m) => typeof audit[m] === 'function')).toEqual([]);
  });

  it('a plugin\'s own document write carries its event: its entry is stored with it, by the relay', async () => {
    const res = await t.http('POST', '/dw/tasks/bulk-create', { json: { items: [{ n: 1 }, { n: 2 }] } });
    expect(res.status).toBe(201);
    const ids = res.body.items.map((d: { _id: string }) => new mongoose.Types.ObjectId(d._id));
    const entries = await auditCollection(t).find({ item_id: { $in: ids } }).toArray();
    expect(entries.map((e) => e.operation)).toEqual(['insert', 'insert']);
    const events = await t.app.db.conn.collection('events').find({ 'source.id': { $in: ids } }).toArray();
    expect(entries.map((e) => String(e._id)).sort()).toEqual(events.map((e) => String(e._id).replace(/^evt_/, '')).sort());
  });
});

describe('a resource change (it carries an event)', () => {
  let t: TestApp;
  beforeAll(async () => {
    // A relay that only stores on a full batch, a read, or close: the entry must travel with the event.
    t = await buildTestApp({ plugins: [auditPlugin, resourcesPlugin], config: { EVENTS_RELAY_INTERVAL_MS: '60000' } });
  });
  afterAll(() => t?.close());

  it('gets its entry with its event, once, whose id it shares; a read stores what waits first', async () => {
    const res = await t.http('POST', '/projects', { json: { name: 'with its event' } });
    expect(res.status).toBe(201);
    const id = new mongoose.Types.ObjectId(String(res.body._id));
    // Still in the document's outbox: neither the event nor the entry is stored yet.
    expect(await auditCollection(t).countDocuments({ item_id: id })).toBe(0);
    const outbox = (await t.app.db.conn.collection('projects').findOne({ _id: id }))?._outbox as { id: string }[];
    expect(outbox).toHaveLength(1);

    const items = await listEntries(t, { resource: 'projects' });
    expect(items.filter((e) => e.item_id === String(id)).map((e) => [e.operation, e.id])).toEqual([['insert', outbox[0]!.id.replace(/^evt_/, '')]]);
    expect(await t.app.db.conn.collection('events').countDocuments({ _id: outbox[0]!.id as never })).toBe(1);
  });

  it('an update records its changes from the event', async () => {
    const c = await t.http('POST', '/projects', { json: { name: 'before' } });
    const u = await t.http('PATCH', `/projects/${c.body._id}`, { json: { name: 'after' }, headers: { 'If-Match': c.headers.get('etag')! } });
    expect(u.status).toBe(200);
    const items = (await listEntries(t, { resource: 'projects' })).filter((e) => e.item_id === String(c.body._id));
    expect(items.map((e) => e.operation).sort()).toEqual(['insert', 'update']);
    expect(items.find((e) => e.operation === 'update').changes).toMatchObject({ name: { old: 'before', new: 'after' } });
  });

  it('close() stores what still waits, entries included', async () => {
    const res = await t.http('POST', '/projects', { json: { name: 'at shutdown' } });
    expect(res.status).toBe(201);
    const id = new mongoose.Types.ObjectId(String(res.body._id));
    expect(await auditCollection(t).countDocuments({ item_id: id })).toBe(0);
    await t.app.close();
    const conn = await mongoose.createConnection(t.config.MONGODB_URI!).asPromise();
    try {
      expect(await conn.collection('audit_log').countDocuments({ item_id: id })).toBe(1);
    } finally {
      await conn.close();
    }
  });
});
