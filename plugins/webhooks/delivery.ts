/**
 * The sender of outbound webhooks: woken in-process when the fan-out creates deliveries (a poll
 * finds those of other processes and the retries), it claims due deliveries in batches with a lease
 * (one conditional update per batch, so N replicas never send the same attempt twice), posts each
 * signed event to its endpoint, and records the outcomes of the attempts that finished together in
 * one bulk write.
 */
import { Types } from 'mongoose';
import type { Logger } from '../../core/logger.ts';
import type { Metrics, OutboundOutcome } from '../../core/observability/metrics.ts';
import type { EventLog } from '../events/index.ts';
import type { EventRecord } from '../../core/event-contributions.ts';
import { systemActor } from '../../core/context.ts';
import type { Doc } from '../../core/hooks.ts';
import { notRemoved, OUTBOX_FIELD, type OutboxSource } from '../../core/outbox.ts';
import { ATTEMPT_LOG_SIZE, type DeliveryStatus, type WebhookDeliveryModel, type WebhookDeliveryRecord, type WebhookEndpointModel, type WebhookEndpointRecord } from './model.ts';
import { deliveryViewOf } from './views.ts';
import type { AttemptView } from './schemas.ts';
import { checkedAddresses, UnsafeUrlError, type Resolver, type ResolvedAddress } from './ssrf.ts';
import { activeSecrets, signedHeaders } from './signing.ts';
import { httpTransport, type Transport, type TransportResult } from './transport.ts';

/** What the sender reports about an endpoint's health (the endpoint service disables failing endpoints). */
export interface EndpointHealth {
  succeeded(endpointId: Types.ObjectId): Promise<void>;
  failed(endpointId: Types.ObjectId, at: Date): Promise<void>;
}

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
  /** Every attempt counts in `metrics.outbound` (by outcome, and the delay of a success). */
  metrics: Metrics;
  /** Resolves endpoint hosts before each attempt. @default dns.lookup (all addresses) */
  resolver: Resolver;
  /** @default httpTransport */
  transport?: Transport;
  /** The event as the endpoint may receive it (its role's read rules); null: not readable by it. */
  view(endpoint: WebhookEndpointRecord, event: EventRecord): EventRecord | null | Promise<EventRecord | null>;
}

/** Stored with a recorded attempt of an outbound delivery that got a 2xx (`delivered`). */
export const DELIVERY_SUCCEEDED_EVENT = 'webhook_delivery.succeeded';
/** Stored with a recorded attempt of an outbound delivery that failed (pending again, or failed). */
export const DELIVERY_FAILED_EVENT = 'webhook_delivery.failed';

/** The lease of a claim outlives the longest attempt; only a process that died leaves one to expire. */
const LEASE_MARGIN_MS = 30_000;
/** Due deliveries read per free slot to choose a batch from: room to pass an endpoint whose share is nearly taken. */
const CANDIDATES_PER_SLOT = 4;

/** The operations of a raw `bulkWrite` on the deliveries (built from values already cast). */
type BulkOps = Parameters<WebhookDeliveryModel['collection']['bulkWrite']>[0];

/** What recording an attempt writes to its delivery. */
interface Outcome {
  status: DeliveryStatus;
  last_attempt: AttemptView;
  next_attempt_at: Date | null;
  attempts?: number;
}

/** A finished attempt waiting for the next batch write; `ok` null: nothing to tell the endpoint's health. */
interface Finished {
  d: WebhookDeliveryRecord;
  set: Outcome;
  endpointId: Types.ObjectId;
  ok: boolean | null;
  done: () => void;
  fail: (err: unknown) => void;
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
  /** Attempts this process is making, and how many of them each endpoint (by id) has. */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly perEndpoint = new Map<string, number>();
  /** Finished attempts not yet written, and the batch write under way. */
  private finished: Finished[] = [];
  private writing: Promise<void> | null = null;
  private readonly transport: Transport;
  /** `webhook_deliveries` as an outbox source of the event log (the `webhook_delivery.*` events). */
  readonly source: OutboxSource;

  constructor(private readonly deps: SenderDeps) {
    this.transport = deps.transport ?? httpTransport;
    this.source = { name: 'webhook_deliveries', model: deps.deliveries, view: (doc) => deliveryViewOf(doc as unknown as WebhookDeliveryRecord) as unknown as Doc };
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
  }

  /** Polls now (new deliveries were just created in this process, or a slot came free); during a poll, right after it. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
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
   * Claims due deliveries in batches until this process's slots are full or none is left it may
   * take, and starts their attempts without waiting for them. A finished attempt wakes the sender
   * to fill its slot.
   */
  async poll(): Promise<void> {
    const { concurrency } = this.deps.settings;
    while (this.inFlight.size < concurrency && !this.stopped) {
      const batch = await this.claimBatch(concurrency - this.inFlight.size);
      if (!batch) return;
      if (!batch.length) continue;
      const ids = [...new Set(batch.map((d) => String(d.endpoint_id)))].map((id) => new Types.ObjectId(id));
      const endpoints = await this.deps.endpoints.find({ _id: { $in: ids } }).lean<WebhookEndpointRecord[]>();
      const byId = new Map(endpoints.map((e) => [String(e._id), e]));
      for (const d of batch) this.launch(d, byId.get(String(d.endpoint_id)) ?? null);
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

  private launch(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord | null): void {
    const key = String(d.endpoint_id);
    this.perEndpoint.set(key, (this.perEndpoint.get(key) ?? 0) + 1);
    const run: Promise<void> = this.attemptClaimed(d, endpoint)
      .catch((err) => this.deps.log.error({ err, delivery_id: String(d._id) }, 'webhook delivery attempt failed'))
      .finally(() => {
        this.inFlight.delete(run);
        const left = (this.perEndpoint.get(key) ?? 1) - 1;
        if (left > 0) this.perEndpoint.set(key, left);
        else this.perEndpoint.delete(key);
        this.wake();
      });
    this.inFlight.add(run);
  }

  /** An attempt of a batch-claimed delivery: its outcome joins the next batch write. */
  private async attemptClaimed(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord | null): Promise<void> {
    if (!endpoint) {
      await this.deps.deliveries.deleteOne({ _id: d._id });
      return;
    }
    const { set, ok } = await this.outcome(d, endpoint, false);
    await new Promise<void>((done, fail) => {
      this.finished.push({ d, set, endpointId: endpoint._id, ok, done, fail });
      this.writing ??= this.writeFinished();
    });
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
    if (!endpointIds.length) return 0;
    const now = new Date();
    const docs = endpointIds.map((endpoint_id) => ({
      tenant_id: tenantId, endpoint_id, event_id: event.id, event_type: event.type, status: 'pending', attempts: 0, last_attempt: null, attempt_log: [],
      next_attempt_at: this.firstAttemptAt(now), lease_until: null, created_at: now, updated_at: now,
    }));
    try {
      const res = await this.deps.deliveries.collection.insertMany(docs, { ordered: false });
      return res.insertedCount;
    } catch (err) {
      const e = err as { writeErrors?: { code?: number; err?: { code?: number } }[] };
      if (!e.writeErrors?.every((w) => (w.code ?? w.err?.code) === 11000)) throw err;
      return docs.length - e.writeErrors.length;
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
    const updated = await this.release(d, set);
    if (ok !== null) await (ok ? this.deps.health.succeeded(endpoint._id) : this.deps.health.failed(endpoint._id, set.last_attempt.attempted_at));
    return updated;
  }

  /** Sends a claimed delivery (unless its endpoint is disabled) and says what to record; `ok` null: not sent. */
  private async outcome(d: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord, manual: boolean): Promise<{ set: Outcome; ok: boolean | null }> {
    if (!endpoint.enabled && !manual) {
      const last_attempt = { status: null, duration_ms: 0, error: 'not sent: the endpoint is disabled', response_excerpt: null, attempted_at: new Date() };
      return { set: { status: 'failed', next_attempt_at: null, last_attempt }, ok: null };
    }
    const started = Date.now();
    const { result, eventAt } = await this.send(endpoint, d).catch((err: Error) => ({ result: { status: null, excerpt: null, error: err.message } as TransportResult, eventAt: null }));
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

  /**
   * What recording an attempt writes: the outcome, the attempt appended to `attempt_log` (the last
   * `ATTEMPT_LOG_SIZE`), the lease released, and its `webhook_delivery.succeeded` / `.failed` event
   * for the delivery's outbox, all in one conditional update, so the event exists if and only if the
   * attempt was recorded. The event's object is frozen into it: the next attempt may change the
   * delivery before the relay runs.
   */
  private recording(d: WebhookDeliveryRecord, set: Outcome, now: Date) {
    const written = { ...set, attempt_log: [...(d.attempt_log ?? []), set.last_attempt].slice(-ATTEMPT_LOG_SIZE), lease_until: null, lease_owner: null, updated_at: now };
    const type = set.status === 'delivered' ? DELIVERY_SUCCEEDED_EVENT : DELIVERY_FAILED_EVENT;
    const entry = { ...this.deps.events.stage(type, { actor: null, tenant_id: d.tenant_id }), data: deliveryViewOf({ ...d, ...written } as unknown as WebhookDeliveryRecord) as unknown as Doc };
    return { written, entry };
  }

  /** Records one attempt (retry by hand, test ping), if this process still holds the lease it claimed `d` with. */
  private async release(d: WebhookDeliveryRecord, set: Outcome): Promise<WebhookDeliveryRecord | null> {
    const { written, entry } = this.recording(d, set, new Date());
    const doc = await this.deps.deliveries
      .findOneAndUpdate({ _id: d._id, lease_until: d.lease_until }, { $set: written, $push: { [OUTBOX_FIELD]: entry } }, { returnDocument: 'after' })
      .lean<WebhookDeliveryRecord>();
    if (!doc) this.deps.log.warn({ delivery_id: String(d._id) }, 'webhook delivery lease lost before the attempt was recorded');
    else await this.deps.events.committed(this.source, doc as unknown as Doc);
    return doc;
  }

  /** Writes the finished attempts, one bulk write at a time: those that finish during a write go in the next. */
  private async writeFinished(): Promise<void> {
    // Attempts finishing in the same turn of the event loop join the first write.
    await new Promise((r) => setImmediate(r));
    while (this.finished.length) {
      const batch = this.finished;
      this.finished = [];
      try {
        await this.writeBatch(batch);
        for (const f of batch) f.done();
      } catch (err) {
        for (const f of batch) f.fail(err);
      }
    }
    this.writing = null;
  }

  /**
   * Records a batch of attempts with one `bulkWrite`, each update conditional on the lease its
   * delivery was claimed with (`lease_owner`): an attempt whose lease passed and was taken by
   * another process is not recorded (that process sends it again). Then the events go to the relay
   * and the endpoints' health is told, once per endpoint (its last outcome in the batch).
   */
  private async writeBatch(batch: Finished[]): Promise<void> {
    const now = new Date();
    const rows = batch.map((f) => ({ f, ...this.recording(f.d, f.set, now) }));
    const res = await this.deps.deliveries.collection.bulkWrite(
      rows.map(({ f, written, entry }) => ({ updateOne: { filter: { _id: f.d._id, lease_owner: f.d.lease_owner }, update: { $set: written, $push: { [OUTBOX_FIELD]: entry } } } })) as unknown as BulkOps,
      { ordered: false },
    );
    let recorded = rows;
    if (res.matchedCount < rows.length) {
      const found = await this.deps.deliveries.find({ _id: { $in: rows.map((r) => r.f.d._id) }, [`${OUTBOX_FIELD}.id`]: { $in: rows.map((r) => r.entry.id) } }, { _id: 1 }).lean();
      const ids = new Set(found.map((x) => String(x._id)));
      recorded = rows.filter((r) => ids.has(String(r.f.d._id)));
      for (const r of rows) if (!ids.has(String(r.f.d._id))) this.deps.log.warn({ delivery_id: String(r.f.d._id) }, 'webhook delivery lease lost before the attempt was recorded');
    }
    await Promise.all(recorded.map((r) => this.deps.events.committed(this.source, { ...r.f.d, ...r.written, [OUTBOX_FIELD]: [r.entry] } as unknown as Doc)));
    const health = new Map<string, Finished>();
    for (const { f } of recorded) if (f.ok !== null) health.set(String(f.endpointId), f);
    await Promise.all([...health.values()].map((f) => (f.ok ? this.deps.health.succeeded(f.endpointId) : this.deps.health.failed(f.endpointId, f.set.last_attempt.attempted_at))));
  }

  /** One attempt in `metrics.outbound`: its outcome, and for a success the delay since the event. */
  private measure(result: TransportResult, ok: boolean, eventAt: Date | null, at: Date): void {
    const outcome: OutboundOutcome = ok ? 'success' : result.status !== null ? 'failure' : result.timedOut ? 'timeout' : 'error';
    this.deps.metrics.outbound.attempts.inc({ outcome });
    if (ok && eventAt) this.deps.metrics.outbound.delay.observe(Math.max(0, at.getTime() - eventAt.getTime()) / 1000);
  }

  /** Posts the delivery's event; `eventAt`: when the event happened (null when it is gone). */
  private async send(endpoint: WebhookEndpointRecord, d: WebhookDeliveryRecord): Promise<{ result: TransportResult; eventAt: Date | null }> {
    const refused = (error: string, eventAt: Date | null = null) => ({ result: { status: null, excerpt: null, error }, eventAt });
    let stored: EventRecord;
    try {
      stored = await this.deps.events.get(systemActor(), d.event_id);
    } catch {
      return refused(`event ${d.event_id} is no longer in the event log`);
    }
    // The role's rules as they are now: changed since the fan-out, they may no longer let it read the row.
    const event = await this.deps.view(endpoint, stored);
    if (!event) return refused('not sent: the endpoint\'s role may not read this row', stored.created_at);
    const url = new URL(endpoint.url);
    if (this.deps.settings.httpsOnly && url.protocol !== 'https:') return refused('refused: the URL must use https', event.created_at);
    let addresses: ResolvedAddress[];
    try {
      addresses = await checkedAddresses(url, { allowedHosts: this.deps.settings.allowedHosts, resolver: this.deps.resolver });
    } catch (err) {
      if (err instanceof UnsafeUrlError) return refused(`refused: ${err.message}`, event.created_at);
      throw err;
    }
    const body = JSON.stringify({ id: event.id, type: event.type, timestamp: event.created_at.toISOString(), data: event.data });
    const headers = signedHeaders(activeSecrets(endpoint.secrets, new Date()), event.id, new Date(), body);
    const result = await this.transport({ url, addresses, headers, body, timeoutMs: this.deps.settings.timeoutMs });
    return { result, eventAt: event.created_at };
  }
}
