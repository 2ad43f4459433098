/**
 * The endpoints the sender sends to, as recently read: a claimed batch reads only those it does not
 * hold from the last `maxAgeMs`, so a backlog drained in many batches reads each endpoint about once
 * a second instead of once a batch. That is the age the fan-out's own read of an endpoint is used
 * for (a fresh delivery's first attempt): a change made by another process (a rotated secret, a
 * disabled endpoint) applies to attempts that start at most `maxAgeMs` after it. One made in this
 * process applies at once: the endpoint service calls `forget` after each write.
 */
import { Types } from 'mongoose';
import type { WebhookEndpointModel, WebhookEndpointRecord } from './model.ts';

/** Entries kept before the expired ones are dropped. */
const PRUNE_AT = 1_000;

export class EndpointCache {
  private readonly byId = new Map<string, { e: WebhookEndpointRecord | null; at: number }>();
  /** Endpoints forgotten since the last read began: a read under way at the change is not kept. */
  private readonly changed = new Set<string>();
  /** Reads of the database (tests). */
  reads = 0;

  constructor(private readonly model: WebhookEndpointModel, private readonly maxAgeMs: number) {}

  /** The endpoints of `ids` (null: gone), read again where the copy held is older than `maxAgeMs`. One read at a time (the sender's poll). */
  async get(ids: readonly string[]): Promise<Map<string, WebhookEndpointRecord | null>> {
    const now = Date.now();
    const out = new Map<string, WebhookEndpointRecord | null>();
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      const hit = this.byId.get(id);
      if (hit && now - hit.at <= this.maxAgeMs) out.set(id, hit.e);
      else missing.push(id);
    }
    if (!missing.length) return out;
    this.reads++;
    const rows = await this.model.find({ _id: { $in: missing.map((id) => new Types.ObjectId(id)) } }).lean<WebhookEndpointRecord[]>();
    const found = new Map(rows.map((e) => [String(e._id), e]));
    if (this.byId.size >= PRUNE_AT) this.prune(now);
    for (const id of missing) {
      const e = found.get(id) ?? null;
      if (!this.changed.has(id)) this.byId.set(id, { e, at: now });
      out.set(id, e);
    }
    this.changed.clear();
    return out;
  }

  /** The endpoint changed: the next batch reads it again. */
  forget(id: unknown): void {
    this.byId.delete(String(id));
    this.changed.add(String(id));
  }

  private prune(now: number): void {
    for (const [id, { at }] of this.byId) if (now - at > this.maxAgeMs) this.byId.delete(id);
  }
}
