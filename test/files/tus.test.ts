import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { uniqueDbUri, jobContext, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { col, download, filesApp, sha256, tenant } from './helpers.ts';

const TUS = { 'Tus-Resumable': '1.0.0' };
const b64 = (s: string) => Buffer.from(s).toString('base64');

async function create(t: TestApp, key: string, length: number, meta: Record<string, string> = { filename: 'movie.bin', filetype: 'application/octet-stream' }) {
  const res = await fetch(`${t.url}/files/uploads`, {
    method: 'POST',
    headers: { ...TUS, 'X-API-Key': key, 'Upload-Length': String(length), 'Upload-Metadata': Object.entries(meta).map(([k, v]) => `${k} ${b64(v)}`).join(',') },
  });
  return { status: res.status, location: res.headers.get('location'), text: await res.text() };
}

const head = (t: TestApp, key: string, loc: string) => fetch(`${t.url}${loc}`, { method: 'HEAD', headers: { ...TUS, 'X-API-Key': key } });

async function patch(t: TestApp, key: string, loc: string, offset: number, body: Buffer) {
  const res = await fetch(`${t.url}${loc}`, {
    method: 'PATCH',
    headers: { ...TUS, 'X-API-Key': key, 'Upload-Offset': String(offset), 'Content-Type': 'application/offset+octet-stream' },
    body: new Uint8Array(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** A PATCH that announces the whole rest but sends only `sent` bytes, then drops the connection. */
function interruptedPatch(t: TestApp, key: string, loc: string, offset: number, rest: Buffer, sent: number): Promise<void> {
  const u = new URL(`${t.url}${loc}`);
  return new Promise((resolve) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'PATCH', headers: { ...TUS, 'X-API-Key': key, 'Upload-Offset': String(offset), 'Content-Type': 'application/offset+octet-stream', 'Content-Length': String(rest.length) } });
    req.on('error', () => resolve());
    req.on('response', () => resolve());
    req.write(rest.subarray(0, sent), () => setTimeout(() => { req.destroy(); resolve(); }, 300));
  });
}

describe('resumable uploads (tus 1.0) under /files/uploads', () => {
  const uri = uniqueDbUri();
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  beforeAll(async () => {
    t = await filesApp({ config: { MONGODB_URI: uri, FILES_MAX_BYTES: String(8_000_000) } });
    a = await tenant(t);
  });
  afterAll(() => t.close());

  it('an upload interrupted halfway resumes after a server restart from the stored offset; the bytes read back with the same sha256', async () => {
    const data = randomBytes(3_000_000);
    const c = await create(t, a.key, data.length);
    expect(c.status).toBe(201);
    expect(c.location).toMatch(/^\/files\/uploads\/[0-9a-f]+$/);
    await interruptedPatch(t, a.key, c.location!, 0, data, 1_500_000);
    const stored = await waitFor(async () => {
      const h = await head(t, a.key, c.location!);
      const off = Number(h.headers.get('upload-offset'));
      return off > 0 ? off : null;
    }, 'the interrupted PATCH to be stored');
    expect(stored).toBeLessThanOrEqual(1_500_000);

    await t.close();
    t = await filesApp({ config: { MONGODB_URI: uri, FILES_MAX_BYTES: String(8_000_000) } });

    const h = await head(t, a.key, c.location!);
    expect(h.status).toBe(200);
    const offset = Number(h.headers.get('upload-offset'));
    expect(offset).toBe(stored);
    expect(h.headers.get('upload-length')).toBe(String(data.length));
    const done = await patch(t, a.key, c.location!, offset, data.subarray(offset));
    expect(done.status).toBe(204);
    const id = done.headers.get('upload-file-id')!;
    const rec = await t.http('GET', `/files/${id}`, { key: a.key });
    expect(rec.body).toMatchObject({ status: 'ready', size: data.length, sha256: sha256(data), filename: 'movie.bin' });
    const back = await download(t, `/files/${id}/content`, { key: a.key });
    expect(sha256(back.bytes)).toBe(sha256(data));
    // The parts are gone once the file is made.
    expect(await col(t, 'file_uploads').countDocuments()).toBe(0);
    expect(await col(t, 'file_upload_parts.files').countDocuments()).toBe(0);
  });

  it('an upload belongs to its tenant: another tenant gets 404 on HEAD, PATCH and DELETE', async () => {
    const b = await tenant(t);
    const c = await create(t, a.key, 10);
    expect((await head(t, b.key, c.location!)).status).toBe(404);
    expect((await patch(t, b.key, c.location!, 0, Buffer.alloc(10))).status).toBe(404);
    expect((await fetch(`${t.url}${c.location}`, { method: 'DELETE', headers: { ...TUS, 'X-API-Key': b.key } })).status).toBe(404);
    expect((await head(t, a.key, c.location!)).status).toBe(200);
    expect((await fetch(`${t.url}/files/uploads`, { method: 'POST', headers: { ...TUS, 'Upload-Length': '10' } })).status).toBe(401);
  });

  it('completion runs the multipart checks: a declared type the bytes contradict is 415 and leaves nothing', async () => {
    const data = Buffer.from('%PDF-1.4\n%%EOF\n');
    const c = await create(t, a.key, data.length, { filename: 'x.png', filetype: 'image/png' });
    const res = await patch(t, a.key, c.location!, 0, data);
    expect(res.status).toBe(415);
    expect(JSON.parse(res.text).error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(await col(t, 'files').countDocuments({ filename: 'x.png' })).toBe(0);
    expect(await col(t, 'file_uploads').countDocuments({ _id: c.location!.split('/').at(-1) as never })).toBe(0);
  });

  it('Upload-Length above FILES_MAX_BYTES is 413 at creation', async () => {
    expect((await create(t, a.key, 9_000_000)).status).toBe(413);
  });

  it('an unfinished upload past FILES_UPLOAD_EXPIRY_HOURS is removed with its parts by the cleanup job', async () => {
    const c = await create(t, a.key, 1000);
    expect((await patch(t, a.key, c.location!, 0, randomBytes(400))).status).toBe(204);
    const id = c.location!.split('/').at(-1)!;
    expect(await col(t, 'file_upload_parts.files').countDocuments({ 'metadata.upload_id': id })).toBe(1);
    const job = t.app.kernel.jobs().find((j) => j.name === 'files_cleanup_uploads')!;
    expect(await job.run(jobContext(), {})).toEqual({ removed: 0 });
    // A controlled clock: the upload's creation moved back past the expiry (24 h by default).
    await col(t, 'file_uploads').updateOne({ _id: id as never }, { $set: { created_at: new Date(Date.now() - 25 * 3_600_000) } });
    expect(await job.run(jobContext(), {})).toEqual({ removed: 1 });
    expect(await col(t, 'file_upload_parts.files').countDocuments({ 'metadata.upload_id': id })).toBe(0);
    expect((await head(t, a.key, c.location!)).status).toBe(404);
  });
});
