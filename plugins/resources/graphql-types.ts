import type { Builder } from '../../core/graphql.ts';
import { scopes } from '../../core/graphql.ts';
import { RESOURCE_PERMISSIONS, type ResourceService } from './service.ts';
import { resourceActions } from './actions.ts';
import { hasSystemScope } from '../../core/context.ts';
import type { FieldInfo } from './fields.ts';
import { FILTER_OPERATORS } from './filters.ts';
import type { ResourceRegistry } from './registry.ts';
import type { ResourceDefinition } from './define.ts';

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);
const camel = (s: string) => s.replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());

/** The GraphQL field names of a resource's operations (null for an operation it does not offer); graphql.ts names them the same way. */
export function operationFields(def: ResourceDefinition) {
  const has = (op: Parameters<ResourceDefinition['operations']['has']>[0]) => def.operations.has(op);
  const n = def.graphqlName;
  return {
    list: has('list') ? lowerFirst(camel(def.name)) : null,
    get: has('get') ? lowerFirst(n) : null,
    create: has('create') ? `create${n}` : null,
    update: has('update') ? `update${n}` : null,
    replace: has('replace') ? `replace${n}` : null,
    delete: has('delete') ? `delete${n}` : null,
    restore: has('delete') ? `restore${n}` : null,
    restore_version: def.versions && has('update') ? `restore${n}Version` : null,
    publish: def.drafts && has('update') ? `publish${n}` : null,
    unpublish: def.drafts && has('update') ? `unpublish${n}` : null,
  };
}

/**
 * `resourceTypes`: every registered resource as a client (the admin console) needs it to build
 * lists, filters and forms generically: fields with their kinds and limits, the GraphQL field
 * names of its operations, search, sort, paging, bulk and cascade rules, and whether the caller
 * holds its required features (`accessible`). What GET /admin/schema says, for every signed-in
 * user (it describes the API, not data), minus personal-data declarations.
 */
export function resourceTypesGraphQL(builder: Builder, registry: ResourceRegistry): void {
  const Field = builder.objectRef<FieldInfo>('ResourceField').implement({
    description: 'A client field of a resource',
    fields: (t) => ({
      name: t.string({ nullable: false, resolve: (f) => f.path }),
      kind: t.string({ nullable: false, description: 'string, number, integer, boolean, date, objectId, mixed or array', resolve: (f) => f.kind }),
      items: t.string({ description: 'Kind of the items of an array', resolve: (f) => f.items ?? null }),
      required: t.boolean({ nullable: false, resolve: (f) => f.required }),
      enum: t.stringList({ resolve: (f) => (f.enum ? f.enum.map(String) : null) }),
      min: t.float({ description: 'Least value of a number', resolve: (f) => f.min ?? null }),
      max: t.float({ description: 'Greatest value of a number', resolve: (f) => f.max ?? null }),
      ref: t.string({ description: 'Resource this id refers to', resolve: (f) => f.ref ?? null }),
    }),
  });
  type Ops = ReturnType<typeof operationFields>;
  const Operations = builder.objectRef<Ops>('ResourceOperations').implement({
    description: 'GraphQL field names of the operations a resource offers (null when not offered)',
    fields: (t) => ({
      list: t.exposeString('list'),
      get: t.exposeString('get'),
      create: t.exposeString('create'),
      update: t.exposeString('update'),
      replace: t.exposeString('replace'),
      delete: t.exposeString('delete'),
      restore: t.exposeString('restore'),
      restore_version: t.exposeString('restore_version', { description: 'Writes an old version back (resources that keep versions)' }),
      publish: t.exposeString('publish', { description: 'Publishes the pending draft (resources with drafts)' }),
      unpublish: t.exposeString('unpublish', { description: 'Withdraws the document from readers without read_drafts (resources with drafts)' }),
    }),
  });
  type Cascade = { field: string; resource: string; on_delete: string };
  const CascadeRule = builder.objectRef<Cascade>('ResourceCascadeRule').implement({
    description: 'A reference between resources and what deleting the referenced document does: deny, cascade or set_null',
    fields: (t) => ({
      resource: t.exposeString('resource', { nullable: false, description: 'The other resource' }),
      field: t.exposeString('field', { nullable: false, description: 'The referencing field' }),
      on_delete: t.exposeString('on_delete', { nullable: false }),
    }),
  });
  const Resource = builder.objectRef<{ def: ResourceDefinition; svc: ResourceService; accessible: boolean }>('ResourceType').implement({
    description: 'A registered resource, as GET /admin/schema describes it',
    fields: (t) => ({
      name: t.string({ nullable: false, resolve: ({ def }) => def.name }),
      path: t.string({ nullable: false, resolve: ({ def }) => def.path }),
      graphql_type: t.string({ nullable: false, resolve: ({ def }) => def.graphqlName }),
      operations: t.field({ type: Operations, nullable: false, resolve: ({ def }) => operationFields(def) }),
      tenant_scoped: t.boolean({ nullable: false, resolve: ({ def }) => def.tenant_scoped }),
      versions: t.boolean({ nullable: false, description: 'Whether its documents keep their history (versions, versionAt, versionDiff)', resolve: ({ def }) => def.versions !== null }),
      drafts: t.boolean({ nullable: false, description: 'Whether its documents carry _status, drafts and publishing', resolve: ({ def }) => def.drafts }),
      fields: t.field({ type: [Field], nullable: false, resolve: ({ def }) => def.fields.filter((f) => !f.private && !f.path.includes('.')) }),
      filter_operators: t.stringList({ nullable: false, description: 'Suffixes of `<field>__<op>` filters', resolve: () => [...FILTER_OPERATORS] }),
      searchable_fields: t.stringList({ nullable: false, description: 'Fields `q` searches (none: no search)', resolve: ({ def }) => def.searchable_fields }),
      default_sort: t.string({ nullable: false, resolve: ({ def }) => def.default_sort }),
      default_page_size: t.int({ nullable: false, resolve: ({ def }) => def.default_page_size }),
      max_page_size: t.int({ nullable: false, resolve: ({ def }) => def.max_page_size }),
      allow_bulk_delete: t.boolean({ nullable: false, resolve: ({ def }) => def.allow_bulk_delete }),
      max_bulk_size: t.int({ nullable: false, resolve: ({ def }) => def.max_bulk_size }),
      features: t.stringList({ nullable: false, description: 'Features a caller must hold to use it', resolve: ({ def }) => def.guards.features }),
      accessible: t.boolean({ nullable: false, description: 'Whether the caller holds those features', resolve: ({ accessible }) => accessible }),
      actions: t.withAuth(scopes(RESOURCE_PERMISSIONS.types)).stringList({
        nullable: false,
        description: 'What the caller may do to this resource at all, of create and delete (one by one or in bulk): decided by its guards and the caller\'s roles, as those calls decide. A rule on rows or fields can still refuse one document (its _actions) or one value',
        resolve: ({ svc }, _a, ctx) => resourceActions(svc, ctx.actor),
      }),
      cascade: t.field({
        type: [CascadeRule], nullable: false, description: 'Its references to other resources',
        resolve: ({ def }) => def.cascade.map((r) => ({ resource: r.references, field: r.field, on_delete: r.on_delete })),
      }),
      referenced_by: t.field({
        type: [CascadeRule], nullable: false, description: 'References of other resources to it (deny: a referenced document cannot be deleted)',
        resolve: ({ def }) => registry.referencing(def.name).map((r) => ({ resource: r.service.def.name, field: r.field, on_delete: r.on_delete })),
      }),
    }),
  });
  builder.queryField('resourceTypes', (t) =>
    t.withAuth(scopes(RESOURCE_PERMISSIONS.types)).field({
      type: [Resource], nullable: false,
      description: 'Every registered resource: fields, operations, search, sort, paging, bulk and cascade rules (signed-in users)',
      resolve: (_r, _a, ctx) => {
        const actor = ctx.actor;
        return registry.list().map((svc) => ({
          def: svc.def,
          svc,
          accessible: hasSystemScope(actor) || svc.def.guards.features.every((f) => actor.features.includes(f)),
        }));
      },
    }),
  );
}
