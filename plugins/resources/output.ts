/**
 * Zod schemas of what a resource's REST endpoints answer, built from its field list: the document,
 * the offset and cursor pages of a list, and the bulk results. They document the responses in
 * OpenAPI (named components `<GraphQLName>`, `<GraphQLName>Page`, ...), so a generated client gets
 * one type per resource.
 */
import { z } from 'zod';
import { pageSchema } from '../../lib/page.ts';
import { BASE_FIELDS, type FieldInfo, type FieldKind } from './fields.ts';
import type { ResourceDefinition } from './define.ts';

/** A relation: its id, or with `populate` the referenced document (null when it is deleted or out of reach). */
const related = z.union([z.string(), z.record(z.string(), z.unknown())]).nullable();

function scalar(kind: Exclude<FieldKind, 'array'>, f: Pick<FieldInfo, 'enum' | 'ref'>): z.ZodType {
  if (f.enum?.length && f.enum.every((v) => typeof v === 'string')) return z.enum(f.enum as [string, ...string[]]);
  switch (kind) {
    case 'string': return z.string();
    case 'number': return z.number();
    case 'integer': return z.number().int();
    case 'boolean': return z.boolean();
    // JSON carries dates as ISO strings (the converter documents z.date() as a date-time string).
    case 'date': return z.date();
    case 'objectId': return f.ref ? related : z.string();
    default: return z.unknown();
  }
}

/** A field's output type; a field that is not required may hold null (a cleared value). */
function fieldSchema(f: FieldInfo): z.ZodType {
  const t = f.kind === 'array' ? z.array(scalar(f.items ?? 'mixed', f)) : scalar(f.kind, f);
  return f.required || f.kind === 'array' ? t : t.nullable();
}

/** Nested paths (`address.city`) become nested objects. */
type Tree = { [key: string]: Tree | z.ZodType };
const isSchema = (x: Tree | z.ZodType): x is z.ZodType => x instanceof z.ZodType;

function toObject(tree: Tree, present: ReadonlySet<string> = new Set()): z.ZodObject {
  const shape: Record<string, z.ZodType> = {};
  for (const [k, v] of Object.entries(tree)) {
    const t = isSchema(v) ? v : toObject(v);
    shape[k] = isSchema(v) && present.has(k) ? t : t.optional();
  }
  return z.object(shape);
}

/**
 * The document of a resource as GET answers it: `_id`, its public fields and the base fields.
 * `_id`, the base fields and the resource's required (top-level) fields are marked required: every
 * full document has them, so a generated client types them without `undefined`. A `fields`
 * projection answers a subset (docs/openapi.md); the schema describes the full document. A field
 * the resource's code read rules may leave out (see {@link maskableFields}) is not required.
 */
export function documentSchema(def: Pick<ResourceDefinition, 'fields' | 'graphqlName'> & { access?: ResourceDefinition['access']; drafts?: boolean }): z.ZodType {
  const tree: Tree = {};
  for (const f of def.fields) {
    if (f.private) continue;
    const parts = f.path.split('.');
    let node = tree;
    for (const p of parts.slice(0, -1)) node = (node[p] && !isSchema(node[p]) ? node[p] : (node[p] = {})) as Tree;
    node[parts.at(-1)!] = fieldSchema(f);
  }
  const base: Record<string, z.ZodType> = {};
  for (const [k, v] of Object.entries(BASE_FIELDS)) {
    const nullable = 'default' in v.schema && v.schema.default === null;
    const t = scalar(v.kind, {});
    base[k] = nullable ? t.nullable() : t;
  }
  const maskable = maskableFields(def);
  const client = toObject(tree, new Set(def.fields.filter((f) => f.required && !f.private && !f.path.includes('.') && !maskable.has(f.path)).map((f) => f.path)));
  return z
    .object({
      _id: z.string().describe('24-character hex object id'), ...client.shape, ...base,
      ...(def.drafts ? { _status: z.enum(['draft', 'published']).optional().describe('draft: not published, or its pending draft shown (`?draft=true`); absent from versions and events') } : {}),
    })
    .meta({ id: def.graphqlName });
}

/**
 * Top-level fields a code read rule of the resource may leave out of a document: those outside a
 * rule's `fields` list, those in its `except`, and every field when a rule is a function of the
 * actor (its answer is known only per request). Stored roles are not known here (docs/access.md).
 */
export function maskableFields(def: Pick<ResourceDefinition, 'fields'> & { access?: ResourceDefinition['access'] }): Set<string> {
  const all = def.fields.filter((f) => !f.path.includes('.')).map((f) => f.path);
  const out = new Set<string>();
  for (const rules of Object.values(def.access ?? {})) {
    const read = rules.read;
    if (typeof read === 'function') return new Set(all);
    const fields = read && typeof read === 'object' ? (read as { fields?: unknown }).fields : undefined;
    if (Array.isArray(fields)) for (const f of all) if (!fields.includes(f)) out.add(f);
    if (fields && typeof fields === 'object' && Array.isArray((fields as { except?: unknown }).except)) for (const f of (fields as { except: string[] }).except) out.add(f);
  }
  return out;
}

const built = new WeakMap<object, ReturnType<typeof buildResponseSchemas>>();

/** Schemas of every REST answer of a resource, named after its GraphQL type (built once per definition). */
export function responseSchemas(def: Pick<ResourceDefinition, 'fields' | 'graphqlName' | 'access'>): ReturnType<typeof buildResponseSchemas> {
  let out = built.get(def);
  if (!out) built.set(def, (out = buildResponseSchemas(def)));
  return out;
}

function buildResponseSchemas(def: Pick<ResourceDefinition, 'fields' | 'graphqlName' | 'access'>) {
  const doc = documentSchema(def);
  const name = def.graphqlName;
  const itemError = z.object({
    index: z.number().int(),
    id: z.string().optional(),
    error: z.object({ status: z.number().int(), code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()) }),
  });
  // Told apart by `mode`: always "offset" in an offset page. A cursor page's body is exactly `items`
  // and `cursors`; its schema still declares an optional `mode: "cursor"` (never sent), so that a
  // generated client's `page.mode === 'offset'` narrows to one type or the other. An absent or
  // null-only property would not do: openapi-fetch drops such keys from response types.
  // docs/decisions/0050-list-page-discriminator.md
  const cursorPage = z
    .object({
      items: z.array(doc),
      cursors: z.object({ next: z.string().nullable(), prev: z.string().nullable(), has_next: z.boolean(), has_prev: z.boolean() }),
      mode: z.literal('cursor').optional().describe('Not sent: a cursor page is `items` and `cursors`. Declared so that `mode === "offset"` tells the pages apart.'),
    })
    .meta({ id: `${name}CursorPage`, description: 'Cursor mode (`cursor`, or `limit` without `page`, given).' });
  const offsetPage = pageSchema(doc).extend({ mode: z.literal('offset').describe('Always `"offset"`: tells an offset page from a cursor page.') });
  return {
    document: doc,
    list: z.union([offsetPage.meta({ id: `${name}Page`, description: 'Offset mode (the default).' }), cursorPage]),
    bulkCreate: z.object({ items: z.array(doc), errors: z.array(itemError), created_count: z.number().int(), error_count: z.number().int() }),
    bulkDelete: z.object({ deleted: z.array(z.string()), errors: z.array(itemError), deleted_count: z.number().int(), error_count: z.number().int() }),
  };
}

const KINDS = ['string', 'number', 'integer', 'boolean', 'date', 'objectId', 'mixed', 'array'] as const;

/** `GET /admin/schema`: every registered resource and its settings. */
export const adminSchemaResponse = z.object({
  resources: z.array(
    z.object({
      name: z.string(),
      path: z.string(),
      tenant_scoped: z.boolean(),
      fields: z.array(
        z.object({
          name: z.string(), type: z.enum(KINDS), items: z.enum(KINDS).optional(), required: z.boolean(),
          enum: z.array(z.unknown()).optional(), min: z.number().optional(), max: z.number().optional(), ref: z.string().optional(),
          file: z.object({ accept: z.array(z.string()).optional(), max_bytes: z.number().optional(), variants: z.record(z.string(), z.record(z.string(), z.unknown())).optional() })
            .optional().describe('For a `file` field: the accepted types, the largest size and the declared image variants'),
        }),
      ),
      searchable_fields: z.array(z.string()),
      default_sort: z.string(),
      default_page_size: z.number().int(),
      max_page_size: z.number().int(),
      allow_bulk_create: z.boolean(),
      allow_bulk_delete: z.boolean(),
      max_bulk_size: z.number().int(),
      populatable: z.array(z.string()),
      guards: z.object({ features: z.array(z.string()), attributes: z.array(z.record(z.string(), z.unknown())) }),
      cascade: z.array(z.object({ field: z.string(), references: z.string(), on_delete: z.enum(['deny', 'cascade', 'set_null']) })),
      referenced_by: z.array(z.object({ resource: z.string(), field: z.string(), on_delete: z.enum(['deny', 'cascade', 'set_null']) })),
      gdpr_fields: z.array(z.string()),
      subject_field: z.string(),
    }),
  ),
});
