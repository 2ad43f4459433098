/**
 * The data store of resumable (tus) uploads: an upload's record in `file_uploads`, its bytes as
 * parts in the GridFS bucket `file_upload_parts` (one part per PATCH, named `<id>/<offset>`). Both
 * live in MongoDB, so an upload resumes on any process, also after a restart, and the embedded
 * setup needs nothing more.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { once } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import { mongo, type Connection, type Model } from 'mongoose';
import { DataStore, ERRORS, Upload } from '@tus/server';
import type { Actor } from '../../core/context.ts';

/** The actor of the tus request being handled (set around the tus server's `handle`). */
export const tusActor = new AsyncLocalStorage<{ actor: Actor; tenantId: string }>();

export interface TusUploadDoc {
  _id: string;
  tenant_id: string;
  actor_id: string;
  size: number | null;
  offset: number;
  metadata: Record<string, string | null>;
  created_at: Date;
}

export class MongoTusStore extends DataStore {
  private readonly bucket: () => mongo.GridFSBucket;

  constructor(
    conn: Connection,
    private readonly uploads: Model<TusUploadDoc>,
    private readonly expiryMs: number,
  ) {
    super();
    this.extensions = ['creation', 'creation-with-upload', 'creation-defer-length', 'termination', 'expiration'];
    this.bucket = () => new mongo.GridFSBucket(conn.db!, { bucketName: 'file_upload_parts' });
  }

  /** The upload's record, or null (another tenant's counts as none). */
  async owned(id: string, tenantId: string): Promise<TusUploadDoc | null> {
    return this.uploads.findOne({ _id: id, tenant_id: tenantId }).lean<TusUploadDoc>();
  }

  override async create(upload: Upload): Promise<Upload> {
    const who = tusActor.getStore();
    if (!who) throw ERRORS.UNKNOWN_ERROR;
    const created_at = new Date();
    await this.uploads.create({ _id: upload.id, tenant_id: who.tenantId, actor_id: who.actor.id, size: upload.size ?? null, offset: 0, metadata: upload.metadata ?? {}, created_at });
    upload.creation_date = created_at.toISOString();
    return upload;
  }

  override async getUpload(id: string): Promise<Upload> {
    const doc = await this.uploads.findById(id).lean<TusUploadDoc>();
    if (!doc) throw ERRORS.FILE_NOT_FOUND;
    return new Upload({ id, size: doc.size ?? undefined, offset: doc.offset, metadata: doc.metadata, creation_date: doc.created_at.toISOString() });
  }

  /**
   * Stores what arrives as one part; a request cut off mid-way keeps the bytes that arrived (the
   * tus server ends the stream on a disconnect), so the client resumes from there.
   */
  override async write(stream: Readable, id: string, offset: number): Promise<number> {
    // Leftovers of a write that stored its part but died before counting it.
    for (const f of await this.bucket().find({ 'metadata.upload_id': id, 'metadata.offset': { $gte: offset } }).toArray()) await this.bucket().delete(f._id);
    const up = this.bucket().openUploadStream(`${id}/${offset}`, { metadata: { upload_id: id, offset } });
    let n = 0;
    try {
      for await (const chunk of stream) {
        n += (chunk as Buffer).length;
        if (!up.write(chunk as Buffer)) await once(up, 'drain');
      }
    } catch {
      // Keep what arrived: the offset says where to resume.
    }
    await new Promise<void>((resolve, reject) => up.end((err?: unknown) => (err ? reject(err as Error) : resolve())));
    await this.uploads.updateOne({ _id: id, offset }, { $inc: { offset: n } });
    return offset + n;
  }

  override async declareUploadLength(id: string, length: number): Promise<void> {
    await this.uploads.updateOne({ _id: id }, { $set: { size: length } });
  }

  /** The upload's bytes in order (its parts one after the other). */
  read(id: string): Readable {
    const out = new PassThrough();
    void (async () => {
      try {
        const parts = await this.bucket().find({ 'metadata.upload_id': id }, { sort: { 'metadata.offset': 1 } }).toArray();
        for (const p of parts) {
          for await (const chunk of this.bucket().openDownloadStream(p._id)) if (!out.write(chunk)) await once(out, 'drain');
        }
        out.end();
      } catch (err) {
        out.destroy(err as Error);
      }
    })();
    return out;
  }

  override async remove(id: string): Promise<void> {
    for (const f of await this.bucket().find({ 'metadata.upload_id': id }, { projection: { _id: 1 } }).toArray()) await this.bucket().delete(f._id).catch(() => undefined);
    await this.uploads.deleteOne({ _id: id });
  }

  override getExpiration(): number {
    return this.expiryMs;
  }

  /** Removes unfinished uploads older than the expiry, with their parts. */
  override async deleteExpired(): Promise<number> {
    const cutoff = new Date(Date.now() - this.expiryMs);
    const old = await this.uploads.find({ created_at: { $lt: cutoff } }, { _id: 1 }).lean();
    for (const u of old) await this.remove(u._id);
    return old.length;
  }
}
