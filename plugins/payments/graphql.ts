/**
 * GraphQL of the payments plugin. `payments` and `payment(id)` come from the resources fragment
 * (type `Payment`); this adds the lifecycle mutations and the payout fields, calling the same
 * services with the same rules as REST.
 */
import type { Builder } from '../../core/graphql.ts';
import { pageObject, parseInput, givenArgs, scopes } from '../../core/graphql.ts';
import { PAYMENT_PERMISSIONS, type PaymentsService, type PaymentView } from './service.ts';
import { PAYOUT_PERMISSIONS, type PayoutsService } from './payouts.ts';
import { LEDGER_PERMISSIONS, type LedgerService, type BalanceRow } from './ledger.ts';
import type { LedgerEntryView, PayoutView } from './model.ts';
import { cancelInput, completeInput, executeInput, failPayoutInput, ledgerQuery, paymentIdParams, payoutListQuery, refundInput, type refundResponse } from './schemas.ts';
import type { z } from 'zod';

/**
 * The fragment. Who may call what is decided by the services (administrators for completion,
 * refunds and the ledger; system administrators for payouts), as for REST.
 */
export function paymentsGraphql(builder: Builder, deps: { svc: PaymentsService; payouts: PayoutsService; ledger: LedgerService | null }) {
  const { svc, payouts, ledger } = deps;
  // The object type the resources fragment defines for the `payments` resource.
  const Payment = 'Payment' as never;

  const Processed = builder.objectRef<{ payment: PaymentView; provider_data: Record<string, unknown> }>('ProcessedPayment');
  Processed.implement({
    fields: (t) => ({
      payment: t.field({ type: Payment, nullable: false, resolve: (r) => r.payment as never }),
      provider_data: t.field({ type: 'JSON', nullable: false, resolve: (r) => r.provider_data }),
    }),
  });

  const Payout = builder.objectRef<PayoutView>('PayoutBatch');
  Payout.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      recipient_type: t.exposeString('recipient_type', { nullable: false }),
      recipient_id: t.exposeString('recipient_id', { nullable: false }),
      tenant_id: t.exposeString('tenant_id'),
      gross_amount: t.exposeString('gross_amount', { nullable: false }),
      fee_amount: t.exposeString('fee_amount', { nullable: false }),
      net_amount: t.exposeString('net_amount', { nullable: false }),
      currency: t.exposeString('currency', { nullable: false }),
      period_start: t.field({ type: 'DateTime', nullable: false, resolve: (b) => b.period_start }),
      period_end: t.field({ type: 'DateTime', nullable: false, resolve: (b) => b.period_end }),
      status: t.exposeString('status', { nullable: false }),
      payment_count: t.exposeInt('payment_count', { nullable: false }),
      payment_ids: t.exposeStringList('payment_ids', { nullable: false }),
      bank_reference: t.exposeString('bank_reference'),
      paid_at: t.field({ type: 'DateTime', resolve: (b) => b.paid_at }),
      failure_reason: t.exposeString('failure_reason'),
      auto_approved: t.exposeBoolean('auto_approved', { nullable: false }),
      created_by: t.exposeString('created_by'),
      approved_by: t.exposeString('approved_by'),
      approved_at: t.field({ type: 'DateTime', resolve: (b) => b.approved_at }),
      created_at: t.field({ type: 'DateTime', nullable: false, resolve: (b) => b.created_at }),
      updated_at: t.field({ type: 'DateTime', nullable: false, resolve: (b) => b.updated_at }),
    }),
  });
  const PayoutPage = pageObject(builder, 'PayoutBatchPage', Payout);

  const Refund = builder.objectRef<z.output<typeof refundResponse>>('PaymentRefund');
  Refund.implement({
    description: 'One refund attempt of a payment, as GET /payments/{id}/refunds lists it',
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      payment_id: t.exposeString('payment_id', { nullable: false }),
      amount: t.exposeString('amount', { nullable: false, description: 'Decimal string, e.g. "12.50"' }),
      currency: t.exposeString('currency', { nullable: false }),
      reason: t.exposeString('reason'),
      status: t.exposeString('status', { nullable: false, description: 'reserved (the provider has not answered yet), succeeded, failed or abandoned' }),
      provider_refund_id: t.exposeString('provider_refund_id'),
      error: t.exposeString('error'),
      created_at: t.field({ type: 'DateTime', nullable: false, resolve: (r) => r.created_at }),
      updated_at: t.field({ type: 'DateTime', nullable: false, resolve: (r) => r.updated_at }),
    }),
  });

  builder.queryFields((t) => ({
    paymentRefunds: t.withAuth(scopes(PAYMENT_PERMISSIONS.refundsOf)).field({
      type: [Refund], nullable: false, description: 'Refund attempts of a payment, oldest first, as GET /payments/{id}/refunds (whoever may read the payment)',
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_r, args, ctx) => (await svc.refundsOf(ctx.actor, parseInput(paymentIdParams, { id: String(args.id) }).id)).items,
    }),
    payouts: t.withAuth(scopes(PAYOUT_PERMISSIONS.list)).field({
      type: PayoutPage, nullable: false, description: 'Payout batches (system administrators)',
      args: { status: t.arg.string(), tenant_id: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, args, ctx) => payouts.list(ctx.actor, parseInput(payoutListQuery, givenArgs(args))),
    }),
    payout: t.withAuth(scopes(PAYOUT_PERMISSIONS.get)).field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => payouts.get(ctx.actor, String(args.id)),
    }),
  }));

  if (ledger) {
    const Balance = builder.objectRef<BalanceRow>('LedgerBalance');
    Balance.implement({
      fields: (t) => ({
        tenant_id: t.exposeString('tenant_id'),
        account: t.exposeString('account', { nullable: false }),
        currency: t.exposeString('currency', { nullable: false }),
        debit: t.exposeString('debit', { nullable: false }),
        credit: t.exposeString('credit', { nullable: false }),
        balance: t.exposeString('balance', { nullable: false }),
      }),
    });
    const Entry = builder.objectRef<LedgerEntryView>('LedgerEntry');
    Entry.implement({
      description: 'One ledger line (double entry: every transaction has a debit and a credit of the same amount)',
      fields: (t) => ({
        id: t.exposeID('id', { nullable: false }),
        tenant_id: t.exposeString('tenant_id'),
        transaction_id: t.exposeString('transaction_id', { nullable: false }),
        entry_type: t.exposeString('entry_type', { nullable: false }),
        payment_id: t.exposeString('payment_id', { nullable: false }),
        account: t.exposeString('account', { nullable: false }),
        direction: t.exposeString('direction', { nullable: false }),
        amount: t.exposeString('amount', { nullable: false, description: 'Decimal string, e.g. "12.50"' }),
        currency: t.exposeString('currency', { nullable: false }),
        created_at: t.field({ type: 'DateTime', nullable: false, resolve: (e) => e.created_at }),
      }),
    });
    const EntryPage = pageObject(builder, 'LedgerEntryPage', Entry);
    builder.queryField('ledgerEntries', (t) =>
      t.withAuth(scopes(LEDGER_PERMISSIONS.entries)).field({
        type: EntryPage, nullable: false, description: "Ledger lines of the caller's tenant, newest first, as GET /ledger/entries (administrators)",
        args: { payment_id: t.arg.string(), account: t.arg.string(), currency: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
        resolve: (_r, args, ctx) => ledger.entries(ctx.actor, parseInput(ledgerQuery, givenArgs(args))),
      }),
    );
    builder.queryField('ledgerBalance', (t) =>
      t.withAuth(scopes(LEDGER_PERMISSIONS.balance)).field({ type: [Balance], nullable: false, description: 'Per tenant, account and currency (administrators)', resolve: async (_r, _a, ctx) => (await ledger.balance(ctx.actor)).items }),
    );
  }

  builder.mutationFields((t) => ({
    updatePayment: t.withAuth(scopes(PAYMENT_PERMISSIONS.update)).field({
      type: Payment, nullable: false, description: 'Same as PUT /payments/{id}: provider_reference, receipt_url, metadata',
      args: { id: t.arg.id({ required: true }), if_match: t.arg.string(), input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, args, ctx) => svc.update(ctx.actor, String(args.id), args.if_match, args.input) as never,
    }),
    processPayment: t.withAuth(scopes(PAYMENT_PERMISSIONS.process)).field({
      type: Processed, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => svc.process(ctx.actor, String(args.id)),
    }),
    completePayment: t.withAuth(scopes(PAYMENT_PERMISSIONS.complete)).field({
      type: Payment, nullable: false,
      args: { id: t.arg.id({ required: true }), provider_reference: t.arg.string({ required: true }), provider_status: t.arg.string({ required: true }), receipt_url: t.arg.string() },
      resolve: (_r, { id, ...rest }, ctx) => svc.complete(ctx.actor, String(id), parseInput(completeInput, givenArgs(rest))) as never,
    }),
    cancelPayment: t.withAuth(scopes(PAYMENT_PERMISSIONS.cancel)).field({
      type: Payment, nullable: false, args: { id: t.arg.id({ required: true }), reason: t.arg.string() },
      resolve: (_r, { id, ...rest }, ctx) => svc.cancel(ctx.actor, String(id), parseInput(cancelInput, givenArgs(rest)).reason ?? null) as never,
    }),
    refundPayment: t.withAuth(scopes(PAYMENT_PERMISSIONS.refund)).field({
      type: Payment, nullable: false, description: 'amount is a decimal string such as "12.50"',
      args: { id: t.arg.id({ required: true }), amount: t.arg.string({ required: true }), reason: t.arg.string() },
      resolve: (_r, { id, ...rest }, ctx) => svc.refund(ctx.actor, String(id), parseInput(refundInput, givenArgs(rest))) as never,
    }),
    approvePayout: t.withAuth(scopes(PAYOUT_PERMISSIONS.approve)).field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => payouts.approve(ctx.actor, String(args.id)),
    }),
    executePayout: t.withAuth(scopes(PAYOUT_PERMISSIONS.execute)).field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }), bank_reference: t.arg.string({ required: true }) },
      resolve: (_r, { id, ...rest }, ctx) => payouts.execute(ctx.actor, String(id), parseInput(executeInput, givenArgs(rest)).bank_reference),
    }),
    processPayout: t.withAuth(scopes(PAYOUT_PERMISSIONS.process)).field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => payouts.process(ctx.actor, String(args.id)),
    }),
    failPayout: t.withAuth(scopes(PAYOUT_PERMISSIONS.fail)).field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }), reason: t.arg.string({ required: true }) },
      resolve: (_r, { id, ...rest }, ctx) => payouts.fail(ctx.actor, String(id), parseInput(failPayoutInput, givenArgs(rest)).reason),
    }),
  }));
}
