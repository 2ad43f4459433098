import { Schema } from 'mongoose';
import { OUTBOX_FIELD, outboxPath } from '../events/public/outbox.ts';
import type { z } from 'zod';
import type { AttributeRule } from '../../core/access.ts';
import type { RouteDef } from '../../core/http/route.ts';
import type { PersonalDataDeclaration } from '../../core/plugin.ts';
import { BASE_FIELDS, describeFields, inputSchemas, type FieldInfo } from './fields.ts';

/** What happens to referencing documents when a referenced one is deleted. */
export type OnDelete = 'deny' | 'cascade' | 'set_null';

/**
 * A cascade rule, declared on the referencing resource.
 * @example { field: 'project_id', references: 'projects', on_delete: 'deny' }
 */
export interface CascadeRule {
  field: string;
  /** Name of the referenced resource. */
  references: string;
  /**
   * - `deny`: 422 CASCADE_DENY while live referencing documents exist;
   * - `cascade`: soft-delete the referencing documents too;
   * - `set_null`: set the field to null on them.
   */
  on_delete: OnDelete;
}

export type Operation = 'list' | 'get' | 'create' | 'update' | 'replace' | 'delete';

/** Options of `defineResource`, one per resource setting (path, search, sort, paging, bulk, guards, cascade, personal data). */
export interface ResourceOptions {
  /** Unique name; also the collection name and the GraphQL base name. @example 'projects' */
  name: string;
  /** Client fields as a mongoose schema. Base fields are added; mark a path `private: true` to hide it. */
  schema: Schema;
  /** URL path. @default `/${name}` */
  path?: string;
  /** Fields searched by `q`; without them `q` is a 400. @default [] */
  searchable_fields?: string[];
  /** @default '-created_at' */
  default_sort?: string;
  /** @default 25 */
  default_page_size?: number;
  /** @default 100 */
  max_page_size?: number;
  /** Enables `POST <path>/bulk`. @default false */
  allow_bulk_create?: boolean;
  /** Enables `DELETE <path>/bulk`. @default false */
  allow_bulk_delete?: boolean;
  /** Most items one bulk call may carry. @default 100 */
  max_bulk_size?: number;
  /** Isolate documents per tenant. @default true */
  tenant_scoped?: boolean;
  guards?: { features?: string[]; attributes?: AttributeRule[] };
  /** Rules this resource's references impose on deleting the referenced documents. */
  cascade?: CascadeRule[];
  /** Relation fields clients may `populate`. @default every field with a `ref` */
  populatable?: string[];
  /** Replace the zod input schemas derived from the mongoose schema. */
  input?: { create?: z.ZodType; update?: z.ZodType; replace?: z.ZodType };
  /**
   * Generated operations to offer, on REST and GraphQL alike; the others get no route and no
   * GraphQL field (e.g. a ledger-like resource without `delete`). @default every operation
   */
  operations?: Operation[];
  /** Replace a generated REST handler (the route, its validation and auth stay). */
  handlers?: Partial<Record<Operation, RouteDef['handler']>>;
  /** Extra routes under any path (they go through the same auth and validation). */
  routes?: RouteDef[];
  /** GraphQL type name. @default singular PascalCase of name */
  graphql_name?: string;
  /**
   * Fields holding personal data (top-level paths): exported with the data subject's documents and
   * replaced by neutral values on erasure (privacy plugin, docs/privacy.md). Neutral value: `[]`
   * for arrays, the `PRIVACY_PSEUDONYM` setting for required strings, null otherwise.
   * @default []
   * @example ['owner_email']
   */
  gdpr_fields?: string[];
  /**
   * Access rules in code, per role (built-in or custom) and action, combined with the tenant's
   * stored roles (docs/access.md). A rule is `true`, `{ rows, fields, presets, check }`, or a
   * function of the actor returning one (or nothing: denied).
   * @example { editor: { read: { rows: { owner_id: '$actor.id' } }, update: { rows: { owner_id: '$actor.id' }, fields: ['title'] } } }
   */
  access?: Record<string, Partial<Record<'read' | 'create' | 'update' | 'delete' | 'read_drafts' | 'publish', unknown>>>;
  /** The field linking a document to its data subject: a user id, as an object id or a string field. @default 'created_by' */
  subject_field?: string;
  /** How a document appears in its data subject's export (privacy plugin), after the private fields are left out. */
  export_view?: PersonalDataDeclaration['export_view'];
  /**
   * Keep every write's document as a version: history, diff and restore (docs/versions.md).
   * `max_per_document` keeps the newest N versions of a document (and its first);
   * `max_age_days` lets the `purge_versions` job drop older ones (the first stays).
   * @default false
   * @example { max_per_document: 50, max_age_days: 365 }
   */
  versions?: boolean | { max_per_document?: number; max_age_days?: number };
  /**
   * Drafts and publishing: writes with `?draft=true` save a draft that readers without the
   * `read_drafts` permission never see; `POST <path>/{id}/publish` publishes it (docs/versions.md#drafts).
   * @default false
   */
  drafts?: boolean;
}

/** A resource's version policy: null limits keep everything. */
export interface VersionPolicy {
  max_per_document: number | null;
  max_age_days: number | null;
}

export interface ResourceDefinition extends Required<Omit<ResourceOptions, 'input' | 'handlers' | 'routes' | 'graphql_name' | 'guards' | 'populatable' | 'operations' | 'access' | 'export_view' | 'versions' | 'drafts'>> {
  /** Documents carry `_status`, drafts and publishing (drafts/). */
  drafts: boolean;
  access: ResourceOptions['access'];
  export_view: ResourceOptions['export_view'];
  /** Null: the resource keeps no versions. */
  versions: VersionPolicy | null;
  operations: ReadonlySet<Operation>;
  guards: { features: string[]; attributes: AttributeRule[] };
  populatable: string[];
  fields: FieldInfo[];
  inputs: { create: z.ZodType; update: z.ZodType; replace: z.ZodType };
  handlers: Partial<Record<Operation, RouteDef['handler']>>;
  routes: RouteDef[];
  graphqlName: string;
  /**
   * Private fields (`private: true` on the path): never returned, filterable, sortable or audited.
   * Hook events carry them as `secret_fields` (the public hook contract).
   */
  privateFields: string[];
  hasTags: boolean;
}

const pascalSingular = (name: string) => {
  const base = name.replace(/ies$/, 'y').replace(/s$/, '');
  return base.replace(/(^|[-_\s])(\w)/g, (_m, _s, c: string) => c.toUpperCase());
};

/**
 * Declare a resource: a mongoose schema plus a path becomes the full generated API (REST, GraphQL,
 * `/admin/schema`, hooks, audit). Register it with the resources plugin (`resources` option or the
 * `resources` service's `register()` from another plugin's `setup`).
 *
 * @example
 * defineResource({ name: 'projects', schema: new Schema({ name: { type: String, required: true } }),
 *   searchable_fields: ['name'], allow_bulk_create: true })
 */
export function defineResource(o: ResourceOptions): ResourceDefinition {
  if (!/^[a-z][a-z0-9_]*$/.test(o.name)) throw new Error(`Resource name "${o.name}" must be lower snake_case`);
  const schema = o.schema.clone();
  addBaseFields(schema, o.tenant_scoped !== false, o.default_sort ?? '-created_at');
  const fields = describeFields(o.schema);
  const derived = inputSchemas(fields.filter((f) => !f.private));
  const def: ResourceDefinition = {
    name: o.name,
    schema,
    path: o.path ?? `/${o.name}`,
    searchable_fields: o.searchable_fields ?? [],
    default_sort: o.default_sort ?? '-created_at',
    default_page_size: o.default_page_size ?? 25,
    max_page_size: o.max_page_size ?? 100,
    allow_bulk_create: o.allow_bulk_create ?? false,
    allow_bulk_delete: o.allow_bulk_delete ?? false,
    max_bulk_size: o.max_bulk_size ?? 100,
    tenant_scoped: o.tenant_scoped !== false,
    guards: { features: o.guards?.features ?? [], attributes: o.guards?.attributes ?? [] },
    cascade: withFileRules(o.cascade ?? [], fields),
    populatable: o.populatable ?? fields.filter((f) => f.ref && f.kind === 'objectId').map((f) => f.path),
    fields,
    inputs: { create: o.input?.create ?? derived.create, update: o.input?.update ?? derived.update, replace: o.input?.replace ?? derived.replace },
    operations: new Set(o.operations ?? ['list', 'get', 'create', 'update', 'replace', 'delete']),
    handlers: o.handlers ?? {},
    routes: o.routes ?? [],
    graphqlName: o.graphql_name ?? pascalSingular(o.name),
    privateFields: fields.filter((f) => f.private).map((f) => f.path),
    hasTags: fields.some((f) => f.path === 'tags' && f.kind === 'array'),
    gdpr_fields: [...new Set(o.gdpr_fields ?? [])],
    subject_field: o.subject_field ?? 'created_by',
    access: o.access,
    export_view: o.export_view,
    versions: versionPolicy(o.name, o.versions),
    drafts: o.drafts ?? false,
  };
  // The published state stays in the top-level fields; a pending draft and the never-published mark live beside them.
  if (def.drafts) schema.add({ _published: { type: Boolean }, _draft: { type: Schema.Types.Mixed, default: null } });
  for (const f of def.searchable_fields) {
    if (!fields.some((x) => x.path === f && x.kind === 'string' && !x.private)) throw new Error(`Resource "${o.name}": searchable field "${f}" is not a public string field`);
  }
  for (const r of def.cascade) {
    if (!fields.some((x) => x.path === r.field)) throw new Error(`Resource "${o.name}": cascade field "${r.field}" does not exist`);
  }
  for (const g of def.gdpr_fields) {
    const f = fields.find((x) => x.path === g);
    if (!f) throw new Error(`Resource "${o.name}": gdpr field "${g}" does not exist`);
    // A required field must keep a valid value once neutralised: only strings have one (the pseudonym).
    if (f.required && (f.kind !== 'string' || f.enum)) throw new Error(`Resource "${o.name}": gdpr field "${g}" is required and not a free string, so it has no neutral value`);
  }
  // A user id, as an object id or as its hex string (e.g. payments' `user_id`, stored as a string).
  if (def.subject_field !== 'created_by' && !fields.some((x) => x.path === def.subject_field && (x.kind === 'objectId' || (x.kind === 'string' && !x.enum))))
    throw new Error(`Resource "${o.name}": subject_field "${def.subject_field}" is not an object id or string field`);
  for (const p of def.populatable) {
    if (!fields.some((x) => x.path === p && x.ref)) throw new Error(`Resource "${o.name}": populatable field "${p}" has no ref`);
  }
  return def;
}

/** A `file` field without a declared rule clears itself when its file is deleted (`set_null`). */
function withFileRules(rules: CascadeRule[], fields: FieldInfo[]): CascadeRule[] {
  const implicit = fields.filter((f) => f.file && !rules.some((r) => r.field === f.path)).map((f): CascadeRule => ({ field: f.path, references: f.ref ?? 'files', on_delete: 'set_null' }));
  return [...rules, ...implicit];
}

function versionPolicy(name: string, v: ResourceOptions['versions']): VersionPolicy | null {
  if (!v) return null;
  const policy = { max_per_document: v === true ? null : v.max_per_document ?? null, max_age_days: v === true ? null : v.max_age_days ?? null };
  for (const [k, n] of Object.entries(policy)) {
    if (n !== null && (!Number.isInteger(n) || n < 1)) throw new Error(`Resource "${name}": versions.${k} must be a whole number of at least 1`);
  }
  return policy;
}

/** Adds the base fields ({@link BASE_FIELDS}) and the indexes every list relies on. */
function addBaseFields(schema: Schema, tenantScoped: boolean, defaultSort: string) {
  schema.add(Object.fromEntries(Object.entries(BASE_FIELDS).map(([k, v]) => [k, { ...v.schema }])));
  schema.set('versionKey', false);
  schema.set('minimize', false);
  schema.set('strict', 'throw');
  // Every list filters on tenant and live documents and sorts by created_at (the default) with _id as
  // tiebreaker: this index serves the default sort and its cursor range queries without a scan.
  const prefix: Record<string, 1 | -1> = tenantScoped ? { tenant_id: 1, is_deleted: 1 } : { is_deleted: 1 };
  schema.index({ ...prefix, created_at: -1, _id: -1 });
  if (defaultSort !== '-created_at') {
    const keys: Record<string, 1 | -1> = { ...prefix };
    for (const part of defaultSort.split(',').map((x) => x.trim()).filter(Boolean)) {
      const desc = part.startsWith('-');
      keys[part.replace(/^[-+]/, '')] = desc ? -1 : 1;
    }
    const last = Object.values(keys).at(-1) ?? 1;
    if (!('_id' in keys)) keys._id = last;
    schema.index(keys);
  }
  schema.index({ is_deleted: 1, deleted_at: 1 }, { partialFilterExpression: { is_deleted: true } });
  // Each write carries its event in this array until the relay moves it to the log (docs/events.md);
  // the sweep finds entries a dead writer left by their age.
  schema.add(outboxPath);
  schema.index({ [`${OUTBOX_FIELD}.created_at`]: 1 }, { sparse: true });
}
