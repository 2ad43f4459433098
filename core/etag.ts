import { EtagRequiredError } from './errors.ts';

/**
 * Strong ETag of a document revision (its `version`), as every resource answers it in `ETag` and
 * expects it back in `If-Match`.
 * @example etagOf(3) // '"3"'
 */
export const etagOf = (version: unknown): string => `"${String(version)}"`;

/**
 * Parses `If-Match` (one or more entity tags; weak tags compare by their opaque value).
 * @throws EtagRequiredError when absent (428)
 */
export function parseIfMatch(header: string | undefined | null): string[] {
  if (!header?.trim()) throw new EtagRequiredError();
  return header
    .split(',')
    .map((t) => t.trim().replace(/^W\//, ''))
    .filter(Boolean);
}

