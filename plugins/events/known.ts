/**
 * What a process knows is in the event log, and the outbox of a write computed by the database
 * inside that write (an update pipeline: no read before the write). docs/events.md, "Writes
 * without a read".
 */
import type { Types } from 'mongoose';
import type { Doc } from '../../core/hooks.ts';
import { RecentMap } from '../../lib/recent.ts';
import { OUTBOX_FIELD } from './public/outbox.ts';
import { beforeOf, type OutboxEntry, type OutboxSource } from './public/outbox.ts';

/** What the relay tells about a document's entries a write supersedes. */
export interface KnownEntries {
  /** Ids of this document's entries known to be in the log. */
  ids: readonly string[];
  /** Entries stamped before this (ms) are in the log (the late sweep pass covered them); 0: none. */
  before: number;
}

const NOTHING_KNOWN: KnownEntries = { ids: [], before: 0 };

/** Whether `e`'s event is known to be in the log (so a superseding write may drop it). */
const isKnown = (known: KnownEntries, e: OutboxEntry): boolean =>
  known.ids.includes(e.id) || (known.before > 0 && new Date(e.created_at).getTime() < known.before);

/**
 * The `_outbox` value of a write that supersedes `old`: its waiting entries with their object
 * frozen (the object of an entry at `old.version` is `old` itself), plus the new entry (none for a
 * write that has no event of its own). Entries `known` to be in the log are dropped.
 */
export function supersede(source: OutboxSource, old: Doc, entry: OutboxEntry | null, known: KnownEntries = NOTHING_KNOWN): OutboxEntry[] {
  const waiting = ((old[OUTBOX_FIELD] as OutboxEntry[] | undefined) ?? []).filter((e) => !isKnown(known, e));
  const added = entry ? [entry] : [];
  if (!waiting.length) return added;
  const view = source.view(old);
  return [...waiting.map((e) => (e.data ? e : { ...e, data: view })), ...added];
}

/**
 * The ids of the events this process stored or found in the log, by document (`collection:id`),
 * for the documents written most recently (see `RecentMap`): what a superseding write may drop
 * (read or not, it drops the same entries), and what a sweep need not look up.
 */
export class KnownByDocument {
  private readonly ids: RecentMap<string, string[]>;
  /** @param capacity the most documents remembered (at least half of them, the newest written) */
  constructor(capacity: number) {
    this.ids = new RecentMap(capacity);
  }

  static key = (collection: string, docId: unknown): string => `${collection}:${String(docId)}`;

  add(key: string, eventIds: readonly string[]): void {
    if (!eventIds.length) return;
    const had = this.ids.get(key);
    // A document's newest entries are the ones a write may still find: keep the last few.
    this.ids.set(key, had ? [...had, ...eventIds].slice(-8) : [...eventIds]);
  }

  of(key: string): readonly string[] {
    return this.ids.get(key) ?? [];
  }
}

/** `before.values` expressions, by changed fields: a resource's updates change few sets of fields. */
const beforeValues = new Map<string, Doc>();

/**
 * The expression of `before.values` for the fields `changed` (built once per set of fields; never
 * mutated). A field the document lacks is left out by the database: `keys` names it.
 */
function beforeValuesOf(changed: readonly string[]): Doc {
  const key = changed.join('\0');
  let values = beforeValues.get(key);
  if (!values) {
    values = Object.fromEntries(changed.map((k) => [k, `$${k}`]));
    if (beforeValues.size < 1_000) beforeValues.set(key, values);
  }
  return values;
}

/** The `_outbox` a write computes in the database, and the same value computed from the document before it. */
export interface OutboxInWrite {
  /** An aggregation expression for the `_outbox` of an update pipeline's `$set`. */
  expression: Doc;
  /** The outbox the write stored, from the document as it was before the write (`returnDocument: 'before'`). */
  applied(old: Doc): OutboxEntry[];
}

/**
 * The outbox of a write superseding the document it changes, as `supersede(source, old, entry)`
 * makes it, but computed by the database from the document itself: waiting entries known to be in
 * the log are dropped, the others keep their object (frozen as `view`), and `entry` is appended
 * with the document's own `tenant_id` (unknown before the write) and `before`: the values the write
 * replaces of the `changed` fields (those of the view it sets or removes), and those it adds. The
 * event's `previous` is rebuilt from them (`previousOf`), so the entry carries no whole object and
 * stays in the document once relayed, as a create's does: clearing it would rewrite the row.
 * `view` is an expression of the document as the API shows it, the same object `source.view(old)`
 * returns (private fields and the outbox removed).
 */
export function outboxInWrite(source: OutboxSource, entry: OutboxEntry, view: Doc, known: KnownEntries, changed: readonly string[]): OutboxInWrite {
  const isKnown = (e: string) => ({
    $or: [{ $in: [`${e}.id`, { $literal: [...known.ids] }] }, ...(known.before ? [{ $lt: [`${e}.created_at`, { $literal: new Date(known.before) }] }] : [])],
  });
  const { previous: _none, ...staged } = entry;
  const values = beforeValuesOf(changed);
  const expression = {
    $concatArrays: [
      {
        $map: {
          input: { $filter: { input: { $ifNull: [`$${OUTBOX_FIELD}`, []] }, as: 'e', cond: { $not: [isKnown('$$e')] } } },
          as: 'e',
          in: { $cond: [{ $ifNull: ['$$e.data', false] }, '$$e', { $mergeObjects: ['$$e', { data: view }] }] },
        },
      },
      [{ $mergeObjects: [{ $literal: staged }, { tenant_id: { $ifNull: ['$tenant_id', null] }, before: { values, keys: { $literal: [...changed] } } }] }],
    ],
  };
  return {
    expression,
    applied: (old) => supersede(source, old, { ...staged, tenant_id: (old.tenant_id as Types.ObjectId | undefined) ?? null, before: beforeOf(old, changed) }, known),
  };
}
