/** The right of access streams: a large export is sent chunked (no Content-Length, never built in memory first) and is one complete JSON document. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { privacyPlugin } from '../../plugins/privacy/index.ts';
import { pdModels, privacyDataPlugin } from '../fixtures/privacy-data-plugin.ts';
import { createSubject, type Subject } from './helpers.ts';

const NOTES = 3000;

let t: TestApp;
let admin: Awaited<ReturnType<typeof createTenantUser>>;
let s: Subject;
let noteIds: string[];

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, privacyPlugin, privacyDataPlugin] });
  admin = await createTenantUser(t, { roles: ['admin'] });
  s = await createSubject(t, admin.tenantId);
  const docs = Array.from({ length: NOTES }, (_, i) => ({ tenant_id: s.tenantId, author_id: s.userId, author_name: s.name, author_email: s.email, amount: i }));
  const inserted = await pdModels(t.app.db.conn).Note.insertMany(docs);
  noteIds = inserted.map((n) => String(n._id));
});
afterAll(() => t?.close());

describe(`export of a subject with ${NOTES} documents`, () => {
  it('is streamed: Transfer-Encoding chunked, no Content-Length; the body parses and holds every document', async () => {
    const res = await fetch(`${t.url}/privacy/users/${s.userId}/export`, { headers: { 'X-API-Key': admin.key } });
    expect(res.status).toBe(200);
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    expect(res.headers.get('content-length')).toBeNull();
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="personal-data-/);
    // Read as it arrives: a body this size comes in many pieces.
    const reader = res.body!.getReader();
    const parts: Uint8Array[] = [];
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value);
    const text = Buffer.concat(parts).toString('utf8');
    expect(text.length).toBeGreaterThan(NOTES * 100);
    expect(parts.length).toBeGreaterThan(1);
    const body = JSON.parse(text);
    expect(body.user).toMatchObject({ id: s.userId, email: s.email });
    const notes = body.collections.pd_notes as any[];
    expect(notes).toHaveLength(NOTES);
    expect(notes.map((n) => n._id)).toEqual([...noteIds].sort());
    expect(notes.every((n) => n.author_email === s.email && n.author_name === s.name)).toBe(true);
    expect(notes.map((n) => n.amount).sort((a, b) => a - b)).toEqual(Array.from({ length: NOTES }, (_, i) => i));
  });
});
