import { Types, type Connection } from 'mongoose';
import { NotFoundError, ValidationError } from '../../core/errors.ts';
import { isSystemActor, requestOf, type Actor } from '../../core/context.ts';
import type { Permissions } from '../../core/permissions.ts';
import type { Tenancy } from '../../core/tenancy.ts';
import type { Logger } from '../../core/logger.ts';
import type { Doc } from '../../core/hooks.ts';
import { cursorFilter, decodeCursor, encodeCursor, querySort, type SortSpec } from '../../lib/cursor.ts';
import { EventCatalogue, type EventTypeView } from './catalogue.ts';
import { eventClaimModel, eventCursorModel, eventModel, newEventId } from './model.ts';
import { OutboxSweeper } from './sweep.ts';
import { outboxInWrite, supersede, type OutboxInWrite } from './known.ts';
import { Relay, type RelaySettings } from './relay.ts';
import type { EventDoc, OutboxEntry, OutboxSource, StageInput } from './public/outbox.ts';
import type { EventSink } from './sink.ts';
import { ConsumerRunner, type ConsumerSettings } from './consumers.ts';
import { toRecord } from './public/contributions.ts';
import type { EventConsumer, EventRecord } from './public/contributions.ts';
import type { EventListQuery } from './schemas.ts';

export interface EventLogSettings extends RelaySettings, ConsumerSettings {
  /** Events older than this are deleted by the sweep. */
  retentionDays: number;
  cursorSecret: string;
  queryTimeoutMs: number;
}

/** What the emitter of an event says about it, besides its type. */
/** An event as an actor may read it: itself, a masked copy, or null (withheld). */
export type EventViewer = (actor: Actor, e: EventRecord) => EventRecord | null | Promise<EventRecord | null>;

const SORT: SortSpec = [['created_at', -1], ['_id', -1]];

/** The cursor page of `GET /events`, as a resource list in cursor mode. */
export interface EventPage {
  items: EventRecord[];
  cursors: { next: string | null; prev: string | null; has_next: boolean; has_prev: boolean };
}

/**
 * Who may call each operation of the event log: the one declaration its REST route, its GraphQL
 * field and (for the live ones) its subscription read. Which events a caller sees (its tenant's,
 * masked by resource access rules) is the log's rule.
 */
export const EVENT_PERMISSIONS = { list: 'admin', get: 'admin', types: 'user', stream: 'user', resourceChanged: 'user' } as const satisfies Permissions;

/**
 * The durable event log (a core plugin, always on). An event is stored if and only if its change is:
 * emitters stage the event into the changed document's outbox in the same atomic write
 * (`stage` + `outbox.insert` / `outbox.update`), and the relay moves it into `events` (see
 * docs/events.md). Events without a document (`ping`) are appended directly.
 */
export class EventLog {
  readonly catalogue = new EventCatalogue();
  private readonly relay: Relay;
  private readonly sweeper: OutboxSweeper;
  private sweepTimer: NodeJS.Timeout | null = null;
  /** The sweeps under way (timer and `sweep()` calls): close() waits for all, so none meets a closed connection. */
  private readonly sweeping = new Set<Promise<unknown>>();
  private readonly runners: ConsumerRunner[] = [];
  private readonly models;
  private retentionTimer: NodeJS.Timeout | null = null;
  private viewer: EventViewer | null = null;

  constructor(
    conn: Connection,
    private readonly tenancy: Tenancy,
    private readonly settings: EventLogSettings,
    private readonly log: Logger,
  ) {
    this.models = { events: eventModel(conn), claims: eventClaimModel(conn), cursors: eventCursorModel(conn) };
    this.relay = new Relay(this.models.events, settings, log);
    this.sweeper = new OutboxSweeper(conn, this.relay, settings, log);
  }

  /** Registers a collection whose documents carry outboxes, so left-behind entries are swept. */
  addSource(source: OutboxSource): void {
    this.relay.addSource(source);
  }

  /**
   * A new event for the outbox of the write that makes the change. Put it in the written document
   * with `outbox.insert(doc, entry)` or `outbox.update(source, old, entry)`, then hand the written
   * document to `committed()`.
   * @throws Error for a type missing from the catalogue (a programming error)
   */
  stage(type: string, input: StageInput): OutboxEntry {
    if (!this.catalogue.has(type)) throw new Error(`Event type "${type}" is not in the catalogue: declare it in the plugin's eventTypes`);
    const actor = input.actor;
    return {
      id: newEventId(),
      type,
      tenant_id: input.tenant_id ? new Types.ObjectId(String(input.tenant_id)) : null,
      created_at: new Date(),
      actor: actor && !isSystemActor(actor) ? actor.id : null,
      request_id: requestOf(actor)?.requestId ?? null,
      ...(input.version !== undefined ? { version: input.version } : {}),
      ...(input.previous ? { previous: input.previous } : {}),
      ...(input.meta ? { meta: input.meta } : {}),
    };
  }

  /** Builders of the `_outbox` value a write stores with its change. */
  readonly outbox = {
    /** The outbox of a new document. */
    insert: (entry: OutboxEntry): OutboxEntry[] => [entry],
    /** The outbox of a write replacing `old` (waiting entries keep their own object). */
    update: (source: OutboxSource, old: Doc, entry: OutboxEntry): OutboxEntry[] => supersede(source, old, entry, this.relay.known(source, old._id)),
    /**
     * The outbox of a write that changes `old` (and its `version`) without an event of its own: the
     * waiting entries with their object frozen. Use it with a compare-and-set on `old.version`.
     */
    freeze: (source: OutboxSource, old: Doc): OutboxEntry[] => supersede(source, old, null, this.relay.known(source, old._id)),
    /**
     * The outbox of a write that changes document `docId` without reading it first: the database
     * computes it inside the write (an update pipeline), as `update()` would from the document read.
     * `view` is the expression of the document as the API shows it, and `changed` the fields of that
     * view the write sets or removes (`version` among them): the entry keeps their values before the
     * write instead of the whole document (see `outboxInWrite`).
     */
    inWrite: (source: OutboxSource, docId: unknown, entry: OutboxEntry, view: Doc, changed: readonly string[]): OutboxInWrite =>
      outboxInWrite(source, entry, view, this.relay.known(source, docId), changed),
  };

  /**
   * The write with an outbox succeeded: relay its events to the log, batched in the background. The
   * promise resolves at once, or with `EVENTS_RELAY_INTERVAL_MS=0` once the events are in the log
   * (the request then answers after its event is readable). Either way the event is already safe in
   * the document.
   */
  committed(source: OutboxSource, doc: Doc): Promise<void> {
    return this.relay.enqueue(source, doc);
  }

  /** Appends an event that belongs to no document (e.g. `ping`), stored before it resolves. */
  async append(type: string, input: Omit<StageInput, 'version' | 'previous'> & { data: Doc }): Promise<EventRecord> {
    const entry = this.stage(type, input);
    const doc: EventDoc = {
      _id: entry.id, type, tenant_id: entry.tenant_id, created_at: entry.created_at, committed_at: new Date(),
      data: input.data, actor: entry.actor, request_id: entry.request_id, previous: null, meta: input.meta ?? null, source: null,
    };
    await this.models.events.collection.insertOne(doc as never);
    return toRecord(doc);
  }

  /** Calls `listener` with every batch this process stores (in-process fan-out, e.g. realtime). */
  onStored(listener: (events: EventDoc[]) => void): void {
    this.relay.onStored(listener);
  }

  /**
   * Adds a durable sink (runs in the relay before outboxes are cleared; must be idempotent by event
   * id). For in-process effects that must survive a crash at the relay's cost, such as audit entries.
   */
  addSink(sink: EventSink): void {
    this.relay.addSink(sink);
  }

  /** Starts a durable consumer in this process. */
  addConsumer(consumer: EventConsumer): void {
    if (this.runners.some((r) => r.name === consumer.name)) throw new Error(`Event consumer "${consumer.name}" is already registered`);
    const runner = new ConsumerRunner(consumer, this.models, this.settings, this.log.child({ consumer: consumer.name }));
    this.runners.push(runner);
  }

  /** Starts the sweep passes, the retention purge and every consumer. */
  start(): void {
    if (!this.sweepTimer) {
      this.sweepTimer = setInterval(() => {
        // A tick slower than the interval is not joined by another one in the same process.
        if (!this.sweeping.size) void this.track(this.sweeper.tick()).catch((err) => this.log.warn({ err }, 'outbox sweep failed'));
      }, this.settings.sweepMs);
      this.sweepTimer.unref();
    }
    for (const r of this.runners) r.start();
    const purge = () => void this.purge().catch((err) => this.log.warn({ err }, 'event retention purge failed'));
    this.retentionTimer = setInterval(purge, 3_600_000);
    this.retentionTimer.unref();
  }

  /** Stores what waits in this process's relay now (tests and shutdown). */
  flush(): Promise<void> {
    return this.relay.flush();
  }

  /**
   * Relays left-behind outbox entries now: the sweep passes (normally run every sweep interval), or
   * with `from`, every entry stamped from then until 5 s ago whose event is not in the log
   * (docs/events.md). Resolves to the number of events stored.
   */
  sweep(from?: Date): Promise<number> {
    return this.track(from ? this.sweeper.catchUp(from) : this.sweeper.tick());
  }

  private track<T>(work: Promise<T>): Promise<T> {
    const settled = work.then(() => undefined, () => undefined);
    this.sweeping.add(settled);
    void settled.then(() => this.sweeping.delete(settled));
    return work;
  }

  async close(): Promise<void> {
    if (this.retentionTimer) clearInterval(this.retentionTimer);
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    await Promise.all(this.sweeping);
    await Promise.all(this.runners.map((r) => r.stop()));
    await this.relay.close();
  }

  async purge(): Promise<number> {
    const cutoff = new Date(Date.now() - this.settings.retentionDays * 86_400_000);
    const res = await this.models.events.deleteMany({ committed_at: { $lt: cutoff } });
    return res.deletedCount ?? 0;
  }

  /**
   * Erasure support: the events of the given documents lose the subject's personal data. Each listed
   * field of `data` and `previous` becomes `replacement` (strings) or null, and any string equal to
   * one of `values` (case-insensitive) becomes `replacement`. Returns the events changed.
   */
  async scrubSubject(input: {
    documents: { resource: string; item_id: unknown; fields: readonly string[]; tenant_id?: unknown }[];
    values: readonly string[];
    replacement: string;
    /** The subject as the actor of changes: the name their events keep for audit (`meta.audit.actor_name`) goes too. */
    actor?: { id: string; tenant_id: unknown };
  }): Promise<number> {
    const values = new Set(input.values.map((v) => v.trim().toLowerCase()));
    let changed = 0;
    if (input.actor) {
      const res = await this.models.events.updateMany(
        { tenant_id: input.actor.tenant_id ?? null, actor: input.actor.id, 'meta.audit.actor_name': { $nin: [null, input.replacement] } },
        { $set: { 'meta.audit.actor_name': input.replacement } },
      );
      changed += res.modifiedCount;
      changed += await this.relay.scrubActorName(input.actor.id, input.actor.tenant_id, input.replacement);
    }
    for (const d of input.documents) {
      const fix = (o: Doc | null): Doc | null => {
        if (!o) return o;
        const out: Doc = { ...o };
        for (const f of d.fields) if (out[f] != null) out[f] = typeof out[f] === 'string' ? input.replacement : null;
        for (const [k, v] of Object.entries(out)) if (typeof v === 'string' && values.has(v.trim().toLowerCase())) out[k] = input.replacement;
        return out;
      };
      // A document's events carry its tenant (null for a collection without tenants): one shard on a cluster.
      const events = await this.models.events
        .find({ tenant_id: d.tenant_id ?? null, 'source.collection': d.resource, 'source.id': d.item_id }, { data: 1, previous: 1 })
        .lean<EventDoc[]>();
      for (const e of events) {
        await this.models.events.updateOne({ _id: e._id }, { $set: { data: fix(e.data), previous: fix(e.previous) } });
        changed++;
      }
      // Entries that stay in the document keep what an update replaced (`before`): that goes too.
      changed += await this.relay.scrubOutbox(d.resource, d.item_id, d.tenant_id, (o) => fix(o)!);
    }
    return changed;
  }

  /** Consumer lag in ms, by consumer name. */
  async lag(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const r of this.runners) out[r.name] = await r.lagMs();
    return out;
  }

  /** The catalogue, each type with its JSON Schema. */
  types(): EventTypeView[] {
    return this.catalogue.list();
  }

  /**
   * Sets how an actor may read each listed event (access rules): the event, a masked copy, or null
   * when it is withheld. Without one every event of the tenant is listed whole.
   */
  useViewer(viewer: EventViewer): void {
    this.viewer = viewer;
  }

  /**
   * The actor's tenant's events, newest first, in cursor pages. Tenant administrators see their
   * tenant's; system administrators all tenants' (or one, with `X-Tenant-Id`). Each event passes the
   * viewer (access rules): a withheld event is skipped and the scan reads on, so a page is full
   * whenever enough readable events remain, and its cursors point at events the caller read.
   * @throws ValidationError for a type not in the catalogue
   */
  async list(actor: Actor, q: EventListQuery): Promise<EventPage> {
    if (q.type && !this.catalogue.has(q.type)) {
      throw new ValidationError([{ loc: ['query', 'type'], msg: `Unknown event type; known types: ${this.catalogue.names().join(', ')}`, type: 'enum' }]);
    }
    const filter: Doc = { ...this.tenancy.filter(actor), ...(q.type ? { type: q.type } : {}) };
    const values = q.cursor ? decodeCursor(q.cursor, SORT, this.settings.cursorSecret) : null;
    const dir = q.direction;
    const want = q.limit + 1;
    const found: { doc: EventDoc; record: EventRecord }[] = [];
    let from: unknown[] | null = values;
    for (let size = want; found.length < want; size = Math.min(Math.max(size * 2, 100), 1000)) {
      const range = from ? cursorFilter(SORT, from, dir) : null;
      const rows = await this.models.events
        .find(range ? { $and: [filter, range] } : filter, { previous: 0, meta: 0, source: 0, committed_at: 0 })
        .sort(querySort(SORT, dir))
        .limit(size)
        .maxTimeMS(this.settings.queryTimeoutMs)
        .lean<EventDoc[]>();
      for (const doc of rows) {
        const record = this.viewer ? await this.viewer(actor, toRecord(doc)) : toRecord(doc);
        if (record) found.push({ doc, record });
        if (found.length === want) break;
      }
      if (rows.length < size) break;
      const end = rows[rows.length - 1]!;
      from = SORT.map(([f]) => (end as unknown as Doc)[f]);
    }
    const more = found.length > q.limit;
    const page = found.slice(0, q.limit);
    if (dir === 'prev') page.reverse();
    const hasNext = dir === 'next' ? more : values !== null;
    const hasPrev = dir === 'next' ? values !== null : more;
    const first = page[0]?.doc;
    const last = page[page.length - 1]?.doc;
    const secret = this.settings.cursorSecret;
    return {
      items: page.map((p) => p.record),
      cursors: {
        next: hasNext && last ? encodeCursor(SORT, last as unknown as Doc, secret) : null,
        prev: hasPrev && first ? encodeCursor(SORT, first as unknown as Doc, secret) : null,
        has_next: hasNext && !!last,
        has_prev: hasPrev && !!first,
      },
    };
  }

  /** One event of the actor's tenant (404 outside it). */
  async get(actor: Actor, id: string): Promise<EventRecord> {
    const doc = await this.models.events.findOne({ _id: id, ...this.tenancy.filter(actor) }, { previous: 0, meta: 0, source: 0 }).lean<EventDoc>();
    const record = doc && (this.viewer ? await this.viewer(actor, toRecord(doc)) : toRecord(doc));
    if (!record) throw new NotFoundError('event', id);
    return record;
  }

  /**
   * The events of `ids` the actor may read, as `get` gives each, with one query (the outbound
   * sender reads a claimed batch's events this way). An id missing from the result is not in the
   * actor's tenant, not readable by it, or no longer in the log.
   */
  async getMany(actor: Actor, ids: readonly string[]): Promise<Map<string, EventRecord>> {
    const out = new Map<string, EventRecord>();
    if (!ids.length) return out;
    const docs = await this.models.events.find({ _id: { $in: [...new Set(ids)] }, ...this.tenancy.filter(actor) }, { previous: 0, meta: 0, source: 0 }).lean<EventDoc[]>();
    for (const doc of docs) {
      const record = this.viewer ? await this.viewer(actor, toRecord(doc)) : toRecord(doc);
      if (record) out.set(record.id, record);
    }
    return out;
  }
}
