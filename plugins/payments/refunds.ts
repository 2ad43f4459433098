/**
 * Refunds: the amount is reserved atomically on the payment (`refundable_minor`), the provider is
 * asked, then the refund is applied (or the reservation released when the provider refuses). A
 * refund record is written before the reservation, so a crash always leaves one to reconcile.
 */
import { Types } from 'mongoose';
import { ConflictError, ValidationError } from '../../core/errors.ts';
import type { Actor } from '../../core/context.ts';
import { fromMinor, toMinor } from './money.ts';
import { REFUNDABLE, type PaymentRecord, type PaymentStatus, type RefundRecord } from './model.ts';
import type { PaymentProvider } from './providers.ts';
import type { RefundInput } from './schemas.ts';
import type { PaymentStore, PaymentView } from './store.ts';
import { ProviderError, RefundExceedsCapturedError, errorText, transitionConflict } from './errors.ts';

/** A refund held on a payment: its record id and the payment after the reservation. */
interface Reservation {
  rid: Types.ObjectId;
  payment: PaymentRecord;
}

/** Attempts a provider refund total gets against concurrent writers before its event fails (and is redelivered). */
const MAX_TOTAL_ATTEMPTS = 100;

export class PaymentRefunds {
  constructor(private readonly store: PaymentStore) {}

  /**
   * `POST /payments/{id}/refund`: reserve the amount atomically on the payment, call the provider,
   * then apply the refund (or release the reservation when the provider fails).
   */
  async refund(actor: Actor, id: string, input: RefundInput): Promise<PaymentView> {
    const p = await this.store.owned(actor, id);
    const minor = toMinor(input.amount, p.currency);
    if (typeof minor === 'string') throw new ValidationError([{ loc: ['body', 'amount'], msg: minor, type: 'invalid_value' }]);
    if (!REFUNDABLE.includes(p.status)) throw transitionConflict(p.status, 'refund', REFUNDABLE);
    const provider = this.store.deps.providers.get(p.provider);
    const reason = input.reason ?? null;
    const held = await this.reserve(actor, p, minor, reason);
    if (!held) {
      const cur = await this.store.current(p._id);
      if (!REFUNDABLE.includes(cur.status)) throw transitionConflict(cur.status, 'refund', REFUNDABLE);
      throw new RefundExceedsCapturedError({
        requested: fromMinor(minor, cur.currency), refundable: fromMinor(cur.refundable_minor ?? 0, cur.currency),
        amount: cur.amount, refunded_amount: cur.refunded_amount, reserved: fromMinor(cur.refund_reserved_minor ?? 0, cur.currency),
      });
    }
    const providerRefundId = await this.refundAtProvider(provider, held.payment, String(held.rid), minor, reason);
    return this.store.view(await this.applyRefund(actor, held.payment, held.rid, minor, reason, providerRefundId));
  }

  /**
   * The provider's cumulative refunded total (a provider webhook): what it holds above what we know
   * (applied plus reserved: our own refunds are counted once) is applied as a refund made at the
   * provider. The difference is taken and reserved in one conditional update on the two amounts it
   * was computed from; when another writer changed them first, it is computed again. So concurrent
   * deliveries each apply their part once, or find nothing left to apply.
   * @throws Error when the total is not a whole, non-negative number of minor units or exceeds the captured amount (nothing written)
   */
  async applyProviderTotal(actor: Actor, payment: PaymentRecord, total: number): Promise<void> {
    if (!Number.isSafeInteger(total) || total < 0) throw new Error(`refunded total ${String(total)} is not a whole number of minor units (0 or more)`);
    if (total > payment.amount_minor) {
      throw new Error(`refunded total ${String(total)} exceeds the captured amount ${String(payment.amount_minor)} (${payment.amount} ${payment.currency}) minor units`);
    }
    const reason = 'refunded at the provider';
    for (let attempt = 0, p = payment; attempt < MAX_TOTAL_ATTEMPTS; attempt++, p = await this.store.current(p._id)) {
      const extra = total - p.refunded_minor - (p.refund_reserved_minor ?? 0);
      if (extra <= 0 || !REFUNDABLE.includes(p.status)) return;
      const held = await this.reserve(actor, p, extra, reason, { refunded_minor: p.refunded_minor, refund_reserved_minor: p.refund_reserved_minor ?? 0 });
      if (held) {
        await this.applyRefund(actor, held.payment, held.rid, extra, reason, null);
        return;
      }
    }
    throw new Error(`refunded total ${String(total)}: the payment kept changing; try again`);
  }

  /**
   * Holds `minor` on the payment: one conditional update on a refundable status and enough left to
   * refund (plus `extra`). Null, with the record removed, when the condition did not hold.
   */
  private async reserve(actor: Actor, p: PaymentRecord, minor: number, reason: string | null, extra: Record<string, unknown> = {}): Promise<Reservation | null> {
    const { store } = this;
    const rid = new Types.ObjectId();
    const now = new Date();
    // The record first: a crash after the reservation then always leaves a record to reconcile.
    await store.deps.refunds.create({
      _id: rid, payment_id: p._id, tenant_id: p.tenant_id, amount: fromMinor(minor, p.currency), amount_minor: minor, currency: p.currency,
      reason, status: 'reserved', requested_by: store.actorId(actor), created_at: now, updated_at: now,
    });
    const reserved = await store.model
      .findOneAndUpdate(
        { _id: p._id, status: { $in: REFUNDABLE }, refundable_minor: { $gte: minor }, ...extra },
        { $inc: { refundable_minor: -minor, refund_reserved_minor: minor }, $push: { open_refund_ids: String(rid) } },
        { returnDocument: 'after' },
      )
      .lean<PaymentRecord>();
    if (reserved) return { rid, payment: reserved };
    await store.deps.refunds.deleteOne({ _id: rid });
    return null;
  }

  /**
   * Asks the provider to refund `minor` of `p` under the refund id `rid` (its idempotency key, so a
   * repeated call refunds once) and answers the provider's refund id. When the provider is missing or
   * fails, the reservation is released (the refund record turns `failed`).
   * @throws ProviderError after releasing
   */
  async refundAtProvider(provider: PaymentProvider | undefined, p: PaymentRecord, rid: string, minor: number, reason: string | null): Promise<string | null> {
    try {
      if (!provider) throw new Error(`provider ${p.provider} is not registered`);
      const res = await provider.refund_payment({
        payment_id: String(p._id), provider_reference: p.provider_reference ?? null, amount: fromMinor(minor, p.currency), amount_minor: minor,
        currency: p.currency, reason, idempotency_key: rid,
      });
      return res?.provider_refund_id ?? null;
    } catch (err) {
      await this.release(p._id, rid, minor, errorText(err));
      this.store.deps.log.warn({ err, provider: p.provider, payment_id: String(p._id), refund_id: rid }, 'refund_payment failed; reservation released');
      throw new ProviderError(p.provider, errorText(err));
    }
  }

  /** Gives a reserved amount back (the provider refused). Idempotent: only an open reservation is released. */
  async release(paymentId: Types.ObjectId, rid: string, minor: number, error: string): Promise<void> {
    await this.store.model.updateOne(
      { _id: paymentId, open_refund_ids: rid },
      { $inc: { refundable_minor: minor, refund_reserved_minor: -minor }, $pull: { open_refund_ids: rid } },
    );
    await this.store.deps.refunds.updateOne({ _id: new Types.ObjectId(rid), status: 'reserved' }, { $set: { status: 'failed', error, updated_at: new Date() } });
  }

  /**
   * Moves a reserved refund into `refunded_minor`: compare-and-set on `refunded_minor` (the decimal
   * string and the status are derived from it in the same update), retried when another refund
   * landed first. Idempotent through `applied_refund_ids`. `payment` is the caller's latest copy; it
   * is read again only when the compare-and-set finds it out of date.
   */
  async applyRefund(actor: Actor, payment: PaymentRecord, rid: Types.ObjectId, minor: number, reason: string | null, providerRefundId: string | null): Promise<PaymentRecord> {
    const { store } = this;
    const key = String(rid);
    const paymentId = payment._id;
    for (let cur = payment; ; cur = await store.current(paymentId)) {
      if ((cur.applied_refund_ids ?? []).includes(key)) return cur;
      if (!(cur.open_refund_ids ?? []).includes(key)) throw new ConflictError('The refund reservation is gone', { refund_id: key });
      const total = cur.refunded_minor + minor;
      const status: PaymentStatus = total >= cur.amount_minor ? 'refunded' : 'partially_refunded';
      const moved = await store.transition(
        actor, paymentId, REFUNDABLE,
        {
          $set: { status, refunded_minor: total, refunded_amount: fromMinor(total, cur.currency), refunded_at: new Date(), refund_reason: reason ?? cur.refund_reason ?? null },
          $inc: { refund_reserved_minor: -minor },
          $pull: { open_refund_ids: key },
          $push: { applied_refund_ids: key },
        },
        { refunded_minor: cur.refunded_minor, open_refund_ids: key },
      );
      if (!moved) continue;
      await store.deps.refunds.updateOne({ _id: rid, status: 'reserved' }, { $set: { status: 'succeeded', provider_refund_id: providerRefundId, updated_at: new Date() } });
      const doc = moved.doc;
      if (store.deps.ledger) await store.deps.ledger.postRefund(doc, key, minor);
      await store.emit('PAYMENT_REFUNDED', {
        payment: store.view(doc),
        refund: { id: key, amount: fromMinor(minor, doc.currency), currency: doc.currency, reason, provider_refund_id: providerRefundId },
        ...store.eventBase(actor, doc),
      });
      return doc;
    }
  }

  /** `GET /payments/{id}/refunds`: the payment's refund attempts, oldest first. */
  async refundsOf(actor: Actor, id: string) {
    const p = await this.store.owned(actor, id);
    const rows = await this.store.deps.refunds.find({ payment_id: p._id }).sort({ created_at: 1, _id: 1 }).lean<RefundRecord[]>();
    return {
      items: rows.map((r) => ({
        id: String(r._id), payment_id: String(r.payment_id), amount: r.amount, currency: r.currency, reason: r.reason ?? null, status: r.status,
        provider_refund_id: r.provider_refund_id ?? null, error: r.error ?? null, created_at: r.created_at, updated_at: r.updated_at,
      })),
    };
  }
}
