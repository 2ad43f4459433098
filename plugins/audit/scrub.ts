/**
 * Erasure support: the entries by or about a subject keep their place but lose the personal values
 * (see `AuditLogger.scrubSubject`). No Koa or GraphQL here.
 */
import type { Doc } from '../../core/hooks.ts';
import type { Filter } from '../../core/access.ts';
import type { Types } from 'mongoose';
import { isPlainObject } from './diff.ts';
import type { AuditEntryModel, AuditEntryRecord } from './model.ts';
import { oid } from './format.ts';

/** What `scrubSubject` removes. */
export interface ScrubInput {
  subject_user_id: string | Types.ObjectId;
  /** Documents whose entries may hold the subject's data, with the fields that hold it. */
  documents: readonly { resource: string; item_id: string | Types.ObjectId; fields: readonly string[] }[];
  /** Whole string values to replace wherever they occur (compared case-insensitively, trimmed). */
  values: readonly string[];
  /** What replaces a personal value (privacy's `PRIVACY_PSEUDONYM`). */
  replacement: string;
}

/** Replaces the subject's personal values in every entry by or about them; returns the entries changed. */
export async function scrubEntries(model: AuditEntryModel, input: ScrubInput): Promise<{ scrubbed: number }> {
  const { replacement } = input;
  const subject = oid(input.subject_user_id, 'subject_user_id');
  const values = new Set(input.values.filter(Boolean).map((v) => v.trim().toLowerCase()));
  const fieldsOf = new Map<string, ReadonlySet<string>>();
  const byResource = new Map<string, Types.ObjectId[]>();
  for (const d of input.documents) {
    const id = oid(d.item_id, 'item_id');
    fieldsOf.set(`${d.resource}:${String(id)}`, new Set(d.fields));
    const ids = byResource.get(d.resource);
    if (ids) ids.push(id);
    else byResource.set(d.resource, [id]);
  }
  const CHUNK = 1000;
  const clauses: Filter[] = [{ user_id: subject }];
  for (const [resource, ids] of byResource) {
    for (let i = 0; i < ids.length; i += CHUNK) clauses.push({ resource, item_id: { $in: ids.slice(i, i + CHUNK) } });
  }
  /**
   * The value with every personal string replaced; the very same value (===) when nothing was.
   * Walks into arrays and plain objects only: BSON values (Decimal128, Binary, Long, ObjectId),
   * dates and buffers are leaves, written back untouched.
   */
  const scrubValue = (v: unknown): unknown => {
    if (typeof v === 'string') return values.has(v.trim().toLowerCase()) ? replacement : v;
    if (Array.isArray(v)) {
      const out = v.map(scrubValue);
      return out.some((x, i) => x !== v[i]) ? out : v;
    }
    if (v && typeof v === 'object' && isPlainObject(v)) {
      let out: Doc | null = null;
      for (const [k, x] of Object.entries(v)) {
        const y = scrubValue(x);
        if (y !== x) (out ??= { ...v })[k] = y;
      }
      return out ?? v;
    }
    return v;
  };
  const hide = (v: unknown) => (v === null || v === undefined ? v : replacement);
  /** `doc` with `f(key, value)` applied to every entry, or `doc` itself when no value changes. */
  const mapEntries = (doc: Doc, f: (k: string, v: unknown) => unknown): Doc => {
    let out: Doc | null = null;
    for (const [k, v] of Object.entries(doc)) {
      const w = f(k, v);
      if (w !== v) (out ??= { ...doc })[k] = w;
    }
    return out ?? doc;
  };
  let scrubbed = 0;
  for (let i = 0; i < clauses.length; i += 50) {
    const ops: { updateOne: { filter: Filter; update: Filter } }[] = [];
    for await (const e of model.find({ $or: clauses.slice(i, i + 50) }).lean<AuditEntryRecord[]>().cursor({ batchSize: 500 })) {
      const fields = fieldsOf.get(`${e.resource}:${String(e.item_id)}`) ?? new Set<string>();
      let changes = scrubValue(e.changes) as Doc | null;
      let snapshot = scrubValue(e.snapshot) as Doc | null;
      if (changes && fields.size) {
        changes = mapEntries(changes, (k, c) => {
          if (!fields.has(k) || !c || typeof c !== 'object' || !isPlainObject(c)) return c;
          const old = hide(c.old);
          const nu = hide(c.new);
          return old === c.old && nu === c.new ? c : { ...c, old, new: nu };
        });
      }
      if (snapshot && fields.size) snapshot = mapEntries(snapshot, (k, v) => (fields.has(k) ? hide(v) : v));
      const userName =
        e.user_name != null && (String(e.user_id) === String(subject) || values.has(e.user_name.trim().toLowerCase())) ? replacement : e.user_name;
      const set: Doc = {};
      if (userName !== e.user_name) set.user_name = userName;
      if (changes !== e.changes) set.changes = changes;
      if (snapshot !== e.snapshot) set.snapshot = snapshot;
      if (Object.keys(set).length) ops.push({ updateOne: { filter: { _id: e._id }, update: { $set: set } } });
    }
    if (ops.length) scrubbed += (await model.bulkWrite(ops, { ordered: false })).modifiedCount;
  }
  return { scrubbed };
}
