/**
 * Records the attempts of outbound deliveries: a batch of attempts that finished together in one
 * bulk write (group commit), or one attempt (retry by hand, test ping) with its own update.
 */
import type { Types } from 'mongoose';
import type { Logger } from '../../core/logger.ts';
import type { EventLog } from '../events/index.ts';
import type { Doc } from '../../core/hooks.ts';
import { OUTBOX_FIELD, type OutboxSource } from '../events/public/outbox.ts';
import { ATTEMPT_LOG_SIZE, type DeliveryStatus, type WebhookDeliveryModel, type WebhookDeliveryRecord } from './model.ts';
import { deliveryViewOf } from './views.ts';
import type { AttemptView } from './schemas.ts';

/** What the sender reports about an endpoint's health (the endpoint service disables failing endpoints). */
export interface EndpointHealth {
  /** Attempts to these endpoints got a 2xx: each one's failing period ends (one write for all). */
  succeeded(endpointIds: Types.ObjectId[]): Promise<void>;
  failed(endpointId: Types.ObjectId, at: Date): Promise<void>;
}

/** Stored with a recorded attempt of an outbound delivery that got a 2xx (`delivered`). */
export const DELIVERY_SUCCEEDED_EVENT = 'webhook_delivery.succeeded';
/** Stored with a recorded attempt of an outbound delivery that failed (pending again, or failed). */
export const DELIVERY_FAILED_EVENT = 'webhook_delivery.failed';

/** The operations of a raw `bulkWrite` on the deliveries (built from values already cast). */
type BulkOps = Parameters<WebhookDeliveryModel['collection']['bulkWrite']>[0];

/** What recording an attempt writes to its delivery. */
export interface Outcome {
  status: DeliveryStatus;
  last_attempt: AttemptView;
  next_attempt_at: Date | null;
  attempts?: number;
}

/** An attempt to record: `ok` null: nothing to tell the endpoint's health. */
export interface Attempt {
  d: WebhookDeliveryRecord;
  set: Outcome;
  endpointId: Types.ObjectId;
  ok: boolean | null;
}

/** A finished attempt waiting for the next batch write. */
interface Finished extends Attempt {
  done: () => void;
  fail: (err: unknown) => void;
}

/**
 * How long finished attempts are gathered before their batch is written, so that those finishing
 * close together share one write (and one write of their endpoints' health). Their slots are free
 * already: only their leases wait.
 */
export const GATHER_MS = 10;

/** Records attempts; every update is conditional on the lease the delivery was claimed with. */
export class AttemptRecorder {
  /** Finished attempts not yet written, and the batch write under way. */
  private finished: Finished[] = [];
  private writing: Promise<void> | null = null;
  /** Batch writes made, and attempts they recorded (tests). */
  readonly written = { batches: 0, attempts: 0 };

  constructor(
    private readonly deps: { deliveries: WebhookDeliveryModel; events: EventLog; health: EndpointHealth; log: Logger },
    private readonly source: OutboxSource,
  ) {}

  /** Queues an attempt for the next batch write; resolves once it is written. */
  add(a: Attempt): Promise<void> {
    return new Promise<void>((done, fail) => {
      this.finished.push({ ...a, done, fail });
      this.writing ??= this.writeFinished();
    });
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
  async release(d: WebhookDeliveryRecord, set: Outcome): Promise<WebhookDeliveryRecord | null> {
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
    // Attempts finishing within GATHER_MS of the first one join its write.
    await new Promise((r) => setTimeout(r, GATHER_MS));
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
   * and the endpoints' health is told: one write for every endpoint with a success in the batch,
   * then a failure for each endpoint whose last outcome was one (a success and a later failure in
   * one batch end the failing period and start another, as two batches would).
   */
  private async writeBatch(batch: Finished[]): Promise<void> {
    const now = new Date();
    this.written.batches++;
    this.written.attempts += batch.length;
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
    // Each endpoint's outcomes in the order they finished: a success ends its failing period, and a
    // failure after its last success (or with none) starts or continues one. Told in that order:
    // the successes first (one write), then the failures after them.
    const health = new Map<string, { id: Types.ObjectId; ok: boolean; failedAt: Date | null }>();
    for (const { f } of recorded) {
      if (f.ok === null) continue;
      const h = health.get(String(f.endpointId)) ?? { id: f.endpointId, ok: false, failedAt: null };
      if (f.ok) Object.assign(h, { ok: true, failedAt: null });
      else h.failedAt = f.set.last_attempt.attempted_at;
      health.set(String(f.endpointId), h);
    }
    const told = [...health.values()];
    const ok = told.filter((h) => h.ok).map((h) => h.id);
    if (ok.length) await this.deps.health.succeeded(ok);
    await Promise.all(told.filter((h) => h.failedAt).map((h) => this.deps.health.failed(h.id, h.failedAt!)));
  }
}
