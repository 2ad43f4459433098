/** The jobs of the payments plugin: settlement and the two reconcilers. */
import { z } from 'zod';
import { systemActor } from '../../core/context.ts';
import type { JobDefinition } from '../../core/plugin.ts';
import { settleParams } from './schemas.ts';
import type { PaymentsService } from './service.ts';
import type { PayoutsService } from './payouts.ts';

export interface PaymentJobsOptions {
  /** Whether the ledger is on (`PAYMENTS_LEDGER_ENABLED`): its reconciler exists only then. */
  ledger: boolean;
  /** Default age in seconds of a reservation the refund reconciler takes over (`PAYMENT_REFUND_RECONCILE_SECONDS`). */
  refundReconcileSeconds: number;
}

export function paymentJobs(svc: PaymentsService, payouts: PayoutsService, opts: PaymentJobsOptions): JobDefinition[] {
  const jobs: JobDefinition[] = [
    {
      name: 'settle_payouts',
      description: 'Build draft payout batches per tenant and currency from completed payments of a period; approve those below PAYOUT_AUTO_APPROVE_THRESHOLD',
      timeout: 600,
      max_attempts: 3,
      params: settleParams,
      async run(ctx, params) {
        const res = await payouts.settle(ctx.tenant_id ? systemActor(ctx.tenant_id) : ctx.actor, params as z.output<typeof settleParams>);
        ctx.log(`settled ${res.payment_count} payments into ${res.batches.length} batches`);
        return { period_start: res.period_start, period_end: res.period_end, batch_ids: res.batches.map((b) => b.id), payment_count: res.payment_count };
      },
    },
    {
      name: 'reconcile_payment_refunds',
      description: 'Finish or release refunds left reserved by a crash (provider asked again with the same idempotency key)',
      timeout: 600,
      params: z.object({ older_than_seconds: z.number().int().min(0).optional() }),
      async run(ctx, params) {
        const res = await svc.reconcileRefunds((params.older_than_seconds as number | undefined) ?? opts.refundReconcileSeconds);
        ctx.log(`refunds examined ${res.examined}: succeeded ${res.succeeded}, released ${res.released}, abandoned ${res.abandoned}`);
        return res;
      },
    },
  ];
  if (opts.ledger) {
    jobs.push({
      name: 'reconcile_payment_ledger',
      description: 'Post ledger entries a crash left out (captures and refunds without their posting)',
      timeout: 1800,
      async run(ctx) {
        const res = await svc.reconcileLedger();
        ctx.log(`posted ${res.captures} missing captures and ${res.refunds} missing refunds`);
        return res;
      },
    });
  }
  return jobs;
}
