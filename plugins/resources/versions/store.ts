/**
 * The versions of documents of versioned resources (`versions` option, docs/versions.md), one record
 * per write, in `resource_versions`. Records are written by a durable sink of the event log: the
 * write's event waits in the document's outbox, written by the same atomic write as the change, and
 * the relay (or, after a crash, the sweep) runs the sink before the event is stored. So a version
 * exists if and only if its write does; the unique key (tenant, resource, document, version) makes a
 * sink that runs twice write it once. No Koa or GraphQL here.
 */
import { Schema, Types, type Connection, type InferSchemaType } from 'mongoose';
import { modelOn } from '../../../core/db.ts';
import type { EventDoc } from '../../events/public/outbox.ts';
import type { Doc } from '../../../core/hooks.ts';
import type { VersionPolicy } from '../define.ts';
import { isSystemField } from '../fields.ts';
import { RecentMap } from '../../../lib/recent.ts';

const VERSIONS_COLLECTION = 'resource_versions';

const versionSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    resource: { type: String, required: true },
    doc_id: { type: Schema.Types.ObjectId, required: true },
    version: { type: Number, required: true },
    operation: { type: String, enum: ['created', 'updated', 'deleted', 'restored', 'draft_saved', 'published', 'unpublished'], required: true },
    created_at: { type: Date, required: true },
    actor: { type: String, default: null },
    request_id: { type: String, default: null },
    changed_fields: { type: [String], default: [] },
    restored_from: { type: Number, default: null },
    event_id: { type: String, required: true },
    /** The document after the write, as the API showed it (no private fields). */
    data: { type: Schema.Types.Mixed, required: true },
  },
  { versionKey: false, minimize: false },
);
// The key of a version, and the index of a document's history read newest first.
versionSchema.index({ tenant_id: 1, resource: 1, doc_id: 1, version: -1 }, { unique: true });
// The age purge ranges over one resource's versions by time.
versionSchema.index({ resource: 1, created_at: 1 });

export type VersionDoc = InferSchemaType<typeof versionSchema>;
/** A stored version, as read back. */
export interface VersionRecord {
  _id: Types.ObjectId;
  tenant_id: Types.ObjectId | null;
  resource: string;
  doc_id: Types.ObjectId;
  version: number;
  operation: 'created' | 'updated' | 'deleted' | 'restored' | 'draft_saved' | 'published' | 'unpublished';
  created_at: Date;
  actor: string | null;
  request_id: string | null;
  changed_fields: string[];
  restored_from: number | null;
  event_id: string;
  data: Doc;
}

/** A version without its document, as a history page lists it. */
export type VersionHead = Omit<VersionRecord, 'data'>;

/** Where a query of versions is scoped: the tenant term of the caller's scope, if any. */
export type TenantTerm = { tenant_id?: unknown };

/** Equal as JSON (the fields an update leaves are the same values: no serializing for those). */
const same = (a: unknown, b: unknown) => a === b || (a == null && b == null) || JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/**
 * The names of the fields a write changed: the client fields whose value differs between the
 * document before and after (on a create, those it holds), and `is_deleted` for a delete or restore.
 */
export function changedFields(previous: Doc | null, data: Doc): string[] {
  const names = new Set([...Object.keys(previous ?? {}), ...Object.keys(data)]);
  const out: string[] = [];
  for (const k of names) {
    if (isSystemField(k) && k !== 'is_deleted') continue;
    if (previous === null ? data[k] !== undefined && data[k] !== null && k !== 'is_deleted' : !same(previous[k], data[k])) out.push(k);
  }
  return out.sort();
}

const VERBS = new Set(['created', 'updated', 'deleted', 'restored', 'draft_saved', 'published', 'unpublished']);

/** How many event ids the sink remembers having stored, at most (the newest half at least: `RecentMap`). */
const REMEMBERED = 50_000;

/** The stored versions of documents: written by the event log's sink, read by the versions routes. */
export class VersionStore {
  readonly model;
  /**
   * Events whose versions this process stored. A write that supersedes a document before its relay
   * ran relays the waiting entry again with its own (docs/events.md): its version is skipped here
   * instead of being refused by the unique index, whose error path costs the batch far more.
   */
  private readonly stored = new RecentMap<string, true>(REMEMBERED);

  constructor(conn: Connection, private readonly policyOf: (resource: string) => VersionPolicy | null) {
    this.model = modelOn(conn, 'ResourceVersion', versionSchema, VERSIONS_COLLECTION);
  }

  /** The record of an event of a versioned resource's write, or null for any other event. */
  recordOf(e: EventDoc): Omit<VersionRecord, '_id'> | null {
    const dot = e.type.lastIndexOf('.');
    const resource = e.type.slice(0, dot);
    const verb = e.type.slice(dot + 1);
    if (!VERBS.has(verb) || !e.source || e.source.collection !== resource || e.source.version === null || !this.policyOf(resource)) return null;
    const restored = (e.meta as { restored_version?: number } | null)?.restored_version;
    return {
      tenant_id: e.tenant_id, resource, doc_id: new Types.ObjectId(String(e.source.id)), version: e.source.version,
      operation: verb as VersionRecord['operation'], created_at: e.created_at, actor: e.actor, request_id: e.request_id,
      changed_fields: changedFields(verb === 'created' ? null : e.previous ?? {}, e.data), restored_from: restored ?? null, event_id: e._id, data: e.data,
    };
  }

  /**
   * The event log's sink: stores the versions of a batch of events, once each, then applies
   * `max_per_document`. A failure throws, so the relay keeps the batch (and its outboxes) and retries.
   */
  async write(events: EventDoc[]): Promise<void> {
    const records = events.filter((e) => !this.stored.has(e._id)).map((e) => this.recordOf(e)).filter((r) => r !== null);
    if (!records.length) return;
    try {
      await this.model.collection.insertMany(records, { ordered: false });
    } catch (err) {
      // Versions stored by an earlier run of the same batch (a retry, a sweep) are duplicates, not failures.
      if (!onlyDuplicates(err)) throw err;
    }
    await this.trim(records);
    for (const r of records) this.stored.set(r.event_id, true);
  }

  /** Keeps the newest `max_per_document` versions of each document written (and its first). */
  private async trim(records: Omit<VersionRecord, '_id'>[]): Promise<void> {
    // The newest version past its limit, by document: only a document past it has versions to remove.
    const newest = new Map<string, { r: Omit<VersionRecord, '_id'>; upTo: number }>();
    for (const r of records) {
      const max = this.policyOf(r.resource)?.max_per_document ?? null;
      if (max === null || r.version - max <= 1) continue;
      const key = `${r.resource}:${String(r.doc_id)}`;
      if ((newest.get(key)?.r.version ?? 0) < r.version) newest.set(key, { r, upTo: r.version - max });
    }
    const terms = [...newest.values()].map(({ r, upTo }) => ({ tenant_id: r.tenant_id, resource: r.resource, doc_id: r.doc_id, version: { $gt: 1, $lte: upTo } }));
    if (terms.length) await this.model.collection.deleteMany(terms.length === 1 ? terms[0]! : { $or: terms });
  }

  /**
   * Up to `limit` versions numbered below `before`, newest first, without the documents. Read as
   * ranges of version numbers, each a bounded range of the history index (a sort over a whole
   * history costs as much as the history on some engines): the first range is `limit + 1` wide,
   * each next one four times wider, so a gap left by retention costs a few reads, not a scan.
   * @returns the page and whether older versions remain
   */
  async page(scope: TenantTerm, resource: string, docId: Types.ObjectId, before: number, limit: number): Promise<{ items: VersionHead[]; more: boolean }> {
    const items: VersionHead[] = [];
    let hi = before - 1;
    let width = limit + 1;
    while (hi >= 1 && items.length <= limit) {
      const lo = Math.max(1, hi - width + 1);
      const rows = await this.model.collection
        .find({ ...scope, resource, doc_id: docId, version: { $gte: lo, $lte: hi } }, { projection: { data: 0 } })
        .sort({ version: -1 })
        .limit(limit + 1 - items.length)
        .toArray();
      items.push(...(rows as unknown as VersionHead[]));
      hi = lo - 1;
      width *= 4;
    }
    return { items: items.slice(0, limit), more: items.length > limit };
  }

  /** Version `n` of a document, or null. */
  async at(scope: TenantTerm, resource: string, docId: Types.ObjectId, n: number): Promise<VersionRecord | null> {
    return (await this.model.collection.findOne({ ...scope, resource, doc_id: docId, version: n })) as VersionRecord | null;
  }

  /** The newest version of a document older than `n`, or null (for the default diff). */
  async before(scope: TenantTerm, resource: string, docId: Types.ObjectId, n: number): Promise<VersionRecord | null> {
    const [doc] = await this.model.collection.find({ ...scope, resource, doc_id: docId, version: { $lt: n } }).sort({ version: -1 }).limit(1).toArray();
    return (doc as VersionRecord | undefined) ?? null;
  }

  /**
   * Drops the versions of `resource` older than `days` days, the first version of each document
   * excepted, within the tenant term. Returns how many went.
   */
  async purgeOlderThan(scope: TenantTerm, resource: string, days: number): Promise<number> {
    const cutoff = new Date(Date.now() - days * 86_400_000);
    const res = await this.model.collection.deleteMany({ ...scope, resource, created_at: { $lt: cutoff }, version: { $gt: 1 } });
    return res.deletedCount;
  }

  /**
   * An erasure: in every version whose document's subject (`subject_field` of the version's
   * document) is the user, the personal fields get their neutral values, as in the document itself.
   * @returns how many versions changed
   */
  async scrubSubject(resources: { name: string; subject_field: string; neutral: Doc }[], subject: { user_id: string; tenant_id: string | null }): Promise<number> {
    let n = 0;
    const ids = Types.ObjectId.isValid(subject.user_id) ? [new Types.ObjectId(subject.user_id), subject.user_id] : [subject.user_id];
    for (const r of resources) {
      if (!Object.keys(r.neutral).length) continue;
      const set = Object.fromEntries(Object.entries(r.neutral).map(([f, v]) => [`data.${f}`, v]));
      const res = await this.model.collection.updateMany(
        { ...(subject.tenant_id ? { tenant_id: new Types.ObjectId(subject.tenant_id) } : {}), resource: r.name, [`data.${r.subject_field}`]: { $in: ids } },
        { $set: set },
      );
      n += res.modifiedCount;
    }
    return n;
  }

  /** Drops every version of the given documents (they were purged). */
  async purgeDocuments(resource: string, docIds: Types.ObjectId[]): Promise<number> {
    if (!docIds.length) return 0;
    const res = await this.model.collection.deleteMany({ resource, doc_id: { $in: docIds } });
    return res.deletedCount;
  }
}

function onlyDuplicates(err: unknown): boolean {
  const e = err as { code?: unknown; writeErrors?: { code?: unknown }[] };
  const errors = e.writeErrors ?? [e];
  return errors.length > 0 && errors.every((w) => w.code === 11000);
}
