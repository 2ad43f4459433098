import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';

/** Every value of `operation`. */
export const AUDIT_OPERATIONS = ['insert', 'update', 'replace', 'delete', 'depersonalize'] as const;
export type AuditOperation = (typeof AUDIT_OPERATIONS)[number];

const AUDIT_COLLECTION = 'audit_log';

/**
 * One audit entry; `tenant_id` is the tenant of the audited document.
 *
 * The single definition of the entry's shape: the TypeScript types below, the API view, its zod
 * response schema (OpenAPI), the GraphQL `AuditEntry` type and the CSV columns are all derived
 * from these paths (see {@link AUDIT_FIELDS}). The custom path option `csv: false` keeps a field
 * out of the CSV export (the CSV holds only the flat columns).
 */
export const auditEntrySchema = new Schema(
  {
    resource: { type: String, required: true },
    item_id: { type: Schema.Types.ObjectId, required: true },
    operation: { type: String, enum: AUDIT_OPERATIONS, required: true },
    user_id: { type: Schema.Types.ObjectId, default: null },
    user_name: { type: String, default: null },
    ip: { type: String, default: null },
    changes: { type: Schema.Types.Mixed, default: null, csv: false },
    snapshot: { type: Schema.Types.Mixed, default: null, csv: false },
    // Set when the change happens (its event's time), not when the entry reaches the database.
    created_at: { type: Date, required: true },
    tenant_id: { type: Schema.Types.ObjectId, default: null, csv: false },
  },
  { versionKey: false, minimize: false },
);
auditEntrySchema.index({ resource: 1, item_id: 1 });
auditEntrySchema.index({ user_id: 1 });
auditEntrySchema.index({ created_at: -1 });
// Every read by a tenant administrator filters on tenant and sorts or ranges on created_at.
auditEntrySchema.index({ tenant_id: 1, created_at: -1 });

/** An entry as written (every path; `_id` is assigned by the driver). */
export type AuditEntryDoc = InferSchemaType<typeof auditEntrySchema>;
/** An entry as read back with `.lean()`. */
export type AuditEntryRecord = AuditEntryDoc & { _id: Types.ObjectId };
export type AuditEntryModel = Model<AuditEntryDoc>;

/** A JSON object, as `changes` and `snapshot` hold. */
type JsonObject = Record<string, unknown>;
/** `changes`/`snapshot` (mongoose `Mixed`, inferred as `any`) hold a JSON object or null. */
type Stored<V> = 0 extends 1 & V ? JsonObject | null : V;
/** How a stored value appears in the API: object ids as strings. */
type ApiValue<V> = 0 extends 1 & V ? JsonObject | null : V extends Types.ObjectId ? string : V;

/** An entry ready to insert: every path present (null where empty). */
export type AuditEntryInput = { -readonly [K in keyof AuditEntryDoc]-?: Stored<Exclude<AuditEntryDoc[K], undefined>> };

/** An entry as the API returns it (REST, GraphQL, JSON export): `id` plus every stored path. */
export type AuditEntryView = { id: string } & { -readonly [K in keyof AuditEntryDoc]-?: ApiValue<Exclude<AuditEntryDoc[K], undefined>> };

/** Kind of an API field, from the mongoose path type. */
export type AuditFieldKind = 'id' | 'string' | 'date' | 'json';

/** One field of the API view of an entry. */
export interface AuditField {
  name: keyof AuditEntryView;
  kind: AuditFieldKind;
  nullable: boolean;
  /** Allowed values of an enum path. */
  values?: readonly string[];
  /** Whether the CSV export has the column. */
  csv: boolean;
}

const KINDS: Record<string, AuditFieldKind> = { ObjectId: 'id', String: 'string', Date: 'date', Mixed: 'json' };

/** The API fields of an entry, in order: `id`, then every schema path, derived from {@link auditEntrySchema}. */
export const AUDIT_FIELDS: readonly AuditField[] = [
  { name: 'id', kind: 'id', nullable: false, csv: true },
  ...Object.entries(auditEntrySchema.paths)
    .filter(([path]) => path !== '_id')
    .map(([path, type]): AuditField => {
      const kind = KINDS[type.instance];
      if (!kind) throw new Error(`audit: no API kind for path ${path} of type ${type.instance}`);
      const values = (type as { enumValues?: string[] }).enumValues;
      return {
        name: path as keyof AuditEntryView,
        kind,
        nullable: !type.isRequired,
        ...(values?.length ? { values } : {}),
        csv: (type.options as { csv?: boolean }).csv !== false,
      };
    }),
];

/** Flat columns of the CSV export, in order. */
export const CSV_COLUMNS: readonly (keyof AuditEntryView)[] = AUDIT_FIELDS.filter((f) => f.csv).map((f) => f.name);

/** The API shape of a stored entry. */
export function entryView(e: AuditEntryRecord): AuditEntryView {
  const out: Record<string, unknown> = {};
  for (const f of AUDIT_FIELDS) {
    const v = f.name === 'id' ? e._id : (e as Record<string, unknown>)[f.name];
    out[f.name] = v === undefined || v === null ? null : f.kind === 'id' ? String(v) : v;
  }
  return out as AuditEntryView;
}

/** Registers (once per connection) and returns the audit model on collection `audit_log`. */
export const auditModel = (conn: Connection): AuditEntryModel =>
  modelOn(conn, 'AuditEntry', auditEntrySchema, AUDIT_COLLECTION);
