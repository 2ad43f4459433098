/** Output shapes of the audit log's export and list: CSV rows, a streamed JSON array, sort and write-error helpers. */
import { Types } from 'mongoose';
import { CSV_COLUMNS, entryView, type AuditEntryRecord } from './model.ts';

/** One CSV record: the flat columns of the API shape, dates as ISO 8601. */
export const csvRow = (e: AuditEntryRecord) => {
  const v = entryView(e);
  return Object.fromEntries(CSV_COLUMNS.map((c) => [c, v[c] instanceof Date ? v[c].toISOString() : v[c]]));
};

export async function* jsonArray(entries: AsyncIterable<AuditEntryRecord>): AsyncGenerator<string> {
  yield '[';
  let sep = '';
  for await (const e of entries) {
    yield sep + JSON.stringify(entryView(e));
    sep = ',';
  }
  yield ']';
}

export async function* mapped<T, U>(items: AsyncIterable<T>, fn: (x: T) => U): AsyncGenerator<U> {
  for await (const x of items) yield fn(x);
}


export function sortOf(sort: string): Record<string, 1 | -1> {
  const dir = sort.startsWith('-') ? -1 : 1;
  return { [dir === -1 ? sort.slice(1) : sort]: dir, _id: dir };
}

export function onlyDuplicateIds(err: unknown): boolean {
  const e = err as { code?: unknown; writeErrors?: { code?: unknown }[] };
  const errors = e.writeErrors ?? [e];
  return errors.length > 0 && errors.every((w) => w.code === 11000);
}

/** An object id from its string form; a malformed one is a programming error of the caller. */
export const oid = (v: string | Types.ObjectId, what: string): Types.ObjectId => {
  if (typeof v !== 'string') return v;
  if (!/^[0-9a-fA-F]{24}$/.test(v)) throw new TypeError(`audit: ${what} must be an object id, got ${JSON.stringify(v)}`);
  return new Types.ObjectId(v);
};
