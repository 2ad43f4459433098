/** The default storage adapter: GridFS in the server's own MongoDB, so the embedded setup needs nothing more. */
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import { mongo, type Connection } from 'mongoose';
import type { ByteRange, StorageAdapter } from './storage.ts';

/** GridFS bucket `files` (collections `files.files` and `files.chunks`); the key is the GridFS filename. */
export function gridfsAdapter(conn: Connection, bucketName = 'files'): StorageAdapter {
  const bucket = () => new mongo.GridFSBucket(conn.db!, { bucketName });
  const ids = async (key: string) => (await bucket().find({ filename: key }, { projection: { _id: 1, length: 1 } }).toArray());
  return {
    name: 'gridfs',
    async put(key: string, body: Readable, info: { content_type: string }) {
      const up = bucket().openUploadStream(key, { metadata: { content_type: info.content_type } });
      try {
        await pipeline(body, up);
      } catch (err) {
        // The chunks written so far: abort() deletes them (the files document is written only at the
        // end). A chunk insert still in flight would land after that delete, so wait for it first.
        await settled(up);
        await up.abort().catch(() => undefined);
        throw err;
      }
      return { size: up.length };
    },
    async get(key: string, range?: ByteRange) {
      const [latest] = await bucket().find({ filename: key }, { sort: { uploadDate: -1 }, limit: 1 }).toArray();
      if (!latest) throw new Error(`gridfs: nothing stored under ${key}`);
      // GridFS's end is exclusive; HTTP's is inclusive.
      return bucket().openDownloadStream(latest._id, range ? { start: range.start, end: range.end + 1 } : {});
    },
    async delete(key: string) {
      for (const f of await ids(key)) await bucket().delete(f._id).catch(() => undefined);
    },
    async stat(key: string) {
      const [f] = await ids(key);
      return f ? { size: Number(f.length) } : null;
    },
    async sweepIncomplete(before: Date) {
      // Chunks are written before their files document: chunks without one, older than `before`, are a dead upload's.
      const chunks = conn.db!.collection(`${bucketName}.chunks`);
      const ids = await chunks.distinct('files_id', { _id: { $lt: mongo.ObjectId.createFromTime(Math.floor(before.getTime() / 1000)) } });
      const live = new Set((await conn.db!.collection(`${bucketName}.files`).find({ _id: { $in: ids } }, { projection: { _id: 1 } }).toArray()).map((f) => String(f._id)));
      const dead = ids.filter((id) => !live.has(String(id)));
      if (dead.length) await chunks.deleteMany({ files_id: { $in: dead } });
      return dead.length;
    },
    async *keys(prefix: string) {
      const escaped = prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      for await (const f of bucket().find({ filename: { $regex: `^${escaped}` } }, { projection: { filename: 1 } })) yield f.filename;
    },
  };
}

/** Resolves once `up` has no chunk insert in flight (bounded: a write that never answers is given up after 30 s). */
async function settled(up: mongo.GridFSBucketWriteStream): Promise<void> {
  const end = Date.now() + 30_000;
  while (up.state.outstandingRequests > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
}
