/**
 * The write side of the event log, a kernel primitive: every write that changes a document stages
 * its event in that document's outbox (`_outbox`) by the same atomic write; the events plugin's
 * relay moves outboxes into the log. Plugins import the constants, shapes and `DocumentChanges`
 * from here; the log itself (`EventLog`) is the events plugin's service `events`.
 */
import { Schema, type Model, type Types } from 'mongoose';
import { isSystemActor, requestOf, type Actor } from '../../../core/context.ts';
import type { Doc } from '../../../core/hooks.ts';

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
  /**
   * The object before the change, told by what the change replaced instead of whole (`previous`
   * absent): the previous values of the fields the change set or removed, and the fields it added.
   * The event's `previous` is its object with these undone (`previousOf`). An entry with it and no
   * `data` stays in its document once relayed, as a create's does.
   */
  before?: EntryBefore;
  meta?: Doc | null;
  /** Frozen object, set when a later write superseded this entry before it reached the log. */
  data?: Doc;
}

/** What a change replaced in its document's object (see `OutboxEntry.before`). */
export interface EntryBefore {
  /** The changed fields that the object had before the change, with their values then. */
  values: Doc;
  /** The fields the change set or removed: those of them missing from `values` are the ones it added. */
  keys?: string[];
  /** The fields the change added, as entries stamped before `keys` name them. */
  absent?: string[];
}

/** `before` of a change to the fields `changed` of an object that was `previous` (see `OutboxEntry.before`). */
export function beforeOf(previous: Doc, changed: readonly string[]): EntryBefore {
  const values: Doc = {};
  for (const k of changed) if (previous[k] !== undefined) values[k] = previous[k];
  return { values, keys: [...changed] };
}

/** The fields a change added (the object before it had none of them). */
const addedBy = (before: EntryBefore): string[] => before.absent ?? (before.keys ?? []).filter((k) => !Object.hasOwn(before.values, k));

/**
 * The object before a change from the object after it and `before`: the fields it added left out,
 * those it changed or removed at their previous values, the others in their order.
 */
export function previousOf(after: Doc, before: EntryBefore): Doc {
  const absent = new Set(addedBy(before));
  const out: Doc = {};
  for (const k of Object.keys(after)) if (!absent.has(k)) out[k] = Object.hasOwn(before.values, k) ? before.values[k] : after[k];
  for (const k of Object.keys(before.values)) if (!Object.hasOwn(out, k)) out[k] = before.values[k];
  return out;
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

/** The outbox field every document with events carries while its events are not yet in the log. */
export const OUTBOX_FIELD = '_outbox';

/**
 * Set (true) by the write that deletes a document of a collection without soft delete: the write
 * keeps the document as a tombstone carrying the delete's event in its outbox, and the relay removes
 * it once every event of its outbox is in the log (docs/events.md, "Deleting a document").
 */
export const REMOVED_FIELD = '_removed';

/** The filter term that leaves out tombstones (`REMOVED_FIELD`): every read of a collection that deletes through them. */
export const notRemoved = { [REMOVED_FIELD]: { $ne: true } } as const;

/** The schema paths a source's mongoose schema adds for its outbox (and its tombstones). */
export const outboxPath = {
  [OUTBOX_FIELD]: { type: [Schema.Types.Mixed], default: undefined, select: true },
  [REMOVED_FIELD]: { type: Boolean, default: undefined },
};

/** What a change needs of the event log (the events plugin's `EventLog` provides it). */
export interface OutboxWriter {
  /** A new outbox entry of `type` (in the catalogue), to be written with the change. */
  stage(type: string, input: StageInput): OutboxEntry;
  /** The write succeeded: hand the written document to the relay. */
  committed(source: OutboxSource, doc: Doc): Promise<void>;
}

/** What `stage` takes: who made the change, and what it is about. */
export interface StageInput {
  actor: Actor | null;
  tenant_id: string | Types.ObjectId | null;
  /** The document version the change produces (absent for documents without versions). */
  version?: number;
  previous?: Doc | null;
  meta?: Doc | null;
}

/**
 * The events of administrative writes to a collection whose documents have no `version` (job
 * schedules and chains, webhook endpoints): each change stages `<thing>.created`, `.updated` or
 * `.deleted` into the changed document's outbox by the write that makes the change, with the object
 * after (`data`) and before (`previous`) frozen into the entry, and asks audit for an entry
 * (`meta.audit`). Entries are appended (`$push`), never rewritten: without a version a write
 * cannot tell which waiting entries it supersedes, and every entry already carries its objects. A
 * delete keeps the document as a tombstone (`REMOVED_FIELD`) that the relay removes once its
 * events are in the log (docs/events.md, "Deleting a document"). No Koa or GraphQL here.
 */
/** The event type of each kind of change, e.g. `{created: 'job_schedule.created', ...}`. */
export interface ChangeTypes {
  created: string;
  updated: string;
  deleted: string;
}

type Verb = keyof ChangeTypes;
const OPERATION: Record<Verb, AuditedChange['operation']> = { created: 'insert', updated: 'update', deleted: 'delete' };

/** A stored document of such a collection: its id and, when it has one, its tenant. */
export type Written = Doc & { _id: unknown; tenant_id?: Types.ObjectId | string | null };

/**
 * Builds the writes of one collection's administrative changes, each carrying its event. The
 * writer puts the returned outbox value into its write, then hands the written document to
 * `committed()`.
 *
 * @example
 * const entry = changes.entry('updated', actor, old, { ...old, ...set });
 * const doc = await Model.findOneAndUpdate({ _id: old._id, ...notRemoved }, { $set: set, $push: changes.push(entry) }, { returnDocument: 'after' }).lean();
 * if (doc) await changes.committed(doc);
 */
export class DocumentChanges {
  constructor(
    /** The event log (reached lazily when the writer is built before it). */
    private readonly events: () => OutboxWriter,
    /** The collection as an outbox source (its `view` is the object of the events). */
    readonly source: OutboxSource,
    private readonly types: ChangeTypes,
    /** The name audit entries and `meta.resource` give the collection. @default source.name */
    private readonly resource: string = source.name,
  ) {}

  /**
   * The entry of one change: `after` is the document as the write leaves it (for a delete, as it
   * was: the object the API showed last), `before` the document it changes (null for a create).
   * `type` names a more precise event of the same kind of change (e.g. `webhook_endpoint.disabled`).
   */
  entry(verb: Verb, actor: Actor | null, before: Written | null, after: Written, opts: { replace?: boolean; bulk?: boolean; type?: string } = {}): OutboxEntry {
    const req = requestOf(actor);
    const tenant = after.tenant_id ?? before?.tenant_id ?? null;
    const audit: AuditedChange = {
      operation: verb === 'updated' && opts.replace ? 'replace' : OPERATION[verb], resource: this.resource,
      actor_name: actor && !isSystemActor(actor) ? actor.name ?? null : null, ip: req?.ip ?? null,
    };
    const staged = this.events().stage(opts.type ?? this.types[verb], {
      actor, tenant_id: tenant ? String(tenant) : null, previous: before ? this.source.view(before) : null,
      meta: { resource: this.resource, ip: req?.ip ?? null, bulk: !!opts.bulk, ...(opts.replace !== undefined ? { replace: opts.replace } : {}), audit },
    });
    return { ...staged, data: this.source.view(after) };
  }

  /** The `_outbox` of a new document. */
  insert(entry: OutboxEntry): Doc {
    return { [OUTBOX_FIELD]: [entry] };
  }

  /** The `$push` of an update carrying `entry`. */
  push(entry: OutboxEntry): Doc {
    return { [OUTBOX_FIELD]: entry };
  }

  /** The update that deletes a document: it becomes a tombstone carrying `entry`, removed by the relay. */
  remove(entry: OutboxEntry): { $set: Doc; $push: Doc } {
    return { $set: { [REMOVED_FIELD]: true }, $push: this.push(entry) };
  }

  /** The write succeeded: hand the written document (for a delete, the tombstone) to the relay. */
  committed(doc: Doc): Promise<void> {
    return this.events().committed(this.source, doc);
  }
}
