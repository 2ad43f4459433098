/**
 * Erasure of a data subject from the stored answers of `Idempotency-Key` requests: the answers the
 * subject's own requests got are deleted, and in every other answer of their tenant a string equal
 * to one of their personal values becomes what the erased account now holds instead. See docs/privacy.md, "Stored answers".
 */
import type { ErasureSubject } from '../../core/plugin.ts';
import { bytesOf, type IdempotencyKeyModel } from './model.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Personal value (trimmed, lower case) → what replaces it. */
type Replacements = ReadonlyMap<string, string>;

/** `value` with every string equal (case-insensitively, trimmed) to a personal value replaced; `changed` counts them. */
function replaceIn(value: Json, values: Replacements, changed: { n: number }): Json {
  if (typeof value === 'string') {
    const replacement = values.get(value.trim().toLowerCase());
    if (replacement === undefined) return value;
    changed.n++;
    return replacement;
  }
  if (Array.isArray(value)) return value.map((v) => replaceIn(v, values, changed));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceIn(v, values, changed)]));
  return value;
}

/** A JSON body with the values replaced, or null when it holds none of them (or is not JSON: answers here are JSON). */
function scrubBody(bytes: Buffer | null, values: Replacements): Buffer | null {
  if (!bytes?.length) return null;
  let parsed: Json;
  try {
    parsed = JSON.parse(bytes.toString('utf8')) as Json;
  } catch {
    return null;
  }
  const changed = { n: 0 };
  const out = replaceIn(parsed, values, changed);
  return changed.n ? Buffer.from(JSON.stringify(out)) : null;
}

/**
 * Removes the subject's personal data from the stored answers (`idempotency_keys`). Records of
 * tenant `''` (system actors acting in every tenant) are searched with the subject's tenant.
 * Safe to run again: a second pass finds nothing left to change.
 * @returns the records deleted or changed
 */
export async function scrubStoredAnswers(model: IdempotencyKeyModel, subject: ErasureSubject): Promise<number> {
  const tenant = subject.tenant_id === null ? {} : { tenant_id: { $in: [subject.tenant_id, ''] } };
  // Their own requests: nobody can replay them (erasure disables the account and revokes its keys).
  const own = await model.collection.deleteMany({ ...tenant, actor_id: subject.user_id });
  let changed = own.deletedCount;
  const values: Replacements = new Map(subject.values.filter((v) => v.value.trim()).map((v) => [v.value.trim().toLowerCase(), v.replacement]));
  if (!values.size) return changed;
  const records = model.collection.find({ ...tenant, state: 'done' }, { projection: { body: 1, error: 1 }, batchSize: 200 });
  for await (const r of records) {
    const body = scrubBody(bytesOf(r.body), values);
    const count = { n: 0 };
    const error = r.error ? (replaceIn(r.error as Json, values, count) as object) : null;
    if (!body && !count.n) continue;
    await model.collection.updateOne({ _id: r._id, state: 'done' }, { $set: { ...(body ? { body } : {}), ...(count.n ? { error } : {}) } });
    changed++;
  }
  return changed;
}
