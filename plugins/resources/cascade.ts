/**
 * Cascade rules of the resources that reference a deleted document: `deny` refuses the delete
 * (422 `CASCADE_DENY`), `cascade` soft-deletes the referencing documents, `set_null` clears their
 * reference. Each child write is a normal write carrying its event, audited from it.
 */
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import type { Actor } from '../../core/context.ts';
import { CascadeDenyError } from '../../core/errors.ts';
import type { Doc } from '../../core/hooks.ts';
import type { ResourceCore } from './service-types.ts';

/** Every `deny` rule the delete would hit, including below children that `cascade` would delete too. */
export async function checkCascadeDeny(svc: ResourceCore, old: Doc, seen = new Set<string>()): Promise<void> {
  seen.add(`${svc.def.name}:${String(old._id)}`);
  for (const ref of svc.deps.lookup.referencing(svc.def.name)) {
    if (ref.on_delete === 'cascade') {
      const children = await ref.service.model.find(ref.service.childFilter(ref.field, old)).lean<Doc[]>();
      for (const c of children) if (!seen.has(`${ref.service.def.name}:${String(c._id)}`)) await checkCascadeDeny(ref.service, c, seen);
    }
    if (ref.on_delete !== 'deny') continue;
    const count = await ref.service.model.countDocuments(ref.service.childFilter(ref.field, old));
    if (count > 0) {
      throw new CascadeDenyError({ resource: svc.def.name, item_id: String(old._id), referenced_by: ref.service.def.name, count });
    }
  }
}

/**
 * Soft-cascade and set-null after the parent is deleted. Without transactions this is best
 * effort per child; each child write is a normal write carrying its event (`.deleted` / `.updated`), audited from it.
 */
export async function applyCascade(svc: ResourceCore, actor: Actor, parent: Doc): Promise<void> {
  for (const ref of svc.deps.lookup.referencing(svc.def.name)) {
    if (ref.on_delete === 'deny') continue;
    const child = ref.service;
    const rows = await child.model.find(child.childFilter(ref.field, parent)).lean<Doc[]>();
    for (const old of rows) {
      if (ref.on_delete === 'cascade') {
        const doc = await child.softDelete(old, {}, actor);
        if (doc) await applyCascade(child, actor, old); // the child's own referrers follow it
      } else {
        const doc = await child.model
          .findOneAndUpdate(
            { _id: old._id, version: old.version },
            { $set: { [ref.field]: null, updated_at: new Date(), updated_by: svc.actorId(actor), [OUTBOX_FIELD]: child.outboxFor('updated', actor, old, { bulk: true }) }, $inc: { version: 1 } },
            { returnDocument: 'after' },
          )
          .lean<Doc>();
        if (doc) await child.committed(doc);
      }
    }
  }
}
