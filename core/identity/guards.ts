import { Types, type QueryFilter } from 'mongoose';
import { AccessDeniedError } from '../errors.ts';
import { hasSystemScope, isAdmin, scopedTenantId, type AuthUser } from '../context.ts';

/**
 * An attribute rule. `equals` / `oneOf` are plain yes/no checks on the caller; `field` restricts
 * documents: only those whose `field` equals the caller's attribute (or is one of its values,
 * when the attribute is an array) are visible and writable.
 *
 * @example { attribute: 'department', equals: 'finance' }
 * @example { attribute: 'region', field: 'region' }
 */
export type AttributeRule =
  | { attribute: string; equals: unknown }
  | { attribute: string; oneOf: unknown[] }
  | { attribute: string; field: string };

/** What a route, resource or GraphQL field requires of its caller. */
export interface AccessPolicy {
  /** Filter by the caller's tenant. @default true */
  tenantScoped?: boolean;
  features?: string[];
  attributes?: AttributeRule[];
}

/** A MongoDB filter, as mongoose accepts it for any model. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Filter = QueryFilter<any>;

/**
 * A role an operation demands: `admin` (a tenant administrator, or any system-scoped actor) or
 * `system` (a system administrator or `systemActor()`).
 */
export type RequiredRole = 'admin' | 'system';

/** The refusal message of each role: stated once, so REST, GraphQL and jobs answer alike. */
export const ROLE_REQUIRED_MESSAGE: Record<RequiredRole, string> = {
  admin: 'Administrator role required',
  system: 'System administrator required',
};

/**
 * The one authorization check by role, called by services (so REST, GraphQL and jobs share it)
 * and by the route and GraphQL guards. Returns the actor for chaining.
 * @throws AccessDeniedError (403 ACCESS_DENIED) when the actor lacks the role
 */
export function requireRole(actor: AuthUser, role: RequiredRole): AuthUser {
  const ok = role === 'system' ? hasSystemScope(actor) : isAdmin(actor);
  if (!ok) throw new AccessDeniedError(ROLE_REQUIRED_MESSAGE[role]);
  return actor;
}

/** System actors act anywhere, so they hold every feature. */
const hasFeature = (user: AuthUser, feature: string): boolean =>
  hasSystemScope(user) || user.features.includes(feature);

export function requireFeatures(user: AuthUser, features: readonly string[]): void {
  for (const feature of features) {
    if (!hasFeature(user, feature)) throw new AccessDeniedError(`Feature "${feature}" required`, { feature });
  }
}

/**
 * Checks attribute rules and returns the document filter they imply (empty when none restricts).
 * @throws AccessDeniedError when a yes/no rule fails or a filtering rule's attribute is missing
 */
function attributeFilter(user: AuthUser, rules: readonly AttributeRule[] = []): Filter {
  if (hasSystemScope(user)) return {};
  const filter: Filter = {};
  for (const rule of rules) {
    const value = user.attributes[rule.attribute];
    if ('equals' in rule) {
      if (value !== rule.equals) throw new AccessDeniedError(`Attribute "${rule.attribute}" does not allow this`, { attribute: rule.attribute });
    } else if ('oneOf' in rule) {
      if (!rule.oneOf.includes(value)) throw new AccessDeniedError(`Attribute "${rule.attribute}" does not allow this`, { attribute: rule.attribute });
    } else {
      if (value === undefined || value === null) throw new AccessDeniedError(`Attribute "${rule.attribute}" required`, { attribute: rule.attribute });
      filter[rule.field] = Array.isArray(value) ? { $in: value } : value;
    }
  }
  return filter;
}

/**
 * The one tenant filter, taken from the actor alone (never from ambient request state), so a
 * service called from a worker scopes exactly as it does in a request. Non-system callers are
 * always confined to their tenant; `{}` (all tenants) only for a system caller without an acting
 * tenant. `field` names the tenant field of the collection (`_id` for the tenants collection).
 */
export function tenantFilter(user: AuthUser, multiTenant: boolean, field = 'tenant_id'): Filter {
  if (!multiTenant) return {};
  const tenant = scopedTenantId(user);
  return tenant ? { [field]: new Types.ObjectId(tenant) } : {};
}

/**
 * The one filter that list, count, get, update, delete, populate and GraphQL all apply: tenant
 * scope plus attribute rules. Throws 403 when a feature or attribute rule rejects the caller.
 */
export function accessFilter(user: AuthUser, policy: AccessPolicy, multiTenant: boolean): Filter {
  requireFeatures(user, policy.features ?? []);
  const attrs = attributeFilter(user, policy.attributes);
  const tenant = policy.tenantScoped === false ? {} : tenantFilter(user, multiTenant);
  return { ...attrs, ...tenant };
}
