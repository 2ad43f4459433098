/** `GET /admin/audit-log/export`: JSON and CSV downloads, quoting, formula escaping and limits. */
import { Types } from 'mongoose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { docWriterPlugin } from '../fixtures/doc-writer-plugin.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { seedEntries, type SeedEntry } from './helpers.ts';

let t: TestApp;
const user = new Types.ObjectId();
const tenant = new Types.ObjectId();
/** Awkward display names, newest first (the export order). */
const NAMES = ['plain', 'Smith, John', 'say "hi"', 'two\nlines', '=SUM(A1:A2)', '+1', '-1', '@cmd', '\tTab', '\rCR', 'x=1'];
let csvSeeds: (SeedEntry & { id: string })[];

beforeAll(async () => {
  t = await buildTestApp({ plugins: [auditPlugin, docWriterPlugin] });
  const seeds: SeedEntry[] = NAMES.map((name, i) => ({
    resource: 'csv', item_id: new Types.ObjectId(), operation: i % 2 ? 'update' : 'delete', user_id: user, user_name: name,
    ip: i === 0 ? '=1+1' : '192.0.2.1', tenant_id: tenant, created_at: new Date(Date.UTC(2026, 10, 20, 12, 0, 0) - i * 1000),
    changes: i % 2 ? { title: { old: 'a,b', new: 'c"d' } } : null, snapshot: i % 2 ? null : { title: 'gone', n: i },
  }));
  const seededIds = await seedEntries(t, seeds);
  csvSeeds = seeds.map((s, i) => ({ ...s, id: seededIds[i]! }));
  const base = Date.UTC(2026, 0, 1);
  await seedEntries(t, Array.from({ length: 10_001 }, (_, i) => ({ resource: 'bulk', created_at: new Date(base + i * 1000) })));
}, 120_000);
afterAll(() => t?.close());

const exportOf = (query: Record<string, string>) => t.http('GET', `/admin/audit-log/export?${new URLSearchParams(query)}`);

it('CSV: header, exactly the flat columns, RFC 4180 quoting and formula escaping', async () => {
  const res = await exportOf({ resource: 'csv', format: 'csv' });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
  expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="audit-log-[\dTZ-]+\.csv"$/);
  const quote = (s: string) => (/[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const cell = (s: string) => quote(/^[=+\-@\t\r]/.test(s) ? `'${s}` : s);
  const expected = [
    'id,resource,item_id,operation,user_id,user_name,ip,created_at',
    ...csvSeeds.map((s) =>
      [s.id, 'csv', String(s.item_id), s.operation, String(user), cell(s.user_name!), cell(s.ip!), s.created_at!.toISOString()].join(','),
    ),
  ];
  expect(res.body).toBe(`${expected.join('\r\n')}\r\n`);
  // Spot checks of the rules, independent of the helper above.
  expect(res.body).toContain(',"Smith, John",');
  expect(res.body).toContain(',"say ""hi""",');
  expect(res.body).toContain(',"two\nlines",');
  expect(res.body).toContain(",'=SUM(A1:A2),");
  expect(res.body).toContain(",'+1,");
  expect(res.body).toContain(",'-1,");
  expect(res.body).toContain(",'@cmd,");
  expect(res.body).toContain(",'\tTab,");
  expect(res.body).toContain(`,"'\rCR",`);
  expect(res.body).toContain(',x=1,');
  expect(res.body).toContain(",'=1+1,");
  expect(res.body).not.toContain('gone');
});

it('JSON (the default): an array of full records', async () => {
  const res = await exportOf({ resource: 'csv' });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="audit-log-[\dTZ-]+\.json"$/);
  expect(res.body).toHaveLength(NAMES.length);
  expect(res.body.map((e: any) => e.user_name)).toEqual(NAMES);
  expect(res.body[0]).toEqual({
    id: csvSeeds[0]!.id, resource: 'csv', item_id: String(csvSeeds[0]!.item_id), operation: 'delete', user_id: String(user), user_name: 'plain',
    ip: '=1+1', changes: null, snapshot: { title: 'gone', n: 0 }, created_at: '2026-11-20T12:00:00.000Z', tenant_id: String(tenant),
  });
  expect(res.body[1].changes).toEqual({ title: { old: 'a,b', new: 'c"d' } });
});

it('applies the list filters', async () => {
  const res = await exportOf({ resource: 'csv', operation: 'update', date_to: '2026-11-20T11:59:57Z' });
  expect(res.body.map((e: any) => e.user_name)).toEqual(['two\nlines', '+1', '@cmd', '\rCR']);
  const csv = await exportOf({ resource: 'csv', user_id: String(new Types.ObjectId()), format: 'csv' });
  expect(csv.body).toBe('id,resource,item_id,operation,user_id,user_name,ip,created_at\r\n');
  const none = await exportOf({ resource: 'nothing' });
  expect(none.body).toEqual([]);
});

it('limits the rows: 10000 by default, `limit` when given', async () => {
  const all = await exportOf({ resource: 'bulk' });
  expect(all.body).toHaveLength(10_000);
  expect(all.body[0].created_at).toBe(new Date(Date.UTC(2026, 0, 1) + 10_000 * 1000).toISOString());
  const three = await exportOf({ resource: 'bulk', format: 'csv', limit: '3' });
  expect(three.body.trimEnd().split('\r\n')).toHaveLength(4);
  expect((await exportOf({ resource: 'csv', limit: '3' })).body.map((e: any) => e.user_name)).toEqual(NAMES.slice(0, 3));
  expect((await exportOf({ resource: 'csv', limit: '100000' })).status).toBe(200);
});

it.each([
  ['limit', { limit: '100001' }],
  ['limit', { limit: '0' }],
  ['format', { format: 'xml' }],
  ['date_from', { date_from: '21/11/2026' }],
  ['sort', { sort: 'created_at' }],
])('answers 422 for a bad %s', async (_field, query) => {
  const res = await exportOf(query);
  expect(res.status).toBe(422);
  expect(envelope(res).code).toBe('VALIDATION_ERROR');
});
