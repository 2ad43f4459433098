/**
 * Custom roles of a tenant: create, list, read, change and delete, each write staging its
 * `role.*` event in the role document's own outbox (docs/events.md). No Koa or GraphQL here.
 */
import { Types, type Model } from 'mongoose';
import { ConflictError, NotFoundError, ValidationError, type ValidationIssue } from '../../core/errors.ts';
import { isSystemActor, requestOf, writeTenantId, type Actor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import type { EventLog } from '../events/index.ts';
import type { EventTypeDefinition } from '../events/public/contributions.ts';
import type { OutboxEntry, OutboxSource } from '../events/public/outbox.ts';
import { OUTBOX_FIELD } from '../events/public/outbox.ts';
import type { Permissions as OperationPermissions } from '../../core/permissions.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import { pageOf } from '../../lib/page.ts';
import { reaches } from './engine.ts';
import { BUILTIN_ROLES, normalize, type Permissions } from './rules.ts';
import type { RoleDoc } from './model.ts';
import type { CreateRoleInput, RolesQuery, RoleView, UpdateRoleInput } from './schemas.ts';
import type { AccessService, ResourceAccessSource } from './service.ts';
import { listVariables } from './engine.ts';

type RoleRecord = RoleDoc & { _id: Types.ObjectId; created_at?: Date; updated_at?: Date };

export const ROLE_EVENTS = ['created', 'updated', 'deleted'] as const;

const roleData = {
  type: 'object',
  properties: {
    id: { type: 'string' }, tenant_id: { type: 'string' }, name: { type: 'string' }, description: { anyOf: [{ type: 'string' }, { type: 'null' }] },
    includes: { type: 'array', items: { type: 'string' } }, permissions: { type: 'object' },
    created_at: { type: 'string', format: 'date-time' }, updated_at: { type: 'string', format: 'date-time' },
  },
  required: ['id', 'tenant_id', 'name', 'includes', 'permissions'],
};

/** `role.created`, `role.updated`, `role.deleted`, for the catalogue. */
export const roleEventTypes: EventTypeDefinition[] = ROLE_EVENTS.map((verb) => ({
  name: `role.${verb}`, description: `A custom role of a tenant was ${verb}; data is the role after the change`, data: roleData,
}));

export const toRoleView = (r: RoleRecord): RoleView => ({
  id: String(r._id), tenant_id: String(r.tenant_id), name: r.name, description: r.description ?? null,
  includes: r.includes ?? [], permissions: JSON.parse(r.permissions ?? '{}') as Record<string, unknown>,
  created_at: r.created_at ?? null, updated_at: r.updated_at ?? null,
});

export interface RoleStoreDeps {
  Role: Model<RoleDoc>;
  events: EventLog;
  tenancy: Tenancy;
  access: AccessService;
  resource(name: string): ResourceAccessSource | undefined;
  /** What still holds the role in the tenant ("users", "webhook endpoints"), or null. */
  roleHeld(tenantId: string, role: string): Promise<string | null>;
}

/**
 * Who may call each role operation and `explain` (administrators, within their tenant): the one
 * declaration its REST route and GraphQL field read.
 */
export const ROLE_PERMISSIONS = { list: 'admin', get: 'admin', create: 'admin', update: 'admin', remove: 'admin', explain: 'admin' } as const satisfies OperationPermissions;

export class RoleStore {
  /** The `roles` collection as an outbox source of the event log. */
  readonly source: OutboxSource;

  constructor(private readonly deps: RoleStoreDeps) {
    this.source = { name: 'roles', model: deps.Role, view: (d) => toRoleView(d as unknown as RoleRecord) as unknown as Doc };
  }

  /** Live roles of a tenant, as the access service compiles them. */
  async ofTenant(tenantId: string): Promise<{ name: string; includes: string[]; permissions: Permissions }[]> {
    const rows = await this.deps.Role.find({ tenant_id: tenantId, is_deleted: false }, { name: 1, includes: 1, permissions: 1 }).lean<RoleRecord[]>();
    return rows.map((r) => ({ name: r.name, includes: r.includes ?? [], permissions: JSON.parse(r.permissions ?? '{}') as Permissions }));
  }

  /** The names among `names` that are no live role of the tenant. */
  async unknown(tenantId: string, names: readonly string[]): Promise<string[]> {
    const found = await this.deps.Role.find({ tenant_id: tenantId, is_deleted: false, name: { $in: names } }, { name: 1 }).lean<RoleRecord[]>();
    const have = new Set(found.map((r) => r.name));
    return names.filter((n) => !have.has(n));
  }

  async create(actor: Actor, input: CreateRoleInput): Promise<RoleView> {
    const tenantId = writeTenantId(actor);
    await this.validate(tenantId, input.name, input.includes ?? [], input.permissions);
    const now = new Date();
    const _id = new Types.ObjectId();
    const doc: RoleRecord = {
      _id, tenant_id: new Types.ObjectId(tenantId), name: input.name, description: input.description ?? null, includes: input.includes ?? [],
      permissions: JSON.stringify(input.permissions), created_by: this.actorId(actor), updated_by: this.actorId(actor), version: 1, is_deleted: false, deleted_at: null,
      created_at: now, updated_at: now,
    } as RoleRecord;
    const entry = this.stage('created', actor, doc, null);
    try {
      await this.deps.Role.collection.insertOne({ ...doc, [OUTBOX_FIELD]: this.deps.events.outbox.insert(entry) } as never);
    } catch (err) {
      throw this.duplicate(err, input.name);
    }
    return this.done(tenantId, { ...doc, [OUTBOX_FIELD]: [entry] } as RoleRecord);
  }

  async list(actor: Actor, page: RolesQuery) {
    const filter = { ...this.deps.tenancy.filter(actor), is_deleted: false };
    const [items, total] = await Promise.all([
      this.deps.Role.find(filter).sort({ created_at: 1, _id: 1 }).skip((page.page - 1) * page.per_page).limit(page.per_page).lean<RoleRecord[]>(),
      this.deps.Role.countDocuments(filter),
    ]);
    return pageOf(items.map(toRoleView), total, page);
  }

  async get(actor: Actor, id: string): Promise<RoleView> {
    return toRoleView(await this.owned(actor, id));
  }

  async update(actor: Actor, id: string, input: UpdateRoleInput): Promise<RoleView> {
    const old = await this.owned(actor, id);
    const tenantId = String(old.tenant_id);
    const next = { name: input.name ?? old.name, includes: input.includes ?? old.includes ?? [], permissions: input.permissions ?? (JSON.parse(old.permissions ?? '{}') as Permissions) };
    await this.validate(tenantId, next.name, next.includes, next.permissions, old);
    const holder = input.name && input.name !== old.name ? await this.deps.roleHeld(tenantId, old.name) : null;
    if (holder) throw new ConflictError(`Role "${old.name}" is held by ${holder}: it cannot be renamed`, { role: old.name, held_by: holder });
    const set: Doc = { ...next, permissions: JSON.stringify(next.permissions), updated_at: new Date(), updated_by: this.actorId(actor), version: old.version + 1 };
    if (input.description !== undefined) set.description = input.description;
    const after = { ...old, ...set } as RoleRecord;
    set[OUTBOX_FIELD] = this.deps.events.outbox.update(this.source, old as unknown as Doc, this.stage('updated', actor, after, old));
    let doc: RoleRecord | null;
    try {
      doc = await this.deps.Role.findOneAndUpdate({ _id: old._id, version: old.version, is_deleted: false }, { $set: set }, { returnDocument: 'after' }).lean<RoleRecord>();
    } catch (err) {
      throw this.duplicate(err, next.name);
    }
    if (!doc) throw new ConflictError('The role changed meanwhile: read it again');
    return this.done(tenantId, doc);
  }

  /** @throws ConflictError (409) while a live user or a webhook endpoint holds the role, or another role includes it */
  async remove(actor: Actor, id: string): Promise<void> {
    const old = await this.owned(actor, id);
    const tenantId = String(old.tenant_id);
    const holder = await this.deps.roleHeld(tenantId, old.name);
    if (holder) throw new ConflictError(`Role "${old.name}" is still held by ${holder}`, { role: old.name, held_by: holder });
    const includer = await this.deps.Role.findOne({ tenant_id: old.tenant_id, is_deleted: false, includes: old.name }, { name: 1 }).lean<RoleRecord>();
    if (includer) throw new ConflictError(`Role "${old.name}" is included by role "${includer.name}"`, { role: old.name, included_by: includer.name });
    const set: Doc = { is_deleted: true, deleted_at: new Date(), updated_by: this.actorId(actor), version: old.version + 1 };
    set[OUTBOX_FIELD] = this.deps.events.outbox.update(this.source, old as unknown as Doc, this.stage('deleted', actor, { ...old, ...set } as RoleRecord, old));
    const doc = await this.deps.Role.findOneAndUpdate({ _id: old._id, version: old.version, is_deleted: false }, { $set: set }, { returnDocument: 'after' }).lean<RoleRecord>();
    if (!doc) throw new ConflictError('The role changed meanwhile: read it again');
    await this.done(tenantId, doc);
  }

  private async done(tenantId: string, doc: RoleRecord): Promise<RoleView> {
    this.deps.access.invalidate(tenantId);
    await this.deps.events.committed(this.source, doc as unknown as Doc);
    return toRoleView(doc);
  }

  private async owned(actor: Actor, id: string): Promise<RoleRecord> {
    const doc = await this.deps.Role.findOne({ _id: id, is_deleted: false, ...this.deps.tenancy.filter(actor) }).lean<RoleRecord>();
    if (!doc) throw new NotFoundError('role', id);
    return doc;
  }

  /** Name, includes (existing roles, no cycle) and every rule against its resource; all problems at once (422). */
  private async validate(tenantId: string, name: string, includes: string[], permissions: Permissions, old?: RoleRecord): Promise<void> {
    const issues: ValidationIssue[] = [];
    if (BUILTIN_ROLES.includes(name)) issues.push({ loc: ['body', 'name'], msg: `"${name}" is a built-in role`, type: 'reserved' });
    const roles = new Map((await this.ofTenant(tenantId)).filter((r) => r.name !== old?.name).map((r) => [r.name, r]));
    for (const [i, inc] of includes.entries()) {
      if (!roles.has(inc)) issues.push({ loc: ['body', 'includes', i], msg: `Unknown role "${inc}" in this tenant`, type: 'unknown_role' });
    }
    if (reaches(name, includes, roles)) issues.push({ loc: ['body', 'includes'], msg: `Including these roles makes a cycle back to "${name}"`, type: 'cycle' });
    for (const [resource, byAction] of Object.entries(permissions)) {
      const src = this.deps.resource(resource);
      if (!src) {
        issues.push({ loc: ['body', 'permissions', resource], msg: `Unknown resource "${resource}"`, type: 'unknown_resource' });
        continue;
      }
      for (const [action, rule] of Object.entries(byAction)) issues.push(...checkRule(src, rule, ['body', 'permissions', resource, action]));
    }
    if (issues.length) throw new ValidationError(issues);
  }

  private stage(verb: (typeof ROLE_EVENTS)[number], actor: Actor, doc: RoleRecord, old: RoleRecord | null): OutboxEntry {
    const ip = requestOf(actor)?.ip ?? null;
    const entry = this.deps.events.stage(`role.${verb}`, {
      actor, tenant_id: String(doc.tenant_id), version: doc.version, previous: old ? (toRoleView(old) as unknown as Doc) : null,
      meta: { resource: 'roles', ip, audit: { operation: verb === 'created' ? 'insert' : verb === 'deleted' ? 'delete' : 'update', resource: 'roles', actor_name: isSystemActor(actor) ? null : actor.name ?? null, ip } },
    });
    return { ...entry, data: toRoleView(doc) as unknown as Doc };
  }

  private duplicate(err: unknown, name: string): unknown {
    if ((err as { code?: number }).code === 11000) return new ConflictError(`A role named "${name}" already exists in this tenant`, { field: 'name' });
    return err;
  }

  private actorId(actor: Actor) {
    return isSystemActor(actor) ? null : new Types.ObjectId(actor.id);
  }
}

/** Problems of one rule: fields and presets the resource has, rows and check in its `where` language. */
function checkRule(src: ResourceAccessSource, rule: unknown, loc: (string | number)[]): ValidationIssue[] {
  if (rule === true || !rule || typeof rule !== 'object') return [];
  const r = rule as { rows?: Doc; fields?: string[] | { except: string[] }; presets?: Doc; check?: Doc };
  const issues: ValidationIssue[] = [];
  const known = new Set(src.fields);
  const fields = Array.isArray(r.fields) ? r.fields : r.fields?.except ?? [];
  for (const f of fields) if (!known.has(f)) issues.push({ loc: [...loc, 'fields'], msg: `Unknown field "${f}"`, type: 'unknown_field' });
  for (const f of Object.keys(r.presets ?? {})) if (!known.has(f)) issues.push({ loc: [...loc, 'presets', f], msg: `Unknown field "${f}"`, type: 'unknown_field' });
  for (const part of ['rows', 'check'] as const) {
    const where = r[part];
    if (!where) continue;
    try {
      normalize({ [part]: where }, (w) => src.compile(listVariables(w)));
    } catch (err) {
      issues.push({ loc: [...loc, part], msg: err instanceof Error ? err.message : String(err), type: 'invalid_filter' });
    }
  }
  return issues;
}
