import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { hasSystemScope, type AuthUser } from '../../core/context.ts';
import { AccessDeniedError } from '../../core/errors.ts';
import { defineResource, type ResourceDefinition, type ResourceOptions } from './define.ts';
import { ResourceRegistry } from './registry.ts';
import { resourceRoutes } from './rest.ts';
import { resourceGraphQL } from './graphql.ts';
import { demoResources } from './demo.ts';
import { DEFAULT_QUERY_LIMITS, queryLimitsSchema } from './query.ts';
import type { ResourceService } from './service.ts';

export { defineResource } from './define.ts';
export type { ResourceDefinition, ResourceOptions, CascadeRule } from './define.ts';
export type { ResourceService } from './service.ts';

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
   * @throws AccessDeniedError for a non-system caller, tenant administrators included (nothing deleted)
   * @example await services.get('resources').purgeSoftDeleted(systemActor(tenantId), 30)
   */
  purgeSoftDeleted(actor: AuthUser, days?: number): Promise<{ deleted_count: number; cutoff_date: Date; resources: Record<string, number> }>;
}

declare module '../../core/services.ts' {
  interface Services {
    resources: ResourcesApi;
  }
}

/**
 * The resources plugin: every registered resource gets the full API of spec document 1.
 * Options: `resources` (definitions to register; default: the demo `/projects` and `/tasks`),
 * `limits` (abuse caps of list queries).
 */
export const resourcesPlugin = definePlugin({
  name: 'resources',
  options: z.object({
    resources: z.array(z.custom<ResourceDefinition>((v) => !!v && typeof v === 'object' && 'fields' in v)).default(demoResources),
    limits: queryLimitsSchema.partial().default({}),
  }),
  setup({ db, hooks, config, services, options }) {
    const limits = { ...DEFAULT_QUERY_LIMITS, ...options.limits };
    const registry = new ResourceRegistry(db, { hooks, config, limits });
    for (const def of options.resources) registry.register(def);

    const purgeSoftDeleted: ResourcesApi['purgeSoftDeleted'] = async (actor, days = config.SOFT_DELETE_RETENTION_DAYS) => {
      // Refused up front: also when no resource is registered, so the answer never depends on the registry.
      if (!hasSystemScope(actor)) throw new AccessDeniedError('System administrator required');
      const results = await Promise.all(registry.list().map((s) => s.purgeSoftDeleted(actor, days)));
      return {
        deleted_count: results.reduce((n, r) => n + r.deleted_count, 0),
        cutoff_date: new Date(Date.now() - days * 86_400_000),
        resources: Object.fromEntries(results.map((r) => [r.resource, r.deleted_count])),
      };
    };
    services.provide('resources', {
      register: (def) => registry.register('graphqlName' in def ? def : defineResource(def)),
      get: (name) => registry.get(name),
      list: () => registry.list(),
      purgeSoftDeleted,
    });

    return {
      routes: () => {
        registry.seal();
        return [
          defineRoute({
            method: 'GET', path: '/admin/schema', auth: 'admin', tags: ['admin'], summary: 'Every registered resource: fields, search, sort, paging, bulk, guards, cascade, personal data',
            handler: () => registry.describe(),
          }),
          ...registry.list().flatMap(resourceRoutes),
        ];
      },
      graphql: (builder) => resourceGraphQL(builder, registry),
      personalData: () => registry.personalData(),
      jobs: [
        {
          name: 'purge_soft_deleted',
          description: 'Permanently removes documents soft-deleted longer ago than SOFT_DELETE_RETENTION_DAYS',
          timeout: 600,
          params: z.object({ days: z.number().int().min(1).optional().describe('Override SOFT_DELETE_RETENTION_DAYS') }),
          // As the run's actor: a per-tenant run purges its tenant only.
          run: async (ctx, params: { days?: number | undefined }) => purgeSoftDeleted(ctx.actor, params.days),
        },
      ],
    };
  },
});
