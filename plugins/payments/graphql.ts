/**
 * GraphQL of the payments plugin. `payments` and `payment(id)` come from the resources fragment
 * (type `Payment`); this adds the lifecycle mutations and the payout fields, calling the same
 * services with the same rules as REST.
 */
import type { Builder } from '../../core/graphql.ts';
import { requireAdmin, requireUser, parseInput, givenArgs } from '../../core/graphql.ts';
import { AccessDeniedError } from '../../core/errors.ts';
import { hasSystemScope } from '../../core/context.ts';
import type { ResourceService } from '../resources/service.ts';
import type { PaymentsService } from './service.ts';
import type { PayoutsService, PayoutView } from './payouts.ts';
import type { LedgerService, BalanceRow } from './ledger.ts';
import { cancelInput, completeInput, executeInput, failPayoutInput, payoutListQuery, refundInput } from './schemas.ts';

export function paymentsGraphql(builder: Builder, deps: { svc: PaymentsService; resource: ResourceService; payouts: PayoutsService; ledger: LedgerService | null }) {
  const { svc, resource, payouts, ledger } = deps;
  // The object type the resources fragment defines for the `payments` resource.
  const Payment = 'Payment' as never;
  const system = (ctx: Parameters<typeof requireUser>[0]) => {
    const user = requireUser(ctx);
    if (!hasSystemScope(user)) throw new AccessDeniedError('System administrator required');
    return user;
  };

  const Processed = builder.objectRef<{ payment: Record<string, unknown>; provider_data: Record<string, unknown> }>('ProcessedPayment');
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
  const PayoutPage = builder.objectRef<{ items: PayoutView[]; total: number; page: number; per_page: number; total_pages: number }>('PayoutBatchPage');
  PayoutPage.implement({
    fields: (t) => ({
      items: t.field({ type: [Payout], nullable: false, resolve: (p) => p.items }),
      total: t.exposeInt('total', { nullable: false }),
      page: t.exposeInt('page', { nullable: false }),
      per_page: t.exposeInt('per_page', { nullable: false }),
      total_pages: t.exposeInt('total_pages', { nullable: false }),
    }),
  });

  builder.queryFields((t) => ({
    payouts: t.field({
      type: PayoutPage, nullable: false, description: 'Payout batches (system administrators)',
      args: { status: t.arg.string(), tenant_id: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, args, ctx) => payouts.list(system(ctx), parseInput(payoutListQuery, givenArgs(args))),
    }),
    payout: t.field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => payouts.get(system(ctx), String(args.id)),
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
    builder.queryField('ledgerBalance', (t) =>
      t.field({ type: [Balance], nullable: false, description: 'Per tenant, account and currency (administrators)', resolve: async (_r, _a, ctx) => (await ledger.balance(requireAdmin(ctx))).items }),
    );
  }

  builder.mutationFields((t) => ({
    updatePayment: t.field({
      type: Payment, nullable: false, description: 'Same as PUT /payments/{id}: provider_reference, receipt_url, metadata',
      args: { id: t.arg.id({ required: true }), if_match: t.arg.string(), input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, args, ctx) => resource.update(requireUser(ctx), String(args.id), args.if_match, args.input, false) as never,
    }),
    processPayment: t.field({
      type: Processed, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => svc.process(requireUser(ctx), String(args.id)),
    }),
    completePayment: t.field({
      type: Payment, nullable: false,
      args: { id: t.arg.id({ required: true }), provider_reference: t.arg.string({ required: true }), provider_status: t.arg.string({ required: true }), receipt_url: t.arg.string() },
      resolve: (_r, { id, ...rest }, ctx) => svc.complete(requireAdmin(ctx), String(id), parseInput(completeInput, givenArgs(rest))) as never,
    }),
    cancelPayment: t.field({
      type: Payment, nullable: false, args: { id: t.arg.id({ required: true }), reason: t.arg.string() },
      resolve: (_r, { id, ...rest }, ctx) => svc.cancel(requireUser(ctx), String(id), parseInput(cancelInput, givenArgs(rest)).reason ?? null) as never,
    }),
    refundPayment: t.field({
      type: Payment, nullable: false, description: 'amount is a decimal string such as "12.50"',
      args: { id: t.arg.id({ required: true }), amount: t.arg.string({ required: true }), reason: t.arg.string() },
      resolve: (_r, { id, ...rest }, ctx) => svc.refund(requireAdmin(ctx), String(id), parseInput(refundInput, givenArgs(rest))) as never,
    }),
    approvePayout: t.field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => payouts.approve(system(ctx), String(args.id)),
    }),
    executePayout: t.field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }), bank_reference: t.arg.string({ required: true }) },
      resolve: (_r, { id, ...rest }, ctx) => payouts.execute(system(ctx), String(id), parseInput(executeInput, givenArgs(rest)).bank_reference),
    }),
    processPayout: t.field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }) },
      resolve: (_r, args, ctx) => payouts.process(system(ctx), String(args.id)),
    }),
    failPayout: t.field({
      type: Payout, nullable: false, args: { id: t.arg.id({ required: true }), reason: t.arg.string({ required: true }) },
      resolve: (_r, { id, ...rest }, ctx) => payouts.fail(system(ctx), String(id), parseInput(failPayoutInput, givenArgs(rest)).reason),
    }),
  }));
}
