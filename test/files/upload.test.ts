import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { TestApp } from '../helpers/app.ts';
import { col, filesApp, PDF, PNG, sha256, tenant, upload } from './helpers.ts';

describe('POST /files (multipart)', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  beforeAll(async () => {
    t = await filesApp({ config: { FILES_MAX_BYTES: String(300_000), FILES_ALLOWED_TYPES: 'image/*,application/pdf,text/plain,application/octet-stream' } });
    a = await tenant(t);
  });
  afterAll(() => t.close());

  it('stores the bytes, sniffs the type, computes sha256 and answers the ready record', async () => {
    const res = await upload(t, a.key, PNG, { type: 'image/png', filename: 'dot.png', metadata: '{"alt":"a dot"}' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ filename: 'dot.png', content_type: 'image/png', size: PNG.length, sha256: sha256(PNG), storage: 'gridfs', status: 'ready', metadata: { alt: 'a dot' }, tenant_id: a.tenantId });
    const stored = await col(t, 'file_bytes.files').findOne({ filename: `${a.tenantId}/${res.body._id}` });
    expect(stored?.length).toBe(PNG.length);
  });

  it('takes the sniffed type when none is declared, and metadata after the file part', async () => {
    const res = await upload(t, a.key, PDF, { filename: 'x.pdf', metadata: '{"n":1}', metadataFirst: false });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ content_type: 'application/pdf', metadata: { n: 1 } });
  });

  it('415 when the declared type disagrees with the bytes, and nothing is kept', async () => {
    const before = await col(t, 'files').countDocuments();
    const res = await upload(t, a.key, PDF, { type: 'image/png', filename: 'fake.png' });
    expect(res.status).toBe(415);
    expect(res.body.error).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', details: { declared: 'image/png', detected: 'application/pdf' } });
    const text = await upload(t, a.key, Buffer.from('just text'), { type: 'image/jpeg' });
    expect(text.status).toBe(415);
    expect(await col(t, 'files').countDocuments()).toBe(before);
  });

  it('415 for a type outside FILES_ALLOWED_TYPES', async () => {
    const zip = Buffer.concat([Buffer.from('504b0304', 'hex'), randomBytes(200)]);
    const res = await upload(t, a.key, zip, { filename: 'a.zip' });
    expect(res.status).toBe(415);
    expect(res.body.error.details).toMatchObject({ content_type: 'application/zip' });
  });

  it('413 past FILES_MAX_BYTES: the stream is cut off, no record and no stored chunks remain', async () => {
    const chunksBefore = await col(t, 'file_bytes.chunks').countDocuments();
    const res = await upload(t, a.key, randomBytes(2_000_000));
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', details: { max_bytes: 300_000 } });
    expect(await col(t, 'files').countDocuments({ status: { $ne: 'ready' } })).toBe(0);
    expect(await col(t, 'file_bytes.chunks').countDocuments()).toBe(chunksBefore);
  });

  it('422 for metadata that is not a JSON object; bytes and record removed', async () => {
    const chunksBefore = await col(t, 'file_bytes.chunks').countDocuments();
    const res = await upload(t, a.key, PNG, { type: 'image/png', metadata: '[1,2', metadataFirst: false });
    expect(res.status).toBe(422);
    expect(res.body.error.details.errors[0].loc).toEqual(['body', 'metadata']);
    expect(await col(t, 'files').countDocuments({ status: 'uploading' })).toBe(0);
    expect(await col(t, 'file_bytes.chunks').countDocuments()).toBe(chunksBefore);
  });

  it('415 for a body that is not multipart; 401 without a credential', async () => {
    expect((await t.http('POST', '/files', { key: a.key, json: { a: 1 } })).status).toBe(415);
    expect((await upload(t, null, PNG)).status).toBe(401);
  });
});

describe('tenant quota', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await filesApp({ config: { FILES_TENANT_QUOTA_BYTES: String(100_000) } });
  });
  afterAll(() => t.close());

  it('413 with quota and usage once a file would pass it; parallel uploads never exceed it; a delete frees its bytes', async () => {
    const a = await tenant(t);
    const results = await Promise.all(Array.from({ length: 6 }, () => upload(t, a.key, randomBytes(30_000))));
    const ok = results.filter((r) => r.status === 201);
    expect(ok.length).toBe(3);
    const refused = results.find((r) => r.status === 413)!;
    expect(refused.body.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', details: { quota: 100_000 } });
    expect(typeof refused.body.error.details.usage).toBe('number');
    expect((await col(t, 'file_usage').findOne({ _id: a.tenantId as never }))?.used).toBe(90_000);
    // Another tenant has its own quota.
    const b = await tenant(t);
    expect((await upload(t, b.key, randomBytes(30_000))).status).toBe(201);
    const f = ok[0]!.body;
    const got = await t.http('GET', `/files/${f._id}`, { key: a.key });
    expect((await t.http('DELETE', `/files/${f._id}`, { key: a.key, headers: { 'If-Match': got.headers.get('etag')! } })).status).toBe(200);
    expect((await upload(t, a.key, randomBytes(30_000))).status).toBe(201);
  });
});
