/**
 * Resource documents built at run time from `resourceTypes`: the list, get, create, update,
 * delete and restore fields of each resource are named there, and the selection is its fields.
 * These are the only untyped documents of the console; their shape comes from the server itself.
 */
import { request, run } from './api.ts';
import { ResourceTypes, type ResourceType } from './graphql.ts';

export type Doc = Record<string, unknown> & { _id: string; etag: string; is_deleted?: boolean | null };

let cache: Promise<ResourceType[]> | null = null;
export const resourceTypes = (): Promise<ResourceType[]> => (cache ??= run(ResourceTypes).then((r) => r.resourceTypes, (e: unknown) => { cache = null; throw e; }));
export const forgetResourceTypes = () => { cache = null; };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const field = (name: string | null | undefined): string => {
  if (!name || !NAME.test(name)) throw new Error(`Not a GraphQL name: ${String(name)}`);
  return name;
};
const selection = (t: ResourceType) => ['_id', 'etag', 'created_at', 'updated_at', 'is_deleted', 'deleted_at', ...t.fields.map((f) => field(f.name))].join(' ');

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

export async function getDoc(t: ResourceType, id: string): Promise<Doc | null> {
  const q = `query Get($id: ID!) { r: ${field(t.operations.get)}(id: $id, include_deleted: true) { ${selection(t)} } }`;
  return ((await request(q, { id })) as { r: Doc | null }).r;
}

export async function createDoc(t: ResourceType, input: Record<string, unknown>): Promise<Doc> {
  const q = `mutation Create($input: JSON!) { r: ${field(t.operations.create)}(input: $input) { ${selection(t)} } }`;
  return ((await request(q, { input })) as { r: Doc }).r;
}

export async function updateDoc(t: ResourceType, id: string, etag: string, input: Record<string, unknown>): Promise<Doc> {
  const q = `mutation Update($id: ID!, $if_match: String, $input: JSON!) { r: ${field(t.operations.update)}(id: $id, if_match: $if_match, input: $input) { ${selection(t)} } }`;
  return ((await request(q, { id, if_match: etag, input })) as { r: Doc }).r;
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
