/**
 * Signed keyset cursors for cursor-mode lists.
 *
 * A cursor holds the sort values of one boundary item (every sort field, `_id` last) plus the
 * canonical sort key, as JSON, base64url-encoded and signed with HMAC-SHA256:
 * `<payloadB64url>.<signatureB64url>`. Pages are range queries relative to that boundary, never
 * skips.
 *
 * How the list service uses this module (decided semantics):
 * - First page (no cursor), `direction=next`: `find(filter).sort(querySort(sort, 'next'))` from the
 *   start of the sort order.
 * - Every page fetches `limit + 1` rows; the extra row only tells whether more rows exist beyond
 *   the page and is not returned.
 * - `direction=next` with a cursor: `find({ $and: [filter, cursorFilter(sort, values, 'next')] })`
 *   sorted by `querySort(sort, 'next')`; `has_next` = more than `limit` rows came back;
 *   `has_prev` = true (a cursor was given).
 * - `direction=prev` with a cursor: `find({ $and: [filter, cursorFilter(sort, values, 'prev')] })`
 *   sorted by `querySort(sort, 'prev')` (the reversed order), keep the first `limit` rows, then
 *   reverse them so the response is in forward order; `has_prev` = more than `limit` rows came
 *   back; `has_next` = true (the boundary item lies after the page).
 * - `direction=prev` without a cursor (our decision): the same backwards fetch
 *   without a range, i.e. the last page of the sort order, with `has_next` = false.
 * - The `next` cursor encodes the last returned item and is only issued when `has_next`; the
 *   `prev` cursor encodes the first returned item and is only issued when `has_prev`.
 * - `decodeCursor` is given the sort of the current request; a cursor issued for another sort is a
 *   400, so the client cannot mix cursors and sorts.
 *
 * Ordering assumptions: MongoDB sorts null and missing values together, lowest in ascending order;
 * `cursorFilter` matches that. A sort field must hold one BSON type family per collection (plus
 * null/missing): range operators only compare values of the same type, so mixed types (e.g. numbers
 * and strings in one field) or array-valued sort fields can skip or repeat rows.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Types } from 'mongoose';
import { BadRequestError } from '../core/errors.ts';
/** A sort: fields with direction, `_id` last as the tie-breaker. */
export type SortSpec = Array<[field: string, dir: 1 | -1]>;

/** Decoded cursor body. */
export interface CursorPayload {
  /** Canonical sort key, e.g. `-created_at,_id`. */
  s: string;
  /** Sort values of the boundary item, same order as the sort spec, `_id` last. */
  v: unknown[];
}

/** Longest token accepted; a real cursor is far shorter, this only bounds the work on garbage. */
const MAX_TOKEN_LENGTH = 8192;
const B64URL = /^[A-Za-z0-9_-]+$/;

/** Canonical text form of a sort spec, e.g. `-created_at,_id`. */
export function sortKey(sort: SortSpec): string {
  return sort.map(([field, dir]) => (dir === -1 ? `-${field}` : field)).join(',');
}

/**
 * Encode and sign a cursor for `doc`, the boundary item (a plain object, e.g. from `.lean()` or
 * `doc.toObject()`). Dotted sort fields are read from nested objects; a missing value is stored as
 * null, which MongoDB sorts and matches the same way.
 *
 * Dates, ObjectIds, Decimal128, non-finite numbers and -0 are tagged (`{$date}`, `{$oid}`, `{$dec}`,
 * `{$num}`) so they decode to the same type.
 *
 * @throws TypeError when a sort value has a type that cannot be encoded (a server-side bug, 500).
 */
export function encodeCursor(sort: SortSpec, doc: Record<string, unknown>, secret: string): string {
  const payload: CursorPayload = { s: sortKey(sort), v: sort.map(([field]) => encodeValue(getPath(doc, field) ?? null)) };
  const body = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
  return `${body}.${sign(body, secret)}`;
}

/**
 * Verify and decode a cursor issued for `sort`; returns the boundary values in sort order.
 *
 * @throws BadRequestError 400: `Invalid cursor` (malformed), `Invalid cursor: signature mismatch`,
 *   `Cursor was issued for a different sort`.
 */
export function decodeCursor(token: string, sort: SortSpec, secret: string): unknown[] {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) throw invalid();
  const parts = token.split('.');
  if (parts.length !== 2) throw invalid();
  const [body, sig] = parts as [string, string];
  if (!B64URL.test(body) || !B64URL.test(sig)) throw invalid();

  // Compare the canonical text of the signature, not decoded bytes: base64url decoding ignores the
  // spare low bits of the last character, so a different token could decode to the same bytes.
  const expected = Buffer.from(sign(body, secret), 'utf8');
  const given = Buffer.from(sig, 'utf8');
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw new BadRequestError('Invalid cursor: signature mismatch', { param: 'cursor' });
  }

  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (!isRecord(payload) || typeof payload.s !== 'string' || !Array.isArray(payload.v)) throw invalid();
  if (payload.s !== sortKey(sort)) throw new BadRequestError('Cursor was issued for a different sort', { param: 'cursor' });
  if (payload.v.length !== sort.length) throw invalid();
  try {
    return payload.v.map(decodeValue);
  } catch {
    throw invalid();
  }
}

/**
 * Filter matching the rows strictly after (`next`) or strictly before (`prev`) the boundary in
 * sort order: the lexicographic chain `$or: [{f0: >v0}, {f0: v0, f1: >v1}, ...]`, where ">" means
 * "later in the walking direction" for that field's sort direction.
 *
 * Null boundary values follow MongoDB's order (null/missing lowest ascending): "greater than null"
 * is `{$ne: null}`, "less than null" matches nothing (its branch is left out), and "less than v"
 * also matches null/missing (`$lt` alone would not, because of type bracketing).
 */
export function cursorFilter(sort: SortSpec, values: unknown[], direction: 'next' | 'prev'): Record<string, unknown> {
  const branches: Record<string, unknown>[] = [];
  for (let i = 0; i < sort.length; i++) {
    const [field, dir] = sort[i]!;
    const value = values[i] ?? null;
    const prefix: Record<string, unknown> = {};
    for (let j = 0; j < i; j++) prefix[sort[j]![0]] = values[j] ?? null;
    const greater = (dir === 1) === (direction === 'next');
    if (greater) {
      branches.push({ ...prefix, [field]: value === null ? { $ne: null } : { $gt: value } });
    } else if (value !== null) {
      branches.push({ ...prefix, [field]: { $lt: value } });
      // `_id` is never null or missing.
      if (field !== '_id') branches.push({ ...prefix, [field]: null });
    }
  }
  // Only reachable when the sort lacks a non-null tiebreaker and the boundary is at the very end.
  if (branches.length === 0) return { _id: { $in: [] } };
  return { $or: branches };
}

/** MongoDB sort document for walking in `direction` (the sort reversed for `prev`). */
export function querySort(sort: SortSpec, direction: 'next' | 'prev'): Record<string, 1 | -1> {
  const out: Record<string, 1 | -1> = {};
  for (const [field, dir] of sort) out[field] = direction === 'next' ? dir : dir === 1 ? -1 : 1;
  return out;
}

function invalid(): BadRequestError {
  return new BadRequestError('Invalid cursor', { param: 'cursor' });
}

function sign(body: string, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('base64url');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function getPath(doc: Record<string, unknown>, path: string): unknown {
  let cur: unknown = doc;
  for (const seg of path.split('.')) {
    if (!isRecord(cur) || isBson(cur)) return undefined;
    cur = cur[seg];
  }
  return cur;
}

function bsonType(v: object): string | undefined {
  const t = (v as { _bsontype?: unknown })._bsontype;
  return typeof t === 'string' ? t : undefined;
}

function isBson(v: object): boolean {
  return bsonType(v) !== undefined;
}

function encodeValue(v: unknown): unknown {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') {
    // JSON cannot carry NaN, ±Infinity or -0.
    if (Object.is(v, -0)) return { $num: '-0' };
    return Number.isFinite(v) ? v : { $num: String(v) };
  }
  if (v instanceof Date) {
    const t = v.getTime();
    if (Number.isNaN(t)) throw new TypeError('Cannot encode an invalid Date in a cursor');
    return { $date: v.toISOString() };
  }
  if (Array.isArray(v)) return v.map(encodeValue);
  if (typeof v === 'object') {
    const type = bsonType(v);
    // Duck-typed so ObjectIds from another copy of the bson package are recognised too.
    if (type === 'ObjectId') return { $oid: (v as { toHexString(): string }).toHexString() };
    if (type === 'Decimal128') return { $dec: String(v) };
    if (type === undefined) {
      const inner: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) inner[k] = encodeValue(x);
      return { $obj: inner };
    }
  }
  throw new TypeError(`Cannot encode a sort value of type ${typeof v} in a cursor`);
}

function decodeValue(v: unknown): unknown {
  if (v === null || typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number') return v;
  if (Array.isArray(v)) return v.map(decodeValue);
  if (!isRecord(v)) throw new TypeError('bad cursor value');
  const keys = Object.keys(v);
  if (keys.length !== 1) throw new TypeError('bad cursor value');
  const tag = keys[0]!;
  const x = v[tag];
  switch (tag) {
    case '$date': {
      if (typeof x !== 'string') break;
      const d = new Date(x);
      if (Number.isNaN(d.getTime())) break;
      return d;
    }
    case '$oid':
      if (typeof x !== 'string' || !/^[0-9a-f]{24}$/.test(x)) break;
      return new Types.ObjectId(x);
    case '$dec':
      if (typeof x !== 'string') break;
      return Types.Decimal128.fromString(x);
    case '$num':
      if (x !== 'NaN' && x !== 'Infinity' && x !== '-Infinity' && x !== '-0') break;
      return Number(x);
    case '$obj': {
      if (!isRecord(x)) break;
      const out: Record<string, unknown> = {};
      for (const [k, y] of Object.entries(x)) {
        if (k === '__proto__') throw new TypeError('bad cursor value');
        out[k] = decodeValue(y);
      }
      return out;
    }
  }
  throw new TypeError('bad cursor value');
}
