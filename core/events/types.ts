import type { Model, Types } from 'mongoose';
import type { Doc } from '../hooks.ts';

/* The shapes the outbox, the relay and the consumers share (relay.ts, known.ts, consumers.ts). */

/**
 * A change's event while it waits in its document's outbox (`_outbox`), written by the same atomic
 * write as the change itself. It has no `data` while the document is still at `version`: the
 * document then IS the event's object. A later write that supersedes it freezes `data` into it
 * first (see `supersede` in known.ts), so every event keeps the object as it was after its own change.
 */
export interface OutboxEntry {
  id: string;
  type: string;
  tenant_id: Types.ObjectId | null;
  created_at: Date;
  actor: string | null;
  request_id: string | null;
  /**
   * The document version this change produced. Absent for documents without versions (run records
   * and the like, whose event states are final): their object is the document as relayed.
   */
  version?: number;
  previous?: Doc | null;
  meta?: Doc | null;
  /** Frozen object, set when a later write superseded this entry before it reached the log. */
  data?: Doc;
}

/** A collection whose documents carry an outbox: registered once per model with the event log. */
export interface OutboxSource {
  /** Collection name, e.g. `projects`. */
  name: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  model: Model<any>;
  /** The object as the API shows it (private fields removed) for a stored document. */
  view(doc: Doc): Doc;
  /** Whether documents belong to tenants (default: the schema has `tenant_id`). */
  tenantScoped?: boolean;
}

/**
 * A durable sink: code that must see every event of a change at least once and whose effect is
 * idempotent by event id (e.g. audit entries keyed by their event). It runs inside the relay, in the
 * same batch, before the outboxes are cleared; if it throws, the batch is retried.
 */
export interface EventSink {
  name: string;
  types: string[] | '*';
  write(events: EventDoc[]): Promise<void>;
}

/**
 * `meta.audit` of an event whose change must have an audit entry. The audit plugin is a durable sink:
 * it writes the entry from the event (changes from `previous` to `data`, the snapshot of a delete
 * from `previous`) in the relay's batch, before the outbox is cleared, so a crash after the answer
 * loses neither.
 */
export interface AuditedChange {
  operation: 'insert' | 'update' | 'replace' | 'delete' | 'depersonalize';
  /** The audited resource (collection) name. */
  resource: string;
  /** The actor's display name, as audit entries show it (null for the system). */
  actor_name: string | null;
  ip: string | null;
  /**
   * The changed document's id, when the event sits in another document's outbox (a privacy
   * erasure's ledger row announcing what it deleted in another collection). @default the event's source id
   */
  item_id?: string;
  /** The entry's `changes` as given, instead of the difference of `previous` and `data`. */
  changes?: Doc;
  /** The entry's `snapshot` as given, instead of `previous` (a delete of another collection's document). */
  snapshot?: Doc;
}

/** An event document as stored in `events`. */
export interface EventDoc {
  _id: string;
  type: string;
  tenant_id: Types.ObjectId | null;
  created_at: Date;
  committed_at: Date;
  data: Doc;
  actor: string | null;
  request_id: string | null;
  previous: Doc | null;
  meta: Doc | null;
  source: { collection: string; id: unknown; version: number | null } | null;
}
