import { z } from 'zod';

/* The limits and the resource view the list-query modules share (query.ts, filters.ts, where.ts). */

const limit = (min: 0 | 1) => (min ? z.number().int().positive() : z.number().int().nonnegative());

/** Abuse limits for list queries. Every value is a hard ceiling; exceeding one is a 400 (`limit` above `maxLimit`: 422, a page size). */
export const queryLimitsSchema = z.object({
  /** Maximum JSON nesting depth of `where`; the top-level object is depth 1 and every object or array adds one. */
  maxWhereDepth: limit(1),
  /** Maximum length of `where` in characters of JSON. */
  maxWhereBytes: limit(1),
  /** Maximum number of object keys plus array items in `where`, counted over all levels. */
  maxWhereNodes: limit(1),
  /** Maximum length of a `$regex` / `__regex` pattern. */
  maxRegexLength: limit(1),
  /** Ceiling of `limit` in cursor mode (400 above it). */
  maxLimit: limit(1),
  /** `limit` used in cursor mode when the client sends none. */
  defaultLimit: limit(1),
  /** Maximum number of relation fields in `populate`. */
  maxPopulate: limit(0),
  /** Maximum number of items of an `in` / `nin` / `$all` list (and of each tag filter). */
  maxInItems: limit(1),
  /** Maximum length of `q`. */
  maxQLength: limit(1),
});
export type QueryLimits = z.infer<typeof queryLimitsSchema>;

export const DEFAULT_QUERY_LIMITS: QueryLimits = Object.freeze({
  maxWhereDepth: 6,
  maxWhereBytes: 8192,
  maxWhereNodes: 200,
  maxRegexLength: 256,
  maxLimit: 100,
  defaultLimit: 25,
  maxPopulate: 5,
  maxInItems: 200,
  maxQLength: 256,
});

/** What the query parser needs to know about a resource. */
export interface ResourceQueryInfo {
  name: string;
  /**
   * true when a client may filter/sort/project on this dotted path (exposed scalar/array/object
   * field, `_id`, base fields like created_at). Private fields and paths that traverse a relation
   * (e.g. `project_id.secret`) return false.
   */
  isFilterable(path: string): boolean;
  /**
   * true when the path may be sorted on (optional; defaults to `isFilterable`). Arrays and free-form
   * objects must return false: keyset cursors compare single values, and an array's sort key
   * differs by direction, so cursor pages would skip rows.
   */
  isSortable?(path: string): boolean;
  /** Fields searched by `q`; empty disables search (400 on `q`). */
  searchableFields: string[];
  /** Sort expression used when `sort` is absent, e.g. `-created_at`. */
  defaultSort: string;
  /** `per_page` when absent (typically 25). */
  defaultPageSize: number;
  /** Ceiling of `per_page` (typically 100); above it is a 422. */
  maxPageSize: number;
  /** The model has a `tags` array field, enabling `tags__in`, `tags__all`, `tags__nin`. */
  hasTags: boolean;
  /** Relation fields allowed in `populate`. */
  populatable: string[];
}
