/**
 * Resource documents built at run time from `resourceTypes`: the list, get, create, update,
 * delete and restore fields of each resource are named there, and the selection is its fields.
 * These are the only untyped documents of the console; their shape comes from the server itself.
 */
import { request, run } from './api.ts';
import { ResourceTypes, type ResourceType } from './graphql.ts';

export type Doc = Record<string, unknown> & { _id: string; etag: string; is_deleted?: boolean | null; _actions?: string[] };

let cache: Promise<ResourceType[]> | null = null;
export const resourceTypes = (): Promise<ResourceType[]> => (cache ??= run(ResourceTypes).then((r) => r.resourceTypes, (e: unknown) => { cache = null; throw e; }));
export const forgetResourceTypes = () => { cache = null; };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const field = (name: string | null | undefined): string => {
  if (!name || !NAME.test(name)) throw new Error(`Not a GraphQL name: ${String(name)}`);
  return name;
};
/**
 * A reference not named `…_id` (a file field such as `attachment`) is, in GraphQL, the referenced
 * document itself: its relation takes the field's own name. The console selects its id.
 */
const isRelation = (f: ResourceType['fields'][number]) => f.kind === 'objectId' && !!f.ref && !f.name.endsWith('_id');
const selection = (t: ResourceType) => ['_id', 'etag', 'created_at', 'updated_at', 'is_deleted', 'deleted_at', ...(t.drafts ? ['_status'] : []), ...t.fields.map((f) => (isRelation(f) ? `${field(f.name)} { _id }` : field(f.name)))].join(' ');
/** `d` with each relation back to its id, as the forms send it and REST shows it. */
export function flat<D extends Doc | null | undefined>(t: ResourceType, d: D): D {
  if (!d) return d;
  for (const f of t.fields.filter(isRelation)) {
    const v = d[f.name];
    d[f.name] = v && typeof v === 'object' ? (v as { _id: string })._id : (v ?? null);
  }
  return d;
}

export interface ListArgs {
  filter?: Record<string, unknown>;
  q?: string;
  tags_all?: string[];
  sort?: string;
  cursor?: string;
  direction?: 'next' | 'prev';
  limit: number;
  include_deleted?: boolean;
}
export interface ListResult {
  items: Doc[];
  cursors: { next: string | null; prev: string | null; has_next: boolean; has_prev: boolean } | null;
}

export async function listDocs(t: ResourceType, a: ListArgs): Promise<ListResult> {
  const q = `query List($filter: JSON, $q: String, $tags_all: [String!], $sort: String, $cursor: String, $direction: String, $limit: Int, $include_deleted: Boolean) {
    r: ${field(t.operations.list)}(filter: $filter, q: $q, tags_all: $tags_all, sort: $sort, cursor: $cursor, direction: $direction, limit: $limit, include_deleted: $include_deleted) {
      items { ${selection(t)} } cursors { next prev has_next has_prev } } }`;
  const data = (await request(q, { ...a, cursor: a.cursor ?? '' })) as { r: ListResult };
  data.r.items.forEach((d) => flat(t, d));
  return data.r;
}

/** Totals per resource in one request (offset mode, one item each). */
export async function countDocs(types: ResourceType[]): Promise<Record<string, number | null>> {
  const listed = types.filter((t) => t.accessible && t.operations.list);
  if (!listed.length) return {};
  const q = `query Counts { ${listed.map((t, i) => `c${i}: ${field(t.operations.list)}(per_page: 1, fields: ["_id"]) { total }`).join(' ')} }`;
  const data = (await request(q)) as Record<string, { total: number | null }>;
  return Object.fromEntries(listed.map((t, i) => [t.name, data[`c${i}`]?.total ?? null]));
}

/**
 * One document; of a resource with drafts, its pending draft where the caller may read it. A
 * deleted one only with `includeDeleted` (administrators: the server refuses it to anyone else).
 * With `_actions`: what the caller may do to it (update, delete, publish, unpublish,
 * restore_version), as the server decides those calls.
 */
export async function getDoc(t: ResourceType, id: string, includeDeleted: boolean): Promise<Doc | null> {
  const q = `query Get($id: ID!) { r: ${field(t.operations.get)}(id: $id${includeDeleted ? ', include_deleted: true' : ''}${t.drafts ? ', draft: true' : ''}) { ${selection(t)} _actions } }`;
  return flat(t, ((await request(q, { id })) as { r: Doc | null }).r);
}

/** `draft`: save a draft instead of publishing (resources with drafts). */
export async function createDoc(t: ResourceType, input: Record<string, unknown>, draft = false): Promise<Doc> {
  const q = `mutation Create($input: JSON!) { r: ${field(t.operations.create)}(input: $input${draft ? ', draft: true' : ''}) { ${selection(t)} } }`;
  return flat(t, ((await request(q, { input })) as { r: Doc }).r);
}

export async function updateDoc(t: ResourceType, id: string, etag: string, input: Record<string, unknown>, draft = false): Promise<Doc> {
  const q = `mutation Update($id: ID!, $if_match: String, $input: JSON!) { r: ${field(t.operations.update)}(id: $id, if_match: $if_match, input: $input${draft ? ', draft: true' : ''}) { ${selection(t)} } }`;
  return flat(t, ((await request(q, { id, if_match: etag, input })) as { r: Doc }).r);
}

/** Publish the pending draft, or withdraw the document (`unpublish`), at the revision shown. */
export async function publishDoc(t: ResourceType, id: string, etag: string, op: 'publish' | 'unpublish'): Promise<void> {
  await request(`mutation Publish($id: ID!, $if_match: String) { r: ${field(t.operations[op])}(id: $id, if_match: $if_match) { _id } }`, { id, if_match: etag });
}

export async function deleteDoc(t: ResourceType, id: string, etag?: string): Promise<void> {
  await request(`mutation Delete($id: ID!, $if_match: String) { r: ${field(t.operations.delete)}(id: $id, if_match: $if_match) { _id } }`, { id, if_match: etag ?? null });
}

export async function restoreDoc(t: ResourceType, id: string, etag?: string): Promise<void> {
  await request(`mutation Restore($id: ID!, $if_match: String) { r: ${field(t.operations.restore)}(id: $id, if_match: $if_match) { _id } }`, { id, if_match: etag ?? null });
}

/** Bulk delete: one request, one aliased delete per document (the server caps mutation fields per request). */
export async function deleteMany(t: ResourceType, docs: { _id: string; etag: string }[]): Promise<void> {
  const vars = Object.fromEntries(docs.flatMap((d, i) => [[`id${i}`, d._id], [`m${i}`, d.etag]]));
  const q = `mutation Bulk(${docs.map((_, i) => `$id${i}: ID!, $m${i}: String`).join(', ')}) { ${docs.map((_, i) => `d${i}: ${field(t.operations.delete)}(id: $id${i}, if_match: $m${i}) { _id }`).join(' ')} }`;
  await request(q, vars);
}

/** One entry of a document's history (without the document). */
export interface VersionEntry {
  version: number;
  operation: string;
  created_at: string;
  actor: string | null;
  changed_fields: string[];
  restored_from: number | null;
}
export interface VersionPage { items: VersionEntry[]; next_before: number | null }
export interface VersionChange { field: string; before: unknown; after: unknown }

const ENTRY = 'version operation created_at actor changed_fields restored_from';

/** A page of a document's history, newest first: versions numbered below `before`. */
export async function listVersions(t: ResourceType, id: string, before?: number, limit = 10): Promise<VersionPage> {
  const q = `query Versions($id: ID!, $limit: Int, $before: Int) { r: ${field(t.operations.get)}(id: $id) { versions(limit: $limit, before: $before) { items { ${ENTRY} } next_before } } }`;
  const r = ((await request(q, { id, limit, before: before ?? null })) as { r: { versions: VersionPage } | null }).r;
  return r?.versions ?? { items: [], next_before: null };
}

/** Version `n` of a document: the entry and the document as it was. */
export async function versionAt(t: ResourceType, id: string, n: number): Promise<(VersionEntry & { document: Doc }) | null> {
  const q = `query VersionAt($id: ID!, $n: Int!) { r: ${field(t.operations.get)}(id: $id) { versionAt(n: $n) { ${ENTRY} document { ${selection(t)} } } } }`;
  const v = ((await request(q, { id, n })) as { r: { versionAt: (VersionEntry & { document: Doc }) | null } | null }).r?.versionAt ?? null;
  if (v) flat(t, v.document);
  return v;
}

/** What changed from version `against` (default: the one before) to version `n`, field by field. */
export async function versionDiff(t: ResourceType, id: string, n: number, against?: number): Promise<{ version: number; against: number | null; changes: VersionChange[] }> {
  const q = `query VersionDiff($id: ID!, $n: Int!, $against: Int) { r: ${field(t.operations.get)}(id: $id) { versionDiff(n: $n, against: $against) { version against changes { field before after } } } }`;
  const r = ((await request(q, { id, n, against: against ?? null })) as { r: { versionDiff: { version: number; against: number | null; changes: VersionChange[] } | null } | null }).r;
  return r?.versionDiff ?? { version: n, against: against ?? null, changes: [] };
}

/** Writes version `n` back as a new version, if the document is still at `etag`. */
export async function restoreVersion(t: ResourceType, id: string, n: number, etag: string): Promise<Doc> {
  const q = `mutation RestoreVersion($id: ID!, $n: Int!, $if_match: String) { r: ${field(t.operations.restore_version)}(id: $id, n: $n, if_match: $if_match) { ${selection(t)} } }`;
  return flat(t, ((await request(q, { id, n, if_match: etag })) as { r: Doc }).r);
}
