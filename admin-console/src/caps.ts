/**
 * What the server offers the signed-in user: the root fields of its schema (a plugin that is off
 * adds none), asked once per session through introspection. A screen shows when its plugin's
 * fields exist and the user's role may use them; the API refuses the rest anyway.
 */
import { signal } from '@preact/signals';
import { isAdmin, isSystem, run, session, type User } from './api.ts';
import { graphql } from './graphql.ts';

const RootFields = graphql(`query RootFields { __schema { queryType { fields { name } } mutationType { fields { name } } } }`);

export const rootFields = signal<Set<string> | null>(null);
let loadedFor: string | null = null;

export function loadCaps(): void {
  const t = session.value?.token ?? null;
  if (!t || loadedFor === t) return;
  loadedFor = t;
  rootFields.value = null;
  run(RootFields).then(
    (r) => {
      // gql.tada leaves introspection results untyped.
      const s = (r as unknown as { __schema: { queryType: { fields: { name: string }[] }; mutationType: { fields: { name: string }[] } | null } }).__schema;
      rootFields.value = new Set([...s.queryType.fields, ...(s.mutationType?.fields ?? [])].map((f) => f.name));
    },
    () => (rootFields.value = new Set()),
  );
}

export interface ScreenDef {
  id: string;
  label: string;
  /** Root field of the plugin: the screen exists only when the server has it. */
  needs: string;
  who: (u: User) => boolean;
}

/** The screens of part 2, in navigation order. */
export const PLUGIN_SCREENS: ScreenDef[] = [
  // First: it follows Identity in the Administration area.
  { id: 'roles', label: 'Roles', needs: 'roles', who: isAdmin },
  { id: 'events', label: 'Events', needs: 'eventTypes', who: isAdmin },
  { id: 'webhooks', label: 'Webhooks', needs: 'webhookEndpoints', who: isAdmin },
  { id: 'inbound', label: 'Inbound webhooks', needs: 'webhookDeadLetter', who: isSystem },
  { id: 'jobs', label: 'Jobs', needs: 'jobRegistry', who: isAdmin },
  { id: 'payments', label: 'Payments', needs: 'payments', who: () => true },
  { id: 'privacy', label: 'Privacy', needs: 'consents', who: () => true },
  // Any user of a tenant may list, upload, download and delete its files (the server's rule).
  { id: 'files', label: 'Files', needs: 'files', who: () => true },
];

export const visibleScreens = (u: User): ScreenDef[] => {
  const f = rootFields.value;
  return f ? PLUGIN_SCREENS.filter((s) => f.has(s.needs) && s.who(u)) : [];
};
