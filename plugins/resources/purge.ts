/** The purge of soft-deleted documents past their age, with their versions. */
import type { Model, Types } from 'mongoose';
import type { Doc } from '../../core/hooks.ts';

type Filter = Record<string, unknown>;

/**
 * Deletes the documents of `scope` soft-deleted before `cutoff`. With `dropVersions`, their
 * versions go first: a crash in between leaves documents that the next purge removes, never
 * orphaned versions.
 */
export async function purgeDeleted(model: Model<Doc>, resource: string, scope: Filter, cutoff: Date, dropVersions?: (resource: string, ids: Types.ObjectId[]) => Promise<unknown>): Promise<number> {
  let filter: Filter = { ...scope, is_deleted: true, deleted_at: { $lt: cutoff } };
  if (dropVersions) {
    const ids = (await model.find(filter, { _id: 1 }).lean<Doc[]>()).map((d) => d._id as Types.ObjectId);
    await dropVersions(resource, ids);
    filter = { ...filter, _id: { $in: ids } };
  }
  return (await model.deleteMany(filter)).deletedCount;
}
