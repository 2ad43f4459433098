import type { Collection } from 'mongoose';
import { z } from 'zod';
import type { Logger } from '../logger.ts';
import { definePlugin } from '../plugin.ts';
import { defineRoute } from '../http/route.ts';
import { idParams, objectId, pageQuery } from '../http/schemas.ts';
import { parseInput as parse, requireAdmin, requireUser } from '../graphql.ts';
import { identityModels, ROLES } from './models.ts';
import { IdentityService } from './service.ts';
import { AuthFailureLimiter, createLimiter } from '../rate-limit.ts';

declare module '../services.ts' {
  interface Services {
    identity: IdentityService;
    /** Failed-authentication counters (per ip and per identity) for every plugin that authenticates. */
    authFailures: AuthFailureLimiter;
  }
}

const createUserBody = z
  .object({
    email: z.string().email(),
    name: z.string().min(1).max(200),
    tenant_id: objectId.optional(),
    roles: z.array(z.enum(ROLES)).min(1).optional(),
    features: z.array(z.string().min(1)).optional(),
    attributes: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

const updateUserBody = z
  .object({
    name: z.string().min(1).max(200),
    roles: z.array(z.enum(ROLES)).min(1),
    features: z.array(z.string().min(1)),
    attributes: z.record(z.string(), z.unknown()),
    is_active: z.boolean(),
  })
  .partial()
  .strict()
  .refine((o) => Object.keys(o).length > 0, { message: 'Give at least one of name, roles, features, attributes, is_active' });

const usersQuery = pageQuery(50, 500).extend({ tenant_id: objectId.optional() });

/** Core plugin: tenants, users, API keys, bearer tokens, `/auth/*` and `/admin/{tenants,users,api-keys}`. */
export const identityPlugin = definePlugin({
  name: 'identity',
  async setup({ db, config, log, services, hooks }) {
    const models = identityModels(db);
    await migrateUsers(models.User.collection, log);
    // Bootstrap below writes users and keys during setup, before the kernel builds every model's
    // indexes; unique emails and key hashes hold only once their indexes exist, so build these now.
    await Promise.all([models.Tenant.init(), models.User.init(), models.ApiKey.init()]);
    const identity = new IdentityService(models, config, log, hooks);
    services.provide('identity', identity);
    services.provide('authFailures', new AuthFailureLimiter(config.RATE_LIMIT_ENABLED ? await createLimiter(config, db, 'auth_failures', config.AUTH_FAILURE_LIMIT) : null));

    if (config.ADMIN_API_KEY) {
      const res = await identity.bootstrap(config.ADMIN_API_KEY, config.ADMIN_EMAIL);
      log.info({ user_id: res.user_id, email: config.ADMIN_EMAIL }, res.created ? 'bootstrap admin key registered' : 'bootstrap admin key already registered');
    } else if ((await identity.countUsers()) === 0) {
      log.warn(
        'No users exist yet. Restart with ADMIN_API_KEY=<a random string of 16+ characters> to create the system administrator, ' +
          'then call POST /admin/tenants, /admin/users and /admin/api-keys with that key (see README).',
      );
    }

    return {
      // The account itself (docs/privacy.md, "The account"): the privacy plugin pseudonymises these
      // fields last, with per-user values, and disables the account. `attributes` are emptied.
      personalData: [
        { name: 'users', model: models.User.modelName, subject_field: '_id', gdpr_fields: ['email', 'name', 'attributes'], tenant_field: 'tenant_id', neutral: { attributes: {} }, on_erasure: 'account' },
      ],
      routes: [
        defineRoute({
          method: 'POST', path: '/auth/token', tags: ['auth'], summary: 'Exchange the presented credential for a bearer token',
          handler: ({ user }) => identity.issueToken(user!),
        }),
        defineRoute({
          method: 'GET', path: '/auth/me', tags: ['auth'], summary: 'The caller with tenant, roles and features',
          // The credential reference is internal (it names the key behind the request).
          handler: ({ user }) => {
            const { credential: _credential, ...me } = user!;
            return me;
          },
        }),
        defineRoute({
          method: 'POST', path: '/admin/tenants', tags: ['admin'], auth: 'system', status: 201, summary: 'Create a tenant',
          body: z.object({ name: z.string().min(1).max(200) }).strict(),
          handler: ({ user, body }) => identity.createTenant(user!, body),
        }),
        defineRoute({
          method: 'GET', path: '/admin/tenants', tags: ['admin'], auth: 'admin', summary: 'List tenants (own tenant for tenant admins)',
          query: pageQuery(50, 500),
          handler: ({ user, query }) => identity.listTenants(user!, query),
        }),
        defineRoute({
          method: 'POST', path: '/admin/users', tags: ['admin'], auth: 'admin', status: 201, summary: 'Create a user',
          body: createUserBody,
          handler: ({ user, body }) => identity.createUser(user!, body),
        }),
        defineRoute({
          method: 'GET', path: '/admin/users', tags: ['admin'], auth: 'admin', summary: 'List users (own tenant for tenant admins)',
          query: usersQuery,
          handler: ({ user, query }) => identity.listUsers(user!, query),
        }),
        defineRoute({
          method: 'PATCH', path: '/admin/users/:id', tags: ['admin'], auth: 'admin',
          summary: 'Change a user (name, roles, features, attributes, is_active); is_active false cuts the user off',
          params: idParams, body: updateUserBody,
          handler: ({ user, params, body }) => identity.updateUser(user!, params.id, body),
        }),
        defineRoute({
          method: 'DELETE', path: '/admin/users/:id', tags: ['admin'], auth: 'admin', status: 204,
          summary: 'Soft-delete a user: its keys are revoked, the audit trail is kept',
          params: idParams,
          handler: async ({ user, params }) => {
            await identity.deleteUser(user!, params.id);
          },
        }),
        defineRoute({
          method: 'POST', path: '/admin/api-keys', tags: ['admin'], auth: 'admin', status: 201,
          summary: 'Create an API key; the plain key is returned once',
          body: z.object({ user_id: objectId, name: z.string().min(1).max(200) }).strict(),
          handler: ({ user, body }) => identity.createApiKey(user!, body),
        }),
        defineRoute({
          method: 'DELETE', path: '/admin/api-keys/:id', tags: ['admin'], auth: 'admin', summary: 'Revoke an API key',
          params: idParams,
          handler: ({ user, params }) => identity.revokeApiKey(user!, params.id),
        }),
      ],
      graphql(builder) {
        const Me = builder.objectRef<{ id: string; email: string; name: string; tenant_id: string; roles: string[]; scope: string | null; features: string[]; attributes: unknown; is_active?: boolean }>('User');
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
          }),
        });
        const Tenant = builder.objectRef<{ id: string; name: string; is_system: boolean; created_at: Date | null }>('Tenant');
        Tenant.implement({
          fields: (t) => ({
            id: t.exposeID('id', { nullable: false }),
            name: t.exposeString('name', { nullable: false }),
            is_system: t.exposeBoolean('is_system', { nullable: false }),
            created_at: t.expose('created_at', { type: 'DateTime' }),
          }),
        });
        const pageOf = (a: { page?: number | null; per_page?: number | null }) => ({
          page: Math.max(1, a.page ?? 1),
          per_page: Math.min(500, Math.max(1, a.per_page ?? 50)),
        });
        builder.queryFields((t) => ({
          me: t.field({ type: Me, resolve: (_r, _a, ctx) => requireUser(ctx) }),
          tenants: t.field({
            type: [Tenant], nullable: false, args: { page: t.arg.int(), per_page: t.arg.int() },
            resolve: async (_r, a, ctx) => (await identity.listTenants(requireAdmin(ctx), pageOf(a))).items,
          }),
          users: t.field({
            type: [Me], nullable: false, args: { page: t.arg.int(), per_page: t.arg.int() },
            resolve: async (_r, a, ctx) => (await identity.listUsers(requireAdmin(ctx), pageOf(a))).items,
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
        const ApiKey = builder.objectRef<{ id: string; name: string; user_id: string; tenant_id: string; prefix: string; key?: string }>('ApiKey');
        ApiKey.implement({
          fields: (t) => ({
            id: t.exposeID('id', { nullable: false }),
            name: t.exposeString('name', { nullable: false }),
            user_id: t.exposeString('user_id', { nullable: false }),
            tenant_id: t.exposeString('tenant_id', { nullable: false }),
            prefix: t.exposeString('prefix', { nullable: false }),
            key: t.string({ description: 'The plain key: only in the createApiKey answer', resolve: (k) => k.key ?? null }),
          }),
        });
        builder.mutationFields((t) => ({
          issueToken: t.field({ type: Token, nullable: false, resolve: (_r, _a, ctx) => identity.issueToken(requireUser(ctx)) }),
          createTenant: t.field({
            type: Tenant, nullable: false, args: { name: t.arg.string({ required: true }) },
            resolve: (_r, a, ctx) => identity.createTenant(requireAdmin(ctx), parse(z.object({ name: z.string().min(1).max(200) }), a)),
          }),
          createUser: t.field({
            type: Me, nullable: false, args: { input: t.arg({ type: 'JSON', required: true }) },
            resolve: (_r, a, ctx) => identity.createUser(requireAdmin(ctx), parse(createUserBody, a.input)),
          }),
          updateUser: t.field({
            type: Me, nullable: false, args: { id: t.arg.string({ required: true }), input: t.arg({ type: 'JSON', required: true }) },
            resolve: (_r, a, ctx) => identity.updateUser(requireAdmin(ctx), parse(idParams, { id: a.id }).id, parse(updateUserBody, a.input)),
          }),
          deleteUser: t.field({
            type: 'Boolean', nullable: false, description: 'Soft-delete a user (true when done)', args: { id: t.arg.string({ required: true }) },
            resolve: async (_r, a, ctx) => {
              await identity.deleteUser(requireAdmin(ctx), parse(idParams, a).id);
              return true;
            },
          }),
          createApiKey: t.field({
            type: ApiKey, nullable: false, args: { user_id: t.arg.string({ required: true }), name: t.arg.string({ required: true }) },
            resolve: (_r, a, ctx) => identity.createApiKey(requireAdmin(ctx), parse(z.object({ user_id: objectId, name: z.string().min(1).max(200) }), a)),
          }),
          revokeApiKey: t.field({
            type: ApiKey, nullable: false, args: { id: t.arg.string({ required: true }) },
            resolve: (_r, a, ctx) => identity.revokeApiKey(requireAdmin(ctx), parse(idParams, a).id),
          }),
        }));
      },
    };
  },
});

/**
 * Brings a users collection of an earlier version up to date: emails were globally unique (index
 * `email_1`) and users had no `is_deleted`. Safe to run on every start and from several processes.
 */
async function migrateUsers(coll: Collection, log: Logger): Promise<void> {
  const indexes = await coll.indexes().catch(() => []);
  if (indexes.some((i) => i.name === 'email_1' && i.unique)) {
    await coll.dropIndex('email_1').catch(() => undefined);
    log.info('users: dropped the global unique email index; emails are now unique per tenant');
  }
  await coll.updateMany({ is_deleted: { $exists: false } }, { $set: { is_deleted: false } });
}
