import { AppError } from '../../../core/errors.ts';
import { hasSystemScope, isAdmin, scopedTenantId, type Actor } from '../../../core/context.ts';
import type { Filter } from '../../../core/access.ts';
import type { Tenancy } from '../../../core/tenancy.ts';
import type { EventRecord } from '../public/contributions.ts';
import { RESOURCE_VERBS, viewUnderAccess, type EventAccess } from '../public/access.ts';

/**
 * The access filter of one resource for an actor, as its reads apply it: tenant scope plus
 * attribute rules. Throws 403 when a feature or attribute guard rejects the actor; undefined for a
 * name that is no resource. (The resources plugin's `get(name).scope(actor)`, when it is enabled.)
 */
export type ResourceScope = (resource: string, actor: Actor) => Filter | undefined;

const idString = (v: unknown): string => (v && typeof v === 'object' && 'toHexString' in v ? (v as { toHexString(): string }).toHexString() : String(v));

/** Does `value` (a field of the event's object, maybe an array) satisfy one term of a scope filter? */
function matchesTerm(value: unknown, term: unknown): boolean {
  const values = Array.isArray(value) ? value.map(idString) : [idString(value)];
  if (term && typeof term === 'object' && '$in' in term) {
    const allowed = new Set(((term as { $in: unknown[] }).$in ?? []).map(idString));
    return values.some((v) => allowed.has(v));
  }
  return values.includes(idString(term));
}

const fieldOf = (data: Record<string, unknown>, path: string): unknown =>
  path.split('.').reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), data);

/**
 * Decides, per event, whether an actor may see it: exactly what the same actor could read with a
 * query at that moment (docs/realtime.md "Who sees what").
 *
 * - Tenant: non-system actors see their tenant's events only; system administrators every
 *   tenant's, or the one they act in (`X-Tenant-Id`). With `MULTI_TENANT_ENABLED` off, no tenant term.
 * - Resource events (`<resource>.<verb>` of a registered resource): the resource's own access
 *   filter for the actor (feature and attribute guards; a failed guard hides every event of the
 *   resource), its field terms matched on the event's object in memory. When access rules
 *   restrict the actor's reads of the resource, {@link view} masks each event or withholds it.
 * - Every other event (payments, job runs, erasure requests, webhooks, ping, plugin events):
 *   administrators only, as `GET /events`.
 */
export class EventVisibility {
  constructor(
    private readonly tenancy: Tenancy,
    private readonly resourceScope: ResourceScope,
    private readonly access: () => EventAccess | undefined = () => undefined,
  ) {}

  /** The resource an event type belongs to, when its first word names a registered resource. */
  resourceOf(type: string, actor: Actor): { name: string; filter: Filter | null } | null {
    const dot = type.lastIndexOf('.');
    if (dot <= 0 || !(RESOURCE_VERBS as readonly string[]).includes(type.slice(dot + 1))) return null;
    const name = type.slice(0, dot);
    try {
      const filter = this.resourceScope(name, actor);
      return filter === undefined ? null : { name, filter };
    } catch (err) {
      if (err instanceof AppError && err.status === 403) return { name, filter: null };
      throw err;
    }
  }

  /** @throws AccessDeniedError when the resource's feature or attribute guards reject the actor (nothing for a name that is no resource) */
  requireResource(resource: string, actor: Actor): void {
    this.resourceScope(resource, actor);
  }

  visible(actor: Actor, e: EventRecord): boolean {
    const resource = this.resourceOf(e.type, actor);
    if (!resource) return this.inTenant(actor, e.tenant_id) && isAdmin(actor);
    if (!resource.filter) return false;
    for (const [field, term] of Object.entries(resource.filter)) {
      if (field === 'is_deleted') continue; // deletes and restores are changes the reader may see
      const value = field === 'tenant_id' ? e.tenant_id : fieldOf(e.data, field);
      if (value === undefined || value === null || !matchesTerm(value, term)) return false;
    }
    return true;
  }

  /**
   * A visible event as the actor may read it: the event itself when no access rule restricts the
   * actor's reads of its resource; otherwise a promise of a copy with `data` masked by the rules
   * whose rows it matches, or of null when none does (the event is withheld).
   */
  view(actor: Actor, e: EventRecord): EventRecord | Promise<EventRecord | null> {
    return viewUnderAccess(this.access(), actor, e);
  }

  /**
   * What an actor's view of events depends on: its tenant scope, system scope, roles, features and
   * attributes (the inputs of tenancy, `isAdmin`, every resource's feature and attribute guards and
   * {@link EventAccess}, which reads role names only).
   * Two actors with the same key see the same events with the same fields, so subscriptions may
   * share results among actors of one key (shared.ts), never across keys.
   */
  key(actor: Actor): string {
    const tenant = !this.tenancy.enabled ? null : hasSystemScope(actor) ? ['system', actor.acting_tenant_id || null] : ['tenant', actor.tenant_id];
    const attributes = Object.keys(actor.attributes ?? {}).sort().map((k) => [k, actor.attributes[k]]);
    return JSON.stringify([tenant, actor.scope, actor.is_system_user, [...actor.roles].sort(), [...actor.features].sort(), attributes]);
  }

  /** True when the actor's tenant scope includes `tenantId` (events without a tenant: system scope only). */
  inTenant(actor: Actor, tenantId: string | null): boolean {
    if (!this.tenancy.enabled) return true;
    const scope = scopedTenantId(actor);
    if (scope === null) return hasSystemScope(actor);
    return tenantId === scope;
  }
}
