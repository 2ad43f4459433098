import { BadRequestError, EtagRequiredError } from '../core/errors.ts';

/**
 * Strong ETag of a document revision (its `version`), as every resource answers it in `ETag` and
 * expects it back in `If-Match`.
 * @example etagOf(3) // '"3"'
 */
export const etagOf = (version: unknown): string => `"${String(version)}"`;

/** One entity tag: optional `W/`, then an opaque value in double quotes (no spaces, quotes or control characters inside). */
const ENTITY_TAG = /^(?:W\/)?"[\x21\x23-\x7e\x80-\uffff]*"$/;

/**
 * Parses `If-Match`: `*`, or one or more comma-separated entity tags (weak tags compare by their
 * opaque value, so `W/"1"` matches `"1"`). `*` is returned as is and matches no revision.
 * @throws EtagRequiredError when absent (428)
 * @throws BadRequestError when it is not that syntax, e.g. `1` without its quotes (400): a format
 *   mistake, not a stale revision
 */
export function parseIfMatch(header: string | undefined | null): string[] {
  if (!header?.trim()) throw new EtagRequiredError();
  // Empty list elements (`"1", `) are allowed by the list syntax and skipped.
  const tags = header.split(',').map((t) => t.trim()).filter(Boolean);
  if (tags.length === 1 && tags[0] === '*') return tags;
  if (!tags.length || !tags.every((t) => ENTITY_TAG.test(t))) {
    throw new BadRequestError('If-Match must be a quoted entity tag such as "1" (with the double quotes), as returned in ETag', {
      header: 'If-Match',
      errors: [{ loc: ['headers', 'If-Match'], msg: 'expected one or more entity tags such as "1" or W/"1", or *', type: 'invalid_format' }],
    });
  }
  return tags.map((t) => t.replace(/^W\//, ''));
}
