/**
 * Audit entries written from the event log: audit is a durable sink of the relay (plugins/events), so
 * the entry of a change whose event asks for one (`meta.audit`, see `AuditedChange`) is stored in
 * the same batch as its event, before the document's outbox is cleared. A process that dies after
 * answering leaves the outbox behind; the sweep relays it and this sink runs again. No Koa or
 * GraphQL here.
 */
import { Types } from 'mongoose';
import type { AuditedChange, EventDoc } from '../events/public/outbox.ts';
import type { Redactor } from './diff.ts';
import type { AuditEntryInput } from './model.ts';

/** An entry with the `_id` it gets from its event: a sink that runs twice writes it once. */
export type EventAuditEntry = AuditEntryInput & { _id: Types.ObjectId };

const auditOf = (e: EventDoc): AuditedChange | null => ((e.meta as { audit?: AuditedChange } | null)?.audit ?? null);

/**
 * The audit entry of an event, or null when the event asks for none or its update changed nothing
 * audit keeps. `redactor` removes the deny-listed fields; `ignored` are fields whose change alone is no
 * change. The entry's `_id` is the event id's object id, so it sorts with the change's time.
 */
export function entryOfEvent(e: EventDoc, redactor: Pick<Redactor, 'redact' | 'changes'>, ignored: ReadonlySet<string>): EventAuditEntry | null {
  const a = auditOf(e);
  if (!a || !e.source) return null;
  const updates = a.operation === 'update' || a.operation === 'replace';
  const changes = a.changes ?? (updates ? redactor.changes(e.previous ?? {}, e.data, ignored) : null);
  if (updates && changes && Object.keys(changes).length === 0) return null;
  const userId = e.actor && Types.ObjectId.isValid(e.actor) ? new Types.ObjectId(e.actor) : null;
  return {
    _id: new Types.ObjectId(e._id.replace(/^evt_/, '')),
    resource: a.resource,
    item_id: new Types.ObjectId(a.item_id ?? String(e.source.id)),
    operation: a.operation,
    user_id: userId,
    user_name: userId ? a.actor_name : null,
    ip: a.ip,
    changes,
    snapshot: a.operation === 'delete' ? redactor.redact(a.snapshot ?? e.previous ?? {}) : null,
    created_at: e.created_at,
    tenant_id: e.tenant_id,
  };
}
