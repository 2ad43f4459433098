/**
 * Pure value functions of the audit log: redaction of sensitive fields and the field-level diff.
 * No I/O; values are documents as mongoose or the driver hand them over (BSON values, dates,
 * nested objects and arrays).
 */
import type { Doc } from '../../core/hooks.ts';

/** One entry of `changes`: the value before and after (null when absent). */
export interface FieldChange {
  old: unknown;
  new: unknown;
}

/**
 * Field names never written into `changes` or `snapshot`, at any depth. Matched case-insensitively
 * and ignoring `_` and `-`, so `apiKey`, `API_KEY` and `api-key` all match `api_key`.
 */
export const DEFAULT_DENY_FIELDS: readonly string[] = Object.freeze([
  'password', 'password_hash', 'passwd', 'key_hash', 'token', 'access_token', 'refresh_token', 'id_token',
  'secret', 'client_secret', 'api_key', 'private_key', 'otp_secret', 'totp_secret', 'mfa_secret',
  'card_number', 'cvv', 'cvc',
]);

/** Fields the server maintains on every write: a change of these alone is not a change. */
export const DEFAULT_IGNORED_FIELDS: readonly string[] = Object.freeze(['_id', '__v', 'updated_at', 'updated_by', 'version']);

const normalizeName = (name: string): string => name.toLowerCase().replace(/[_-]/g, '');

/** A BSON value (ObjectId, Decimal128, Binary, Long, Timestamp...): a leaf, never walked into. */
export const isBson = (v: object): boolean => typeof (v as { _bsontype?: unknown })._bsontype === 'string';

/** An object literal (or null-prototype object): the only objects walked into, besides arrays. */
export const isPlainObject = (v: object): v is Doc => {
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
};

/** Removes deny-listed names (any depth) and secret paths from documents, as deep copies. */
export class Redactor {
  private readonly deny: Set<string>;
  private readonly deniedNames = new Map<string, boolean>();

  constructor(denyFields: readonly string[]) {
    this.deny = new Set(denyFields.map(normalizeName));
  }

  /**
   * A deep copy of `doc` without deny-listed names and without `secretPaths` (dotted paths from
   * the root; a path through an array applies to every element).
   */
  redact(doc: unknown, secretPaths: readonly string[] = []): Doc {
    const copy = this.copy(doc);
    if (!copy || typeof copy !== 'object' || Array.isArray(copy)) return {};
    for (const path of secretPaths) removePath(copy, path.split('.'));
    return copy as Doc;
  }

  /**
   * `diffDocs(redact(before), redact(after), ignored)`, redacting only the top-level fields on the
   * way (a field's copy is compared, so a difference only in a deny-listed name inside it is none).
   */
  changes(before: Doc, after: Doc, ignored: ReadonlySet<string>): Record<string, FieldChange> {
    if (!isPlainObject(before) || !isPlainObject(after)) return diffDocs(this.redact(before), this.redact(after), ignored);
    const changes: Record<string, FieldChange> = {};
    for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
      if (ignored.has(k) || this.denied(k)) continue;
      const [a, b] = [this.copy(before[k]), this.copy(after[k])];
      if (!sameValue(a, b)) changes[k] = { old: a ?? null, new: b ?? null };
    }
    return changes;
  }

  /** Whether a field name is deny-listed (names are few: each is normalized once). */
  private denied(name: string): boolean {
    let d = this.deniedNames.get(name);
    if (d === undefined) {
      d = this.deny.has(normalizeName(name));
      if (this.deniedNames.size < 10_000) this.deniedNames.set(name, d);
    }
    return d;
  }

  private copy(v: unknown): unknown {
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map((x) => this.copy(x));
    if (v instanceof Date || isBson(v) || ArrayBuffer.isView(v)) return v;
    if (v instanceof Map) return this.copy(Object.fromEntries(v));
    if (!isPlainObject(v)) {
      // Mongoose documents and subdocuments: audit their plain data, not their internals.
      const toObject = (v as { toObject?: unknown }).toObject;
      return typeof toObject === 'function' ? this.copy((toObject as () => unknown).call(v)) : v;
    }
    const out: Doc = {};
    for (const [k, x] of Object.entries(v)) {
      if (!this.denied(k)) out[k] = this.copy(x);
    }
    return out;
  }
}

function removePath(v: unknown, segs: readonly string[]): void {
  if (!v || typeof v !== 'object') return;
  if (Array.isArray(v)) {
    for (const x of v) removePath(x, segs);
    return;
  }
  const [head, ...rest] = segs;
  if (head === undefined) return;
  const obj = v as Doc;
  if (rest.length === 0) delete obj[head];
  else removePath(obj[head], rest);
}

/**
 * Equality by value: nested objects by their keys regardless of order, arrays element by element,
 * dates by instant, BSON values by their canonical JSON (so an ObjectId equals its hex string).
 * `null` and a missing value are equal.
 */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a == null || b == null) return a == null && b == null;
  if (typeof a !== 'object' || typeof b !== 'object') {
    if (typeof a === 'object' && isBson(a)) return JSON.stringify(a) === JSON.stringify(b);
    if (typeof b === 'object' && isBson(b)) return JSON.stringify(a) === JSON.stringify(b);
    return Number.isNaN(a) && Number.isNaN(b);
  }
  if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
  if (isBson(a) || isBson(b)) return JSON.stringify(a) === JSON.stringify(b);
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    return ArrayBuffer.isView(a) && ArrayBuffer.isView(b) && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  }
  const ao = a as Doc;
  const bo = b as Doc;
  const keys = new Set([...Object.keys(ao), ...Object.keys(bo)]);
  for (const k of keys) if (!sameValue(ao[k], bo[k])) return false;
  return true;
}

/**
 * Top-level fields whose value differs between `before` and `after`, each as `{old, new}`
 * (null for an absent side). Fields in `ignored` never count.
 */
export function diffDocs(before: Doc, after: Doc, ignored: ReadonlySet<string>): Record<string, FieldChange> {
  const changes: Record<string, FieldChange> = {};
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (ignored.has(k) || sameValue(before[k], after[k])) continue;
    changes[k] = { old: before[k] ?? null, new: after[k] ?? null };
  }
  return changes;
}
