/**
 * The data store of resumable (tus) uploads: an upload's record in `file_uploads`, its bytes as
 * parts in the GridFS bucket `file_upload_parts` (one part per PATCH, named `<id>/<offset>`). Both
 * live in MongoDB, so an upload resumes on any process, also after a restart, and the embedded
 * setup needs nothing more.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import { mongo, type Connection, type Model } from 'mongoose';
import { DataStore, ERRORS, Upload } from '@tus/server';
import type { Actor } from '../../core/context.ts';

/** A writer renews its claim this often; a claim not renewed for WRITER_STALE_MS is free (its process died). */
const WRITER_BEAT_MS = 5_000;
const WRITER_STALE_MS = 30_000;

/** The answer to a PATCH while another request (on any process) writes the upload. */
export const UPLOAD_LOCKED = { status_code: 423, body: 'The upload is being written by another request; retry after it (HEAD gives the offset)\n' };

/** The actor of the tus request being handled (set around the tus server's `handle`). */
export const tusActor = new AsyncLocalStorage<{ actor: Actor; tenantId: string }>();

export interface TusUploadDoc {
  _id: string;
  tenant_id: string;
  actor_id: string;
  size: number | null;
  offset: number;
  metadata: Record<string, string | null>;
  writer: { token: string; at: Date } | null;
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
    await this.uploads.create({ _id: upload.id, tenant_id: who.tenantId, actor_id: who.actor.id, size: upload.size ?? null, offset: 0, metadata: upload.metadata ?? {}, writer: null, created_at });
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
    const token = await this.claim(id, offset);
    // Renewed while the bytes flow, so a long PATCH keeps its claim and a dead process's lapses.
    const beat = setInterval(() => void this.uploads.updateOne({ _id: id, 'writer.token': token }, { $set: { 'writer.at': new Date() } }).catch(() => undefined), WRITER_BEAT_MS);
    beat.unref();
    let counted = false;
    try {
      // Leftovers of a write that stored its part but died before counting it.
      for (const f of await this.bucket().find({ 'metadata.upload_id': id, 'metadata.offset': { $gte: offset } }).toArray()) await this.bucket().delete(f._id).catch(() => undefined);
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
      const res = await this.uploads.updateOne({ _id: id, offset, 'writer.token': token }, { $inc: { offset: n }, $set: { writer: null } });
      counted = res.modifiedCount === 1;
      if (!counted) {
        // The claim lapsed and another request took the upload over: this part is not the upload's.
        await this.bucket().delete(up.id).catch(() => undefined);
        throw UPLOAD_LOCKED;
      }
      return offset + n;
    } finally {
      clearInterval(beat);
      if (!counted) await this.uploads.updateOne({ _id: id, 'writer.token': token }, { $set: { writer: null } }).catch(() => undefined);
    }
  }

  /**
   * Makes this request the one writer of the upload at `offset`, on any process (one conditional
   * update): two PATCHes on two replicas cannot both append.
   * @throws 409 (tus INVALID_OFFSET) when the offset has moved; 423 while another request writes
   */
  private async claim(id: string, offset: number): Promise<string> {
    const token = randomUUID();
    const now = new Date();
    const res = await this.uploads.updateOne(
      { _id: id, offset, $or: [{ writer: null }, { 'writer.at': { $lt: new Date(now.getTime() - WRITER_STALE_MS) } }] },
      { $set: { writer: { token, at: now } } },
    );
    if (res.modifiedCount === 1) return token;
    const doc = await this.uploads.findById(id, { offset: 1 }).lean();
    if (!doc) throw ERRORS.FILE_NOT_FOUND;
    if (doc.offset !== offset) throw ERRORS.INVALID_OFFSET;
    throw UPLOAD_LOCKED;
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
