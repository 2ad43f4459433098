/**
 * The purge of the files plugin: bytes of files deleted long enough ago, uploads a dead process
 * left `uploading`, stored bytes with no record, and records whose bytes are gone.
 */
import { Types } from 'mongoose';
import type { Doc } from '../../core/hooks.ts';
import type { StorageRegistry } from './storage.ts';
import type { FilesService } from './service.ts';

export interface PurgeResult {
  purged: number;
  stale_uploads: number;
  orphan_bytes: number;
  missing_bytes: number;
  incomplete_stores: number;
}

/** Runs every step over every tenant (a maintenance job, as the system). */
export async function purgeFiles(svc: FilesService, storage: StorageRegistry, opts: { purgeAfterDays: number; staleUploadHours: number; now?: Date }): Promise<PurgeResult> {
  const now = opts.now ?? new Date();
  const records = svc.collection();
  const out: PurgeResult = { purged: 0, stale_uploads: 0, orphan_bytes: 0, missing_bytes: 0, incomplete_stores: 0 };
  const removeBytes = async (f: Doc) => {
    const adapter = storage.get(String(f.storage));
    const key = `${String(f.tenant_id)}/${String(f._id)}`;
    for (const name of Object.keys((f.variants as Doc | undefined) ?? {})) await adapter.delete(`${key}/${name}`);
    await adapter.delete(key);
  };
  // Deleted files past the retention: bytes first, then the record (a crash in between retries).
  const deletedBefore = new Date(now.getTime() - opts.purgeAfterDays * 86_400_000);
  for await (const f of records.find({ is_deleted: true, deleted_at: { $lt: deletedBefore } })) {
    await removeBytes(f);
    await records.deleteOne({ _id: f._id });
    out.purged += 1;
  }
  // Uploads still `uploading` long after they began: their process died.
  const staleBefore = new Date(now.getTime() - opts.staleUploadHours * 3_600_000);
  for await (const f of records.find({ status: 'uploading', created_at: { $lt: staleBefore } })) {
    await removeBytes(f);
    await records.deleteOne({ _id: f._id, status: 'uploading' });
    out.stale_uploads += 1;
  }
  for (const name of storage.names()) {
    const adapter = storage.get(name);
    if (adapter.sweepIncomplete) out.incomplete_stores += await adapter.sweepIncomplete(staleBefore);
    if (!adapter.keys) continue;
    // Stored bytes whose record is gone (`<tenant>/<file id>[/<variant>]`).
    for await (const key of adapter.keys('')) {
      const id = key.split('/')[1] ?? '';
      if (!Types.ObjectId.isValid(id) || !/^[0-9a-f]{24}$/.test(id) || !(await records.countDocuments({ _id: new Types.ObjectId(id) }, { limit: 1 }))) {
        await adapter.delete(key);
        out.orphan_bytes += 1;
      }
    }
  }
  // Ready files whose bytes are gone: deleted, with their event.
  for await (const f of records.find({ status: 'ready' }, { projection: { _id: 1, tenant_id: 1, storage: 1 } })) {
    const adapter = storage.get(String(f.storage));
    if (await adapter.stat(`${String(f.tenant_id)}/${String(f._id)}`)) continue;
    if (await svc.markDeleted(String(f._id))) out.missing_bytes += 1;
  }
  return out;
}
