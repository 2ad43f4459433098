/**
 * Concurrent deliveries of one event within this process. Without this, every duplicate of a burst
 * tries its own insert (a failed insert costs as much as a write) and then its own `$inc` on the
 * one stored document: N writes queued on one row lock, so the last duplicate of a burst of 50 was
 * answered seconds after the handler had finished. Here the duplicates of a delivery this process
 * is already storing skip the insert, and their counting is batched into one write per round trip.
 */
import type { WebhookEventModel, WebhookEventRecord } from './model.ts';

/** How long after the last local insert attempt (or handler run) an event is still known to be stored. */
const KNOWN_FOR_MS = 5_000;

interface Batch {
  count: number;
  deliveryId: string | null;
  done: Promise<WebhookEventRecord | null>;
  resolve(doc: WebhookEventRecord | null): void;
  reject(err: unknown): void;
}

interface Lane {
  /** A counting write in flight. */
  busy: boolean;
  /** Duplicates that arrived meanwhile: counted together by the next write. */
  next: Batch | null;
}

const newBatch = (): Batch => {
  const b = { count: 0, deliveryId: null } as Batch;
  b.done = new Promise((resolve, reject) => Object.assign(b, { resolve, reject }));
  return b;
};

export class DuplicateDeliveries {
  /** Key → whether the event is stored (resolved once this process's insert attempt has settled). */
  private readonly stored = new Map<string, Promise<boolean>>();
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly model: WebhookEventModel) {}

  static key(provider: string, eventId: string): string {
    return `${provider}\u0000${eventId}`;
  }

  /**
   * Whether this process stored the event (or saw it stored) moments ago, once its insert attempt
   * in flight has settled; undefined when this process knows nothing of it (then decided at once,
   * so two deliveries cannot both see nothing after one of them started inserting).
   */
  known(key: string): Promise<boolean> | undefined {
    return this.stored.get(key);
  }

  /**
   * Marks an insert attempt in flight; the duplicates arriving meanwhile wait for it instead of
   * inserting too. Call `settle(stored)` when the attempt is over, and `forget()` when the event
   * no longer needs protecting (after its handler, or at once when it was not stored).
   */
  inserting(key: string): { settle(stored: boolean): void; forget(): void } {
    let settle!: (stored: boolean) => void;
    const known = new Promise<boolean>((r) => (settle = r));
    this.stored.set(key, known);
    return {
      settle,
      forget: () => {
        const timer = setTimeout(() => {
          if (this.stored.get(key) === known) this.stored.delete(key);
        }, KNOWN_FOR_MS);
        timer.unref();
      },
    };
  }

  /**
   * Counts one duplicate delivery (`retry_count + 1`, `is_duplicate`, the latest `delivery_id`) and
   * returns the event as stored after the write, or null when it no longer exists. Duplicates that
   * arrive while a write is in flight are counted together by the next one; each caller's promise
   * settles only once its own increment is stored.
   */
  count(provider: string, eventId: string, deliveryId: string | null): Promise<WebhookEventRecord | null> {
    const key = DuplicateDeliveries.key(provider, eventId);
    let lane = this.lanes.get(key);
    if (!lane) this.lanes.set(key, (lane = { busy: false, next: null }));
    const batch = (lane.next ??= newBatch());
    batch.count += 1;
    if (deliveryId) batch.deliveryId = deliveryId;
    if (!lane.busy) void this.flush(key, provider, eventId, lane);
    return batch.done;
  }

  private async flush(key: string, provider: string, eventId: string, lane: Lane): Promise<void> {
    const batch = lane.next;
    if (!batch) {
      this.lanes.delete(key);
      return;
    }
    lane.next = null;
    lane.busy = true;
    try {
      const now = new Date();
      const doc = await this.model
        .findOneAndUpdate(
          { provider, event_id: eventId },
          { $inc: { retry_count: batch.count }, $set: { is_duplicate: true, updated_at: now, ...(batch.deliveryId ? { delivery_id: batch.deliveryId } : {}) } },
          { returnDocument: 'after' },
        )
        .lean<WebhookEventRecord>();
      batch.resolve(doc);
    } catch (err) {
      batch.reject(err);
    } finally {
      lane.busy = false;
      void this.flush(key, provider, eventId, lane);
    }
  }
}
