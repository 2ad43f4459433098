import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { idParams } from '../../core/http/schemas.ts';
import { pageHeaderDocs, setPageHeaders } from '../../lib/page.ts';
import { roleModel } from './model.ts';
import { ROLE_PERMISSIONS, RoleStore, roleEventTypes } from './roles.ts';
import { AccessService, checkCodeAccess, type ResourceAccessSource } from './service.ts';
import { createRoleInput, explainInput, explainView, roleListView, rolesQuery, roleView, updateRoleInput } from './schemas.ts';
import { accessGraphql } from './graphql.ts';
import type { Action, CodeAccess } from './rules.ts';

export type { AccessService, ReadAccess, WriteAccess, WriteRequest } from './service.ts';
export type { Action, CodeAccess, CodeRule, Rule } from './rules.ts';

declare module '../../core/services.ts' {
  interface Services {
    /** Effective access rules (roles and code rules) for the resources plugin. */
    access: AccessService;
  }
}

/**
 * Access policies: custom roles per tenant (`/admin/roles`), their rules for rows and fields of
 * every resource, and `POST /admin/access/explain`. The resources plugin asks the `access`
 * service for each caller's effective rule (docs/access.md).
 */
export const accessPlugin = definePlugin({
  name: 'access',
  dependsOn: ['resources'],
  setup({ db, config, services, tenancy }) {
    const resources = services.get('resources');
    const identity = services.get('identity');
    const events = services.get('events');
    // Asked several times per request under rules: a resource's facts are built once (resources are fixed once registered).
    const known = new Map<string, ResourceAccessSource>();
    const resource = (name: string): ResourceAccessSource | undefined => {
      const hit = known.get(name);
      if (hit) return hit;
      const facts = resources.accessFacts(name);
      if (!facts) return undefined;
      if (facts.code) checkCodeAccess(name, facts.code as CodeAccess);
      const source = { ...facts, code: facts.code as CodeAccess | undefined };
      known.set(name, source);
      return source;
    };
    const Role = roleModel(db);
    const holder: { roles?: RoleStore } = {};
    const access = new AccessService({ resource, loadRoles: (t) => holder.roles!.ofTenant(t), ttlMs: config.AUTH_CACHE_TTL_MS });
    const roles = (holder.roles = new RoleStore({ Role, events, tenancy, access, resource, roleHeld: (t, r) => identity.roleHeld(t, r) }));
    events.addSource(roles.source);
    // A role named by a resource's code rules exists in every tenant.
    const inCode = (n: string) => resources.list().some((r) => !!r.def.access?.[n]);
    identity.registerRoleCheck((tenantId, names) => roles.unknown(tenantId, names.filter((n) => !inCode(n))));
    services.provide('access', access);
    services.provide('eventAccess', {
      restricted: (actor, name) => access.eventRestricted(actor, name),
      view: (actor, name, data) => access.eventView(actor, name, data),
    });

    const explain = async (actor: Parameters<AccessService['explain']>[0], input: { user_id: string; resource: string; action: Action }) =>
      access.explain(await identity.userAsActor(actor, input.user_id), input.resource, input.action);

    return {
      eventTypes: roleEventTypes,
      routes: () => {
        for (const r of resources.list()) resource(r.def.name); // a malformed code rule fails at start-up
        return [
          defineRoute({
            method: 'POST', path: '/admin/roles', tags: ['admin'], auth: ROLE_PERMISSIONS.create, status: 201, summary: 'Create a custom role of your tenant', response: roleView,
            body: createRoleInput, handler: ({ actor, body }) => roles.create(actor, body),
          }),
          defineRoute({
            method: 'GET', path: '/admin/roles', tags: ['admin'], auth: ROLE_PERMISSIONS.list, summary: 'List the custom roles (own tenant for tenant admins)', response: roleListView,
            query: rolesQuery, docs: { responseHeaders: pageHeaderDocs('Roles') },
            handler: async ({ actor, query, ctx }) => setPageHeaders(ctx, await roles.list(actor, query)),
          }),
          defineRoute({
            method: 'GET', path: '/admin/roles/:id', tags: ['admin'], auth: ROLE_PERMISSIONS.get, summary: 'One custom role', response: roleView,
            params: idParams, handler: ({ actor, params }) => roles.get(actor, params.id),
          }),
          defineRoute({
            method: 'PATCH', path: '/admin/roles/:id', tags: ['admin'], auth: ROLE_PERMISSIONS.update, summary: 'Change a custom role (takes effect within AUTH_CACHE_TTL_MS everywhere)', response: roleView,
            params: idParams, body: updateRoleInput, handler: ({ actor, params, body }) => roles.update(actor, params.id, body),
          }),
          defineRoute({
            method: 'DELETE', path: '/admin/roles/:id', tags: ['admin'], auth: ROLE_PERMISSIONS.remove, status: 204, summary: 'Delete a custom role no user holds and no role includes',
            params: idParams,
            handler: async ({ actor, params }) => {
              await roles.remove(actor, params.id);
            },
          }),
          defineRoute({
            method: 'POST', path: '/admin/access/explain', tags: ['admin'], auth: ROLE_PERMISSIONS.explain, summary: 'The effective rule of a user for a resource and an action, after combining its roles',
            body: explainInput, response: explainView, handler: ({ actor, body }) => explain(actor, body),
          }),
        ];
      },
      graphql: (builder) => accessGraphql(builder, roles, explain),
    };
  },
});
