import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Binary, ObjectId } from 'mongodb';
import { jobContext, type TestApp } from '../helpers/app.ts';
import { col, download, filesApp, PDF, PNG, tenant, upload } from './helpers.ts';

describe('files_purge job', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenant>>;
  beforeAll(async () => {
    t = await filesApp();
    a = await tenant(t);
  });
  afterAll(() => t.close());

  const run = () => t.app.kernel.jobs().find((j) => j.name === 'files_purge')!.run(jobContext(), {});
  const bytesOf = (id: string) => col(t, 'file_bytes.files').countDocuments({ filename: `${a.tenantId}/${id}` });
  const dayAgo = (days: number) => new Date(Date.now() - days * 86_400_000);

  it('purges deleted files past FILES_PURGE_AFTER_DAYS, dead uploads, orphan bytes and records without bytes; keeps the rest', async () => {
    const keep = (await upload(t, a.key, PNG, { type: 'image/png' })).body;
    const recent = (await upload(t, a.key, PDF)).body;
    const old = (await upload(t, a.key, PDF)).body;
    for (const f of [recent, old]) {
      const etag = (await t.http('GET', `/files/${f._id}`, { key: a.key })).headers.get('etag')!;
      expect((await t.http('DELETE', `/files/${f._id}`, { key: a.key, headers: { 'If-Match': etag } })).status).toBe(200);
    }
    // A controlled clock: the old delete moved back past the retention (30 days by default).
    await col(t, 'files').updateOne({ _id: new ObjectId(old._id as string) }, { $set: { deleted_at: dayAgo(31) } });
    // What a process killed mid-upload leaves: an `uploading` record and GridFS chunks without their files document.
    const dead = new ObjectId();
    await col(t, 'files').insertOne({ _id: dead, filename: 'dead.bin', content_type: 'application/octet-stream', size: 0, sha256: null, storage: 'gridfs', status: 'uploading', metadata: {}, variants: {}, tenant_id: new ObjectId(a.tenantId), created_at: dayAgo(2), updated_at: dayAgo(2), created_by: null, updated_by: null, is_deleted: false, deleted_at: null, deleted_by: null, version: 1 });
    await col(t, 'file_bytes.chunks').insertOne({ _id: ObjectId.createFromTime(Math.floor(dayAgo(2).getTime() / 1000)), files_id: new ObjectId(), n: 0, data: new Binary(Buffer.alloc(100)) });
    // Bytes whose record is gone, and a record whose bytes are gone.
    const orphan = (await upload(t, a.key, PDF)).body;
    await col(t, 'files').deleteOne({ _id: new ObjectId(orphan._id as string) });
    const lost = (await upload(t, a.key, PDF)).body;
    const lostFile = await col(t, 'file_bytes.files').findOne({ filename: `${a.tenantId}/${lost._id}` });
    await col(t, 'file_bytes.chunks').deleteMany({ files_id: lostFile!._id });
    await col(t, 'file_bytes.files').deleteOne({ _id: lostFile!._id });

    expect(await run()).toEqual({ purged: 1, stale_uploads: 1, orphan_bytes: 1, missing_bytes: 1, incomplete_stores: 1 });

    expect(await col(t, 'files').countDocuments({ _id: new ObjectId(old._id as string) })).toBe(0);
    expect(await bytesOf(old._id)).toBe(0);
    expect(await bytesOf(recent._id)).toBe(1);
    expect(await col(t, 'files').countDocuments({ _id: dead })).toBe(0);
    expect(await col(t, 'files').countDocuments({ status: 'uploading' })).toBe(0);
    expect(await bytesOf(orphan._id)).toBe(0);
    expect((await col(t, 'files').findOne({ _id: new ObjectId(lost._id as string) }))?.status).toBe('deleted');
    const chunkFiles = await col(t, 'file_bytes.chunks').distinct('files_id');
    const files = (await col(t, 'file_bytes.files').find({}, { projection: { _id: 1 } }).toArray()).map((f) => String(f._id));
    expect(chunkFiles.map(String).every((id) => files.includes(id))).toBe(true);
    expect((await download(t, `/files/${keep._id}/content`, { key: a.key })).bytes.equals(PNG)).toBe(true);
    // Nothing left to do: a second run changes nothing.
    expect(await run()).toEqual({ purged: 0, stale_uploads: 0, orphan_bytes: 0, missing_bytes: 0, incomplete_stores: 0 });
  });
});
