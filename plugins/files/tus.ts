/** Resumable uploads on the tus 1.0 protocol (`@tus/server`) under `/files/uploads`. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server, MemoryLocker, type Upload } from '@tus/server';
import { AppError, NotFoundError } from '../../core/errors.ts';
import { writeTenantId, type Actor } from '../../core/context.ts';
import type { FilesService } from './service.ts';
import type { MongoTusStore} from './tus-store.ts';
import { tusActor } from './tus-store.ts';

export const TUS_PATH = '/files/uploads';

/** The tus error answer for an AppError: its status and the usual error envelope. */
const tusError = (err: unknown) => {
  if (err instanceof AppError) return { status_code: err.status, body: JSON.stringify({ error: { code: err.code, message: err.message, details: err.details } }) };
  return err;
};

/**
 * The tus server on our store. Creation checks the declared length against the quota; completion
 * runs the bytes through the same path as a multipart upload (size, type, sha256, quota, `ready`),
 * answers the file id in `Upload-File-Id`, and removes the parts.
 */
export function tusUploads(svc: FilesService, store: MongoTusStore, opts: { maxBytes: number }) {
  const server = new Server({
    path: TUS_PATH,
    datastore: store,
    locker: new MemoryLocker(),
    maxSize: opts.maxBytes,
    relativeLocation: true,
    onUploadCreate: async (_req, upload: Upload) => {
      const who = tusActor.getStore()!;
      try {
        if (upload.size !== undefined) await svc.checkQuota(who.tenantId, upload.size);
      } catch (err) {
        throw tusError(err);
      }
      return {};
    },
    onUploadFinish: async (_req, upload: Upload) => {
      const who = tusActor.getStore()!;
      const meta = upload.metadata ?? {};
      try {
        const stored = await svc.store(who.actor, store.read(upload.id), { filename: meta.filename ?? 'file', declared_type: meta.filetype ?? null });
        const file = await svc.finish(stored, meta.metadata ?? undefined);
        return { headers: { 'Upload-File-Id': String(file._id) } };
      } catch (err) {
        throw tusError(err);
      } finally {
        await store.remove(upload.id);
      }
    },
  });
  return {
    /** Handles one tus request of `actor`; an upload of another tenant is a 404 (answered before `takeOver`, by the caller). */
    async handle(actor: Actor, id: string | null, req: IncomingMessage, res: ServerResponse, takeOver: () => void): Promise<void> {
      const tenantId = writeTenantId(actor);
      if (id && !(await store.owned(id, tenantId))) throw new NotFoundError('uploads', id);
      // From here the tus server writes the response itself.
      takeOver();
      await tusActor.run({ actor, tenantId }, () => server.handle(req, res));
    },
    /** Removes unfinished uploads past `FILES_UPLOAD_EXPIRY_HOURS`, with their parts. */
    cleanUpExpired: () => store.deleteExpired(),
  };
}
