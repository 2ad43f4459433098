import type { Model } from 'mongoose';
import type { Logger } from '../../core/logger.ts';
import type { Doc } from '../../core/hooks.ts';
import { OUTBOX_FIELD, REMOVED_FIELD, previousOf } from './public/outbox.ts';
import { KnownByDocument, type KnownEntries } from './known.ts';
import type { EventDoc, OutboxEntry, OutboxSource } from './public/outbox.ts';
import type { EventSink } from './sink.ts';

interface Pending {
  source: OutboxSource;
  docId: unknown;
  /** The document's key in what the relay knows (`KnownByDocument.key`). */
  key: string;
  /** The document's own `tenant_id` (null when it has none): the clear names it, so it stays on one shard. */
  tenantId: unknown;
  events: Omit<EventDoc, 'committed_at'>[];
  /** Ids of the entries to remove from the document's outbox once their events are stored. */
  clearIds: string[];
  /** A tombstone (`REMOVED_FIELD`) holding every entry of its outbox here: removed once they are stored. */
  remove?: boolean;
  /**
   * Ids of entries the write found waiting and froze (not its own): most are in the log already,
   * relayed by the process that wrote them. The relay looks them up before storing.
   */
  inherited?: string[];
}

export interface RelaySettings {
  /** How long the relay gathers events before one bulk insert. */
  flushMs: number;
  /** Flush at once when this many events wait. */
  maxBatch: number;
  /** How often every process runs the sweep passes (a writer that died leaves entries behind). */
  sweepMs: number;
  /** The recent pass: entries stamped at least this long ago are checked against the log. */
  sweepAgeMs: number;
  /** The late pass: the same window again this long after, for writes that committed late. */
  lateSweepAgeMs: number;
  /** No pass looks back further than this (the log's retention): older events may be purged. */
  retentionMs: number;
}

type WriteError = { code?: number; writeErrors?: { code?: number; index?: number; err?: { code?: number } }[] };
/** The codes of a bulk write's failed operations (the driver nests them in `err` on some paths). */
const writeErrorCodes = (e: WriteError): number[] => (e.writeErrors ?? []).map((w) => w.code ?? w.err?.code ?? 0);

const isWriteConflict = (err: unknown): boolean => (err as WriteError).code === 112 || writeErrorCodes(err as WriteError).includes(112);

const isDuplicateOnly = (err: unknown): boolean => {
  const e = err as WriteError;
  if (e.code === 11000 && !e.writeErrors) return true;
  const codes = writeErrorCodes(e);
  return codes.length > 0 && codes.every((c) => c === 11000);
};

/**
 * Whether an entry stays in its document once its event is in the log: an entry with neither an
 * object nor a whole `previous` of its own, on a versioned document (a create, or an update that
 * keeps only what it replaced, `before`). Removing it would rewrite the document's row (every index
 * entry on PostgreSQL-backed engines) to save a few hundred bytes; the sweep tells it from a lost
 * one by looking its id up in the log (docs/events.md). Entries carrying whole objects are removed:
 * left in place they would weigh on every read of the document.
 */
export const staysAfterRelay = (e: OutboxEntry): boolean => e.version !== undefined && !e.data && !e.previous;

/** The term naming a document's tenant in a query of `source`: none for a collection without tenants. */
const tenantTerm = (source: OutboxSource, tenantId: unknown): { tenant_id?: unknown } =>
  (source.tenantScoped ?? !!source.model.schema.path('tenant_id')) ? { tenant_id: tenantId ?? null } : {};

/** The ids of a document's entries that the relay removes once stored (see `staysAfterRelay`). */
export const clearIdsOf = (doc: Doc): string[] =>
  ((doc[OUTBOX_FIELD] as OutboxEntry[] | undefined) ?? []).filter((e) => !staysAfterRelay(e)).map((e) => e.id);

/** Events of one document's outbox, each with its object (frozen, or the document itself). */
export function eventsOf(source: OutboxSource, doc: Doc, log?: Logger): Omit<EventDoc, 'committed_at'>[] {
  const entries = (doc[OUTBOX_FIELD] as OutboxEntry[] | undefined) ?? [];
  const version = doc.version as number | undefined;
  return entries.map((e) => {
    if (!e.data && e.version !== undefined && version !== undefined && e.version !== version) {
      // Only a writer outside the outbox protocol can leave this: the object is the current one.
      log?.warn({ event_id: e.id, collection: source.name, entry_version: e.version, version }, 'outbox entry superseded without its object; using the current document');
    }
    const data = e.data ?? source.view(doc);
    return {
      _id: e.id,
      type: e.type,
      tenant_id: e.tenant_id ?? null,
      created_at: e.created_at,
      data,
      actor: e.actor ?? null,
      request_id: e.request_id ?? null,
      previous: e.previous ?? (e.before ? previousOf(data, e.before) : null),
      meta: e.meta ?? null,
      source: { collection: source.name, id: doc._id, version: e.version ?? null },
    };
  });
}


/**
 * Moves events from document outboxes into the `events` collection: in batches for this process's
 * own writes (one insert and one bulk update per flush), and through sweep windows (plugins/events/sweep.ts)
 * for entries a dead process left behind. Both are idempotent (event ids are the `_id`), so several
 * processes may relay the same entry: it is stored once.
 */
export class Relay {
  private queue: Pending[] = [];
  private queued = 0;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private readonly sources = new Map<string, OutboxSource>();
  private readonly listeners: ((events: EventDoc[]) => void)[] = [];
  private readonly sinks: EventSink[] = [];
  /** Events this process stored or saw in the log, by document: their entries need no freezing. */
  private readonly byDocument = new KnownByDocument(50_000);
  /** Entries stamped before this (ms) are in the log: the late sweep pass covered them. */
  private knownBefore = 0;

  constructor(
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    private readonly events: Model<any>,
    private readonly settings: RelaySettings,
    private readonly log: Logger,
  ) {}

  addSource(source: OutboxSource): void {
    this.sources.set(source.name, source);
  }

  /** Adds a durable sink: it sees every batch before its events are stored (see `EventSink`). */
  addSink(sink: EventSink): void {
    this.sinks.push(sink);
  }

  /** Called with every batch of events this process inserted into the log (in-process fan-out). */
  onStored(listener: (events: EventDoc[]) => void): void {
    this.listeners.push(listener);
  }

  /** What this process knows is in the log of a document's entries (see `supersede`, `outboxInWrite`). */
  known(source: OutboxSource, docId: unknown): KnownEntries {
    return { ids: this.byDocument.of(KnownByDocument.key(source.name, docId)), before: this.knownBefore };
  }

  /** The late sweep pass covered every entry stamped before `at` (ms). */
  coveredBefore(at: number): void {
    if (at > this.knownBefore) this.knownBefore = at;
  }

  /**
   * Queues the outbox of a document this process just wrote (the write's returned document). With
   * `flushMs` 0 the returned promise resolves once the events are in the log (the writer may await
   * it before answering); otherwise at once.
   */
  enqueue(source: OutboxSource, doc: Doc): Promise<void> {
    const events = eventsOf(source, doc, this.log);
    if (!events.length) return Promise.resolve();
    // The write's own entry is the last; any before it waited in the document (frozen by this write).
    const inherited = events.length > 1 ? events.slice(0, -1).map((e) => e._id) : undefined;
    this.queue.push({ source, docId: doc._id, key: KnownByDocument.key(source.name, doc._id), tenantId: doc.tenant_id ?? null, events, clearIds: clearIdsOf(doc), remove: doc[REMOVED_FIELD] === true, ...(inherited ? { inherited } : {}) });
    this.queued += events.length;
    if (this.settings.flushMs === 0) return this.flush();
    if (this.queued >= this.settings.maxBatch) void this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.settings.flushMs);
      this.timer.unref();
    }
    return Promise.resolve();
  }

  /** Stores everything queued now; resolves when it is in the log (or kept for the next try). */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    while (this.flushing) await this.flushing;
    if (!this.queue.length) return;
    const batch = this.queue;
    this.queue = [];
    this.queued = 0;
    this.flushing = this.store(batch)
      .catch((err) => {
        // The documents still hold their outboxes: keep the batch for the next flush, and the sweep
        // recovers it even if this process dies.
        this.log.warn({ err, events: batch.reduce((n, b) => n + b.events.length, 0) }, 'event relay failed; retrying');
        this.queue.unshift(...batch);
        this.queued += batch.reduce((n, b) => n + b.events.length, 0);
        if (!this.timer) {
          this.timer = setTimeout(() => void this.flush(), Math.max(this.settings.flushMs, 500));
          this.timer.unref();
        }
      })
      .finally(() => {
        this.flushing = null;
      });
    await this.flushing;
  }

  /**
   * Sinks first, then the insert into the log, then the clear: an event in the log has had its
   * sinks run, so a sweep that finds an entry's event in the log has nothing left to do for it
   * (but clear it). A process dying before the insert leaves the entry for the sweep, which runs
   * the sinks again (they are idempotent by event id).
   */
  async store(batch: Pending[]): Promise<void> {
    await this.learnInherited(batch);
    const committed_at = new Date();
    const docs: EventDoc[] = [];
    const seen = new Set<string>();
    for (const b of batch) {
      const known = this.byDocument.of(b.key);
      for (const e of b.events) {
        // An entry a later write kept (frozen) comes again with that write: once its event is in the
        // log, or already in this batch, only its clear is left to do. Duplicates would take every
        // insert's error path, which costs the database far more than the insert.
        if (seen.has(e._id) || known.includes(e._id)) continue;
        seen.add(e._id);
        docs.push({ ...e, committed_at });
      }
    }
    // The sinks are independent of each other: side by side, so a batch waits for the slowest, not the sum.
    // All settle before a failure is thrown, so a retry never overlaps a sink still writing.
    const sunk = await Promise.allSettled(this.sinks.map(async (sink) => {
      const mine = sink.types === '*' ? docs : docs.filter((d) => (sink.types as string[]).includes(d.type));
      if (mine.length) await sink.write(mine);
    }));
    const failed = sunk.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const inserted = await this.insertNew(docs);
    for (const b of batch) this.byDocument.add(b.key, b.events.map((e) => e._id));
    const bySource = new Map<OutboxSource, Pending[]>();
    for (const b of batch) {
      if (!b.clearIds.length && !b.remove) continue;
      const items = bySource.get(b.source);
      if (items) items.push(b);
      else bySource.set(b.source, [b]);
    }
    await Promise.all([...bySource].map(([source, items]) => this.clear(source, items)));
    if (!inserted.length) return;
    for (const l of this.listeners) {
      try {
        l(inserted);
      } catch (err) {
        this.log.error({ err }, 'event listener failed');
      }
    }
  }

  /**
   * Looks up in the log the entries writes of this batch froze (another process's, as a rule, which
   * it relayed long ago), in one query: those found are known, so they go to no sink and no insert
   * again (a duplicate takes every insert's error path, the sinks' too), and are only cleared.
   */
  private async learnInherited(batch: Pending[]): Promise<void> {
    const asked = batch.flatMap((b) => {
      if (!b.inherited) return [];
      const known = this.byDocument.of(b.key);
      return b.inherited.filter((id) => !known.includes(id));
    });
    if (!asked.length) return;
    const found = await this.inLog(asked);
    for (const b of batch) if (b.inherited) this.byDocument.add(b.key, b.inherited.filter((id) => found.has(id)));
  }

  /** Which of the event ids `ids` are in the log (one query by `_id`). */
  private async inLog(ids: string[]): Promise<Set<string>> {
    return new Set((await this.events.collection.find({ _id: { $in: ids } } as never, { projection: { _id: 1 } }).toArray()).map((d) => String(d._id)));
  }

  /** Inserts `docs` into the log; resolves to those that were not there already. */
  private async insertNew(docs: EventDoc[]): Promise<EventDoc[]> {
    if (!docs.length) return docs;
    try {
      await this.events.collection.insertMany(docs as never[], { ordered: false });
      return docs;
    } catch (err) {
      if (!isDuplicateOnly(err)) throw err;
      const e = err as WriteError;
      const dup = new Set((e.writeErrors ?? []).map((w) => w.index));
      // A single-document insert reports its duplicate without writeErrors.
      return e.writeErrors ? docs.filter((_, i) => !dup.has(i)) : [];
    }
  }

  /**
   * Removes relayed entries from their documents' outboxes: one `updateMany` per tenant of the batch
   * (all in one command), by `_id $in` (the primary key's index; `_outbox.id` has none) plus the
   * documents' `tenant_id` where the collection has one, pulling the batch's entry ids. A per-document
   * update cost one statement per document on the database; pulling an id a document does not hold
   * changes nothing, and pulling it twice (a sweep on another replica) neither.
   */
  private async clear(source: OutboxSource, items: Pending[]): Promise<void> {
    const tenanted = !!source.model.schema.path('tenant_id');
    const groups = new Map<string, { tenantId: unknown; ids: unknown[]; events: string[]; removed: unknown[] }>();
    for (const b of items) {
      const key = tenanted ? String(b.tenantId) : '';
      let g = groups.get(key);
      if (!g) groups.set(key, (g = { tenantId: b.tenantId, ids: [], events: [], removed: [] }));
      if (b.remove) {
        g.removed.push(b.docId);
        continue;
      }
      g.ids.push(b.docId);
      g.events.push(...b.clearIds);
    }
    const scope = (g: { tenantId: unknown }, ids: unknown[]) => (tenanted ? { tenant_id: g.tenantId, _id: { $in: ids } } : { _id: { $in: ids } });
    const ops = [...groups.values()].flatMap((g) => [
      ...(g.ids.length ? [{ updateMany: { filter: scope(g, g.ids), update: { $pull: { [OUTBOX_FIELD]: { id: { $in: g.events } } } } } }] : []),
      // A tombstone's events are all in the log now: the delete it stands for is finished.
      ...(g.removed.length ? [{ deleteMany: { filter: { ...scope(g, g.removed), [REMOVED_FIELD]: true } } }] : []),
    ]);
    // A write racing the clear on one of the documents may make the database report a write conflict
    // (PostgreSQL-backed engines do, for a multi-document write): the pull is idempotent, so run it again.
    for (let attempt = 1; ; attempt++) {
      try {
        await source.model.collection.bulkWrite(ops as never, { ordered: false });
        return;
      } catch (err) {
        if (attempt >= 5 || !isWriteConflict(err)) throw err;
        await new Promise((r) => setTimeout(r, attempt * 5));
      }
    }
  }

  /**
   * Relays what the documents' entries stamped in [from, until) left behind: events missing from
   * the log are stored (sinks, insert), and entries that should have been cleared are. Resolves to
   * the number of events stored.
   */
  async sweepWindow(from: Date, until: Date): Promise<number> {
    let total = 0;
    for (const source of this.sources.values()) {
      const filter = { [OUTBOX_FIELD]: { $elemMatch: { created_at: { $gte: from, $lt: until } } } };
      // The outboxes only: nearly every entry is in the log already, and a document is read whole
      // only when one of its entries is not (relayLeftBehind).
      const projection = { _id: 1, tenant_id: 1, [OUTBOX_FIELD]: 1, [REMOVED_FIELD]: 1 };
      let chunk: Doc[] = [];
      for await (const d of source.model.collection.find(filter, { projection }).batchSize(this.settings.maxBatch)) {
        chunk.push(d as Doc);
        if (chunk.length >= this.settings.maxBatch) {
          total += await this.relayLeftBehind(source, chunk, from, until);
          chunk = [];
        }
      }
      if (chunk.length) total += await this.relayLeftBehind(source, chunk, from, until);
    }
    return total;
  }

  /** `outboxes`: the documents' `_id`, `tenant_id` and outbox (sweepWindow's projection). */
  private async relayLeftBehind(source: OutboxSource, outboxes: Doc[], from: Date, until: Date): Promise<number> {
    // Only entries of this window: a newer one may still wait in its writer's relay, not yet in the log.
    // A tombstone gets no newer one: all its entries are checked, so that it can be removed.
    const docs = outboxes.map((d) => {
      const remove = d[REMOVED_FIELD] === true;
      const ids = ((d[OUTBOX_FIELD] as OutboxEntry[] | undefined) ?? []).filter((e) => remove || (e.created_at >= from && e.created_at < until)).map((e) => e.id);
      return { d, key: KnownByDocument.key(source.name, d._id), ids, remove };
    });
    let lost = docs.map((x) => {
      const known = this.byDocument.of(x.key);
      return { ...x, missing: new Set(x.ids.filter((id) => !known.includes(id))) };
    }).filter((x) => x.missing.size);
    if (lost.length) {
      const found = await this.inLog(lost.flatMap((x) => [...x.missing]));
      for (const x of lost) this.byDocument.add(x.key, [...x.missing].filter((id) => found.has(id)));
      lost = lost.map((x) => ({ ...x, missing: new Set([...x.missing].filter((id) => !found.has(id))) })).filter((x) => x.missing.size);
    }
    // The events of missing entries need their object: the document itself where the entry has none.
    const whole = lost.length ? await source.model.collection.find({ _id: { $in: lost.map((x) => x.d._id) } } as never).toArray() : [];
    const current = new Map(whole.map((d) => [String(d._id), d as Doc]));
    const missingOf = new Map(lost.map((x) => [String(x.d._id), x.missing]));
    let stored = 0;
    const todo: Pending[] = [];
    for (const { d, key, ids, remove } of docs) {
      const window = new Set(ids);
      const clearIds = clearIdsOf(d).filter((id) => window.has(id));
      const missing = missingOf.get(String(d._id));
      const now = missing && current.get(String(d._id));
      // A document gone or rewritten since the projection: what its outbox holds now is the sweep's next concern.
      const events = now ? eventsOf(source, now, this.log).filter((e) => missing.has(e._id)) : [];
      stored += events.length;
      if (events.length || clearIds.length || remove) todo.push({ source, docId: d._id, key, tenantId: d.tenant_id ?? null, events, clearIds, remove });
    }
    if (todo.length) await this.store(todo);
    return stored;
  }

  /**
   * Replaces the actor's display name (`meta.audit.actor_name`, what audit entries show) in the
   * outbox entries of `actorId` that stay in their documents, for an erasure. Resolves to the
   * number of documents changed. As for the events themselves, the actor's own tenant: one shard
   * on a cluster. No index covers `_outbox.actor`: each outbox collection of that tenant is read.
   */
  async scrubActorName(actorId: string, tenantId: unknown, replacement: string): Promise<number> {
    let changed = 0;
    for (const source of this.sources.values()) {
      const tenant = tenantTerm(source, tenantId);
      const res = await source.model.collection.updateMany(
        { ...tenant, [OUTBOX_FIELD]: { $elemMatch: { actor: actorId, 'meta.audit.actor_name': { $nin: [null, replacement] } } } },
        { $set: { [`${OUTBOX_FIELD}.$[e].meta.audit.actor_name`]: replacement } },
        { arrayFilters: [{ 'e.actor': actorId, 'e.meta.audit.actor_name': { $nin: [null, replacement] } }] },
      );
      changed += res.modifiedCount;
    }
    return changed;
  }

  /**
   * Applies `fix` (an erasure's) to the objects the outbox of one document keeps (`data`, `previous`,
   * and what an update replaced, `before.values`), entry by entry (by id: a write racing it keeps its
   * own entries). Resolves to the number of entries changed; 0 when `collection` has no outbox.
   */
  async scrubOutbox(collection: string, docId: unknown, tenantId: unknown, fix: (o: Doc) => Doc): Promise<number> {
    const source = this.sources.get(collection);
    if (!source) return 0;
    const tenant = tenantTerm(source, tenantId);
    const doc = (await source.model.collection.findOne({ ...tenant, _id: docId } as never, { projection: { [OUTBOX_FIELD]: 1 } })) as Doc | null;
    const set: Doc = {};
    const arrayFilters: Doc[] = [];
    for (const e of (doc?.[OUTBOX_FIELD] as OutboxEntry[] | undefined) ?? []) {
      const kept: [string, Doc | null | undefined][] = [['data', e.data], ['previous', e.previous], ['before.values', e.before?.values]];
      const changed = kept.flatMap(([k, o]) => {
        const fixed = o ? fix(o) : o;
        return JSON.stringify(fixed) === JSON.stringify(o) ? [] : [[k, fixed] as const];
      });
      if (!changed.length) continue;
      const name = `e${arrayFilters.length}`;
      arrayFilters.push({ [`${name}.id`]: e.id });
      for (const [k, v] of changed) set[`${OUTBOX_FIELD}.$[${name}].${k}`] = v;
    }
    if (!arrayFilters.length) return 0;
    await source.model.collection.updateOne({ ...tenant, _id: docId } as never, { $set: set }, { arrayFilters });
    return arrayFilters.length;
  }

  async close(): Promise<void> {
    await this.flush();
  }
}
