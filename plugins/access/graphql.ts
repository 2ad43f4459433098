import { givenArgs, pageObject, parseInput, type Builder, scopes } from '../../core/graphql.ts';
import { idParams } from '../../core/http/schemas.ts';
import type { Actor } from '../../core/context.ts';
import { createRoleInput, explainInput, rolesQuery, updateRoleInput, type ExplainView, type RoleView } from './schemas.ts';
import { ROLE_PERMISSIONS, type RoleStore } from './roles.ts';
import type { Action } from './rules.ts';

type Explain = (actor: Actor, input: { user_id: string; resource: string; action: Action }) => Promise<ExplainView>;

/** `Role`, `roles` / `role`, `createRole` / `updateRole` / `deleteRole` and `explainAccess`: the REST operations of /admin/roles. */
export function accessGraphql(builder: Builder, roles: RoleStore, explain: Explain): void {
  const Role = builder.objectRef<RoleView>('Role');
  Role.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      name: t.exposeString('name', { nullable: false }),
      description: t.exposeString('description'),
      includes: t.exposeStringList('includes', { nullable: false }),
      permissions: t.expose('permissions', { type: 'JSON', nullable: false }),
      created_at: t.expose('created_at', { type: 'DateTime' }),
      updated_at: t.expose('updated_at', { type: 'DateTime' }),
    }),
  });
  const RolePage = pageObject(builder, 'RolePage', Role);
  builder.queryFields((t) => ({
    roles: t.withAuth(scopes(ROLE_PERMISSIONS.list)).field({
      type: RolePage, nullable: false, args: { page: t.arg.int(), per_page: t.arg.int() },
      description: 'Custom roles with their total, as GET /admin/roles',
      resolve: (_r, a, ctx) => roles.list(ctx.actor, parseInput(rolesQuery, givenArgs(a))),
    }),
    role: t.withAuth(scopes(ROLE_PERMISSIONS.get)).field({
      type: Role, nullable: false, args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => roles.get(ctx.actor, parseInput(idParams, a).id),
    }),
    explainAccess: t.withAuth(scopes(ROLE_PERMISSIONS.explain)).field({
      type: 'JSON', nullable: false, description: 'The effective rule of a user, as POST /admin/access/explain',
      args: { user_id: t.arg.string({ required: true }), resource: t.arg.string({ required: true }), action: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => explain(ctx.actor, parseInput(explainInput, a)),
    }),
  }));
  builder.mutationFields((t) => ({
    createRole: t.withAuth(scopes(ROLE_PERMISSIONS.create)).field({
      type: Role, nullable: false, args: { input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, a, ctx) => roles.create(ctx.actor, parseInput(createRoleInput, a.input)),
    }),
    updateRole: t.withAuth(scopes(ROLE_PERMISSIONS.update)).field({
      type: Role, nullable: false, args: { id: t.arg.string({ required: true }), input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, a, ctx) => roles.update(ctx.actor, parseInput(idParams, { id: a.id }).id, parseInput(updateRoleInput, a.input)),
    }),
    deleteRole: t.withAuth(scopes(ROLE_PERMISSIONS.remove)).field({
      type: 'Boolean', nullable: false, description: 'Delete a custom role (true when done)', args: { id: t.arg.string({ required: true }) },
      resolve: async (_r, a, ctx) => {
        await roles.remove(ctx.actor, parseInput(idParams, a).id);
        return true;
      },
    }),
  }));
}
