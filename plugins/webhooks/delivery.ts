/**
 * The sender of outbound webhooks: woken in-process when the fan-out creates deliveries (a poll
 * finds those of other processes and the retries), it claims due deliveries in batches with a lease
 * (one conditional update per batch, so N replicas never send the same attempt twice), posts each
 * signed event to its endpoint, and records the outcomes of the attempts that finished together in
 * one bulk write.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Types } from 'mongoose';
import type { Logger } from '../../core/logger.ts';
import type { OutboundMetrics, OutboundOutcome } from './metrics.ts';
import type { EventLog } from '../events/index.ts';
import type { EventRecord } from '../events/public/contributions.ts';
import type { Doc } from '../../core/hooks.ts';
import { notRemoved, type OutboxSource } from '../events/public/outbox.ts';
import { type WebhookDeliveryModel, type WebhookDeliveryRecord, type WebhookEndpointModel, type WebhookEndpointRecord } from './model.ts';
import { deliveryViewOf } from './views.ts';
import { AttemptRecorder, type EndpointHealth, type Outcome } from './recorder.ts';
import type { Resolver } from './ssrf.ts';
import { httpTransport, type Transport, type TransportResult } from './transport.ts';
import { postEvent } from './post.ts';

export { DELIVERY_FAILED_EVENT, DELIVERY_SUCCEEDED_EVENT, type EndpointHealth } from './recorder.ts';

export interface SenderSettings {
  /** Delay in seconds before each attempt (index 0: the first, counted from the delivery's creation). */
  schedule: readonly number[];
  timeoutMs: number;
  pollMs: number;
  allowedHosts: readonly string[];
  /** Refuse `http:` URLs (production). */
  httpsOnly: boolean;
  /** Deliveries one process sends at once. */
  concurrency: number;
  /** Deliveries of one endpoint one process sends at once (its share of `concurrency`). */
  endpointConcurrency: number;
}

export interface SenderDeps {
  deliveries: WebhookDeliveryModel;
  endpoints: WebhookEndpointModel;
  events: EventLog;
  health: EndpointHealth;
  settings: SenderSettings;
  log: Logger;
  /** Every attempt counts in the outbound series (by outcome, and the delay of a success). */
  metrics: OutboundMetrics;
  /** Resolves endpoint hosts before each attempt. @default dns.lookup (all addresses) */
  resolver: Resolver;
  /** @default httpTransport */
  transport?: Transport;
  /** The event as the endpoint may receive it (its role's read rules); null: not readable by it. */
  view(endpoint: WebhookEndpointRecord, event: EventRecord): EventRecord | null | Promise<EventRecord | null>;
}

/** The lease of a claim outlives the longest attempt; only a process that died leaves one to expire. */
const LEASE_MARGIN_MS = 30_000;
/** Due deliveries read per free slot to choose a batch from: room to pass an endpoint whose share is nearly taken. */
const CANDIDATES_PER_SLOT = 4;
/** A fresh delivery's endpoint as the fan-out read it is used this long; after, it is read again. */
const FRESH_MAX_AGE_MS = 1_000;
/** Fresh deliveries kept in memory at most; more are left to the search. */
const FRESH_MAX = 10_000;

/** A delivery this process just created, with its endpoint and event as the fan-out read them. */
export interface FreshDelivery {
  d: WebhookDeliveryRecord;
  endpoint: WebhookEndpointRecord;
  event: EventRecord;
}

/**
 * Claims, sends and records deliveries. `start()` polls in the background; `claim` + `attempt` are
 * also used directly for a retry by hand and a test ping (answered synchronously).
 */
export class DeliverySender {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  /** A wake came while a poll ran: poll again as soon as it ends. */
  private again = false;
  private stopped = true;
  /** Runs a function in the async context of start-up (no request's). */
  private readonly background = AsyncLocalStorage.snapshot();
  /** Attempts this process is sending, and how many of them each endpoint (by id) has. */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly perEndpoint = new Map<string, number>();
  /** Sent attempts whose recording is under way (stop waits for them). */
  private readonly recordings = new Set<Promise<void>>();
  /** Deliveries this process's fan-out created, by endpoint id, oldest first, with when they came. */
  private readonly fresh = new Map<string, { f: FreshDelivery; at: number }[]>();
  private freshCount = 0;
  /** Fresh deliveries claimed, waiting for a slot of their endpoint (by id). */
  private readonly ready = new Map<string, { d: WebhookDeliveryRecord; endpoint: WebhookEndpointRecord | null; event: EventRecord }[]>();
  private readyCount = 0;
  /** The last search of the database found nothing due: a wake serves the fresh deliveries only, until `pollMs` passed. */
  private dry = false;
  private searchedAt = 0;
  private readonly recorder: AttemptRecorder;
  private readonly transport: Transport;
  /** `webhook_deliveries` as an outbox source of the event log (the `webhook_delivery.*` events). */
  readonly source: OutboxSource;

  constructor(private readonly deps: SenderDeps) {
    this.transport = deps.transport ?? httpTransport;
    this.source = { name: 'webhook_deliveries', model: deps.deliveries, view: (doc) => deliveryViewOf(doc as unknown as WebhookDeliveryRecord) as unknown as Doc };
    this.recorder = new AttemptRecorder(deps, this.source);
  }

  private get leaseMs(): number {
    return this.deps.settings.timeoutMs + LEASE_MARGIN_MS;
  }

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
    this.fresh.clear();
    this.freshCount = 0;
    // Claimed and never started: their lease is released, so another process sends them at once.
    const held = [...this.ready.values()].flat().map((r) => r.d);
    this.ready.clear();
    this.readyCount = 0;
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
      if (this.freshCount >= FRESH_MAX) {
        this.dry = false;
        break;
      }
      const key = String(f.d.endpoint_id);
      const queue = this.fresh.get(key);
      if (queue) queue.push({ f, at });
      else this.fresh.set(key, [{ f, at }]);
      this.freshCount++;
    }
    this.wake(false);
  }

  /**
   * Polls now, during a poll right after it: new deliveries were created in this process (`search`:
   * in the database only, so the next poll searches), or a slot came free.
   */
  wake(search = true): void {
    if (this.stopped) return;
    if (search) this.dry = false;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    // A wake comes from the relay of a request's write: the poll it starts is background work, not
    // part of that request (its logs, trace and tenant context), so it runs in the start-up context.
    this.timer = this.background(setTimeout, () => {
      this.timer = null;
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
   * Claims the fresh deliveries whose endpoints have free slots, then searches the database for due
   * deliveries in batches until this process's slots are full or none is left it may take, and
   * starts their attempts without waiting for them. A sent attempt wakes the sender to fill its
   * slot. After a search that found nothing, wakes skip the search until `pollMs` passed: the
   * search is for other processes' deliveries and retries, which the timer finds.
   */
  async poll(): Promise<void> {
    const { concurrency, pollMs } = this.deps.settings;
    await this.claimFresh();
    if (this.dry && Date.now() - this.searchedAt < pollMs) return;
    this.searchedAt = Date.now();
    while (this.inFlight.size < concurrency && !this.stopped) {
      const batch = await this.claimBatch(concurrency - this.inFlight.size);
      this.dry = !batch;
      if (!batch) return;
      if (!batch.length) continue;
      const ids = [...new Set(batch.map((d) => String(d.endpoint_id)))].map((id) => new Types.ObjectId(id));
      const endpoints = await this.deps.endpoints.find({ _id: { $in: ids } }).lean<WebhookEndpointRecord[]>();
      const byId = new Map(endpoints.map((e) => [String(e._id), e]));
      for (const d of batch) this.launch(d, byId.get(String(d.endpoint_id)) ?? null);
    }
  }

  /**
   * Claims fresh deliveries with one conditional update on their ids: still pending, never
   * attempted, not leased. Each one matched is as the fan-out created it, so the copy in memory is
   * the delivery; one another process took first is left to it. Each endpoint claims up to twice its
   * share: those past its free slots wait in `ready` and start the moment a slot comes free, with no
   * round trip between two attempts (their lease covers one attempt more). An endpoint read more
   * than `FRESH_MAX_AGE_MS` ago is read again, so a change to it (a rotated secret) applies.
   */
  private async claimFresh(): Promise<void> {
    const { concurrency, endpointConcurrency, timeoutMs } = this.deps.settings;
    const chosen: { f: FreshDelivery; at: number }[] = [];
    let room = 2 * concurrency - this.inFlight.size - this.readyCount;
    for (const [key, queue] of this.fresh) {
      let want = Math.min(room, 2 * endpointConcurrency - (this.perEndpoint.get(key) ?? 0) - (this.ready.get(key)?.length ?? 0));
      for (; want > 0 && queue.length; want--, room--, this.freshCount--) chosen.push(queue.shift()!);
      if (!queue.length) this.fresh.delete(key);
    }
    if (!chosen.length || this.stopped) return;
    const old = Date.now() - FRESH_MAX_AGE_MS;
    const stale = [...new Set(chosen.filter((c) => c.at < old).map((c) => String(c.f.d.endpoint_id)))].map((id) => new Types.ObjectId(id));
    const reread = new Map((stale.length ? await this.deps.endpoints.find({ _id: { $in: stale } }).lean<WebhookEndpointRecord[]>() : []).map((e) => [String(e._id), e]));
    const now = new Date();
    const lease = { lease_until: new Date(now.getTime() + this.leaseMs + timeoutMs), lease_owner: new Types.ObjectId().toHexString() };
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
    for (const { f, at } of mine) {
      const key = String(f.d.endpoint_id);
      const endpoint = at < old ? (reread.get(key) ?? null) : f.endpoint;
      const queue = this.ready.get(key);
      const r = { d: { ...f.d, ...lease }, endpoint, event: f.event };
      if (queue) queue.push(r);
      else this.ready.set(key, [r]);
      this.readyCount++;
    }
    this.launchReady();
  }

  /** Starts the claimed fresh deliveries whose endpoints have a free slot. */
  private launchReady(): void {
    const { concurrency, endpointConcurrency } = this.deps.settings;
    for (const [key, queue] of this.ready) {
      while (queue.length && (this.perEndpoint.get(key) ?? 0) < endpointConcurrency && this.inFlight.size < concurrency) {
        const r = queue.shift()!;
        this.readyCount--;
        this.launch(r.d, r.endpoint, r.event);
      }
      if (!queue.length) this.ready.delete(key);
    }
  }

  /**
   * Claims up to `free` due deliveries with one conditional update. Each endpoint gets no more than
   * its free share (`endpointConcurrency` less its attempts under way), so a slow or hanging
   * endpoint holds its share only and the deliveries of the others are claimed past its backlog.
   * The chosen deliveries are leased to a new owner id in one `updateMany` whose filter repeats
   * "due and not leased": one another process leased in between is left to it.
   * @returns the claimed deliveries; [] when others took every chosen one; null when none is due
   */
  private async claimBatch(free: number): Promise<WebhookDeliveryRecord[] | null> {
    const { endpointConcurrency } = this.deps.settings;
    const now = new Date();
    const full = [...this.perEndpoint].filter(([, n]) => n >= endpointConcurrency).map(([id]) => new Types.ObjectId(id));
    const due = { status: 'pending' as const, next_attempt_at: { $lte: now }, $or: [{ lease_until: null }, { lease_until: { $lt: now } }] };
    const rows = await this.deps.deliveries
      .find({ ...due, ...(full.length ? { endpoint_id: { $nin: full } } : {}) }, { _id: 1, endpoint_id: 1 })
      .sort({ next_attempt_at: 1 })
      .limit(free * CANDIDATES_PER_SLOT)
      .lean<{ _id: Types.ObjectId; endpoint_id: Types.ObjectId }[]>();
    if (!rows.length) return null;
    const taken = new Map<string, number>();
    const chosen: Types.ObjectId[] = [];
    for (const r of rows) {
      const key = String(r.endpoint_id);
      const mine = taken.get(key) ?? 0;
      if ((this.perEndpoint.get(key) ?? 0) + mine >= endpointConcurrency) continue;
      taken.set(key, mine + 1);
      chosen.push(r._id);
      if (chosen.length >= free) break;
    }
    const owner = new Types.ObjectId().toHexString();
    const res = await this.deps.deliveries.updateMany({ _id: { $in: chosen }, ...due }, { $set: { lease_until: new Date(now.getTime() + this.leaseMs), lease_owner: owner } });
    if (!res.modifiedCount) return [];
    return this.deps.deliveries.find({ _id: { $in: chosen }, lease_owner: owner }).lean<WebhookDeliveryRecord[]>();
  }

  /**
   * Sends a claimed delivery in one of the process's slots. The slot comes free once the attempt is
   * sent: its recording (the lease still held) goes on in the next batch write.
   */
  private launch(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord | null, event?: EventRecord): void {
    const key = String(d.endpoint_id);
    this.perEndpoint.set(key, (this.perEndpoint.get(key) ?? 0) + 1);
    const failed = (err: unknown) => this.deps.log.error({ err, delivery_id: String(d._id) }, 'webhook delivery attempt failed');
    const run: Promise<void> = this.attemptClaimed(d, endpoint, event)
      .then(({ recorded }) => {
        const r = recorded.catch(failed).finally(() => this.recordings.delete(r));
        this.recordings.add(r);
      })
      .catch(failed)
      .finally(() => {
        this.inFlight.delete(run);
        const left = (this.perEndpoint.get(key) ?? 1) - 1;
        if (left > 0) this.perEndpoint.set(key, left);
        else this.perEndpoint.delete(key);
        if (!this.stopped) this.launchReady();
        this.wake(false);
      });
    this.inFlight.add(run);
  }

  /** An attempt of a batch-claimed delivery; resolves once sent, with its recording in the next batch write. */
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

  /** {@link create} for several events with one insert. @returns the deliveries created (not those that existed) */
  async createMany(items: { event: EventRecord; tenantId: Types.ObjectId; endpointIds: Types.ObjectId[] }[]): Promise<WebhookDeliveryRecord[]> {
    const now = new Date();
    const docs = items.flatMap(({ event, tenantId, endpointIds }) => endpointIds.map((endpoint_id) => ({
      _id: new Types.ObjectId(), tenant_id: tenantId, endpoint_id, event_id: event.id, event_type: event.type, status: 'pending' as const, attempts: 0, last_attempt: null,
      attempt_log: [], next_attempt_at: this.firstAttemptAt(now), lease_until: null, lease_owner: null, created_at: now, updated_at: now,
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
    if (ok !== null) await (ok ? this.deps.health.succeeded(endpoint._id) : this.deps.health.failed(endpoint._id, set.last_attempt.attempted_at));
    return updated;
  }

  /** Sends a claimed delivery (unless its endpoint is disabled) and says what to record; `ok` null: not sent. */
  private async outcome(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord, manual: boolean, event?: EventRecord): Promise<{ set: Outcome; ok: boolean | null }> {
    if (!endpoint.enabled && !manual) {
      const last_attempt = { status: null, duration_ms: 0, error: 'not sent: the endpoint is disabled', response_excerpt: null, attempted_at: new Date() };
      return { set: { status: 'failed', next_attempt_at: null, last_attempt }, ok: null };
    }
    const started = Date.now();
    const { result, eventAt } = await postEvent(this.deps, this.transport, endpoint, d, event).catch((err: Error) => ({ result: { status: null, excerpt: null, error: err.message } as TransportResult, eventAt: null }));
    const at = new Date();
    const ok = result.status !== null && result.status >= 200 && result.status <= 299;
    this.measure(result, ok, eventAt, at);
    const attempts = d.attempts + 1;
    const delay = this.deps.settings.schedule[attempts];
    const retry = !ok && delay !== undefined && (!manual || d.status === 'pending');
    const last_attempt = { status: result.status, duration_ms: at.getTime() - started, error: result.error, response_excerpt: result.excerpt, attempted_at: at };
    return {
      set: { status: ok ? 'delivered' : retry ? 'pending' : 'failed', attempts, last_attempt, next_attempt_at: retry ? new Date(at.getTime() + delay * 1000) : null },
      ok,
    };
  }

  /** One attempt in the outbound series: its outcome, and for a success the delay since the event. */
  private measure(result: TransportResult, ok: boolean, eventAt: Date | null, at: Date): void {
    const outcome: OutboundOutcome = ok ? 'success' : result.status !== null ? 'failure' : result.timedOut ? 'timeout' : 'error';
    this.deps.metrics.attempts.inc({ outcome });
    if (ok && eventAt) this.deps.metrics.delay.observe(Math.max(0, at.getTime() - eventAt.getTime()) / 1000);
  }
}
