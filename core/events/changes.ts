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
import type { Types } from 'mongoose';
import { isSystemActor, requestOf, type Actor } from '../context.ts';
import type { Doc } from '../hooks.ts';
import { OUTBOX_FIELD, REMOVED_FIELD } from './model.ts';
import type { EventLog } from './service.ts';
import type { AuditedChange, OutboxEntry, OutboxSource } from './types.ts';

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
    private readonly events: () => Pick<EventLog, 'stage' | 'committed'>,
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
