/**
 * The sender of outbound webhooks: woken in-process when the fan-out creates deliveries (a poll
 * finds those of other processes and the retries), it claims due deliveries in batches with a lease
 * (one conditional update per batch, so N replicas never send the same attempt twice), ahead of its
 * free slots for endpoints that answer (slots.ts), posts each signed event on a kept-alive
 * connection (agents.ts), and records the attempts that finished together in one bulk write.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Types } from 'mongoose';
import type { EventRecord } from '../events/public/contributions.ts';
import type { Doc } from '../../core/hooks.ts';
import { notRemoved, OUTBOX_FIELD, type OutboxSource } from '../events/public/outbox.ts';
import { systemActor } from '../../core/context.ts';
import type { WebhookDeliveryRecord, WebhookEndpointRecord } from './model.ts';
import { deliveryViewOf } from './views.ts';
import { AttemptRecorder, type Outcome } from './recorder.ts';
import { httpTransport, type Transport } from './transport.ts';
import { attemptOutcome, type PostDeps } from './post.ts';
import { ReceiverAgents } from './agents.ts';
import { EndpointCache } from './lookups.ts';
import { AHEAD_SHARES, FreshQueue, Slots, type SearchScope } from './slots.ts';
import type { FreshDelivery, Ready, SenderDeps } from './sender-deps.ts';

export { DELIVERY_FAILED_EVENT, DELIVERY_SUCCEEDED_EVENT, type EndpointHealth } from './recorder.ts';
export type { FreshDelivery, SenderDeps, SenderSettings } from './sender-deps.ts';

/** The lease of a claim outlives the longest attempt; only a process that died leaves one to expire. */
const LEASE_MARGIN_MS = 30_000;
/**
 * Due deliveries a search reads (whole), per delivery a claim may take: room to pass an endpoint
 * whose share is nearly taken; the surplus serves the next rounds for `CANDIDATES_MAX_AGE_MS`.
 */
const CANDIDATES_PER_SLOT = 3;
const CANDIDATES_MAX_AGE_MS = 500;
/** A fresh delivery's endpoint as the fan-out read it is used this long, and so is one a batch read; after, it is read again. */
const FRESH_MAX_AGE_MS = 1_000;
/** Fresh deliveries kept in memory at most; more are left to the search. */
const FRESH_MAX = 10_000;
/**
 * How long other processes' searches leave a delivery to the process whose fan-out created it and
 * holds it in memory (`reserved_until`): without it, processes' searches took each other's fresh deliveries.
 */
const RESERVED_MS = 2_000;

/**
 * Claims, sends and records deliveries. `start()` polls in the background; `claim` + `attempt` are
 * also used directly for a retry by hand and a test ping (answered synchronously).
 */
export class DeliverySender {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  /** A wake came while a poll ran: poll again as soon as it ends. */
  private again = false;
  /** A poll is due at once (the timer is set to 0): further wakes have nothing to add. */
  private soon = false;
  private stopped = true;
  /** Runs a function in the async context of start-up (no request's). */
  private readonly background = AsyncLocalStorage.snapshot();
  /** Attempts this process is sending (stop waits for them); their slots are counted in `slots`. */
  private readonly inFlight = new Set<Promise<void>>();
  /** Attempts under way and claimed deliveries waiting, by endpoint, and what a claim may take. */
  readonly slots: Slots<Ready>;
  /** Sent attempts whose recording is under way (stop waits for them). */
  private readonly recordings = new Set<Promise<void>>();
  /** Deliveries this process's fan-out created, by endpoint id, oldest first, with when they came. */
  private readonly fresh = new FreshQueue<FreshDelivery>(FRESH_MAX);
  /** The last search of the database found nothing due: a wake serves the fresh deliveries only, until `pollMs` passed. */
  private dry = false;
  /** The surplus of the last search (see `cached`). */
  private candidates: { rows: WebhookDeliveryRecord[]; at: number } | null = null;
  /** Wakes asking for a search: one that came while a search ran keeps that search from marking the sender dry. */
  private searchWakes = 0;
  private createdWakes = 0;
  private searchedAt = 0;
  private readonly recorder: AttemptRecorder;
  private readonly transport: Transport;
  private readonly post: PostDeps;
  private readonly agents: ReceiverAgents;
  /** The endpoints of claimed batches, as read within the last `FRESH_MAX_AGE_MS`. */
  readonly endpointCache: EndpointCache;
  /** Searches of the database and deliveries claimed (tests). */
  readonly counts = { searches: 0, claimed: 0 };
  /** `webhook_deliveries` as an outbox source of the event log (the `webhook_delivery.*` events). */
  readonly source: OutboxSource;

  constructor(private readonly deps: SenderDeps) {
    this.transport = deps.transport ?? httpTransport;
    this.source = { name: 'webhook_deliveries', model: deps.deliveries, view: (doc) => deliveryViewOf(doc as unknown as WebhookDeliveryRecord) as unknown as Doc };
    this.recorder = new AttemptRecorder(deps, this.source);
    this.slots = new Slots(deps.settings);
    this.agents = new ReceiverAgents(deps.settings.concurrency);
    this.post = { ...deps, agentFor: (url, addresses) => this.agents.for(url, addresses) };
    this.endpointCache = new EndpointCache(deps.endpoints, FRESH_MAX_AGE_MS);
  }

  private get leaseMs(): number { return this.deps.settings.timeoutMs + LEASE_MARGIN_MS; }

  /** The lease of a delivery claimed for the slots (`Slots`): it may wait for `AHEAD_SHARES` attempts of its endpoint before its own. */
  private get aheadLeaseMs(): number { return this.leaseMs + AHEAD_SHARES * this.deps.settings.timeoutMs; }

  get openConnections(): number { return this.agents.sockets; } // (tests)

  /** When the first attempt of a delivery created at `at` is due. */
  firstAttemptAt(at: Date): Date {
    return new Date(at.getTime() + (this.deps.settings.schedule[0] ?? 0) * 1000);
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Stops polling and waits for the attempts under way to be recorded. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
    await Promise.all(this.inFlight);
    await Promise.all(this.recordings);
    this.agents.close();
    this.fresh.clear();
    // Claimed and never started: their lease is released, so another process sends them at once.
    const held = this.slots.drain().map((r) => r.d);
    if (held.length) {
      await this.deps.deliveries
        .updateMany({ _id: { $in: held.map((d) => d._id) }, lease_owner: { $in: [...new Set(held.map((d) => String(d.lease_owner)))] } }, { $set: { lease_until: null, lease_owner: null } })
        .catch((err: unknown) => this.deps.log.warn({ err }, 'webhook deliveries claimed ahead could not be released; their lease runs out'));
    }
  }

  /**
   * Deliveries this process's fan-out just created (with the endpoint and event it read): claimed
   * by id on the next wake, with no search and no read of the endpoint or event. Those it cannot
   * hold (first attempt not due at once, too many waiting) are left to the search.
   */
  offer(created: FreshDelivery[]): void {
    if (this.stopped || (this.deps.settings.schedule[0] ?? 0) > 0) return;
    const at = Date.now();
    for (const f of created) {
      if (this.fresh.add(String(f.d.endpoint_id), f, at)) continue;
      this.searchAgain();
      break;
    }
    this.wake(false);
  }

  /**
   * Polls now, during a poll right after it: new deliveries were created in this process (`search`:
   * in the database only, so the next poll searches), or a slot came free.
   */
  wake(search = true): void {
    if (this.stopped) return;
    if (search) this.searchAgain();
    if (this.running) this.again = true;
    else if (!this.soon) this.schedule(0);
  }

  /** The next poll searches; `created`: deliveries were created since, so the last search's surplus is not all there is. */
  private searchAgain(created = true): void {
    this.dry = false;
    this.searchWakes++;
    if (!created) return;
    this.candidates = null;
    this.createdWakes++;
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.soon = ms === 0;
    // A wake comes from the relay of a request's write: the poll it starts is background work, not
    // part of that request (its logs, trace and tenant context), so it runs in the start-up context.
    this.timer = this.background(setTimeout, () => {
      this.timer = null;
      this.soon = false;
      this.running = this.poll()
        .catch((err) => this.deps.log.warn({ err }, 'webhook delivery poll failed'))
        .finally(() => {
          this.running = null;
          const again = this.again;
          this.again = false;
          if (!this.stopped) this.schedule(again ? 0 : this.deps.settings.pollMs);
        });
    }, ms);
    this.timer.unref();
  }

  /**
   * Claims the fresh deliveries whose endpoints have room, then searches the database for due
   * deliveries in rounds while a claim may take some (see `Slots.scope`), and starts the attempts
   * that have a slot without waiting for them. A sent attempt wakes the sender to fill its slot.
   * After a search that found nothing, wakes skip the search until `pollMs` passed (the search is
   * for other processes' deliveries and retries, which the timer finds), unless a slot of an
   * endpoint whose deliveries the search left for its share came free.
   */
  async poll(): Promise<void> {
    await this.claimFresh();
    if (this.dry && Date.now() - this.searchedAt < this.deps.settings.pollMs) return;
    this.searchedAt = Date.now();
    while (!this.stopped && (await this.claimBatch())) {
      // Each round claimed deliveries, or others took the chosen ones first: search again.
    }
  }

  /**
   * Claims fresh deliveries with one conditional update on their ids: still pending, never
   * attempted, not leased. Each one matched is as the fan-out created it, so the copy in memory is
   * the delivery; one another process took first is left to it. Each endpoint claims up to twice its
   * share, more while it answers (`Slots.freshRoom`): those past its free slots wait in `slots`, and
   * start the moment a slot comes free (their lease covers the attempts before theirs). An endpoint
   * read more than `FRESH_MAX_AGE_MS` ago is read again, so a change to it (a rotated secret) applies.
   */
  private async claimFresh(): Promise<void> {
    const at = Date.now();
    const chosen = this.fresh.take(this.slots.room, (key) => this.slots.freshRoom(key, at));
    if (!chosen.length || this.stopped) return;
    const old = at - FRESH_MAX_AGE_MS;
    const stale = chosen.filter((c) => c.at < old).map((c) => String(c.f.d.endpoint_id));
    const reread = stale.length ? await this.endpointCache.get(stale) : new Map<string, WebhookEndpointRecord | null>();
    const now = new Date();
    const lease = { lease_until: new Date(now.getTime() + this.aheadLeaseMs), lease_owner: new Types.ObjectId().toHexString() };
    const ids = chosen.map((c) => c.f.d._id);
    const res = await this.deps.deliveries.updateMany(
      { _id: { $in: ids }, status: 'pending', attempts: 0, next_attempt_at: { $lte: now }, lease_until: null },
      { $set: lease },
    );
    let mine = chosen;
    if (res.modifiedCount < chosen.length) {
      const held = new Set((await this.deps.deliveries.find({ _id: { $in: ids }, lease_owner: lease.lease_owner }, { _id: 1 }).lean()).map((r) => String(r._id)));
      mine = chosen.filter((c) => held.has(String(c.f.d._id)));
    }
    this.hold(mine.map(({ f, at }) => ({ d: { ...f.d, ...lease }, endpoint: at < old ? (reread.get(String(f.d.endpoint_id)) ?? null) : f.endpoint, event: f.event })));
  }

  /** Claimed deliveries wait by endpoint; those that have a slot start. */
  private hold(claimed: Ready[]): void {
    const byKey = new Map<string, Ready[]>();
    for (const r of claimed) byKey.set(String(r.d.endpoint_id), [...(byKey.get(String(r.d.endpoint_id)) ?? []), r]);
    for (const [key, items] of byKey) this.slots.hold(key, items);
    this.counts.claimed += claimed.length;
    this.launchReady();
  }

  /**
   * Starts the claimed deliveries whose endpoints have a free slot. One whose lease no longer covers
   * an attempt and its recording (it waited longer than its claim allowed for) is not sent but
   * released: another process may take it once the lease passes, and must not find it under way.
   */
  private launchReady(): void {
    for (const { item: { d, endpoint, event } } of this.slots.launchable()) {
      if (d.lease_until && d.lease_until.getTime() - Date.now() >= this.leaseMs) this.launch(d, endpoint, event);
      else void this.deps.deliveries.updateOne({ _id: d._id, lease_owner: d.lease_owner }, { $set: { lease_until: null, lease_owner: null } }).catch(() => undefined);
    }
  }

  /**
   * Due deliveries read by the last search and not claimed yet (its surplus), while under
   * `CANDIDATES_MAX_AGE_MS` old and none was created since (a wake drops them), of the endpoints the
   * scope covers; null: search. The claim's filter decides, as for rows just read.
   */
  private cached(scope: SearchScope, at: number): WebhookDeliveryRecord[] | null {
    const c = this.candidates;
    if (!c || at - c.at > CANDIDATES_MAX_AGE_MS) return null;
    const rows = c.rows.filter((r) => (scope.free ? !scope.full.includes(String(r.endpoint_id)) : scope.fast.includes(String(r.endpoint_id))));
    return rows.length && this.slots.choose(rows, at, false).length ? rows : null;
  }

  /** Reads due deliveries of the scope, oldest first; keeps the surplus for the next rounds. @returns null when none is due */
  private async search(scope: SearchScope, due: Record<string, unknown>): Promise<WebhookDeliveryRecord[] | null> {
    const ids = (keys: string[]) => keys.map((k) => new Types.ObjectId(k));
    const which = scope.free ? (scope.full.length ? { endpoint_id: { $nin: ids(scope.full) } } : {}) : { endpoint_id: { $in: ids(scope.fast) } };
    const limit = this.slots.room * CANDIDATES_PER_SLOT;
    const [wakes, created] = [this.searchWakes, this.createdWakes];
    const at = Date.now();
    this.counts.searches++;
    const rows = (await this.deps.deliveries.collection
      .find({ ...due, ...which }, { projection: { [OUTBOX_FIELD]: 0 }, sort: { next_attempt_at: 1 }, limit })
      .toArray()) as unknown as WebhookDeliveryRecord[];
    if (rows.length < limit) this.slots.searchedAll(scope, rows);
    this.candidates = scope.free && created === this.createdWakes ? { rows, at } : null;
    if (rows.length) return rows;
    // Dry, unless a wake came while the search ran: what woke it may have been created after the read.
    if (scope.free && wakes === this.searchWakes) this.dry = true;
    return null;
  }

  /**
   * One round of the search: claims due deliveries with one conditional update, as many as
   * `Slots.scope` and `Slots.choose` allow. With a slot free, the search leaves out the endpoints at
   * their cap (so a slow or hanging endpoint holds its share only, and the others are claimed past
   * its backlog); with every slot busy, it claims ahead for the answering endpoints that have
   * deliveries left. The candidates are read whole (not their outbox) and leased to a new owner id
   * with one `updateMany` whose filter repeats "due and not leased" and the number of attempts read:
   * a delivery another process leased, or leased and recorded, in between is left to it. The copies
   * read are then the claimed deliveries; only when fewer matched is the claim read back. Their
   * endpoints (`EndpointCache`) and events (one query) are read for the batch.
   * @returns whether to search again
   */
  private async claimBatch(): Promise<boolean> {
    const at = Date.now();
    const scope = this.slots.scope(at);
    if (!scope) return false;
    const now = new Date(at);
    const due = {
      status: 'pending' as const, next_attempt_at: { $lte: now },
      $and: [{ $or: [{ lease_until: null }, { lease_until: { $lt: now } }] }, { $or: [{ reserved_until: null }, { reserved_until: { $lt: now } }] }],
    };
    const rows = this.cached(scope, at) ?? (await this.search(scope, due));
    if (!rows) return false;
    const chosen = this.slots.choose(rows, Date.now());
    if (this.candidates) this.candidates.rows = this.candidates.rows.filter((r) => !chosen.includes(r));
    if (!chosen.length) return false;
    const lease = { lease_until: new Date(at + this.aheadLeaseMs), lease_owner: new Types.ObjectId().toHexString() };
    const byAttempts = new Map<number, Types.ObjectId[]>();
    for (const d of chosen) byAttempts.set(d.attempts, [...(byAttempts.get(d.attempts) ?? []), d._id]);
    const same = [...byAttempts].map(([attempts, list]) => ({ _id: { $in: list }, attempts }));
    const res = await this.deps.deliveries.collection.updateMany({ $and: [due, same.length === 1 ? same[0]! : { $or: same }] }, { $set: lease });
    let mine = chosen;
    if (res.modifiedCount < chosen.length) {
      if (!res.modifiedCount) return true;
      mine = await this.deps.deliveries.find({ _id: { $in: chosen.map((d) => d._id) }, lease_owner: lease.lease_owner }, { [OUTBOX_FIELD]: 0 }).lean<WebhookDeliveryRecord[]>();
    }
    const [endpoints, events] = await Promise.all([
      this.endpointCache.get(mine.map((d) => String(d.endpoint_id))),
      // Unread here (the log failed to answer): each attempt reads its own.
      this.deps.events.getMany(systemActor(), mine.map((d) => d.event_id)).catch(() => new Map<string, EventRecord>()),
    ]);
    this.hold(mine.map((d) => ({ d: { ...d, ...lease }, endpoint: endpoints.get(String(d.endpoint_id)) ?? null, event: events.get(d.event_id) })));
    return true;
  }

  /**
   * Sends a claimed delivery in one of the process's slots. The slot comes free once the attempt is
   * sent: its recording (the lease still held) goes on in the next batch write.
   */
  private launch(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord | null, event?: EventRecord): void {
    const key = String(d.endpoint_id);
    const end = this.slots.begin(key, Date.now());
    const failed = (err: unknown) => this.deps.log.error({ err, delivery_id: String(d._id) }, 'webhook delivery attempt failed');
    const run: Promise<void> = this.attemptClaimed(d, endpoint, event)
      .then(({ recorded }) => {
        const r = recorded.catch(failed).finally(() => this.recordings.delete(r));
        this.recordings.add(r);
      })
      .catch(failed)
      .finally(() => {
        this.inFlight.delete(run);
        end();
        // The search left deliveries of this endpoint for its share: it has room again (unless fresh
        // deliveries of it wait, which fill its room without a search).
        if (this.slots.backlog.has(key) && !this.fresh.has(key)) this.searchAgain(false);
        if (!this.stopped) this.launchReady();
        this.wake(false);
      });
    this.inFlight.add(run);
  }

  /** An attempt of a claimed delivery; resolves once sent, with its recording in the next batch write. */
  private async attemptClaimed(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord | null, event?: EventRecord): Promise<{ recorded: Promise<void> }> {
    if (!endpoint) {
      await this.deps.deliveries.deleteOne({ _id: d._id });
      return { recorded: Promise.resolve() };
    }
    const { set, ok } = await this.outcome(d, endpoint, false, event);
    // Wrapped: an async function returning the promise itself would wait for the write.
    return { recorded: this.recorder.add({ d, set, endpointId: endpoint._id, ok }) };
  }

  /**
   * Claims one delivery matching `filter` whose lease is free: the single atomic step that keeps
   * two processes (or a poller and a manual retry) from sending the same attempt.
   */
  async claim(filter: Record<string, unknown>): Promise<WebhookDeliveryRecord | null> {
    const now = new Date();
    return this.deps.deliveries
      .findOneAndUpdate(
        { ...filter, $or: [{ lease_until: null }, { lease_until: { $lt: now } }] },
        { $set: { lease_until: new Date(now.getTime() + this.leaseMs), lease_owner: new Types.ObjectId().toHexString() } },
        { sort: { next_attempt_at: 1 }, returnDocument: 'after' },
      )
      .lean<WebhookDeliveryRecord>();
  }

  /**
   * Creates one pending delivery per endpoint for `event` (first attempt per the schedule). A
   * delivery that exists already is kept: the unique (endpoint, event) index makes a repeated
   * fan-out harmless. @returns how many were created
   */
  async create(event: EventRecord, tenantId: Types.ObjectId, endpointIds: Types.ObjectId[]): Promise<number> {
    return (await this.createMany([{ event, tenantId, endpointIds }])).length;
  }

  /**
   * {@link create} for several events with one insert; `offered`: they go to {@link offer} next,
   * and are reserved for this process a moment. @returns the deliveries created (not those that existed)
   */
  async createMany(items: { event: EventRecord; tenantId: Types.ObjectId; endpointIds: Types.ObjectId[] }[], offered = false): Promise<WebhookDeliveryRecord[]> {
    const now = new Date();
    // To be offered to this sender, which holds them (see `offer`): reserved for it a moment.
    const reserved = offered && !this.stopped && (this.deps.settings.schedule[0] ?? 0) === 0 ? new Date(now.getTime() + RESERVED_MS) : null;
    const docs = items.flatMap(({ event, tenantId, endpointIds }) => endpointIds.map((endpoint_id) => ({
      _id: new Types.ObjectId(), tenant_id: tenantId, endpoint_id, event_id: event.id, event_type: event.type, status: 'pending' as const, attempts: 0, last_attempt: null,
      attempt_log: [], next_attempt_at: this.firstAttemptAt(now), lease_until: null, lease_owner: null, reserved_until: reserved, created_at: now, updated_at: now,
    })));
    if (!docs.length) return [];
    try {
      await this.deps.deliveries.collection.insertMany(docs, { ordered: false });
      return docs as unknown as WebhookDeliveryRecord[];
    } catch (err) {
      const e = err as { writeErrors?: { index: number; code?: number; err?: { code?: number } }[] };
      if (!e.writeErrors?.every((w) => (w.code ?? w.err?.code) === 11000)) throw err;
      const existed = new Set(e.writeErrors.map((w) => w.index));
      return docs.filter((_, i) => !existed.has(i)) as unknown as WebhookDeliveryRecord[];
    }
  }

  /** Creates a delivery already claimed by the caller, who attempts it at once (test pings). */
  async createClaimed(d: { tenant_id: Types.ObjectId; endpoint_id: Types.ObjectId; event_id: string; event_type: string }): Promise<WebhookDeliveryRecord> {
    const now = new Date();
    const doc = await this.deps.deliveries.create({
      ...d, status: 'pending', attempts: 0, last_attempt: null, next_attempt_at: now, lease_until: new Date(now.getTime() + this.leaseMs), created_at: now, updated_at: now,
    });
    return doc.toObject() as WebhookDeliveryRecord;
  }

  /**
   * One attempt of a claimed delivery: loads its endpoint and event, checks the addresses, posts,
   * records the outcome and releases the lease. `manual` (retry by hand, test): a failure of a
   * delivery that was not pending leaves it `failed` instead of re-entering the schedule, and a
   * disabled endpoint is still sent to.
   * @returns the delivery after the attempt (null when it vanished: its endpoint was deleted)
   */
  async attempt(d: WebhookDeliveryRecord, manual: boolean): Promise<WebhookDeliveryRecord | null> {
    const endpoint = await this.deps.endpoints.findOne({ _id: d.endpoint_id, ...notRemoved }).lean<WebhookEndpointRecord>();
    if (!endpoint) {
      await this.deps.deliveries.deleteOne({ _id: d._id });
      return null;
    }
    const { set, ok } = await this.outcome(d, endpoint, manual);
    const updated = await this.recorder.release(d, set);
    if (ok !== null) await (ok ? this.deps.health.succeeded([endpoint._id]) : this.deps.health.failed(endpoint._id, set.last_attempt.attempted_at));
    return updated;
  }

  private outcome(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord, manual: boolean, event?: EventRecord): Promise<{ set: Outcome; ok: boolean | null }> {
    return attemptOutcome(this.post, this.transport, d, endpoint, manual, event);
  }
}
