import type { Connection, Model, Types } from 'mongoose';
import type { Actor } from '../../core/context.ts';
import { requireRole } from '../../core/access.ts';
import type { Doc } from '../../core/hooks.ts';
import type { PersonalDataDeclaration } from '../../core/plugin.ts';
import type { ResourceDefinition } from './define.ts';
import { ResourceService, type ResourceLookup, type ServiceDeps } from './service.ts';

/** What a purge of soft-deleted documents removed: in total, and by resource. */
export interface PurgeResult {
  deleted_count: number;
  cutoff_date: Date;
  resources: Record<string, number>;
}

/**
 * All registered resources. Drives routes, GraphQL, `/admin/schema`, cascade resolution and
 * populate. Resources are registered during plugin set-up; the registry is sealed once the
 * server is assembled.
 */
export class ResourceRegistry implements ResourceLookup {
  private readonly services = new Map<string, ResourceService>();
  private sealed = false;

  constructor(
    private readonly conn: Connection,
    private readonly deps: Omit<ServiceDeps, 'lookup'>,
  ) {}

  /** Drops the versions of purged documents of a versioned resource (set by the plugin). */
  purgeVersions?: (resource: string, ids: Types.ObjectId[]) => Promise<unknown>;

  register(def: ResourceDefinition): ResourceService {
    if (this.sealed) throw new Error(`Resource "${def.name}" registered too late: register resources in a plugin's setup()`);
    if (this.services.has(def.name)) throw new Error(`Resource "${def.name}" is registered twice`);
    for (const s of this.services.values()) {
      if (s.def.path === def.path) throw new Error(`Resources "${s.def.name}" and "${def.name}" share the path ${def.path}`);
    }
    const model = (this.conn.models[def.name] ?? this.conn.model(def.name, def.schema, def.name)) as Model<Doc>;
    const service = new ResourceService(def, model, { ...this.deps, lookup: this });
    this.deps.events.addSource(service.source);
    this.services.set(def.name, service);
    return service;
  }

  /** Checks cross-resource references, then refuses further registrations. */
  seal(): void {
    for (const s of this.services.values()) {
      for (const rule of s.def.cascade) {
        if (!this.services.has(rule.references)) throw new Error(`Resource "${s.def.name}": cascade rule references unknown resource "${rule.references}"`);
      }
      for (const p of s.def.populatable) {
        const ref = s.def.fields.find((f) => f.path === p)?.ref;
        if (ref && !this.services.has(ref)) throw new Error(`Resource "${s.def.name}": populatable "${p}" references unknown resource "${ref}"`);
      }
    }
    this.sealed = true;
  }

  get(name: string): ResourceService | undefined {
    return this.services.get(name);
  }

  list(): ResourceService[] {
    return [...this.services.values()];
  }

  referencing(name: string) {
    return this.list().flatMap((service) =>
      service.def.cascade.filter((r) => r.references === name).map((r) => ({ service, field: r.field, on_delete: r.on_delete })),
    );
  }

  /**
   * Permanently removes documents soft-deleted longer ago than `days` (default
   * `SOFT_DELETE_RETENTION_DAYS`), in every resource, within the actor's tenant scope:
   * `systemActor()` purges every tenant, `systemActor(tenantId)` that tenant only.
   * @throws AccessDeniedError for a non-system actor, tenant administrators included (nothing deleted)
   */
  async purgeSoftDeleted(actor: Actor, days = this.deps.config.SOFT_DELETE_RETENTION_DAYS): Promise<PurgeResult> {
    // Refused up front: also when no resource is registered, so the answer never depends on the registry.
    requireRole(actor, 'system');
    const results = await Promise.all(this.list().map((s) => s.purgeSoftDeleted(actor, days, s.def.versions ? this.purgeVersions : undefined)));
    return {
      deleted_count: results.reduce((n, r) => n + r.deleted_count, 0),
      cutoff_date: new Date(Date.now() - days * 86_400_000),
      resources: Object.fromEntries(results.map((r) => [r.resource, r.deleted_count])),
    };
  }

  /** The `/admin/schema` description of every resource. */
  describe() {
    return {
      resources: this.list().map(({ def }) => ({
        name: def.name,
        path: def.path,
        tenant_scoped: def.tenant_scoped,
        fields: def.fields
          .filter((f) => !f.private)
          .map((f) => ({
            name: f.path,
            type: f.kind,
            ...(f.items ? { items: f.items } : {}),
            required: f.required,
            ...(f.enum ? { enum: f.enum } : {}),
            ...(f.min !== undefined ? { min: f.min } : {}),
            ...(f.max !== undefined ? { max: f.max } : {}),
            ...(f.ref ? { ref: f.ref } : {}),
            ...(f.file ? { file: f.file } : {}),
          })),
        searchable_fields: def.searchable_fields,
        default_sort: def.default_sort,
        default_page_size: def.default_page_size,
        max_page_size: def.max_page_size,
        allow_bulk_create: def.allow_bulk_create,
        allow_bulk_delete: def.allow_bulk_delete,
        max_bulk_size: def.max_bulk_size,
        populatable: def.populatable,
        guards: def.guards,
        cascade: def.cascade,
        referenced_by: this.referencing(def.name).map((r) => ({ resource: r.service.def.name, field: r.field, on_delete: r.on_delete })),
        gdpr_fields: def.gdpr_fields,
        subject_field: def.subject_field,
      })),
    };
  }

  /**
   * One personal-data declaration per resource (privacy plugin): every resource's documents are
   * linked to a subject by `subject_field`, so each is exported; only `gdpr_fields` are neutralised
   * on erasure: `[]` for arrays, the `PRIVACY_PSEUDONYM` setting for required strings (a required
   * field must stay valid), null otherwise. Private fields never leave in an export.
   */
  personalData(): PersonalDataDeclaration[] {
    const pseudonym = this.deps.config.PRIVACY_PSEUDONYM;
    return this.list().map(({ def, model }) => ({
      name: def.name,
      model: model.modelName,
      subject_field: def.subject_field,
      gdpr_fields: def.gdpr_fields,
      tenant_field: def.tenant_scoped ? 'tenant_id' : null,
      neutral: Object.fromEntries(
        def.gdpr_fields.map((g) => {
          const f = def.fields.find((x) => x.path === g)!;
          return [g, f.kind === 'array' ? [] : f.required ? pseudonym : null];
        }),
      ),
      on_erasure: 'depersonalize',
      export_exclude: def.privateFields,
      ...(def.export_view ? { export_view: def.export_view } : {}),
    }));
  }
}
