import { z } from 'zod';
import { objectId, pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';
import { ACTIONS, permissionsSchema } from './rules.ts';

const roleName = z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/, 'lower case letters, digits, - and _, starting with a letter');

/** `POST /admin/roles` body, GraphQL `createRole(input)`. */
export const createRoleInput = z
  .object({
    name: roleName,
    description: z.string().max(500).nullable().optional(),
    includes: z.array(roleName).max(50).optional(),
    permissions: permissionsSchema,
  })
  .strict();
export type CreateRoleInput = z.output<typeof createRoleInput>;

/** `PATCH /admin/roles/{id}` body: any of the creation fields; an empty body is refused. */
export const updateRoleInput = createRoleInput
  .partial()
  .strict()
  .refine((o) => Object.keys(o).length > 0, { message: 'Give at least one of name, description, includes, permissions' });
export type UpdateRoleInput = z.output<typeof updateRoleInput>;

/** `GET /admin/roles` query. */
export const rolesQuery = pageQuery(50, 500);
export type RolesQuery = z.output<typeof rolesQuery>;

/** `POST /admin/access/explain` body. */
export const explainInput = z.object({ user_id: objectId, resource: z.string().min(1), action: z.enum(ACTIONS) }).strict();
export type ExplainInput = z.output<typeof explainInput>;

/** A role in admin responses. */
export const roleView = z
  .object({
    id: z.string(),
    tenant_id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    includes: z.array(z.string()),
    permissions: z.record(z.string(), z.unknown()),
    created_at: z.date().nullable(),
    updated_at: z.date().nullable(),
  })
  .meta({ id: 'Role' });
export type RoleView = z.output<typeof roleView>;
export const roleListView = pageSchema(roleView);

const grantView = z.object({
  role: z.string(),
  rows: z.record(z.string(), z.unknown()).nullable(),
  fields: z.array(z.string()).nullable(),
  presets: z.record(z.string(), z.unknown()),
  check: z.record(z.string(), z.unknown()).nullable(),
});

/** The effective rule of a user for one resource and action, after combining the user's roles. */
export const explainView = z
  .object({
    allowed: z.boolean(),
    roles: z.array(z.string()).describe('The user\'s roles with every included role'),
    restricted: z.boolean().describe('false: no rule applies to this user here, access is as for a role without rules'),
    rows: z.record(z.string(), z.unknown()).nullable().describe('The filter of the rows allowed; null: every row'),
    fields: z.array(z.string()).nullable().describe('Fields readable or writable in some allowed row; null: every field'),
    presets: z.record(z.string(), z.unknown()).describe('Values the server sets (from the grants that set any)'),
    check: z.record(z.string(), z.unknown()).nullable().describe('What a written document must match; null: nothing'),
    grants: z.array(grantView).describe('Each role\'s rule; a write needs one that allows all of it'),
  })
  .meta({ id: 'AccessExplanation' });
export type ExplainView = z.output<typeof explainView>;
