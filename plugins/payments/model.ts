/**
 * Stored shapes of the payments plugin. Money is stored twice per amount: `*_minor` (integer minor
 * units, what every computation and every atomic condition uses) and the canonical decimal string
 * (`amount`, `refunded_amount`, what the API answers), written in the same update.
 */
import { Schema, type Connection, type InferSchemaType, type Model, type Types } from 'mongoose';
import { modelOn } from '../../core/db.ts';

/** Payment lifecycle states. */
export const PAYMENT_STATUSES = ['pending', 'processing', 'completed', 'partially_refunded', 'refunded', 'cancelled', 'failed'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];
/** States a refund may start from. */
export const REFUNDABLE: readonly PaymentStatus[] = ['completed', 'partially_refunded'];

/**
 * Client fields of a Payment (the resources plugin adds the base fields: tenant, timestamps,
 * version...). `private: true` paths are bookkeeping the API never shows.
 */
export const paymentSchema = new Schema({
  resource_type: { type: String, required: true },
  resource_id: { type: String, required: true },
  user_id: { type: String, required: true },
  user_name: { type: String, default: null },
  amount: { type: String, required: true },
  amount_minor: { type: Number, required: true },
  currency: { type: String, required: true },
  provider: { type: String, required: true },
  provider_reference: { type: String, default: null },
  status: { type: String, enum: PAYMENT_STATUSES, default: 'pending' },
  refunded_amount: { type: String, required: true },
  refunded_minor: { type: Number, default: 0 },
  refund_reason: { type: String, default: null },
  paid_at: { type: Date, default: null },
  refunded_at: { type: Date, default: null },
  cancelled_at: { type: Date, default: null },
  failure_reason: { type: String, default: null },
  receipt_url: { type: String, default: null },
  metadata: { type: Schema.Types.Mixed, default: {} },
  /** The payout batch that settled this payment (set once, atomically: never two batches). */
  payout_batch_id: { type: Schema.Types.ObjectId, default: null },
  /** Captured minus refunded minus reserved: the atomic refund condition (`$gte`, then `$inc`). */
  refundable_minor: { type: Number, default: 0, private: true },
  /** Sum of refunds reserved and not yet settled with the provider. */
  refund_reserved_minor: { type: Number, default: 0, private: true },
  /** Refunds reserved on this payment and not yet applied or released. */
  open_refund_ids: { type: [String], default: [], private: true },
  /** Refunds applied to `refunded_minor` (makes applying one idempotent). */
  applied_refund_ids: { type: [String], default: [], private: true },
});
paymentSchema.index({ resource_type: 1, resource_id: 1 });
paymentSchema.index({ user_id: 1 });
paymentSchema.index({ status: 1 });
paymentSchema.index({ provider: 1 });
paymentSchema.index({ paid_at: 1 });
paymentSchema.index({ provider: 1, provider_reference: 1 });
// Settlement scans completed, unsettled payments per tenant and period.
paymentSchema.index({ tenant_id: 1, payout_batch_id: 1, paid_at: 1 });

/**
 * The API form of a stored shape: object ids become strings, and the `Nullable` keys (paths stored
 * with `default: null`, which mongoose's inference types as never null) may be null.
 */
export type ApiForm<T, Nullable extends keyof T = never> = {
  [K in keyof T]-?: Exclude<IdAsString<T[K]>, undefined> | (K extends Nullable ? null : never);
};
type IdAsString<V> = V extends Types.ObjectId ? string : V extends Types.ObjectId[] ? string[] : V;

export type PaymentFields = InferSchemaType<typeof paymentSchema>;
/** A stored Payment (with the resource base fields). */
export type PaymentRecord = PaymentFields & {
  _id: Types.ObjectId;
  tenant_id: Types.ObjectId | null;
  version: number;
  created_at: Date;
  updated_at: Date;
  created_by: Types.ObjectId | null;
};
/** The bookkeeping paths of a Payment (`private: true`): never in an answer. */
export type PaymentBookkeeping = 'refundable_minor' | 'refund_reserved_minor' | 'open_refund_ids' | 'applied_refund_ids';

/** Refund states: `reserved` (amount held on the payment, provider not yet answered), then `succeeded`, `failed` or `abandoned`. */
export const REFUND_STATUSES = ['reserved', 'succeeded', 'failed', 'abandoned'] as const;

/** One refund attempt; its `_id` is the provider's idempotency key, so a re-driven refund is never paid twice. */
export const refundSchema = new Schema(
  {
    payment_id: { type: Schema.Types.ObjectId, required: true },
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    amount: { type: String, required: true },
    amount_minor: { type: Number, required: true },
    currency: { type: String, required: true },
    reason: { type: String, default: null },
    status: { type: String, enum: REFUND_STATUSES, required: true },
    provider_refund_id: { type: String, default: null },
    error: { type: String, default: null },
    requested_by: { type: Schema.Types.ObjectId, default: null },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
  },
  { versionKey: false, minimize: false },
);
refundSchema.index({ payment_id: 1, created_at: 1 });
refundSchema.index({ status: 1, created_at: 1 });
export type RefundRecord = InferSchemaType<typeof refundSchema> & { _id: Types.ObjectId };
export const refundModel = (conn: Connection): Model<InferSchemaType<typeof refundSchema>> =>
  modelOn(conn, 'PaymentRefund', refundSchema, 'payment_refunds');

/** Ledger accounts: money held at the provider (asset) and sales (revenue). */
export const LEDGER_ACCOUNTS = ['provider_clearing', 'sales'] as const;

/**
 * One ledger line. A posting (`transaction_id`) is two or more lines whose debits equal their
 * credits per currency. Lines are immutable; a refund posts reversing lines.
 */
export const ledgerEntrySchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    /** `capture:<payment id>` or `refund:<refund id>`: one posting per business event. */
    transaction_id: { type: String, required: true },
    entry_type: { type: String, enum: ['capture', 'refund'], required: true },
    payment_id: { type: Schema.Types.ObjectId, required: true },
    account: { type: String, enum: LEDGER_ACCOUNTS, required: true },
    direction: { type: String, enum: ['debit', 'credit'], required: true },
    amount: { type: String, required: true },
    amount_minor: { type: Number, required: true },
    currency: { type: String, required: true },
    created_at: { type: Date, required: true },
  },
  { versionKey: false, minimize: false },
);
// Posting twice (a retried completion, a reconciliation) inserts nothing new.
ledgerEntrySchema.index({ transaction_id: 1, account: 1, direction: 1 }, { unique: true });
ledgerEntrySchema.index({ tenant_id: 1, created_at: -1 });
ledgerEntrySchema.index({ payment_id: 1 });
export type LedgerEntryRecord = InferSchemaType<typeof ledgerEntrySchema> & { _id: Types.ObjectId };
/** A ledger line as the API returns it (`amount` only, as a decimal string). */
export type LedgerEntryView = { id: string } & ApiForm<Omit<LedgerEntryRecord, '_id' | 'amount_minor'>, 'tenant_id'>;
export const ledgerModel = (conn: Connection): Model<InferSchemaType<typeof ledgerEntrySchema>> =>
  modelOn(conn, 'LedgerEntry', ledgerEntrySchema, 'ledger_entries');

/** PayoutBatch states. */
export const PAYOUT_STATUSES = ['draft', 'approved', 'processing', 'completed', 'failed'] as const;
export type PayoutStatus = (typeof PAYOUT_STATUSES)[number];

/** A PayoutBatch: recipient, amounts, period and state, plus who created and approved it, `failure_reason`, and `building` (settlement in progress). */
export const payoutSchema = new Schema(
  {
    recipient_type: { type: String, enum: ['tenant', 'partner'], required: true },
    recipient_id: { type: String, required: true },
    tenant_id: { type: Schema.Types.ObjectId, default: null },
    gross_amount: { type: String, required: true },
    fee_amount: { type: String, required: true },
    net_amount: { type: String, required: true },
    gross_minor: { type: Number, required: true },
    fee_minor: { type: Number, required: true },
    net_minor: { type: Number, required: true },
    currency: { type: String, required: true },
    period_start: { type: Date, required: true },
    period_end: { type: Date, required: true },
    status: { type: String, enum: PAYOUT_STATUSES, required: true },
    payment_count: { type: Number, required: true },
    payment_ids: { type: [Schema.Types.ObjectId], default: [] },
    bank_reference: { type: String, default: null },
    paid_at: { type: Date, default: null },
    /** Why the last transfer failed (`fail_payout`); cleared when it is retried. */
    failure_reason: { type: String, default: null },
    /** True while the settlement run that created the batch is still claiming payments. */
    building: { type: Boolean, default: true },
    auto_approved: { type: Boolean, default: false },
    created_by: { type: Schema.Types.ObjectId, default: null },
    approved_by: { type: Schema.Types.ObjectId, default: null },
    approved_at: { type: Date, default: null },
    created_at: { type: Date, required: true },
    updated_at: { type: Date, required: true },
  },
  { versionKey: false, minimize: false },
);
payoutSchema.index({ tenant_id: 1, created_at: -1 });
payoutSchema.index({ status: 1 });
export type PayoutRecord = InferSchemaType<typeof payoutSchema> & { _id: Types.ObjectId };
/** A batch as the API returns it: amounts as decimal strings, without the minor units and the `building` flag. */
export type PayoutView = { id: string } & ApiForm<
  Omit<PayoutRecord, '_id' | 'gross_minor' | 'fee_minor' | 'net_minor' | 'building'>,
  'tenant_id' | 'bank_reference' | 'paid_at' | 'failure_reason' | 'created_by' | 'approved_by' | 'approved_at'
>;
export const payoutModel = (conn: Connection): Model<InferSchemaType<typeof payoutSchema>> =>
  modelOn(conn, 'PayoutBatch', payoutSchema, 'payout_batches');
