import { z } from 'zod';
import { Schema, type SchemaDefinition, type SchemaType } from 'mongoose';
import { objectId } from '../../core/http/schemas.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';

/** Scalar kinds a resource field can have; they drive validation, GraphQL types and `/admin/schema`. */
export type FieldKind = 'string' | 'number' | 'integer' | 'boolean' | 'date' | 'objectId' | 'mixed' | 'array';

export interface FieldInfo {
  path: string;
  kind: FieldKind;
  /** Element kind for arrays. */
  items?: Exclude<FieldKind, 'array'>;
  required: boolean;
  hasDefault: boolean;
  enum?: readonly unknown[];
  min?: number;
  max?: number;
  /** Name of the related resource for relation fields (`ref` in the mongoose schema). */
  ref?: string;
  /** Never returned, filterable, sortable or audited (`private: true` on the path). */
  private: boolean;
  /** For `type: 'file'`: what the referenced file must be. */
  file?: FileFieldRule;
}

/** A declared image variant of a file field, rendered when a file is attached. */
export interface FileVariantSpec {
  width?: number;
  height?: number;
  fit?: 'cover' | 'contain' | 'fill' | 'inside' | 'outside';
  format?: 'webp' | 'jpeg' | 'png' | 'avif';
}

/**
 * What a `file` field accepts: `{ type: 'file', accept: ['image/*'], max_bytes: 5_000_000,
 * variants: { thumb: { width: 200, height: 200, fit: 'cover', format: 'webp' } } }`. Its value is
 * the id of a ready file of the `files` resource in the document's tenant.
 */
export interface FileFieldRule {
  /** Content types (`image/*` matches a family); empty or absent: any. */
  accept?: string[];
  max_bytes?: number;
  variants?: Record<string, FileVariantSpec>;
}

/**
 * The schema type behind `type: 'file'`: an object id referencing the `files` resource (`ref`
 * defaults to it), carrying the field's `accept`, `max_bytes` and `variants` in its options.
 */
export class SchemaFile extends Schema.Types.ObjectId {
  static override schemaName = 'File' as 'ObjectId';
  constructor(path: string, options?: Record<string, unknown>, ...rest: unknown[]) {
    super(path, { ref: 'files', ...options } as never, ...(rest as []));
  }
}
// Mongoose looks up a `type: 'file'` string among its schema types; registered once, on import.
(Schema.Types as unknown as Record<string, unknown>).File = SchemaFile;

/**
 * Base document fields, defined once: the mongoose schema, the
 * filter/sort allow-list, the GraphQL object type and the system-field guard all read this table.
 * Our type decisions: `created_by`/`updated_by`/`deleted_by` are user object ids (null for
 * system writes), `deleted_at` a date, `version` an integer starting at 1 and incremented by every write.
 */
export const BASE_FIELDS = {
  tenant_id: { kind: 'objectId', schema: { type: Schema.Types.ObjectId, default: null } },
  created_at: { kind: 'date', schema: { type: Date } },
  updated_at: { kind: 'date', schema: { type: Date } },
  created_by: { kind: 'objectId', schema: { type: Schema.Types.ObjectId, default: null } },
  updated_by: { kind: 'objectId', schema: { type: Schema.Types.ObjectId, default: null } },
  is_deleted: { kind: 'boolean', schema: { type: Boolean, default: false } },
  deleted_at: { kind: 'date', schema: { type: Date, default: null } },
  deleted_by: { kind: 'objectId', schema: { type: Schema.Types.ObjectId, default: null } },
  version: { kind: 'integer', schema: { type: Number, default: 1 } },
} as const satisfies Record<string, { kind: FieldKind; schema: SchemaDefinition[string] }>;

/** Fields the server maintains: `_id` plus the base fields. Clients never write them (a body that tries gets 422). */
const SYSTEM_FIELDS: readonly string[] = Object.freeze(['_id', ...Object.keys(BASE_FIELDS)]);
/** True for a system field ({@link SYSTEM_FIELDS}); they are always filterable and sortable. */
export const isSystemField = (path: string): boolean => SYSTEM.has(path);
const SYSTEM = new Set<string>(SYSTEM_FIELDS);

const kindOf = (instance: string | undefined, options: Record<string, unknown>): Exclude<FieldKind, 'array'> => {
  switch (instance) {
    case 'String': return 'string';
    case 'Number': return options.integer ? 'integer' : 'number';
    case 'Boolean': return 'boolean';
    case 'Date': return 'date';
    case 'ObjectId': case 'ObjectID': return 'objectId';
    default: return 'mixed';
  }
};

/** Client-visible fields of a mongoose schema (system fields excluded), in declaration order. */
export function describeFields(schema: Schema): FieldInfo[] {
  const out: FieldInfo[] = [];
  schema.eachPath((path: string, type: SchemaType) => {
    // The outbox is the event log's, never a field of the resource (docs/events.md).
    if (SYSTEM.has(path) || path === '__v' || path === OUTBOX_FIELD || path.startsWith(`${OUTBOX_FIELD}.`)) return;
    const options = (type.options ?? {}) as Record<string, unknown>;
    const instance = (type as unknown as { instance?: string }).instance;
    const base = {
      path,
      required: options.required === true,
      hasDefault: options.default !== undefined,
      private: options.private === true,
      ...(typeof options.ref === 'string' ? { ref: options.ref } : {}),
    };
    if (instance === 'Array') {
      const inner = (type as unknown as { embeddedSchemaType?: { instance?: string; options?: Record<string, unknown> } }).embeddedSchemaType;
      const innerOpts = inner?.options ?? {};
      out.push({
        ...base,
        kind: 'array',
        items: kindOf(inner?.instance, innerOpts),
        ...(Array.isArray(innerOpts.enum) ? { enum: innerOpts.enum as unknown[] } : {}),
        ...(typeof innerOpts.ref === 'string' ? { ref: innerOpts.ref } : {}),
      });
      return;
    }
    if (type instanceof SchemaFile) {
      const file: FileFieldRule = {
        ...(Array.isArray(options.accept) ? { accept: options.accept as string[] } : {}),
        ...(typeof options.max_bytes === 'number' ? { max_bytes: options.max_bytes } : {}),
        ...(options.variants && typeof options.variants === 'object' ? { variants: options.variants as FileFieldRule['variants'] } : {}),
      };
      out.push({ ...base, kind: 'objectId', file });
      return;
    }
    const kind = kindOf(instance, options);
    const enumValues = Array.isArray(options.enum) ? (options.enum as unknown[]) : undefined;
    const min = typeof options.min === 'number' ? options.min : undefined;
    const max = typeof options.max === 'number' ? options.max : undefined;
    out.push({ ...base, kind, ...(enumValues ? { enum: enumValues } : {}), ...(min !== undefined ? { min } : {}), ...(max !== undefined ? { max } : {}) });
  });
  return out;
}

function scalarZod(kind: Exclude<FieldKind, 'array'>, f: Pick<FieldInfo, 'enum' | 'min' | 'max'>): z.ZodType {
  if (f.enum?.length && f.enum.every((v) => typeof v === 'string')) return z.enum(f.enum as [string, ...string[]]);
  switch (kind) {
    case 'string': return z.string();
    case 'number':
    case 'integer': {
      let n = kind === 'integer' ? z.number().int() : z.number();
      if (f.min !== undefined) n = n.min(f.min);
      if (f.max !== undefined) n = n.max(f.max);
      return n;
    }
    case 'boolean': return z.boolean();
    case 'date': return z.iso.datetime({ offset: true }).or(z.iso.date()).transform((s) => new Date(s));
    case 'objectId': return objectId;
    default: return z.unknown();
  }
}

/**
 * Zod input schemas derived from the mongoose schema, so a resource declares its fields once.
 * `create`/`replace` require what the schema requires; `update` makes everything optional. All are
 * strict: unknown and system fields are rejected with 422.
 */
export function inputSchemas(fields: readonly FieldInfo[]) {
  const shape: Record<string, z.ZodType> = {};
  const partial: Record<string, z.ZodType> = {};
  for (const f of fields) {
    if (f.private && f.path.includes('.')) continue;
    let t: z.ZodType = f.kind === 'array' ? z.array(scalarZod(f.items ?? 'mixed', f)) : scalarZod(f.kind, f);
    // Optional scalars may be cleared with null; arrays are cleared with [] (null would break tag filters).
    if (!f.required && f.kind !== 'array') t = t.nullable();
    partial[f.path] = t.optional();
    shape[f.path] = f.required && !f.hasDefault ? t : t.optional();
  }
  return {
    create: z.object(shape).strict(),
    replace: z.object(shape).strict(),
    update: z.object(partial).strict(),
  };
}
