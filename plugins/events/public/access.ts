import type { Actor } from '../../../core/context.ts';

/**
 * Whether access rules restrict `actor`'s reads of `resource` (so REST would filter its rows or
 * mask its fields). Answered synchronously, per event: from the actor's role names and the rules
 * resources declare in code, never from stored roles, so a custom role counts as restricting.
 * Provided by the access plugin as the service `eventAccess`; without it nothing is restricted.
 */
export interface EventAccess {
  restricted(actor: Actor, resource: string): boolean;
  /**
   * For a restricted actor: the event's `data` (a row of `resource`) as the actor may read it,
   * masked to the fields of the rules whose rows it matches; null when none matches (withheld).
   */
  view(actor: Actor, resource: string, data: Record<string, unknown>): Promise<Record<string, unknown> | null>;
}

declare module '../../../core/services.ts' {
  interface Services {
    /** Provided by the access plugin: which actors' resource events are withheld; use `services.maybe('eventAccess')`. */
    eventAccess: EventAccess;
  }
}

/**
 * The verbs of resource events: `<resource>.<verb>`. The last three are those of resources with
 * drafts, whose objects never hold draft values (the published document, or only `_id` and the base fields).
 */
export const RESOURCE_VERBS = ['created', 'updated', 'deleted', 'restored', 'draft_saved', 'published', 'unpublished'] as const;

/**
 * An event as `actor` may read it under access rules: the event itself when none restricts the
 * actor's reads of its resource (or it is no resource event); otherwise a promise of a copy with
 * `data` masked, or of null when no rule lets the actor read the row (the event is withheld).
 * The one decision the stream, `GET /events` and outbound webhooks share.
 */
export function viewUnderAccess<E extends { type: string; data: Record<string, unknown> }>(access: EventAccess | undefined, actor: Actor, e: E): E | Promise<E | null> {
  const dot = e.type.lastIndexOf('.');
  if (!access || dot <= 0 || !(RESOURCE_VERBS as readonly string[]).includes(e.type.slice(dot + 1))) return e;
  const resource = e.type.slice(0, dot);
  if (!access.restricted(actor, resource)) return e;
  return access.view(actor, resource, e.data).then((data) => (data ? { ...e, data } : null));
}
