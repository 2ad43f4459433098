/** Restore of a soft-deleted document: the same If-Match and scope rules as a delete, one event. */
import { ConflictError, EtagMismatchError } from '../../core/errors.ts';
import { etagOf, parseIfMatch } from '../../lib/etag.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import type { Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { ResourceCore } from './service-types.ts';
import { withRows, writeAccess } from './access.ts';

/**
 * Restores a soft-deleted document (administrators; guarded by `If-Match` like a delete). What a
 * cascade deleted with it stays deleted: restore those one by one.
 * @throws AccessDeniedError for non-administrators; ConflictError when the document is not deleted
 */
export async function restoreDocument(svc: ResourceCore, actor: Actor, id: string, ifMatch: string | null | undefined): Promise<Doc> {
  const scope = withRows(svc.scope(actor, { includeDeleted: true }), (await writeAccess(svc, actor, 'delete'))?.rows);
  svc.checkIncludeDeleted(actor, true);
  const tags = parseIfMatch(ifMatch);
  const old = await svc.findOwned(id, scope);
  if (!tags.includes(etagOf(old.version))) throw new EtagMismatchError();
  if (!old.is_deleted) throw new ConflictError(`${svc.def.name} ${id} is not deleted`);
  const now = new Date();
  const by = svc.actorId(actor);
  const doc = await svc.model
    .findOneAndUpdate(
      { _id: old._id, ...scope, version: old.version },
      { $set: { is_deleted: false, deleted_at: null, deleted_by: null, updated_at: now, updated_by: by, [OUTBOX_FIELD]: svc.outboxFor('restored', actor, old) }, $inc: { version: 1 } },
      { returnDocument: 'after' },
    )
    .lean<Doc>();
  if (!doc) throw await svc.lostRace(id, scope);
  await svc.committed(doc);
  return svc.view(doc);
}

