/**
 * Strong ETag of a document revision (its `version`), as every resource answers it in `ETag` and
 * expects it back in `If-Match`.
 * @example etagOf(3) // '"3"'
 */
export const etagOf = (version: unknown): string => `"${String(version)}"`;
