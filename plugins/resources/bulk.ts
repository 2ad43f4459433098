/**
 * Bulk create and bulk delete of one resource: each item goes through the service's own create or
 * delete (same guards, hooks and audit), and a rejected item is reported with its index instead
 * of failing the call.
 */
import { ConflictError } from '../../core/errors.ts';
import { toAppError } from '../../core/http/map-error.ts';
import type { Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { ResourceCore } from './service-types.ts';

/** One rejected item of a bulk call. */
export interface BulkItemError {
  index: number;
  id?: string;
  error: { status: number; code: string; message: string; details: Record<string, unknown> };
}

export interface BulkCreateResult {
  items: Doc[];
  errors: BulkItemError[];
  created_count: number;
  error_count: number;
}

export interface BulkDeleteResult {
  deleted: string[];
  errors: BulkItemError[];
  deleted_count: number;
  error_count: number;
}

/** The error of one rejected bulk item; an unexpected failure (not a client error) fails the whole call. */
const itemError = (err: unknown, loc: (string | number)[] = ['body']): BulkItemError['error'] => {
  const e = toAppError(err, loc);
  if (!e) throw err;
  return { status: e.status, code: e.code, message: e.message, details: e.details };
};

/** Creates the items one by one, in order; each failure is reported by its index. */
export async function bulkCreate(svc: ResourceCore, actor: Actor, items: unknown[]): Promise<BulkCreateResult> {
  svc.scope(actor); // a failed feature/attribute guard rejects the whole call (403), not each item
  const out: BulkCreateResult = { items: [], errors: [], created_count: 0, error_count: 0 };
  // Sequential keeps the answer's order and bounds load; max_bulk_size caps the count.
  for (const [index, item] of items.entries()) {
    try {
      out.items.push(await svc.create(actor, item, { bulk: true, loc: ['body', index] }));
    } catch (err) {
      out.errors.push({ index, error: itemError(err, ['body', index]) });
    }
  }
  out.created_count = out.items.length;
  out.error_count = out.errors.length;
  return out;
}

/** Soft-deletes each `{id, etag}`; a 409 when every row was rejected. */
export async function bulkDelete(svc: ResourceCore, actor: Actor, items: { id: string; etag: string }[]): Promise<BulkDeleteResult> {
  svc.scope(actor); // a failed feature/attribute guard rejects the whole call (403), not each row
  const out: BulkDeleteResult = { deleted: [], errors: [], deleted_count: 0, error_count: 0 };
  for (const [index, item] of items.entries()) {
    try {
      await svc.remove(actor, item.id, item.etag, { bulk: true });
      out.deleted.push(item.id);
    } catch (err) {
      out.errors.push({ index, id: item.id, error: itemError(err) });
    }
  }
  out.deleted_count = out.deleted.length;
  out.error_count = out.errors.length;
  if (out.deleted_count === 0 && out.error_count > 0) {
    throw new ConflictError('Every item of the bulk delete was rejected', { errors: out.errors });
  }
  return out;
}
