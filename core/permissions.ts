/**
 * Permissions: who may call an operation. Each operation (a REST route and the GraphQL field of the
 * same service call) declares its permission once, as data next to the service method it calls
 * (for example `export const LEDGER_PERMISSIONS = { entries: 'admin' } as const satisfies
 * Permissions`); the route passes it as `auth`, the field as `t.withAuth(scopes(...))`, and both
 * surfaces check it with {@link permit}. Services then receive a non-null actor and keep only the
 * rules about data (tenant scope, ownership, access rules). See docs/auth.md "Permissions".
 */
import type { Actor } from './context.ts';
import { AuthRequiredError } from './errors.ts';
import { requireRole } from './access.ts';

/**
 * - `public`: anyone; a presented credential is still resolved.
 * - `user`: any authenticated actor (401 otherwise).
 * - `admin`: role `admin` or system scope (403 otherwise).
 * - `system`: system administrators only (`scope: system` or `is_system_user`).
 */
export type Permission = 'public' | 'user' | 'admin' | 'system';

/** Every {@link Permission}, in order of what it demands. */
export const PERMISSIONS: readonly Permission[] = ['public', 'user', 'admin', 'system'];

/** A service's declarations: operation name → permission. */
export type Permissions = Readonly<Record<string, Permission>>;

/**
 * The one check of a declared permission, for REST routes and GraphQL fields alike (the GraphQL
 * builder's scopes call it): `public` passes anyone, the others need an actor holding the role.
 * @throws the rejected credential's error or AuthRequiredError (401), AccessDeniedError (403)
 */
export function permit(permission: Permission, actor: Actor | null | undefined, authError: Error | null = null): true {
  if (permission === 'public') return true;
  if (!actor) throw authError ?? new AuthRequiredError();
  if (permission === 'admin' || permission === 'system') requireRole(actor, permission);
  return true;
}
