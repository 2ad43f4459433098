import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import type { TestApp } from '../helpers/app.ts';
import { sign, signingKey } from '../../plugins/files/signing.ts';

const SECRET = 'files-test-signing-secret-0123456789';
import { col, download, filesApp, PDF, PNG, sha256, tenant, upload } from './helpers.ts';

describe('files as a resource: list, get, delete, downloads, signed URLs, events, GraphQL', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  let b: Awaited<ReturnType<typeof tenant>>;
  let png: Record<string, any>;
  let pdf: Record<string, any>;
  const big = randomBytes(70_000);
  let bigFile: Record<string, any>;
  beforeAll(async () => {
    t = await filesApp({ config: { FILES_SIGNED_URL_SECRET: SECRET } });
    a = await tenant(t);
    b = await tenant(t);
    png = (await upload(t, a.key, PNG, { type: 'image/png', filename: 'dot.png' })).body;
    pdf = (await upload(t, a.key, PDF, { type: 'application/pdf', filename: 'invoice "march".pdf' })).body;
    bigFile = (await upload(t, a.key, big, { filename: 'blob.bin' })).body;
  });
  afterAll(() => t.close());

  it('lists and gets within the tenant, with filters and cursor pages; another tenant sees nothing', async () => {
    const list = await t.http('GET', '/files?content_type=image/png', { key: a.key });
    expect(list.status).toBe(200);
    expect(list.body.items.map((f: any) => f._id)).toEqual([png._id]);
    const page1 = await t.http('GET', '/files?limit=2', { key: a.key });
    expect(page1.body.items).toHaveLength(2);
    const page2 = await t.http('GET', `/files?limit=2&cursor=${encodeURIComponent(page1.body.cursors.next)}`, { key: a.key });
    expect(page2.body.items).toHaveLength(1);
    expect((await t.http('GET', `/files/${png._id}`, { key: a.key })).body.sha256).toBe(sha256(PNG));
    expect((await t.http('GET', '/files', { key: b.key })).body.items).toEqual([]);
    expect((await t.http('GET', `/files/${png._id}`, { key: b.key })).status).toBe(404);
  });

  it('downloads: ETag, If-None-Match 304, Range 206, 416 past the end, disposition and nosniff', async () => {
    const full = await download(t, `/files/${bigFile._id}/content`, { key: a.key });
    expect(full.status).toBe(200);
    expect(sha256(full.bytes)).toBe(sha256(big));
    expect(full.headers.get('etag')).toBe(`"${sha256(big)}"`);
    expect(full.headers.get('x-content-type-options')).toBe('nosniff');
    expect(full.headers.get('content-disposition')).toMatch(/^attachment; filename="blob.bin"/);
    const again = await download(t, `/files/${bigFile._id}/content`, { key: a.key, headers: { 'If-None-Match': full.headers.get('etag')! } });
    expect(again.status).toBe(304);
    expect(again.bytes.length).toBe(0);
    const part = await download(t, `/files/${bigFile._id}/content`, { key: a.key, headers: { Range: 'bytes=1000-1999' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 1000-1999/${big.length}`);
    expect(part.bytes.equals(big.subarray(1000, 2000))).toBe(true);
    const tail = await download(t, `/files/${bigFile._id}/content`, { key: a.key, headers: { Range: 'bytes=-10' } });
    expect(tail.bytes.equals(big.subarray(big.length - 10))).toBe(true);
    const past = await download(t, `/files/${bigFile._id}/content`, { key: a.key, headers: { Range: `bytes=${big.length}-` } });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe(`bytes */${big.length}`);
    const img = await download(t, `/files/${png._id}/content`, { key: a.key });
    expect(img.headers.get('content-type')).toBe('image/png');
    expect(img.headers.get('content-disposition')).toMatch(/^inline/);
    const doc = await download(t, `/files/${pdf._id}/content`, { key: a.key });
    expect(doc.headers.get('content-type')).toBe('application/pdf');
    expect(doc.headers.get('content-disposition')).toMatch(/^attachment/);
  });

  it('downloads are reads: another tenant gets 404, no credential 401', async () => {
    expect((await download(t, `/files/${png._id}/content`, { key: b.key })).status).toBe(404);
    expect((await download(t, `/files/${png._id}/content`)).status).toBe(401);
    expect((await t.http('POST', `/files/${png._id}/signed-url`, { key: b.key })).status).toBe(404);
  });

  it('signed URLs work without credentials until they expire; a changed byte is 403', async () => {
    const res = await t.http('POST', `/files/${png._id}/signed-url`, { key: a.key });
    expect(res.status).toBe(200);
    const url = new URL(res.body.url);
    expect(Date.parse(res.body.expires_at)).toBeGreaterThan(Date.now());
    const ok = await fetch(url);
    expect(ok.status).toBe(200);
    expect(Buffer.from(await ok.arrayBuffer()).equals(PNG)).toBe(true);
    const sig = url.searchParams.get('signature')!;
    const flipped = new URL(url);
    flipped.searchParams.set('signature', (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1));
    expect((await fetch(flipped)).status).toBe(403);
    const later = new URL(url);
    later.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 3600));
    expect((await fetch(later)).status).toBe(403);
    const other = new URL(url.toString().replace(png._id, pdf._id));
    expect((await fetch(other)).status).toBe(403);
    // Expiry, without waiting: URLs signed with the server's secret, one valid, one a second past its time.
    const key = signingKey(SECRET, '');
    const now = Math.floor(Date.now() / 1000);
    expect((await fetch(`${t.url}/files/${png._id}/content?${sign(key, png._id, now + 600)}`)).status).toBe(200);
    const expired = await fetch(`${t.url}/files/${png._id}/content?${sign(key, png._id, now - 1)}`);
    expect(expired.status).toBe(403);
    expect(((await expired.json()) as any).error.code).toBe('ACCESS_DENIED');
  });

  it('delete: If-Match required, another tenant 404, soft (status deleted, hidden from lists, no download); events and audit', async () => {
    const f = (await upload(t, a.key, PDF, { filename: 'gone.pdf' })).body;
    const got = await t.http('GET', `/files/${f._id}`, { key: a.key });
    expect((await t.http('DELETE', `/files/${f._id}`, { key: a.key })).status).toBe(428);
    expect((await t.http('DELETE', `/files/${f._id}`, { key: b.key, headers: { 'If-Match': got.headers.get('etag')! } })).status).toBe(404);
    const del = await t.http('DELETE', `/files/${f._id}`, { key: a.key, headers: { 'If-Match': got.headers.get('etag')! } });
    expect(del.status).toBe(200);
    expect(del.body.status).toBe('deleted');
    expect((await t.http('GET', `/files/${f._id}`, { key: a.key })).status).toBe(404);
    expect((await download(t, `/files/${f._id}/content`, { key: a.key })).status).toBe(404);
    expect(await col(t, 'file_bytes.files').countDocuments({ filename: `${a.tenantId}/${f._id}` })).toBe(1);
    const events = await t.http('GET', '/events?limit=100', { key: (await adminOf(t, a.tenantId)) });
    const mine = events.body.items.filter((e: any) => e.data?._id === f._id).map((e: any) => e.type);
    expect(mine.sort()).toEqual(['file.deleted', 'file.uploaded']);
    expect((await t.http('GET', '/events?limit=100', { key: await adminOf(t, b.tenantId) })).body.items.filter((e: any) => e.type.startsWith('file.'))).toEqual([]);
    const audit = await col(t, 'audit_log').find({ resource: 'files', item_id: new Types.ObjectId(f._id as string) }).toArray();
    expect(audit.map((e) => e.operation).sort()).toEqual(['delete', 'insert']);
  });

  it('GraphQL: files, file, the signed url and deleteFile, tenant-scoped', async () => {
    const q = await t.gql('{ files { items { _id filename status url } } }', {}, { key: a.key });
    expect(q.body.errors).toBeUndefined();
    const item = q.body.data.files.items.find((f: any) => f._id === png._id);
    expect(item.url).toMatch(/\/content\?expires=\d+&signature=/);
    expect((await fetch(item.url)).status).toBe(200);
    const other = await t.gql('query($id: ID!) { file(id: $id) { _id } }', { id: png._id }, { key: b.key });
    expect(other.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const f = (await upload(t, a.key, PDF)).body;
    const etag = (await t.http('GET', `/files/${f._id}`, { key: a.key })).headers.get('etag');
    const denied = await t.gql('mutation($id: ID!, $m: String) { deleteFile(id: $id, if_match: $m) { _id } }', { id: f._id, m: etag }, { key: b.key });
    expect(denied.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const anon = await t.gql('mutation($id: ID!, $m: String) { deleteFile(id: $id, if_match: $m) { _id } }', { id: f._id, m: etag }, { key: null });
    expect(anon.body.errors?.[0]?.extensions?.code).toBe('AUTH_REQUIRED');
    const del = await t.gql('mutation($id: ID!, $m: String) { deleteFile(id: $id, if_match: $m) { _id status } }', { id: f._id, m: etag }, { key: a.key });
    expect(del.body.data.deleteFile).toEqual({ _id: f._id, status: 'deleted' });
  });
});

/** A tenant administrator's key (`GET /events` is for administrators). */
async function adminOf(t: TestApp, tenantId: string): Promise<string> {
  const { createTenantUser } = await import('../helpers/app.ts');
  return (await createTenantUser(t, { tenantId, roles: ['admin'] })).key;
}
