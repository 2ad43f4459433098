import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import type { Actor } from '../../core/context.ts';
import { defineResource, type ResourceDefinition, type ResourceOptions } from './define.ts';
import { ResourceRegistry, type PurgeResult } from './registry.ts';
import { resourceRoutes } from './rest.ts';
import { resourceEventTypes } from './events.ts';
import { adminSchemaResponse, responseSchemas } from './output.ts';
import { resourceGraphQL } from './graphql.ts';
import { sampleResources, sampleResourcesWithFiles } from './sample-resources.ts';
import type { FileReferenceChecker } from './write-checks.ts';
import { DEFAULT_QUERY_LIMITS, queryLimitsSchema } from './query.ts';
import type { ResourceService } from './service.ts';
import { accessFactsOf } from './access.ts';
import { versionRoutes } from './versions/rest.ts';
import { setUpVersions, withVersionsPersonalData } from './versions/setup.ts';
import { draftRoutes, draftsReadRows, publishDueDrafts } from './drafts/setup.ts';
import { resourceJobs } from './jobs.ts';

export { defineResource } from './define.ts';
export type { ResourceDefinition, ResourceOptions, CascadeRule } from './define.ts';
export type { ResourceService } from './service.ts';
export type { FileReferenceChecker } from './write-checks.ts';
export type { FileFieldRule, FileVariantSpec } from './fields.ts';

/** What other plugins get from `services.get('resources')`. */
export interface ResourcesApi {
  /**
   * Register a resource; call it from your plugin's `setup()` (declare `dependsOn: ['resources']`).
   * Takes the options of `defineResource` (defined here, so the caller needs no value import) or a
   * definition it already made.
   */
  register(def: ResourceOptions | ResourceDefinition): ResourceService;
  get(name: string): ResourceService | undefined;
  list(): ResourceService[];
  /**
   * Permanently remove documents soft-deleted longer ago than `SOFT_DELETE_RETENTION_DAYS` (or
   * `days`), in every resource, within the actor's tenant scope: `systemActor()` purges every
   * tenant, `systemActor(tenantId)` that tenant only (a job passes `ctx.actor`).
   * @throws AccessDeniedError for a non-system actor, tenant administrators included (nothing deleted)
   * @example await services.get('resources').purgeSoftDeleted(systemActor(tenantId), 30)
   */
  purgeSoftDeleted(actor: Actor, days?: number): Promise<PurgeResult>;
  /**
   * The zod schema of a registered resource's document as its REST routes answer it (OpenAPI
   * component `<GraphQL name>`), for a plugin's own routes that answer one (`response`). Wrap it
   * in `z.lazy` when the routes are declared before the resource is registered.
   * @throws Error for an unknown resource
   */
  documentSchema(name: string): z.ZodType;
  /**
   * What the access plugin needs of a resource: its client fields, the always-readable system
   * fields, its code rules and its `where` compiler (the `?where=` language; throws a 400 outside it).
   */
  accessFacts(name: string): ResourceAccessFacts | undefined;
  /**
   * Sets the checks of `file` fields (ready, accepted type, size; declared variants), once, from
   * the plugin holding files. Without it a write naming a file is refused.
   * @throws Error when one is already set
   */
  setFileChecker(checker: FileReferenceChecker): void;
  /**
   * Publishes every draft whose `publish_at` is at or before `now`, in the actor's scope, each once
   * across replicas (the `publish_drafts` job; docs/versions.md#drafts).
   * @example await services.get('resources').publishDue(systemActor())
   */
  publishDue(actor: Actor, now?: Date): Promise<{ published: number; conflicts: number }>;
}

/** See {@link ResourcesApi.accessFacts}. */
export interface ResourceAccessFacts {
  name: string;
  fields: string[];
  system: string[];
  code: ResourceDefinition['access'];
  compile(where: Record<string, unknown>): Record<string, unknown>;
}

declare module '../../core/services.ts' {
  interface Services {
    resources: ResourcesApi;
  }
}

/**
 * The resources plugin: every registered resource gets REST and GraphQL list, get, create, update,
 * replace, soft delete and bulk operations. Options: `resources` (definitions to register; when
 * absent, the sample `/projects` and `/tasks` if `SAMPLE_RESOURCES_ENABLED`), `limits` (abuse caps
 * of list queries).
 */
export const resourcesPlugin = definePlugin({
  name: 'resources',
  options: z.object({
    resources: z.array(z.custom<ResourceDefinition>((v) => !!v && typeof v === 'object' && 'fields' in v)).optional(),
    limits: queryLimitsSchema.partial().default({}),
  }),
  setup({ db, hooks, config, services, options, tenancy }) {
    const limits = { ...DEFAULT_QUERY_LIMITS, ...options.limits };
    let fileChecker: FileReferenceChecker | undefined;
    const registry = new ResourceRegistry(db, { hooks, config, limits, tenancy, events: services.get('events'), access: () => services.maybe('access'), files: () => fileChecker, drafts: draftsReadRows });
    const samples = config.SAMPLE_RESOURCES_ENABLED ?? config.NODE_ENV !== 'production';
    // With files on, `projects` gains its `attachment` file field.
    for (const def of options.resources ?? (samples ? (config.FILES_ENABLED ? sampleResourcesWithFiles : sampleResources) : [])) registry.register(def);
    const versions = setUpVersions(db, registry, services.get('events'));

    services.provide('resources', {
      register: (def) => registry.register('graphqlName' in def ? def : defineResource(def)),
      get: (name) => registry.get(name),
      list: () => registry.list(),
      purgeSoftDeleted: (actor, days) => registry.purgeSoftDeleted(actor, days),
      documentSchema: (name) => {
        const svc = registry.get(name);
        if (!svc) throw new Error(`No resource "${name}" is registered`);
        return responseSchemas(svc.def).document;
      },
      accessFacts: (name) => {
        const svc = registry.get(name);
        return svc && accessFactsOf(svc, limits);
      },
      publishDue: (actor, now) => publishDueDrafts(registry, actor, now),
      setFileChecker: (checker) => {
        if (fileChecker) throw new Error('A file checker is already set');
        fileChecker = checker;
      },
    });

    return {
      routes: () => {
        registry.seal();
        return [
          defineRoute({
            method: 'GET', path: '/admin/schema', auth: 'admin', tags: ['admin'], summary: 'Every registered resource: fields, search, sort, paging, bulk, guards, cascade, personal data',
            response: adminSchemaResponse,
            handler: () => registry.describe(),
          }),
          ...registry.list().flatMap(resourceRoutes),
          ...registry.list().flatMap((svc) => [...versionRoutes(svc, versions), ...draftRoutes(svc)]),
        ];
      },
      graphql: (builder) => resourceGraphQL(builder, registry, versions),
      personalData: () => withVersionsPersonalData(registry.personalData(), registry, versions),
      eventTypes: () => registry.list().flatMap((svc) => resourceEventTypes(svc.def)),
      jobs: resourceJobs(registry, versions),
    };
  },
});
