/**
 * A resource's events: `<resource>.created`, `.updated`, `.deleted` and `.restored`, each staged into
 * the changed document's outbox by the write itself (docs/events.md). No Koa or GraphQL here.
 */
import { beforeOf, type AuditedChange, type OutboxEntry } from '../events/public/outbox.ts';
import type { EventTypeDefinition, JsonSchema } from '../events/public/contributions.ts';
import { isSystemActor, requestOf, type Actor } from '../../core/context.ts';
import type { OutboxOptions, ResourceCore } from './service-types.ts';
import type { Doc } from '../../core/hooks.ts';
import type { ResourceDefinition } from './define.ts';
import { BASE_FIELDS, type FieldInfo, type FieldKind } from './fields.ts';

export { DRAFT_EVENT_VERBS, RESOURCE_EVENT_VERBS, type ResourceEventVerb } from './event-verbs.ts';
import { DRAFT_EVENT_VERBS, RESOURCE_EVENT_VERBS, type ResourceEventVerb } from './event-verbs.ts';

const SCALAR: Record<Exclude<FieldKind, 'array'>, JsonSchema> = {
  string: { type: 'string' },
  number: { type: 'number' },
  integer: { type: 'integer' },
  boolean: { type: 'boolean' },
  date: { type: 'string', format: 'date-time' },
  objectId: { type: 'string', pattern: '^[0-9a-f]{24}$' },
  mixed: {},
};

const fieldSchema = (f: Pick<FieldInfo, 'kind' | 'items' | 'enum' | 'required'>): JsonSchema => {
  const base = f.kind === 'array' ? { type: 'array', items: SCALAR[f.items ?? 'mixed'] } : { ...SCALAR[f.kind], ...(f.enum ? { enum: [...f.enum] } : {}) };
  return f.required || f.kind === 'array' ? base : { anyOf: [base, { type: 'null' }] };
};

/** The JSON Schema of a resource's document as the API shows it (private fields left out). */
export function documentSchema(def: ResourceDefinition): JsonSchema {
  const properties: Record<string, JsonSchema> = { _id: SCALAR.objectId };
  for (const [path, f] of Object.entries(BASE_FIELDS)) properties[path] = fieldSchema({ kind: f.kind, required: false });
  for (const f of def.fields) if (!f.private && !f.path.includes('.')) properties[f.path] = fieldSchema(f);
  return { type: 'object', properties, required: ['_id', 'version', ...def.fields.filter((f) => f.required && !f.private).map((f) => f.path)] };
}

/** The event types of a resource (the four, and the draft events with `drafts`), for the catalogue. */
export function resourceEventTypes(def: ResourceDefinition): EventTypeDefinition[] {
  const data = documentSchema(def);
  const what: Record<ResourceEventVerb, string> = {
    created: 'was created',
    updated: 'was updated (PATCH, PUT, or a cascade setting a reference to null)',
    deleted: 'was soft-deleted (directly, in bulk, or by a cascade)',
    restored: 'was restored from soft delete',
    draft_saved: 'got a draft saved; data is the published document (only `_id` and the base fields when never published), never the draft',
    published: 'was published (its draft became the document, by a call or at its publish_at)',
    unpublished: 'was withdrawn from readers without read_drafts; data has only `_id` and the base fields',
  };
  const verbs = def.drafts ? [...RESOURCE_EVENT_VERBS, ...DRAFT_EVENT_VERBS] : RESOURCE_EVENT_VERBS;
  return verbs.map((verb) => ({ name: `${def.name}.${verb}`, description: `A document of ${def.name} ${what[verb]}; data is the document after the change`, data }));
}

/** What audit and other in-process sinks read besides the public fields. */
export interface ResourceEventMeta extends Doc {
  resource: string;
  ip: string | null;
  bulk: boolean;
  replace?: boolean;
  /** Set on an update that restored an earlier version of the document: that version's number. */
  restored_version?: number;
  /** Audit writes the change's entry from the event (a durable sink). */
  audit: AuditedChange;
}

const AUDIT_OPERATION: Record<ResourceEventVerb, AuditedChange['operation']> = { created: 'insert', updated: 'update', deleted: 'delete', restored: 'update', draft_saved: 'update', published: 'update', unpublished: 'update' };

/** The inputs of one staged resource event. */
export interface ResourceChange {
  verb: ResourceEventVerb;
  actor: Actor | null;
  tenantId: string | null;
  /** The version the write produces. */
  version: number;
  /** The document before the change, as the API shows it (null for a create). */
  previous: Doc | null;
  meta: ResourceEventMeta;
}

export type StageFn = (type: string, input: { actor: Actor | null; tenant_id: string | null; version: number; previous: Doc | null; meta: Doc }) => OutboxEntry;

export const stageResourceEvent = (stage: StageFn, resource: string, c: ResourceChange): OutboxEntry =>
  stage(`${resource}.${c.verb}`, { actor: c.actor, tenant_id: c.tenantId, version: c.version, previous: c.previous, meta: c.meta });

/** Options of a resource write's event. */
export type { OutboxOptions } from './service-types.ts';

/** The entry of a resource write's event, without the outbox it goes into. */
export function stageChange(svc: ResourceCore, verb: ResourceEventVerb, actor: Actor | null, c: { version: number; previous: Doc | null; tenantId: string | null } & OutboxOptions): OutboxEntry {
  const ctx = requestOf(actor);
  return stageResourceEvent((type, input) => svc.deps.events.stage(type, input), svc.def.name, {
    verb, actor, tenantId: c.tenantId, version: c.version, previous: c.previous,
    meta: {
      resource: svc.def.name, ip: ctx?.ip ?? null, bulk: !!c.bulk, ...(c.replace !== undefined ? { replace: c.replace } : {}),
      ...(c.restoredVersion !== undefined ? { restored_version: c.restoredVersion } : {}),
      audit: {
        operation: verb === 'updated' && c.replace ? 'replace' : AUDIT_OPERATION[verb],
        resource: svc.def.name,
        actor_name: actor && !isSystemActor(actor) ? actor.name ?? null : null,
        ip: ctx?.ip ?? null,
      },
    },
  });
}

/**
 * The event of a write, to store in the written document's outbox (`_outbox`) by that same write.
 * `old` is the document the write replaces (null for a create): its waiting entries keep their object.
 */
export function outboxFor(svc: ResourceCore, verb: ResourceEventVerb, actor: Actor | null, old: Doc | null, opts: OutboxOptions = {}): OutboxEntry[] {
  const tenantId = opts.tenantId !== undefined ? opts.tenantId : old?.tenant_id ? String(old.tenant_id) : null;
  const previous = old ? svc.source.view(old) : null;
  const staged = stageChange(svc, verb, actor, { ...opts, tenantId, version: old ? (old.version as number) + 1 : 1, previous: opts.changed ? null : previous });
  const entry = previous && opts.changed ? { ...staged, before: beforeOf(previous, opts.changed) } : staged;
  return old ? svc.deps.events.outbox.update(svc.source, old, entry) : svc.deps.events.outbox.insert(entry);
}
