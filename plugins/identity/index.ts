import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { idParams } from '../../core/http/schemas.ts';
import { identityModels, migrateUsers } from './model.ts';
import { apiKeyView, createApiKeyInput, createdApiKeyView, createTenantInput, createUserInput, meView, tenantListView, tenantsQuery, tenantView, tokenView, updateUserInput, userListView, usersQuery, userView } from './schemas.ts';
import { IDENTITY_PERMISSIONS, IdentityService } from './service.ts';
import { MembershipService, migratePeople } from './memberships.ts';
import { identityEventTypes } from './events.ts';
import { identityGraphql } from './graphql.ts';
import { pageHeaderDocs, setPageHeaders } from '../../lib/page.ts';

export type { IdentityService } from './service.ts';
export type { MembershipService } from './memberships.ts';
export type { AuthenticationService } from './authentication.ts';
export type { IdentityModels, UserDoc } from './model.ts';

declare module '../../core/services.ts' {
  interface Services {
    identity: IdentityService;
    /** A person's memberships (users documents in several tenants) and the tenant a personal sign-in acts in. */
    memberships: MembershipService;
  }
}

/** Core plugin: tenants, users, API keys, bearer tokens, `/auth/*` and `/admin/{tenants,users,api-keys}`. */
export const identityPlugin = definePlugin({
  name: 'identity',
  async setup({ db, config, log, services, tenancy }) {
    const models = identityModels(db);
    await migrateUsers(models.User.collection, log);
    // Bootstrap below writes users and keys during setup, before the kernel builds every model's
    // indexes; unique emails and key hashes hold only once their indexes exist, so build these now.
    await Promise.all([models.Tenant.init(), models.User.init(), models.ApiKey.init(), models.Person.init()]);
    await migratePeople(models, log);
    const memberships = new MembershipService(models);
    services.provide('memberships', memberships);
    const identity = new IdentityService({ models, config, log, tenancy, events: () => services.get('events') });
    services.provide('identity', identity);
    services.provide('authentication', identity);

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
      eventTypes: identityEventTypes,
      // Left-behind entries of a process that died after a change are relayed by the sweep.
      ready: () => {
        for (const source of Object.values(identity.changes.sources)) services.get('events').addSource(source);
      },
      // The account itself (docs/privacy.md, "The account"): the privacy plugin pseudonymises these
      // fields last, with per-user values, and disables the account. `attributes` are emptied.
      personalData: [
        { name: 'users', model: models.User.modelName, subject_field: '_id', gdpr_fields: ['email', 'name', 'attributes'], tenant_field: 'tenant_id', neutral: { attributes: {} }, on_erasure: 'account' },
      ],
      routes: [
        defineRoute({
          method: 'POST', path: '/auth/token', auth: IDENTITY_PERMISSIONS.issueToken, tags: ['auth'], summary: 'Exchange the presented credential for a bearer token', response: tokenView,
          handler: ({ actor }) => identity.issueToken(actor),
        }),
        defineRoute({
          method: 'GET', path: '/auth/me', auth: IDENTITY_PERMISSIONS.me, tags: ['auth'], summary: 'The caller with tenant, roles and features, and the memberships of its person', response: meView,
          // The credential reference is internal (it names the key behind the request).
          handler: async ({ actor }) => {
            const { credential: _credential, ...me } = actor;
            return { ...me, memberships: await memberships.membershipsOf(me.id) };
          },
        }),
        defineRoute({
          method: 'POST', path: '/admin/tenants', tags: ['admin'], auth: IDENTITY_PERMISSIONS.createTenant, status: 201, summary: 'Create a tenant', response: tenantView,
          body: createTenantInput,
          handler: ({ actor, body }) => identity.createTenant(actor, body),
        }),
        defineRoute({
          method: 'GET', path: '/admin/tenants', tags: ['admin'], auth: IDENTITY_PERMISSIONS.listTenants, summary: 'List tenants (own tenant for tenant admins)', response: tenantListView,
          query: tenantsQuery, docs: { responseHeaders: pageHeaderDocs('Tenants') },
          handler: async ({ actor, query, ctx }) => setPageHeaders(ctx, await identity.listTenants(actor, query)),
        }),
        defineRoute({
          method: 'POST', path: '/admin/users', tags: ['admin'], auth: IDENTITY_PERMISSIONS.createUser, status: 201, summary: 'Create a user', response: userView,
          body: createUserInput,
          handler: ({ actor, body }) => identity.createUser(actor, body),
        }),
        defineRoute({
          method: 'GET', path: '/admin/users', tags: ['admin'], auth: IDENTITY_PERMISSIONS.listUsers, summary: 'List users (own tenant for tenant admins)', response: userListView,
          query: usersQuery, docs: { responseHeaders: pageHeaderDocs('Matching users') },
          handler: async ({ actor, query, ctx }) => setPageHeaders(ctx, await identity.listUsers(actor, query)),
        }),
        defineRoute({
          method: 'PATCH', path: '/admin/users/:id', tags: ['admin'], auth: IDENTITY_PERMISSIONS.updateUser,
          summary: 'Change a user (name, roles, features, attributes, is_active); is_active false cuts the user off',
          params: idParams, body: updateUserInput, response: userView,
          handler: ({ actor, params, body }) => identity.updateUser(actor, params.id, body),
        }),
        defineRoute({
          method: 'DELETE', path: '/admin/users/:id', tags: ['admin'], auth: IDENTITY_PERMISSIONS.deleteUser, status: 204,
          summary: 'Soft-delete a user: its keys are revoked, the audit trail is kept',
          params: idParams,
          handler: async ({ actor, params }) => {
            await identity.deleteUser(actor, params.id);
          },
        }),
        defineRoute({
          method: 'POST', path: '/admin/api-keys', tags: ['admin'], auth: IDENTITY_PERMISSIONS.createApiKey, status: 201,
          summary: 'Create an API key; the plain key is returned once', response: createdApiKeyView,
          body: createApiKeyInput,
          handler: ({ actor, body }) => identity.createApiKey(actor, body),
        }),
        defineRoute({
          method: 'DELETE', path: '/admin/api-keys/:id', tags: ['admin'], auth: IDENTITY_PERMISSIONS.revokeApiKey, summary: 'Revoke an API key', response: apiKeyView,
          params: idParams,
          handler: ({ actor, params }) => identity.revokeApiKey(actor, params.id),
        }),
      ],
      graphql: (builder) => identityGraphql(builder, identity, memberships),
    };
  },
});
