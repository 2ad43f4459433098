/**
 * An endpoint's `role`: its deliveries carry what that role may read, as a user holding only that
 * role would read the event on `GET /events/stream` (the same decision, `viewUnderAccess`).
 */
import type { Actor } from '../../core/context.ts';
import type { EventRecord } from '../events/public/contributions.ts';
import { viewUnderAccess, type EventAccess } from '../events/public/access.ts';

/** The part of an endpoint the decision reads. */
export interface RoleHolder {
  _id: unknown;
  tenant_id: unknown;
  role?: string | null;
}

/**
 * The actor an endpoint's role reads as: a member of the endpoint's tenant holding that role only,
 * with no attributes (`$actor.attributes.*` are null) and an id no row holds (`$actor.id` matches nothing).
 */
export const roleActor = (e: RoleHolder & { role: string }): Actor => ({
  id: `webhook_endpoint:${String(e._id)}`, email: '', name: 'webhook endpoint', tenant_id: String(e.tenant_id),
  roles: [e.role], scope: null, is_system_user: false, features: [], attributes: {},
});

/**
 * `event` as the endpoint may receive it: whole without a role (or when its role's rules do not
 * restrict the event's resource), `data` masked by the role's read rules, or null when they do not
 * let the role read the row (the endpoint gets no delivery of it).
 */
export function endpointView(access: EventAccess | undefined, endpoint: RoleHolder, event: EventRecord): EventRecord | Promise<EventRecord | null> {
  const role = endpoint.role;
  return role ? viewUnderAccess(access, roleActor({ ...endpoint, role }), event) : event;
}
