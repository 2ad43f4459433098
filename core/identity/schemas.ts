import { z } from 'zod';
import { objectId, pageQuery } from '../http/schemas.ts';
import { ROLES } from './models.ts';

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
    roles: z.array(z.enum(ROLES)).min(1).optional(),
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
    roles: z.array(z.enum(ROLES)).min(1),
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
