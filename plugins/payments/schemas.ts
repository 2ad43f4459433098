/** Zod inputs of the payments plugin, shared by REST and GraphQL. */
import { z } from 'zod';
import { objectId, pageQuery } from '../../core/http/schemas.ts';
import { currencyDigits, fromMinor, toMinor } from './money.ts';
import { LEDGER_ACCOUNTS, PAYMENT_STATUSES, PAYOUT_STATUSES, REFUND_STATUSES } from './model.ts';
import { pageSchema } from '../../lib/page.ts';

/** A decimal amount: a string such as `"12.50"` or a JSON number. */
export const amountInput = z.union([z.string(), z.number()]).describe('Decimal amount: a string such as "12.50" (preferred) or a JSON number');
const currencyInput = z.string().describe('ISO 4217 code, upper case, e.g. USD');
const text = (max: number) => z.string().trim().min(1).max(max);

/**
 * `POST /payments` (and GraphQL `createPayment`): validated, then turned into the stored fields of a
 * new pending payment. `providers()` names the registered providers.
 */
export function createPaymentInput(providers: () => string[]) {
  return z
    .object({
      resource_type: text(100),
      resource_id: text(200),
      user_id: text(200),
      user_name: z.string().trim().max(200).nullable().optional(),
      amount: amountInput,
      currency: currencyInput,
      provider: z.string(),
      metadata: z.record(z.string(), z.unknown()).optional(),
    })
    .strict()
    .transform((v, ctx) => {
      if (currencyDigits(v.currency) === undefined) {
        ctx.addIssue({ code: 'custom', path: ['currency'], message: 'must be an ISO 4217 currency code (upper case)' });
        return z.NEVER;
      }
      const minor = toMinor(v.amount, v.currency);
      if (typeof minor === 'string') {
        ctx.addIssue({ code: 'custom', path: ['amount'], message: minor });
        return z.NEVER;
      }
      if (!providers().includes(v.provider)) {
        ctx.addIssue({ code: 'custom', path: ['provider'], message: `unknown provider; registered: ${providers().join(', ')}` });
        return z.NEVER;
      }
      return {
        resource_type: v.resource_type, resource_id: v.resource_id, user_id: v.user_id, user_name: v.user_name ?? null,
        amount: fromMinor(minor, v.currency), amount_minor: minor, currency: v.currency, provider: v.provider,
        status: 'pending', refunded_amount: fromMinor(0, v.currency), refunded_minor: 0, refundable_minor: 0,
        metadata: v.metadata ?? {},
      };
    });
}

/** `PUT /payments/{id}`: only these three fields; any other is a 422. */
export const updatePaymentInput = z
  .object({
    provider_reference: text(255).nullable().optional(),
    receipt_url: z.url().max(2048).nullable().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

/** `POST /payments/{id}/complete`. */
export const completeInput = z
  .object({
    provider_reference: text(255),
    provider_status: text(100).describe("The provider's status word, normalised through its status_map (manual: paid, received, completed...)"),
    receipt_url: z.url().max(2048).nullable().optional(),
  })
  .strict();
export type CompleteInput = z.output<typeof completeInput>;

/** `POST /payments/{id}/refund`. */
export const refundInput = z.object({ amount: amountInput, reason: z.string().trim().max(500).nullable().optional() }).strict();
export type RefundInput = z.output<typeof refundInput>;

/** `POST /payments/{id}/cancel`. */
export const cancelInput = z.object({ reason: z.string().trim().max(500).nullable().optional() }).strict();

export const paymentIdParams = z.object({ id: z.string().describe('Payment id (24 hex characters)') });
export const payoutIdParams = z.object({ id: z.string().describe('Payout batch id') });

/** Header docs of `PUT /payments/{id}`. */
export const ifMatchHeader = { 'If-Match': { description: 'ETag of the revision being changed (from GET)', required: true } };

/** `GET /ledger/entries`. */
export const ledgerQuery = z
  .object({
    payment_id: objectId.optional(),
    account: z.string().optional(),
    currency: z.string().optional(),
    ...pageQuery(50, 100).shape,
  })
  .strict();
export type LedgerQuery = z.output<typeof ledgerQuery>;

/** `GET /payouts`. */
export const payoutListQuery = z
  .object({
    status: z.enum(PAYOUT_STATUSES).optional(),
    tenant_id: objectId.optional(),
    ...pageQuery(25, 100).shape,
  })
  .strict();
export type PayoutListQuery = z.output<typeof payoutListQuery>;

export const executeInput = z.object({ bank_reference: text(255) }).strict();
export const failPayoutInput = z.object({ reason: text(1000) }).strict();

/** Parameters of the `settle_payouts` job and `POST /payouts/settle`. */
export const settleParams = z
  .object({
    period_start: z.iso.datetime({ offset: true }).or(z.iso.date()).optional().describe('Start of the period (inclusive); default: the start of yesterday (UTC)'),
    period_end: z.iso.datetime({ offset: true }).or(z.iso.date()).optional().describe('End of the period (exclusive); default: the start of today (UTC)'),
    tenant_id: objectId.optional().describe('Only this tenant; default: every tenant'),
  })
  .strict();
export type SettleParams = z.output<typeof settleParams>;

// Response schemas (OpenAPI documentation of what the routes answer). Amounts are decimal strings.
const decimal = z.string().describe('Decimal amount, e.g. "12.50"');

/**
 * Answers holding a payment: the resources plugin's own `Payment` schema, read when the document
 * is generated (the resource is registered after its routes are declared).
 */
export function paymentResponses(paymentSchema: () => z.ZodType) {
  const payment = z.lazy(paymentSchema);
  return { payment, processed: z.object({ payment, provider_data: z.record(z.string(), z.unknown()) }) };
}

/** A refund attempt of a payment. */
export const refundResponse = z.object({
  id: z.string(), payment_id: z.string(), amount: decimal, currency: z.string(), reason: z.string().nullable(), status: z.enum(REFUND_STATUSES),
  provider_refund_id: z.string().nullable(), error: z.string().nullable(), created_at: z.date(), updated_at: z.date(),
});
export const refundsResponse = z.object({ items: z.array(refundResponse) });

/** A payout batch. */
export const payoutResponse = z
  .object({
    id: z.string(), recipient_type: z.enum(['tenant', 'partner']), recipient_id: z.string(), tenant_id: z.string().nullable(),
    gross_amount: decimal, fee_amount: decimal, net_amount: decimal, currency: z.string(), period_start: z.date(), period_end: z.date(),
    status: z.enum(PAYOUT_STATUSES), payment_count: z.number().int(), payment_ids: z.array(z.string()), bank_reference: z.string().nullable(),
    paid_at: z.date().nullable(), failure_reason: z.string().nullable(), auto_approved: z.boolean(), created_by: z.string().nullable(),
    approved_by: z.string().nullable(), approved_at: z.date().nullable(), created_at: z.date(), updated_at: z.date(),
  })
  .meta({ id: 'PayoutBatch' });
export const payoutPageResponse = pageSchema(payoutResponse);
export const settleResponse = z.object({ period_start: z.date(), period_end: z.date(), batches: z.array(payoutResponse), payment_count: z.number().int() });

/** A ledger line. */
const ledgerEntryResponse = z.object({
  id: z.string(), tenant_id: z.string().nullable(), transaction_id: z.string(), entry_type: z.enum(['capture', 'refund']), payment_id: z.string(),
  account: z.enum(LEDGER_ACCOUNTS), direction: z.enum(['debit', 'credit']), amount: decimal, currency: z.string(), created_at: z.date(),
});
export const ledgerPageResponse = pageSchema(ledgerEntryResponse);
export const balanceResponse = z.object({
  items: z.array(z.object({ tenant_id: z.string().nullable(), account: z.enum(LEDGER_ACCOUNTS), currency: z.string(), debit: decimal, credit: decimal, balance: decimal })),
  balanced: z.boolean(),
});
const id = z.string().regex(/^[0-9a-f]{24}$/);
/**
 * The data of every `payment.<status>` event: the payment as the API shows it (decimal strings, the
 * resource base fields, no bookkeeping fields), after the transition.
 */
export const paymentEventData = z.object({
  _id: id,
  tenant_id: id.nullable(),
  resource_type: z.string(),
  resource_id: z.string(),
  user_id: z.string(),
  user_name: z.string().nullable(),
  amount: z.string().describe('Decimal string, e.g. "12.50"'),
  amount_minor: z.number().int(),
  currency: z.string(),
  provider: z.string(),
  provider_reference: z.string().nullable(),
  status: z.enum(PAYMENT_STATUSES),
  refunded_amount: z.string(),
  refunded_minor: z.number().int(),
  refund_reason: z.string().nullable(),
  paid_at: z.date().nullable(),
  refunded_at: z.date().nullable(),
  cancelled_at: z.date().nullable(),
  failure_reason: z.string().nullable(),
  receipt_url: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()),
  payout_batch_id: id.nullable(),
  version: z.number().int(),
  created_at: z.date(),
  updated_at: z.date(),
  created_by: id.nullable(),
  updated_by: id.nullable(),
  is_deleted: z.boolean(),
  deleted_at: z.date().nullable(),
  deleted_by: id.nullable(),
});

/** What each payment event type says happened, by the status the transition reached. */
const PAYMENT_EVENT_DESCRIPTIONS: Record<Exclude<(typeof PAYMENT_STATUSES)[number], 'pending'>, string> = {
  processing: 'The provider accepted the payment (pending → processing)',
  completed: 'The payment was captured (processing → completed)',
  partially_refunded: 'A refund was applied and part of the amount stays captured',
  refunded: 'A refund was applied and the whole amount is refunded',
  cancelled: 'The payment was cancelled before processing (pending → cancelled)',
  failed: 'The provider declined the payment (pending or processing → failed)',
};

/**
 * The payments plugin's event types: `payment.<status>` for every status a transition reaches
 * (`pending` is only the state of a new payment, announced by the resource event `payments.created`).
 */
export const paymentEventTypes = () =>
  Object.entries(PAYMENT_EVENT_DESCRIPTIONS).map(([status, what]) => ({
    name: `payment.${status}`,
    description: `${what}; data is the payment after the change, as the API shows it`,
    data: paymentEventData,
  }));
