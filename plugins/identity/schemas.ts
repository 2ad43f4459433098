import { z } from 'zod';
import { objectId, pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';

/** A role name: a built-in role or a custom role of the user's tenant (checked by the service). */
const roleName = z.string().min(1).max(64);

/** `POST /admin/tenants` body, GraphQL `createTenant` arguments. */
export const createTenantInput = z.object({ name: z.string().min(1).max(200) }).strict();
export type CreateTenantInput = z.output<typeof createTenantInput>;

/** `GET /admin/tenants` query: `page` / `per_page` (default 50, at most 500). */
export const tenantsQuery = pageQuery(50, 500);
export type PageRequest = z.output<typeof tenantsQuery>;

/** `POST /admin/users` body, GraphQL `createUser(input)`. Without `tenant_id` the user goes to the actor's tenant. */
export const createUserInput = z
  .object({
    email: z.string().email(),
    name: z.string().min(1).max(200),
    tenant_id: objectId.optional(),
    /** `user`, `admin`, or custom roles of the user's tenant. */
    roles: z.array(roleName).min(1).optional(),
    features: z.array(z.string().min(1)).optional(),
    attributes: z.record(z.string(), z.unknown()).optional(),
    /**
     * `system`: another system administrator (role admin, every tenant), in the system tenant. Only a
     * system administrator may create one; the creation is audited like any user's.
     */
    scope: z.literal('system').optional(),
  })
  .strict();
export type CreateUserInput = z.output<typeof createUserInput>;

/** Fields `PATCH /admin/users/{id}` (GraphQL `updateUser`) may change; anything else is refused (422), and so is an empty body. */
export const updateUserInput = z
  .object({
    name: z.string().min(1).max(200),
    roles: z.array(roleName).min(1),
    features: z.array(z.string().min(1)),
    attributes: z.record(z.string(), z.unknown()),
    is_active: z.boolean(),
  })
  .partial()
  .strict()
  .refine((o) => Object.keys(o).length > 0, { message: 'Give at least one of name, roles, features, attributes, is_active' });
export type UpdateUserInput = z.output<typeof updateUserInput>;

/** `GET /admin/users` query: a page, optionally of one tenant. */
export const usersQuery = pageQuery(50, 500).extend({ tenant_id: objectId.optional() });
export type ListUsersQuery = z.output<typeof usersQuery>;

/** `POST /admin/api-keys` body, GraphQL `createApiKey` arguments. */
export const createApiKeyInput = z.object({ user_id: objectId, name: z.string().min(1).max(200) }).strict();
export type CreateApiKeyInput = z.output<typeof createApiKeyInput>;

/** GraphQL `apiKeys` arguments: a page of keys, optionally of one user, revoked ones on request. */
export const apiKeysQuery = pageQuery(50, 500).extend({ user_id: objectId.optional(), include_revoked: z.boolean().default(false) });
export type ListApiKeysQuery = z.output<typeof apiKeysQuery>;

// Response schemas (OpenAPI documentation of what the routes answer).

/** One membership of a person: the users document that acts in `tenant_id`. */
export const membershipView = z.object({
  user_id: z.string(), tenant_id: z.string(), tenant_name: z.string().nullable(), roles: z.array(z.string()), features: z.array(z.string()),
}).meta({ id: 'Membership' });

/** The actor as `GET /auth/me` shows it. */
export const meView = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string(),
  tenant_id: z.string(),
  roles: z.array(z.string()),
  scope: z.enum(['system']).nullable().describe('`system` for system administrators'),
  is_system_user: z.boolean(),
  features: z.array(z.string()),
  attributes: z.record(z.string(), z.unknown()),
  acting_tenant_id: z.string().nullable().optional().describe('System administrators: the tenant chosen with `X-Tenant-Id`'),
  memberships: z.array(membershipView).optional().describe("Every active membership of the caller's person, this one included (`GET /auth/me`)"),
});

/** A user in admin responses. */
export const userView = meView.omit({ acting_tenant_id: true, memberships: true }).extend({ is_active: z.boolean(), created_at: z.date().nullable() }).meta({ id: 'User' });
/** A tenant in admin responses. */
export const tenantView = z.object({ id: z.string(), name: z.string(), is_system: z.boolean(), created_at: z.date().nullable() }).meta({ id: 'Tenant' });
/** An API key in admin responses (never its hash). */
export const apiKeyView = z
  .object({
    id: z.string(), name: z.string(), user_id: z.string(), tenant_id: z.string(), prefix: z.string(),
    revoked_at: z.date().nullable(), last_used_at: z.date().nullable(), created_at: z.date().nullable(),
  })
  .meta({ id: 'ApiKey' });
/** The creation answer: the key plus the plain `key`, shown this once. */
export const createdApiKeyView = apiKeyView.extend({ key: z.string().describe('The plain key; it is not shown again') });
/** `POST /auth/token`. */
export const tokenView = z.object({ token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int().describe('Seconds') });

/** `GET /admin/tenants`: core's page (`total_pages` too, as every offset list). */
export const tenantListView = pageSchema(tenantView);
/** `GET /admin/users`: core's page. */
export const userListView = pageSchema(userView);
