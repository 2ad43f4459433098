import { givenArgs, pageObject, parseInput, type Builder, scopes } from '../../core/graphql.ts';
import { idParams } from '../../core/http/schemas.ts';
import { apiKeysQuery, createApiKeyInput, createTenantInput, createUserInput, tenantsQuery, updateUserInput, usersQuery, type PageRequest } from './schemas.ts';
import type { Actor } from '../../core/context.ts';
import { IDENTITY_PERMISSIONS, type ApiKeyView, type IdentityService, type TenantView } from './service.ts';
import type { MembershipService, MembershipView } from './memberships.ts';

/** GraphQL `page` / `per_page` arguments: clamped to the REST limits (default 50, at most 500), never refused. */
const clampPage = (a: { page?: number | null; per_page?: number | null }): PageRequest => ({
  page: Math.max(1, a.page ?? 1),
  per_page: Math.min(500, Math.max(1, a.per_page ?? 50)),
});

/**
 * The identity fragment: `User` (`me`, `users`, `usersPage`), `Tenant` (`tenants`, `tenantsPage`),
 * `ApiKey`, `TokenResponse`, and the admin mutations. Arguments are validated with the REST
 * schemas; each field declares its permission from `IDENTITY_PERMISSIONS`, as its REST route does.
 */
export function identityGraphql(builder: Builder, identity: IdentityService, memberships: MembershipService): void {
  // `me` is the actor itself; `users` and the mutations add `is_active` (and `created_at`, not exposed).
  const Me = builder.objectRef<Actor & { is_active?: boolean }>('User');
  Me.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      email: t.exposeString('email', { nullable: false }),
      name: t.exposeString('name', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      roles: t.exposeStringList('roles', { nullable: false }),
      scope: t.exposeString('scope'),
      features: t.exposeStringList('features', { nullable: false }),
      attributes: t.expose('attributes', { type: 'JSON' }),
      is_active: t.boolean({ nullable: false, resolve: (u) => u.is_active !== false }),
      last_admin: t.boolean({
        nullable: false, description: 'The only active administrator of its tenant (a console offers no Disable or Delete for it)',
        resolve: (u) => identity.isLastAdmin(u),
      }),
    }),
  });
  const Tenant = builder.objectRef<TenantView>('Tenant');
  Tenant.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      name: t.exposeString('name', { nullable: false }),
      is_system: t.exposeBoolean('is_system', { nullable: false }),
      created_at: t.expose('created_at', { type: 'DateTime' }),
    }),
  });
  // `tenants` and `users` answer a bare list (kept as they are for existing clients); `tenantsPage`
  // and `usersPage` answer core's page, with the total, as GET /admin/tenants and /admin/users do.
  const TenantPage = pageObject(builder, 'TenantPage', Tenant);
  const UserPage = pageObject(builder, 'UserPage', Me);
  const Membership = builder.objectRef<MembershipView>('Membership');
  Membership.implement({
    description: 'One membership of a person: the user that acts in tenant_id',
    fields: (t) => ({
      user_id: t.exposeID('user_id', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      tenant_name: t.exposeString('tenant_name'),
      roles: t.exposeStringList('roles', { nullable: false }),
      features: t.exposeStringList('features', { nullable: false }),
    }),
  });
  builder.queryFields((t) => ({
    me: t.withAuth(scopes(IDENTITY_PERMISSIONS.me)).field({ type: Me, resolve: (_r, _a, ctx) => ctx.actor }),
    myMemberships: t.withAuth(scopes(IDENTITY_PERMISSIONS.memberships)).field({
      type: [Membership], nullable: false, description: "Every active membership of the caller's person, as GET /auth/me lists them",
      resolve: (_r, _a, ctx) => memberships.membershipsOf(ctx.actor.id),
    }),
    tenants: t.withAuth(scopes(IDENTITY_PERMISSIONS.listTenants)).field({
      type: [Tenant], nullable: false, args: { page: t.arg.int(), per_page: t.arg.int() },
      description: 'One page of tenants, without the total (tenantsPage has it)',
      resolve: async (_r, a, ctx) => (await identity.listTenants(ctx.actor, clampPage(a))).items,
    }),
    tenantsPage: t.withAuth(scopes(IDENTITY_PERMISSIONS.listTenants)).field({
      type: TenantPage, nullable: false, args: { page: t.arg.int(), per_page: t.arg.int() },
      description: 'Tenants with their total, as GET /admin/tenants: every tenant for system administrators, their own for tenant administrators',
      resolve: (_r, a, ctx) => identity.listTenants(ctx.actor, parseInput(tenantsQuery, givenArgs(a))),
    }),
    users: t.withAuth(scopes(IDENTITY_PERMISSIONS.listUsers)).field({
      type: [Me], nullable: false, args: { page: t.arg.int(), per_page: t.arg.int(), tenant_id: t.arg.string({ description: 'System administrators: users of this tenant only' }) },
      description: 'One page of users, without the total (usersPage has it)',
      resolve: async (_r, a, ctx) => {
        const actor = ctx.actor;
        const { tenant_id } = parseInput(usersQuery.pick({ tenant_id: true }), givenArgs({ tenant_id: a.tenant_id }));
        return (await identity.listUsers(actor, { ...clampPage(a), ...(tenant_id ? { tenant_id } : {}) })).items;
      },
    }),
    usersPage: t.withAuth(scopes(IDENTITY_PERMISSIONS.listUsers)).field({
      type: UserPage, nullable: false,
      args: { page: t.arg.int(), per_page: t.arg.int(), tenant_id: t.arg.string({ description: 'System administrators: users of this tenant only' }) },
      description: 'Users with their total, as GET /admin/users: tenant administrators see their own tenant only',
      resolve: (_r, a, ctx) => identity.listUsers(ctx.actor, parseInput(usersQuery, givenArgs(a))),
    }),
    apiKeys: t.withAuth(scopes(IDENTITY_PERMISSIONS.listApiKeys)).field({
      type: [ApiKey], nullable: false, description: 'API keys you administer, newest first (never the key itself): of one user with user_id; revoked ones with include_revoked',
      args: { user_id: t.arg.string(), include_revoked: t.arg.boolean(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: async (_r, a, ctx) => {
        const actor = ctx.actor;
        const keys = await identity.listApiKeys(actor, { ...parseInput(apiKeysQuery, givenArgs({ user_id: a.user_id, include_revoked: a.include_revoked })), ...clampPage(a) });
        const emails = await identity.userEmails(actor, keys.map((k) => k.user_id));
        return keys.map((k) => ({ ...k, user_email: emails.get(k.user_id) ?? null }));
      },
    }),
  }));
  const Token = builder.objectRef<{ token: string; token_type: string; expires_in: number }>('TokenResponse');
  Token.implement({
    fields: (t) => ({
      token: t.exposeString('token', { nullable: false }),
      token_type: t.exposeString('token_type', { nullable: false }),
      expires_in: t.exposeInt('expires_in', { nullable: false }),
    }),
  });
  const ApiKey = builder.objectRef<ApiKeyView & { key?: string; user_email?: string | null }>('ApiKey');
  ApiKey.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      name: t.exposeString('name', { nullable: false }),
      user_id: t.exposeString('user_id', { nullable: false }),
      user_email: t.string({ description: "The owner's e-mail (in the apiKeys list)", resolve: (k) => k.user_email ?? null }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      prefix: t.exposeString('prefix', { nullable: false }),
      created_at: t.field({ type: 'DateTime', resolve: (k) => k.created_at ?? null }),
      last_used_at: t.field({ type: 'DateTime', resolve: (k) => k.last_used_at ?? null }),
      revoked_at: t.field({ type: 'DateTime', resolve: (k) => k.revoked_at ?? null }),
      key: t.string({ description: 'The plain key: only in the createApiKey answer', resolve: (k) => k.key ?? null }),
    }),
  });
  builder.mutationFields((t) => ({
    issueToken: t.withAuth(scopes(IDENTITY_PERMISSIONS.issueToken)).field({ type: Token, nullable: false, resolve: (_r, _a, ctx) => identity.issueToken(ctx.actor) }),
    createTenant: t.withAuth(scopes(IDENTITY_PERMISSIONS.createTenant)).field({
      type: Tenant, nullable: false, args: { name: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => identity.createTenant(ctx.actor, parseInput(createTenantInput, a)),
    }),
    createUser: t.withAuth(scopes(IDENTITY_PERMISSIONS.createUser)).field({
      type: Me, nullable: false, args: { input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, a, ctx) => identity.createUser(ctx.actor, parseInput(createUserInput, a.input)),
    }),
    updateUser: t.withAuth(scopes(IDENTITY_PERMISSIONS.updateUser)).field({
      type: Me, nullable: false, args: { id: t.arg.string({ required: true }), input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, a, ctx) => identity.updateUser(ctx.actor, parseInput(idParams, { id: a.id }).id, parseInput(updateUserInput, a.input)),
    }),
    deleteUser: t.withAuth(scopes(IDENTITY_PERMISSIONS.deleteUser)).field({
      type: 'Boolean', nullable: false, description: 'Soft-delete a user (true when done)', args: { id: t.arg.string({ required: true }) },
      resolve: async (_r, a, ctx) => {
        await identity.deleteUser(ctx.actor, parseInput(idParams, a).id);
        return true;
      },
    }),
    createApiKey: t.withAuth(scopes(IDENTITY_PERMISSIONS.createApiKey)).field({
      type: ApiKey, nullable: false, args: { user_id: t.arg.string({ required: true }), name: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => identity.createApiKey(ctx.actor, parseInput(createApiKeyInput, a)),
    }),
    revokeApiKey: t.withAuth(scopes(IDENTITY_PERMISSIONS.revokeApiKey)).field({
      type: ApiKey, nullable: false, args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => identity.revokeApiKey(ctx.actor, parseInput(idParams, a).id),
    }),
  }));
}
