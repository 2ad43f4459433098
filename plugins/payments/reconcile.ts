/**
 * Reconcilers, run as jobs: they finish what a crash between two writes left undone. Both are
 * idempotent (a second run finds nothing to do).
 */
import { systemActor } from '../../core/context.ts';
import type { PaymentRecord, RefundRecord } from './model.ts';
import type { PaymentStore } from './store.ts';
import type { PaymentRefunds } from './refunds.ts';
import { errorText } from './errors.ts';

const BATCH = 500;

export class PaymentReconciler {
  constructor(
    private readonly store: PaymentStore,
    private readonly refunds: PaymentRefunds,
  ) {}

  /**
   * Posts what a crash between a transition and its ledger posting left out: the capture of every
   * captured payment and every succeeded refund without their posting (posting is idempotent).
   */
  async ledger(): Promise<{ captures: number; refunds: number }> {
    const ledger = this.store.deps.ledger;
    const out = { captures: 0, refunds: 0 };
    if (!ledger) return out;
    const captured = this.store.model.find({ status: { $in: ['completed', 'partially_refunded', 'refunded'] }, is_deleted: false }).lean<PaymentRecord[]>().cursor();
    out.captures = await postMissing(captured as AsyncIterable<PaymentRecord>, ledger.existing.bind(ledger), (p) => `capture:${String(p._id)}`, (p) => ledger.postCapture(p));
    const succeeded = this.store.deps.refunds.find({ status: 'succeeded' }).lean<RefundRecord[]>().cursor();
    out.refunds = await postMissing(
      succeeded as AsyncIterable<RefundRecord>, ledger.existing.bind(ledger), (r) => `refund:${String(r._id)}`,
      (r) => ledger.postRefund({ _id: r.payment_id, tenant_id: r.tenant_id ?? null, currency: r.currency } as PaymentRecord, String(r._id), r.amount_minor),
    );
    return out;
  }

  /**
   * Settles refunds left `reserved` by a crash (between the reservation and the provider's answer):
   * already applied → `succeeded`; reservation gone → `abandoned`; else the provider is asked again
   * with the same idempotency key (the refund id), then the refund is applied or released.
   */
  async refundsLeftReserved(olderThanSeconds: number): Promise<{ examined: number; succeeded: number; released: number; abandoned: number }> {
    const { store, refunds } = this;
    const out = { examined: 0, succeeded: 0, released: 0, abandoned: 0 };
    const cutoff = new Date(Date.now() - olderThanSeconds * 1000);
    const stuck = await store.deps.refunds.find({ status: 'reserved', created_at: { $lt: cutoff } }).lean<RefundRecord[]>();
    for (const r of stuck) {
      out.examined++;
      const p = await store.model.findById(r.payment_id).lean<PaymentRecord>();
      const key = String(r._id);
      if (p && (p.applied_refund_ids ?? []).includes(key)) {
        await store.deps.refunds.updateOne({ _id: r._id, status: 'reserved' }, { $set: { status: 'succeeded', updated_at: new Date() } });
        out.succeeded++;
        continue;
      }
      if (!p || !(p.open_refund_ids ?? []).includes(key)) {
        await store.deps.refunds.updateOne({ _id: r._id, status: 'reserved' }, { $set: { status: 'abandoned', updated_at: new Date() } });
        out.abandoned++;
        continue;
      }
      const actor = systemActor(p.tenant_id ? String(p.tenant_id) : null);
      let providerRefundId: string | null;
      try {
        providerRefundId = await refunds.refundAtProvider(store.deps.providers.find(p.provider), p, key, r.amount_minor, r.reason ?? null);
      } catch {
        out.released++; // refundAtProvider released the reservation
        continue;
      }
      try {
        await refunds.applyRefund(actor, p, r._id, r.amount_minor, r.reason ?? null, providerRefundId);
        out.succeeded++;
      } catch (err) {
        await refunds.release(p._id, key, r.amount_minor, errorText(err));
        out.released++;
      }
    }
    return out;
  }
}

/** Streams `rows` in batches of 500 and posts those whose posting does not exist yet; answers how many it posted. */
async function postMissing<T>(rows: AsyncIterable<T>, existing: (ids: string[]) => Promise<Set<string>>, txId: (row: T) => string, post: (row: T) => Promise<void>): Promise<number> {
  let posted = 0;
  let batch: T[] = [];
  const flush = async () => {
    const have = await existing(batch.map(txId));
    for (const row of batch) {
      if (have.has(txId(row))) continue;
      await post(row);
      posted++;
    }
    batch = [];
  };
  for await (const row of rows) {
    batch.push(row);
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  return posted;
}
