import type { Db } from 'mongodb';

/**
 * Outbox entries of `collection` whose events are not in the log. An entry in a document is not
 * enough to say its event is missing: relayed creates stay in their documents (docs/events.md).
 */
export async function unrelayedEntries(db: Db, collection: string): Promise<string[]> {
  const docs = await db.collection<{ _outbox?: { id: string }[] }>(collection).find({ '_outbox.0': { $exists: true } }, { projection: { _outbox: 1 } }).toArray();
  const ids = docs.flatMap((d) => (d._outbox ?? []).map((e) => e.id));
  if (!ids.length) return [];
  const stored = new Set((await db.collection<{ _id: string }>('events').find({ _id: { $in: ids } }, { projection: { _id: 1 } }).toArray()).map((e) => e._id));
  return ids.filter((id) => !stored.has(id));
}
