/** `populate=`: relation ids replaced by the related documents, read through each target's own scope. */
import { Types } from 'mongoose';
import type { Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { ResourceCore } from './service-types.ts';
import { AccessDeniedError } from '../../core/errors.ts';
import { applyMask, readAccess, withRows } from './access.ts';

export function checkPopulate(svc: ResourceCore, actor: Actor, paths: string[]): void {
  for (const p of paths) {
    const target = svc.deps.lookup.get(svc.fieldByPath.get(p)?.ref ?? '');
    target?.scope(actor);
  }
}

/** Replaces relation ids with the related documents the actor may see (else null). One query per path. */
export async function populate(svc: ResourceCore, actor: Actor, items: Doc[], paths: string[]): Promise<Doc[]> {
  if (!paths.length || !items.length) return items.map((d) => svc.view(d));
  const out = items.map((d) => ({ ...svc.view(d) }));
  for (const p of paths) {
    const target = svc.deps.lookup.get(svc.fieldByPath.get(p)?.ref ?? '');
    if (!target) continue;
    const ids = [...new Set(out.map((d) => d[p]).filter((v) => v != null).map(String))].map((s) => new Types.ObjectId(s));
    if (!ids.length) continue;
    // The related resource's own rules: its rows in the query, its fields masked; none readable: null.
    const ra = await Promise.resolve(readAccess(target, actor)).then((r) => ({ r }), (err: unknown) => (err instanceof AccessDeniedError ? null : Promise.reject(err)));
    const related = ra
      ? await target.model
        .find(withRows(withRows({ _id: { $in: ids }, ...target.scope(actor) }, ra.r?.rows), await target.draftRows(actor)))
        .select(target.projection(null))
        .lean<Doc[]>()
      : [];
    const byId = new Map(applyMask(ra?.r ?? null, related, null).map((r) => [String(r._id), target.view(r)]));
    for (const d of out) if (d[p] != null) d[p] = byId.get(String(d[p])) ?? null;
  }
  return out;
}
