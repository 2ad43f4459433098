/**
 * Where a resource applies the caller's access rules (the `access` service, docs/access.md): the
 * rows filter goes into the query after the tenant scope and soft delete, the names a list query
 * uses must be readable, documents are masked, and a write must be allowed by one grant. Without
 * the access plugin, or without rules for the caller, nothing changes. No Koa or GraphQL here.
 */
import { AccessDeniedError } from '../../core/errors.ts';
import type { Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { Filter } from '../../core/access.ts';
import type { ReadAccess, WriteAccess } from '../access/index.ts';
import { BASE_FIELDS, isSystemField } from './fields.ts';
import type { ParsedListQuery, QueryLimits } from './query.ts';
import { validateWhere } from './where.ts';
import type { ResourceCore } from './service-types.ts';

export type { ReadAccess, WriteAccess };

/** What the access plugin knows of a resource: its code rules, the fields always and ever readable, and its `where` compiler. */
export function accessFactsOf(svc: ResourceCore, limits: QueryLimits) {
  return {
    // With drafts, a document's state is readable wherever the document is, as the base fields are.
    name: svc.def.name, code: svc.def.access, system: ['_id', ...Object.keys(BASE_FIELDS), ...(svc.def.drafts ? ['_published', '_status'] : [])],
    fields: svc.def.fields.filter((f) => !f.private && !f.path.includes('.')).map((f) => f.path),
    compile: (where: unknown) => validateWhere(where, svc.queryInfo, limits),
  };
}

/** The caller's read restriction, or null. @throws AccessDeniedError when no role may read */
export function readAccess(svc: ResourceCore, actor: Actor): Promise<ReadAccess | null> | null {
  const access = svc.deps.access?.();
  return access ? access.read(actor, svc.def.name) : null;
}

/** The caller's write restriction, or null. @throws AccessDeniedError when no role may do it */
export function writeAccess(svc: ResourceCore, actor: Actor, action: 'create' | 'update' | 'delete'): Promise<WriteAccess | null> | null {
  const access = svc.deps.access?.();
  return access ? access.write(actor, svc.def.name, action) : null;
}

const castCache = new WeakMap<ResourceCore, Map<string, Filter>>();
/** The same, by the rows object: the access service hands out the same rows while the caller's roles stay the same. */
const castByRows = new WeakMap<Filter, Filter>();
const CAST_CACHE_MAX = 1000;

/** Plain objects and arrays copied, values kept: what mongoose's cast, which replaces values in place, may write to. */
const copyFilter = (v: unknown): unknown =>
  Array.isArray(v) ? v.map(copyFilter)
  : v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, copyFilter(x)]))
  : v;

/**
 * A rule's rows cast to the resource's field types (mongoose's cast, which costs more than a read by
 * id). The rows of one role with one caller's variables are the same on every request, so each is
 * cast once per process, on a copy (the rows are shared with the caller's other requests); the cache
 * is emptied when it reaches {@link CAST_CACHE_MAX} entries. Regular expressions are keyed by their
 * source and flags (JSON would make every one `{}`).
 */
export function castRows(svc: ResourceCore, rows: Filter): Filter {
  const same = castByRows.get(rows);
  if (same) return same;
  let cache = castCache.get(svc);
  if (!cache) castCache.set(svc, (cache = new Map()));
  const key = JSON.stringify(rows, (_k, v: unknown) => (v instanceof RegExp ? `\u0000re:${String(v)}` : v));
  let cast = cache.get(key);
  if (!cast) {
    cast = svc.model.where({}).cast(svc.model, copyFilter(rows) as Filter) as Filter;
    if (cache.size >= CAST_CACHE_MAX) cache.clear();
    cache.set(key, cast);
  }
  castByRows.set(rows, cast);
  return cast;
}

/** `scope` with the rows a rule allows AND-ed to it (the scope's own terms are never replaced). */
export function withRows(scope: Filter, rows: Filter | null | undefined): Filter {
  if (!rows) return scope;
  return { ...scope, $and: [...((scope.$and as Filter[] | undefined) ?? []), rows] };
}

/**
 * A read's filter: `scope` with the rule's rows beside its terms when none of their names is one of
 * the scope's (the same conjunction; the database answers a flat filter faster than one with
 * `$and`), else AND-ed as {@link withRows} does. Not for a write's scope: `checkWritable` reads
 * every term of that as a constraint on the written values.
 */
export function readFilter(scope: Filter, rows: Filter | null | undefined): Filter {
  if (!rows) return scope;
  for (const k of Object.keys(rows)) if (k in scope) return withRows(scope, rows);
  return { ...scope, ...rows };
}

/** Every field path a filter names (inside `$and` / `$or` / `$nor` and filter-style `$elemMatch` too). */
function pathsOf(filter: Filter, prefix = '', out: string[] = []): string[] {
  for (const [k, v] of Object.entries(filter)) {
    if (k === '$and' || k === '$or' || k === '$nor') for (const f of v as Filter[]) pathsOf(f, prefix, out);
    else if (!k.startsWith('$')) {
      out.push(prefix + k);
      const em = v && typeof v === 'object' ? (v as { $elemMatch?: Filter }).$elemMatch : undefined;
      if (em && Object.keys(em).some((x) => !x.startsWith('$'))) pathsOf(em, `${prefix}${k}.`, out);
    }
  }
  return out;
}

const root = (p: string) => p.split('.')[0]!;

/**
 * A list query may filter, sort and search only by fields readable in every row the caller may read
 * (else a value could be guessed from which rows come back), and project only readable fields.
 * @throws AccessDeniedError (403, `details.field`) naming the first field that is not
 */
export function checkListQuery(ra: ReadAccess, q: Pick<ParsedListQuery, 'filter' | 'sort' | 'fields'>): void {
  const readable = (set: ReadonlySet<string> | null, p: string) => isSystemField(p) || !set || set.has(root(p));
  for (const p of pathsOf(q.filter)) if (!readable(ra.queryable, p)) throw refused(p, 'filter');
  for (const [p] of q.sort) if (!readable(ra.queryable, p)) throw refused(p, 'sort');
  for (const p of q.fields ?? []) if (!readable(ra.readable, p)) throw refused(p, 'fields');
}

const refused = (field: string, param: string) => new AccessDeniedError(`You may not read field '${field}'`, { field, param });

/**
 * The projection of a masked read: the requested fields plus those the mask reads to decide per row
 * (removed again by {@link trimMask}).
 */
export function maskProjection(ra: ReadAccess | null, fields: string[] | null): string[] | null {
  if (!ra || !fields || !ra.maskNeeds.size) return fields;
  return [...new Set([...fields, ...ra.maskNeeds])];
}

/** Each document masked, then cut to the requested `fields` (when the mask needed more). */
export function applyMask(ra: ReadAccess | null, docs: Doc[], fields: string[] | null): Doc[] {
  if (!ra) return docs;
  const keep = fields && ra.maskNeeds.size ? new Set(fields) : null;
  return docs.map((d) => {
    const m = ra.mask(d);
    return keep ? Object.fromEntries(Object.entries(m).filter(([k]) => keep.has(k) || k === '_id')) : m;
  });
}

/**
 * `_id` and the base fields of a document, nothing else: what a caller learns of a row it wrote but
 * may not read, and a drafts resource's event object while nothing is published.
 */
export const baseOnly = (doc: Doc): Doc => Object.fromEntries(Object.entries(doc).filter(([k]) => k === '_id' || isSystemField(k)));

/**
 * A write's answer as the caller may read it: masked by its read rules; a row outside them (or
 * with no read rule at all) keeps only `_id` and the base fields.
 */
export async function maskWritten(svc: ResourceCore, actor: Actor, doc: Doc): Promise<Doc> {
  const pending = readAccess(svc, actor);
  if (!pending) return doc;
  let ra: ReadAccess | null;
  try {
    ra = await pending;
  } catch (err) {
    if (err instanceof AccessDeniedError) return baseOnly(doc);
    throw err;
  }
  if (!ra) return doc;
  return ra.sees(doc) ? ra.mask(doc) : baseOnly(doc);
}

/** The client fields a write changes: a PATCH those it names; a PUT also those it clears. */
export function writtenFields(svc: ResourceCore, old: Doc, input: Doc, replace: boolean): string[] {
  const named = Object.keys(input);
  if (!replace) return named;
  return [...new Set([...named, ...svc.clientPaths.filter((p) => old[p] !== undefined && old[p] !== null && !(p in input))])];
}

/** The document a PATCH or PUT produces (what a rule's `check` is evaluated on). */
export function updatedDoc(svc: ResourceCore, old: Doc, input: Doc, replace: boolean): Doc {
  if (!replace) return { ...old, ...input };
  const kept = Object.fromEntries(Object.entries(old).filter(([k]) => !svc.clientPaths.includes(k)));
  return { ...kept, ...input };
}
