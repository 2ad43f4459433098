import { AccessDeniedError } from './errors.ts';
import type { Logger } from './logger.ts';

/**
 * The credential a request was authenticated with, by its root: the API key (or the credential a
 * plugin registered, e.g. a passkey) that started the token chain. Bearer tokens carry it in their
 * `cid` claim; `identity.issueToken` binds new tokens to it.
 */
export interface CredentialRef {
  /** `api_key`, or a kind registered with `identity.registerCredentialKind` (e.g. `passkey`). */
  kind: string;
  id: string;
  /** Set when the request came with a bearer token: its `exp` (seconds). Tokens minted from it never outlive it. */
  exp?: number;
}

/** The authenticated actor, as every service and plugin sees it. */
export interface Actor {
  id: string;
  email: string;
  name: string;
  tenant_id: string;
  roles: string[];
  /** `system` for system administrators; null otherwise. */
  scope: 'system' | null;
  is_system_user: boolean;
  features: string[];
  attributes: Record<string, unknown>;
  /**
   * The one tenant a system actor acts in: set by `X-Tenant-Id` or `systemActor(tenantId)`.
   * Absent or null = all tenants. Never read for other actors: they are always confined to
   * `tenant_id`, inside a request or not.
   */
  acting_tenant_id?: string | null;
  /** What authenticated this request (absent for `systemActor()` and users loaded outside a request). Never shown to clients. */
  credential?: CredentialRef;
  /** The request this actor came in with (symbol key: never serialized). Read it with `requestOf()`. */
  [REQUEST]?: RequestContext;
}

/** Per-request state: request id, client ip and the request's logger. */
export interface RequestContext {
  requestId: string;
  ip: string | null;
  actor: Actor | null;
  log: Logger;
}

/**
 * Key under which a request's actor carries its request. Explicit rather than ambient
 * (AsyncLocalStorage): a service called from a job must never see a request it is not part of.
 */
const REQUEST: unique symbol = Symbol('request');

/** The actor as seen below a request: the same actor, carrying its request (id, ip, logger). */
export const withRequest = (actor: Actor, request: RequestContext): Actor => ({ ...actor, [REQUEST]: request });

/**
 * The request an actor came in with, for logs and hook events (`ip`, `request_id`); undefined for
 * actors made outside requests (`systemActor()`, jobs, start-up).
 */
export const requestOf = (actor: Actor | null | undefined): RequestContext | undefined => actor?.[REQUEST];

/**
 * True for actors holding system scope (`scope: system` or `is_system_user`): system
 * administrators and `systemActor()`. They may act across tenants. Compare `isSystemActor`, which
 * is true only for the synthetic actor `systemActor()` returns (no user behind it).
 */
export const hasSystemScope = (actor: Actor | null | undefined): boolean =>
  !!actor && (actor.scope === 'system' || actor.is_system_user);

/** Role `admin`, or system scope. For a refusal use `requireRole(actor, 'admin')` (plugins/identity/guards.ts). */
export const isAdmin = (actor: Actor | null | undefined): boolean =>
  !!actor && (actor.roles.includes('admin') || hasSystemScope(actor));

/** `id` of the actor returned by `systemActor()`; audit stores it as `user_id` null. */
const SYSTEM_ACTOR_ID = 'system';

/**
 * The actor for code outside requests (jobs, webhook handlers, migrations). Pass it to any service
 * as its actor: `systemActor()` acts in every tenant, `systemActor(tenantId)` in that one only.
 * Audit records its changes with `user_id` and `user_name` null: no person made them.
 *
 * @example await services.get('resources').get('projects')!.list(systemActor(tenantId), {})
 */
export function systemActor(tenantId?: string | null): Actor {
  return {
    id: SYSTEM_ACTOR_ID,
    email: '',
    name: 'system',
    tenant_id: tenantId ?? '',
    roles: ['admin'],
    scope: 'system',
    is_system_user: true,
    features: [],
    attributes: {},
    acting_tenant_id: tenantId ?? null,
  };
}

/**
 * True only for the synthetic actor made by `systemActor()`: no user stands behind it, so audit and
 * `created_by` record null. Not a permission check: use `hasSystemScope` (or `requireRole`) for that.
 */
export const isSystemActor = (actor: { id: string } | null | undefined): boolean => !!actor && actor.id === SYSTEM_ACTOR_ID;

/**
 * The tenant an actor is confined to: its own for every non-system actor; for a system actor
 * the acting tenant, or null for all tenants. Fails closed: only an explicit system actor gets null.
 * @throws AccessDeniedError for a non-system actor without a tenant (never widened to all tenants)
 */
export function scopedTenantId(actor: Actor): string | null {
  if (!hasSystemScope(actor)) {
    // An empty tenant would read as "no tenant filter": refuse instead of widening the scope.
    if (!actor.tenant_id) throw new AccessDeniedError('The caller belongs to no tenant');
    return actor.tenant_id;
  }
  return actor.acting_tenant_id || null;
}

/**
 * The tenant an actor writes new documents to: its scoped tenant, or for a system actor acting
 * in all tenants its own tenant. `systemActor()` has none and must name one.
 * @throws Error for `systemActor()` without a tenant (a programming error, not a client error)
 */
export function writeTenantId(actor: Actor): string {
  const t = scopedTenantId(actor) ?? actor.tenant_id;
  if (!t) throw new Error('systemActor() acts in every tenant: use systemActor(tenantId) to write tenant-scoped documents');
  return t;
}
