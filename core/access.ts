import { Types, type QueryFilter } from 'mongoose';
import { AccessDeniedError } from './errors.ts';
import { hasSystemScope, isAdmin, scopedTenantId, type Actor } from './context.ts';

/**
 * An attribute rule. `equals` / `oneOf` are plain yes/no checks on the actor; `field` restricts
 * documents: only those whose `field` equals the actor's attribute (or is one of its values,
 * when the attribute is an array) are visible and writable.
 *
 * @example { attribute: 'department', equals: 'finance' }
 * @example { attribute: 'region', field: 'region' }
 */
export type AttributeRule =
  | { attribute: string; equals: unknown }
  | { attribute: string; oneOf: unknown[] }
  | { attribute: string; field: string };

/** What a route, resource or GraphQL field requires of its actor. */
export interface AccessPolicy {
  /** Filter by the actor's tenant. @default true */
  tenantScoped?: boolean;
  features?: string[];
  attributes?: AttributeRule[];
}

/** A MongoDB filter, as mongoose accepts it for any model. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Filter = QueryFilter<any>;

/** The built-in roles. A user may also hold custom roles of its tenant (the access plugin defines them). */
export const ROLES = ['user', 'admin'] as const;

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
export function requireRole(actor: Actor, role: RequiredRole): Actor {
  const ok = role === 'system' ? hasSystemScope(actor) : isAdmin(actor);
  if (!ok) throw new AccessDeniedError(ROLE_REQUIRED_MESSAGE[role]);
  return actor;
}

/** System actors act anywhere, so they hold every feature. */
const hasFeature = (actor: Actor, feature: string): boolean =>
  hasSystemScope(actor) || actor.features.includes(feature);

/** @throws AccessDeniedError (403, `details.feature`) for the first feature the actor lacks */
export function requireFeatures(actor: Actor, features: readonly string[]): void {
  for (const feature of features) {
    if (!hasFeature(actor, feature)) throw new AccessDeniedError(`Feature "${feature}" required`, { feature });
  }
}

/**
 * Checks attribute rules and returns the document filter they imply (empty when none restricts).
 * @throws AccessDeniedError when a yes/no rule fails or a filtering rule's attribute is missing
 */
function attributeFilter(actor: Actor, rules: readonly AttributeRule[] = []): Filter {
  if (hasSystemScope(actor)) return {};
  const filter: Filter = {};
  for (const rule of rules) {
    const value = actor.attributes[rule.attribute];
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
 * service called from a worker scopes exactly as it does in a request. With `multiTenant`,
 * non-system actors are confined to their tenant and `{}` (all tenants) is only for a system actor
 * without an acting tenant; without it, `{}` for everyone (a single-tenant deployment). `field`
 * names the tenant field of the collection (`_id` for the tenants collection). Plugins call it
 * through `ctx.tenancy.filter(actor)`, which passes `MULTI_TENANT_ENABLED`.
 */
export function tenantFilter(actor: Actor, multiTenant: boolean, field = 'tenant_id'): Filter {
  if (!multiTenant) return {};
  const tenant = scopedTenantId(actor);
  return tenant ? { [field]: new Types.ObjectId(tenant) } : {};
}

/**
 * The one filter that list, count, get, update, delete, populate and GraphQL all apply: tenant
 * scope plus attribute rules. Throws 403 when a feature or attribute rule rejects the actor.
 */
export function accessFilter(actor: Actor, policy: AccessPolicy, multiTenant: boolean): Filter {
  requireFeatures(actor, policy.features ?? []);
  const attrs = attributeFilter(actor, policy.attributes);
  const tenant = policy.tenantScoped === false ? {} : tenantFilter(actor, multiTenant);
  return { ...attrs, ...tenant };
}
