import { Types } from 'mongoose';
import type { AppError } from '../../core/errors.ts';
import { AccessDeniedError, EtagMismatchError, NotFoundError, parseInput } from '../../core/errors.ts';
import type { OutboxEntry, OutboxSource } from '../events/public/outbox.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import { pageOf } from '../../lib/page.ts';
import { etagOf, parseIfMatch } from '../../lib/etag.ts';
import { isAdmin, isSystemActor, writeTenantId, type Actor } from '../../core/context.ts';
import { requireRole, type Filter } from '../../core/access.ts';
import type { Permissions } from '../../core/permissions.ts';
import { documentEventBase, type Doc, type DocumentEventBase } from '../../core/hooks.ts';
import { parseListArgs, parseListQuery, type ListArgs, type ParsedListQuery, type RawQuery, type ResourceQueryInfo } from './query.ts';
import { cursorFilter, decodeCursor, encodeCursor, querySort } from '../../lib/cursor.ts';
import type { ResourceDefinition } from './define.ts';
import { isSystemField } from './fields.ts';
import { nameCastParam } from './filters.ts';
import { applyCascade, checkCascadeDeny } from './cascade.ts';
import { checkReferences, checkWritable, fillGuardedFields } from './write-checks.ts';
import { bulkCreate, bulkDelete, type BulkCreateResult, type BulkDeleteResult } from './bulk.ts';
import { purgeDeleted } from './purge.ts';
import { outboxFor, type OutboxOptions, type ResourceEventVerb } from './events.ts';
import { restoreDocument } from './restore.ts';
import { updateDocument } from './update.ts';
import { PlainWriter } from './plain-write.ts';
import { draftFields, type DraftOptions } from './drafts/fields.ts';
import { checkPopulate, populate } from './populate.ts';
import { applyMask, baseOnly, castRows, checkListQuery, maskProjection, maskWritten, readAccess, readFilter, withRows, writeAccess } from './access.ts';

export type { BulkCreateResult, BulkDeleteResult, BulkItemError } from './bulk.ts';
export type { CursorPage, OffsetPage, ReadOptions, ResourceLookup, ResourceModel, ServiceDeps } from './service-types.ts';
import type { CursorPage, OffsetPage, ReadOptions, ResourceCore, ResourceModel, ServiceDeps } from './service-types.ts';

/**
 * Who may call each operation of every resource (REST route and GraphQL field alike, drafts and
 * versions included): any signed-in caller. What a caller may read or write is the resource's data
 * rules (tenant scope, guards, access rules, deleted documents for administrators), not a
 * permission of the operation.
 */
export const RESOURCE_PERMISSIONS = {
  list: 'user', get: 'user', create: 'user', update: 'user', replace: 'user', delete: 'user', restore: 'user', bulkCreate: 'user', bulkDelete: 'user',
  publish: 'user', unpublish: 'user', history: 'user', version: 'user', diff: 'user', restoreVersion: 'user', actions: 'user', types: 'user',
} as const satisfies Permissions;

/**
 * Every operation of one resource. REST and GraphQL both call this; nothing here knows Koa or
 * GraphQL. Tenant scope, guards and soft delete come from one filter (`scope()`), so list, count,
 * get, write and populate can never disagree.
 */
export class ResourceService implements ResourceCore {
  readonly queryInfo: ResourceQueryInfo;
  readonly fieldByPath: Map<string, ResourceDefinition['fields'][number]>;
  /** Projection that leaves out the private fields. */
  private readonly privateProjection: Record<string, 0>;
  /** The paths a client writes (not private): a replace resets those its body leaves out. */
  readonly clientPaths: string[];
  /** This resource's collection as an outbox source of the event log. */
  readonly source: OutboxSource;
  /** Mongoose-exact writes without mongoose documents or queries, where the schema allows. */
  readonly plain: PlainWriter;
  /**
   * `source.view()` as an aggregation expression of the stored document (`$$ROOT`), for update
   * pipelines. With drafts, of a published document only (the draft's state left out).
   */
  readonly viewExpression: Doc;
  /** Whether the schema hides a path from reads (`select: false`), which only mongoose's reads apply. */
  readonly hidesPaths: boolean;
  /** The stored keys no view shows: private fields, the outbox, and with drafts `_draft` and `_published`. */
  private readonly hidden: ReadonlySet<string>;

  constructor(
    readonly def: ResourceDefinition,
    readonly model: ResourceModel,
    readonly deps: ServiceDeps,
  ) {
    this.fieldByPath = new Map(def.fields.map((f) => [f.path, f]));
    // Not the outbox: view() drops it, and excluding it made a sorted 25-row page cost 34 ms, not 22 (bench/history/performance.md).
    this.privateProjection = Object.fromEntries([...def.privateFields, ...(def.drafts ? ['_draft'] : [])].map((f) => [f, 0 as const]));
    this.hidden = new Set([...def.privateFields, OUTBOX_FIELD, ...(def.drafts ? ['_draft', '_published'] : [])]);
    this.source = { name: def.name, model, view: def.drafts ? (d) => this.eventObject(d) : (d) => this.view(d), tenantScoped: def.tenant_scoped !== false };
    this.clientPaths = def.fields.filter((f) => !f.private).map((f) => f.path);
    this.plain = new PlainWriter(model);
    const hidden = [...this.hidden];
    this.viewExpression = { $arrayToObject: { $filter: { input: { $objectToArray: '$$ROOT' }, as: 'f', cond: { $not: [{ $in: ['$$f.k', hidden] }] } } } };
    this.hidesPaths = Object.values(model.schema.paths).some((t) => (t.options as { select?: unknown } | undefined)?.select === false);
    this.queryInfo = {
      name: def.name,
      isFilterable: (p) => this.isFilterable(p),
      isSortable: (p) => this.isFilterable(p) && !['array', 'mixed'].includes(this.fieldByPath.get(p)?.kind ?? '') && !p.includes('.'),
      searchableFields: def.searchable_fields,
      defaultSort: def.default_sort,
      defaultPageSize: def.default_page_size,
      maxPageSize: def.max_page_size,
      hasTags: def.hasTags,
      populatable: def.populatable,
    };
  }

  /** Those of `keys` that `view()` shows (stored keys other than private fields, the outbox and the draft's state). */
  shownKeys(keys: Iterable<string>): string[] {
    return [...keys].filter((k) => !this.hidden.has(k));
  }

  private isFilterable(path: string): boolean {
    if (isSystemField(path)) return true;
    const f = this.fieldByPath.get(path);
    if (f) return !f.private;
    const root = this.fieldByPath.get(path.split('.')[0] ?? '');
    return !!root && root.kind === 'mixed' && !root.private;
  }

  /**
   * The one access filter: tenant scope + attribute rules (403 on a failed feature/attribute
   * guard) + live documents unless `includeDeleted`.
   */
  scope(actor: Actor, opts: { includeDeleted?: boolean } = {}): Filter {
    const f: Filter = this.deps.tenancy.access(actor, {
      tenantScoped: this.def.tenant_scoped, features: this.def.guards.features, attributes: this.def.guards.attributes,
    });
    if (!opts.includeDeleted) f.is_deleted = false;
    return f;
  }

  checkIncludeDeleted(actor: Actor, includeDeleted: boolean) {
    // Soft-deleted documents may hold data their owners meant to remove: only admins see them.
    if (includeDeleted && !isAdmin(actor)) throw new AccessDeniedError('include_deleted requires the admin role');
  }

  /**
   * Serialized form of a stored document: private fields removed; with drafts, `_status` (last)
   * instead of `_draft` and `_published`. A `fields` projection that leaves `_published` out gives
   * no `_status`.
   */
  view(doc: Doc): Doc {
    if (!this.def.privateFields.length && !(OUTBOX_FIELD in doc) && !this.def.drafts) return doc;
    const out = this.shown(doc);
    if (this.def.drafts && '_published' in doc) out._status = doc._published === false ? 'draft' : 'published';
    return out;
  }

  /**
   * `doc` without the keys no view shows (private fields, the outbox, a draft's state), in its order.
   * One pass: deleting keys from a copy leaves a dictionary-mode object, slower to read and serialize.
   */
  private shown(doc: Doc): Doc {
    const out: Doc = {};
    for (const k of Object.keys(doc)) if (!this.hidden.has(k)) out[k] = doc[k];
    return out;
  }

  /** The object of a drafts resource's event: the published document; only `_id` and the base fields when none is published. */
  private eventObject(doc: Doc): Doc {
    return doc._published !== false ? this.shown(doc) : baseOnly(doc);
  }

  /** The caller's filter of documents not published (none without drafts). */
  draftRows = async (actor: Actor): Promise<Filter | null> => (this.def.drafts && this.deps.drafts ? this.deps.drafts(this, actor) : null);

  /** The `_outbox` value of a write (see events.ts `outboxFor`). */
  outboxFor(verb: ResourceEventVerb, actor: Actor | null, old: Doc | null, opts: OutboxOptions = {}): OutboxEntry[] {
    return outboxFor(this, verb, actor, old, opts);
  }

  /** Hands a document just written with an outbox to the relay. */
  committed(doc: Doc): Promise<void> {
    return this.deps.events.committed(this.source, doc);
  }

  /** Parses REST list parameters (a query string). */
  parse(raw: RawQuery): ParsedListQuery {
    return parseListQuery(raw, this.queryInfo, this.deps.limits);
  }

  /** Lists with REST parameters (a query string). */
  async list(actor: Actor, raw: RawQuery, opts: ReadOptions = {}): Promise<OffsetPage | CursorPage> {
    return this.listParsed(actor, this.parse(raw), opts).catch((err: unknown) => Promise.reject(nameCastParam(err, raw)));
  }

  /** Lists with structured arguments (GraphQL); same rules and errors as {@link list}. */
  async listArgs(actor: Actor, args: ListArgs, opts: ReadOptions = {}): Promise<OffsetPage | CursorPage> {
    return this.listParsed(actor, parseListArgs(args, this.queryInfo, this.deps.limits), opts).catch((err: unknown) => Promise.reject(nameCastParam(err, args.filter ?? {})));
  }

  /**
   * REST get-one: reads `fields`, `populate` and `include_deleted` from the query string and returns
   * the document with its ETag (computed even when `fields` leaves `version` out, which then stays out).
   */
  async getOne(actor: Actor, id: string, query: RawQuery = {}): Promise<{ doc: Doc; etag: string }> {
    const { fields, populate, include_deleted } = query;
    // Most reads carry none of the three: skip the list parser then (hot path).
    if (fields === undefined && populate === undefined && include_deleted === undefined) return this.read(actor, id);
    const q = this.parse({ fields, populate, include_deleted });
    return this.read(actor, id, { includeDeleted: q.includeDeleted, fields: q.fields, populate: q.populate });
  }

  /** {@link get} plus the ETag; `version` is projected for it and removed again unless `fields` asked for it. */
  async read(actor: Actor, id: string, opts: { includeDeleted?: boolean; fields?: string[] | null; populate?: string[] } = {}): Promise<{ doc: Doc; etag: string }> {
    const asked = opts.fields ?? null;
    const fields = this.withVersion(asked);
    const doc = await this.get(actor, id, { ...opts, fields });
    const etag = etagOf(doc.version);
    if (fields !== asked) delete doc.version;
    return { doc, etag };
  }

  private withVersion(fields: string[] | null): string[] | null {
    return fields && !fields.includes('version') ? [...fields, 'version'] : fields;
  }

  private async listParsed(actor: Actor, parsed: ParsedListQuery, opts: ReadOptions): Promise<OffsetPage | CursorPage> {
    const q = opts.etags ? { ...parsed, fields: this.withVersion(parsed.fields) } : parsed;
    this.checkIncludeDeleted(actor, q.includeDeleted);
    const ra = await readAccess(this, actor);
    if (ra) checkListQuery(ra, q);
    const scope = withRows(withRows(this.scope(actor, { includeDeleted: q.includeDeleted }), ra?.rows), await this.draftRows(actor));
    const filter: Filter = Object.keys(q.filter).length ? { $and: [scope, q.filter] } : scope;
    if (q.populate.length) checkPopulate(this, actor, q.populate);

    if (q.mode === 'offset') {
      const [rows, total] = await Promise.all([
        this.model
          .find(filter)
          .sort(querySort(q.sort, 'next'))
          .skip((q.page - 1) * q.perPage)
          .limit(q.perPage)
          .select(this.projection(maskProjection(ra, q.fields)))
          .maxTimeMS(this.deps.config.QUERY_TIMEOUT_MS)
          .lean<Doc[]>(),
        this.model.countDocuments(filter).maxTimeMS(this.deps.config.QUERY_TIMEOUT_MS),
      ]);
      const items = await this.populate(actor, applyMask(ra, rows, q.fields), q.populate);
      return { mode: 'offset', ...pageOf(items, total, { page: q.page, per_page: q.perPage }) };
    }

    const values = q.cursor ? decodeCursor(q.cursor, q.sort, this.deps.config.CURSOR_HMAC_SECRET) : null;
    const dir = q.direction;
    const range = values ? cursorFilter(q.sort, values, dir) : null;
    // Cursors need the sort values even when `fields` leaves them out; they are stripped again below.
    const sortFields = q.sort.map(([f]) => f);
    const wanted = maskProjection(ra, q.fields ? [...new Set([...q.fields, ...sortFields])] : null);
    const rows = await this.model
      .find(range ? { $and: [filter, range] } : filter)
      .sort(querySort(q.sort, dir))
      .limit(q.limit + 1)
      .select(this.projection(wanted))
      .maxTimeMS(this.deps.config.QUERY_TIMEOUT_MS)
      .lean<Doc[]>();
    const more = rows.length > q.limit;
    const page = rows.slice(0, q.limit);
    if (dir === 'prev') page.reverse();
    const hasNext = dir === 'next' ? more : values !== null;
    const hasPrev = dir === 'next' ? values !== null : more;
    const secret = this.deps.config.CURSOR_HMAC_SECRET;
    const first = page[0];
    const last = page[page.length - 1];
    const cursors = {
      next: hasNext && last ? encodeCursor(q.sort, last, secret) : null,
      prev: hasPrev && first ? encodeCursor(q.sort, first, secret) : null,
      has_next: hasNext && !!last,
      has_prev: hasPrev && !!first,
    };
    let items = page;
    if (q.fields) {
      const keep = new Set(q.fields);
      items = page.map((d) => Object.fromEntries(Object.entries(d).filter(([k]) => keep.has(k) || k === '_id')));
    }
    return { mode: 'cursor', items: await this.populate(actor, applyMask(ra, items, q.fields), q.populate), cursors };
  }

  async get(actor: Actor, id: string, opts: { includeDeleted?: boolean; fields?: string[] | null; populate?: string[] } = {}): Promise<Doc> {
    this.checkIncludeDeleted(actor, !!opts.includeDeleted);
    if (opts.populate?.length) checkPopulate(this, actor, opts.populate);
    const ra = await readAccess(this, actor);
    if (ra && opts.fields) checkListQuery(ra, { filter: {}, sort: [], fields: opts.fields });
    const scope = { _id: this.oid(id), ...this.scope(actor, { includeDeleted: opts.includeDeleted }) };
    // An access rule's rows are cast to the fields' types here (the caller's variables are filled in
    // per request, as strings), so a read under a rule keeps the driver's hot path below.
    const filter = readFilter(readFilter(scope, ra?.rows ? castRows(this, ra.rows) : null), await this.draftRows(actor));
    const projection = this.projection(maskProjection(ra, opts.fields ?? null));
    // Hot path: a filter of ids and booleans needs no casting, so the driver reads it directly
    // (mongoose's query building costs more than the read itself). Attribute rules may carry
    // values that mongoose casts to the field's type: they keep the mongoose path.
    const doc = this.needsCasting(scope)
      ? await this.model.findOne(filter).select(projection).lean<Doc>()
      : ((await this.plain.driver().findOne(filter, { projection })) as Doc | null);
    if (!doc) throw new NotFoundError(this.def.name, id);
    const [masked] = applyMask(ra, [doc], opts.fields ?? null) as [Doc];
    if (!opts.populate?.length) return this.view(masked);
    const [out] = await this.populate(actor, [masked], opts.populate);
    return out!;
  }

  /** Creates a document; with `draft` (drafts resources) one not published, seen only where drafts are (drafts/). */
  async create(actor: Actor, body: unknown, opts: { bulk?: boolean; loc?: (string | number)[]; draft?: DraftOptions | null } = {}): Promise<Doc> {
    const scope = this.scope(actor);
    const input = parseInput(this.def.inputs.create, body, opts.loc ?? ['body']) as Doc;
    // A system actor's acting tenant (`X-Tenant-Id`), else the actor's own.
    const tenantId = this.def.tenant_scoped ? writeTenantId(actor) : null;
    const wa = await writeAccess(this, actor, 'create');
    if (wa) Object.assign(input, wa.decide({ old: null, written: Object.keys(input), input, result: (p) => ({ ...input, ...p, tenant_id: tenantId, created_by: this.actorId(actor) }) }));
    fillGuardedFields(this.def, scope, input);
    const ev = await this.deps.hooks.runBefore('BEFORE_CREATE', { ...this.event(actor, tenantId, !!opts.bulk), data: input });
    checkWritable(scope, ev.data);
    await checkReferences(this, actor, ev.data, opts.loc ?? ['body'], tenantId);
    const now = new Date();
    const by = this.actorId(actor);
    const doc = await this.plain.insert({
      ...ev.data,
      tenant_id: tenantId ? new Types.ObjectId(tenantId) : null,
      created_at: now, updated_at: now, created_by: by, updated_by: by,
      is_deleted: false, deleted_at: null, deleted_by: null, version: 1, ...draftFields(this, actor, opts.draft), ...(opts.draft ? { _published: false } : {}),
      [OUTBOX_FIELD]: this.outboxFor(opts.draft ? 'draft_saved' : 'created', actor, null, { bulk: !!opts.bulk, tenantId }),
    });
    await this.committed(doc);
    return maskWritten(this, actor, this.view(doc));
  }

  /** PATCH (`replace: false`) or PUT (`replace: true`), guarded by `If-Match` in the same atomic update (update.ts). */
  async update(actor: Actor, id: string, ifMatch: string | null | undefined, body: unknown, replace: boolean): Promise<Doc> {
    return maskWritten(this, actor, await updateDocument(this, actor, id, ifMatch, body, replace));
  }

  /** Soft delete guarded by `If-Match`; cascade rules of referencing resources run first. */
  async remove(actor: Actor, id: string, ifMatch: string | null | undefined, opts: { bulk?: boolean } = {}): Promise<Doc> {
    const scope = withRows(withRows(this.scope(actor), (await writeAccess(this, actor, 'delete'))?.rows), await this.draftRows(actor));
    const tags = parseIfMatch(ifMatch);
    const old = await this.findOwned(id, scope);
    if (!tags.includes(etagOf(old.version))) throw new EtagMismatchError();
    await checkCascadeDeny(this, old);
    const tenantId = old.tenant_id ? String(old.tenant_id) : null;
    await this.deps.hooks.runBefore('BEFORE_DELETE', { ...this.event(actor, tenantId, !!opts.bulk), id, old });
    const doc = await this.softDelete(old, scope, actor, !!opts.bulk);
    if (!doc) throw await this.lostRace(id, scope);
    await applyCascade(this, actor, old);
    return maskWritten(this, actor, this.view(doc));
  }

  /** For a plugin deleting its own documents outside {@link remove}: referrers' `deny` rules (422 CASCADE_DENY), before the delete. */
  checkReferrers(old: Doc): Promise<void> {
    return checkCascadeDeny(this, old);
  }

  /** After such a delete: the referencing documents' `cascade` and `set_null` rules. */
  cascadeFrom(actor: Actor, old: Doc): Promise<void> {
    return applyCascade(this, actor, old);
  }

  /** Creates each item as {@link create} would; rejected items are reported, not thrown (see bulk.ts). */
  bulkCreate(actor: Actor, items: unknown[]): Promise<BulkCreateResult> {
    return bulkCreate(this, actor, items);
  }

  /** Soft-deletes each `{id, etag}` as {@link remove} would (see bulk.ts). */
  bulkDelete(actor: Actor, items: { id: string; etag: string }[]): Promise<BulkDeleteResult> {
    return bulkDelete(this, actor, items);
  }

  /**
   * Permanently removes documents soft-deleted more than `olderThanDays` ago, in the actor's scope
   * (`scope()`): `systemActor()` every tenant, `systemActor(tenantId)` that tenant only; their versions first.
   * @throws AccessDeniedError for a non-system actor, tenant administrators included (nothing deleted)
   */
  async purgeSoftDeleted(actor: Actor, olderThanDays: number, dropVersions?: (resource: string, ids: Types.ObjectId[]) => Promise<unknown>): Promise<{ resource: string; deleted_count: number; cutoff_date: Date }> {
    requireRole(actor, 'system');
    const cutoff = new Date(Date.now() - olderThanDays * 86_400_000);
    const deleted = await purgeDeleted(this.model, this.def.name, this.scope(actor, { includeDeleted: true }), cutoff, dropVersions);
    return { resource: this.def.name, deleted_count: deleted, cutoff_date: cutoff };
  }

  oid(id: string): Types.ObjectId {
    if (!Types.ObjectId.isValid(id) || !/^[0-9a-fA-F]{24}$/.test(id)) throw new NotFoundError(this.def.name, id);
    return new Types.ObjectId(id);
  }

  /** True unless every key of the filter is one whose value the service itself built with the stored type. */
  needsCasting(filter: Filter): boolean {
    for (const k of Object.keys(filter)) if (k !== '_id' && k !== 'tenant_id' && k !== 'is_deleted') return true;
    return false;
  }

  projection(fields: string[] | null): Record<string, 0 | 1> {
    if (fields) return Object.fromEntries([...fields.map((f) => [f, 1 as const]), ['_id', 1 as const]]);
    return this.privateProjection;
  }

  /** The document `id` in `scope` (404 otherwise); `plain`: the scope's values are their stored types (no casting), whatever its keys. */
  async findOwned(id: string, scope: Filter, plain = false): Promise<Doc> {
    const filter = { _id: this.oid(id), ...scope };
    // As in `get`, through the driver; a schema hiding paths (`select: false`) keeps mongoose, which omits them.
    const old = this.hidesPaths || (!plain && this.needsCasting(filter))
      ? await this.model.findOne(filter).lean<Doc>()
      : ((await this.plain.driver().findOne(filter)) as Doc | null);
    if (!old) throw new NotFoundError(this.def.name, id);
    return old;
  }

  /** The conditional write matched nothing: the document vanished (404) or another writer won (412). */
  async lostRace(id: string, scope: Filter): Promise<AppError> {
    const still = await this.model.exists({ _id: this.oid(id), ...scope });
    return still ? new EtagMismatchError() : new NotFoundError(this.def.name, id);
  }

  /** Soft-deletes `old` if it is still at its revision (also for cascade.ts). */
  async softDelete(old: Doc, scope: Filter, actor: Actor | null, bulk = true): Promise<Doc | null> {
    const now = new Date();
    const by = this.actorId(actor);
    const outbox = this.outboxFor('deleted', actor, old, { bulk });
    const doc = await this.model
      .findOneAndUpdate(
        { _id: old._id, ...scope, version: old.version },
        { $set: { is_deleted: true, deleted_at: now, deleted_by: by, updated_at: now, updated_by: by, [OUTBOX_FIELD]: outbox }, $inc: { version: 1 } },
        { returnDocument: 'after' },
      )
      .lean<Doc>();
    if (doc) await this.committed(doc);
    return doc;
  }

  /** Restores a soft-deleted document (administrators; see restore.ts). */
  async restore(actor: Actor, id: string, ifMatch: string | null | undefined): Promise<Doc> {
    return maskWritten(this, actor, await restoreDocument(this, actor, id, ifMatch));
  }

  /** Live documents of this resource that reference `parent` through `field`, in the parent's tenant. */
  childFilter(field: string, parent: Doc): Filter {
    const sameTenant = this.def.tenant_scoped && this.deps.tenancy.enabled && parent.tenant_id;
    return { [field]: parent._id, is_deleted: false, ...(sameTenant ? { tenant_id: parent.tenant_id } : {}) };
  }

  /** Replaces relation ids with the related documents the actor may see (else null); see populate.ts. */
  populate(actor: Actor, items: Doc[], paths: string[]): Promise<Doc[]> {
    return populate(this, actor, items, paths);
  }

  /** The id stored in `created_by` and the like: null for `systemActor()`. */
  actorId(actor: Actor | null) {
    return actor && !isSystemActor(actor) ? new Types.ObjectId(actor.id) : null;
  }

  event(actor: Actor | null, tenantId: string | null, bulk: boolean): DocumentEventBase {
    return documentEventBase(this.def.name, actor, tenantId, { secret_fields: this.def.privateFields, bulk });
  }
}

