import { definePlugin } from '../../core/plugin.ts';
import { onHook } from '../../core/hooks.ts';
import type { Actor } from '../../core/context.ts';
// Types only: the declaration merging that gives `services.get('webhooks')` its type.
import type {} from '../webhooks/index.ts';
import { ledgerModel, payoutModel, paymentSchema, refundModel } from './model.ts';
import { createPaymentInput, paymentEventTypes, paymentResponses, updatePaymentInput } from './schemas.ts';
import { ledgerRoutes, paymentRoutes, payoutRoutes } from './routes.ts';
import { PaymentsService, type PaymentsApi, type PaymentView } from './service.ts';
import { LedgerService } from './ledger.ts';
import { PayoutsService } from './payouts.ts';
import { paymentJobs } from './jobs.ts';
import { manualProvider } from './providers.ts';
import { stripeProvider } from './stripe.ts';
import { paymentsGraphql } from './graphql.ts';
import { paymentErrorCodes } from './errors.ts';

export type { PaymentsApi, PaymentView } from './service.ts';
export type { PaymentProvider, PaymentIntent, ProviderPaymentResult, RefundRequest, ProviderRefundResult, WebhookOutcome } from './providers.ts';
export type { PaymentStatus, PayoutView } from './model.ts';

declare module '../../core/services.ts' {
  interface Services {
    payments: PaymentsApi;
  }
}

/** Who and where a payment event happened; `actor` is the system actor for webhook-driven changes. */
interface PaymentEventBase {
  /** The payment after the change, as the API shows it (decimal strings, no bookkeeping fields). */
  payment: PaymentView;
  actor: Actor;
  tenant_id: string | null;
  request_id: string | null;
}

declare module '../../core/hooks.ts' {
  interface HookEvents {
    /** A payment reached `completed` (once per payment, whichever of REST, GraphQL or a webhook won). */
    PAYMENT_COMPLETED: PaymentEventBase;
    /** A refund was applied (once per refund); `payment.status` is `partially_refunded` or `refunded`. */
    PAYMENT_REFUNDED: PaymentEventBase & {
      refund: { id: string; amount: string; currency: string; reason: string | null; provider_refund_id: string | null };
    };
  }
}

/**
 * Payments: the Payment resource with its lifecycle and refunds, the provider registry (`manual`
 * built in, `stripe` when configured, others from plugins), the ledger, payout batches and the
 * `settle_payouts` / `reconcile_payment_refunds` jobs. `PAYMENTS_ENABLED` mounts the API; the
 * `payments` service is provided either way so provider plugins start in both modes.
 */
export const paymentsPlugin = definePlugin({
  name: 'payments',
  enabledBy: 'PAYMENTS_ENABLED',
  dependsOn: ['resources', 'webhooks'],
  setup({ db, config, services, hooks, log, tenancy }) {
    const ledger = config.PAYMENTS_LEDGER_ENABLED ? new LedgerService(ledgerModel(db), tenancy) : null;
    const svc = new PaymentsService({ hooks, log, refunds: refundModel(db), webhooks: services.get('webhooks'), ledger, events: services.get('events') });
    services.provide('payments', svc);
    svc.registerProvider(manualProvider);
    if (config.STRIPE_SECRET_KEY && config.STRIPE_WEBHOOK_SECRET) {
      svc.registerProvider(stripeProvider({ secretKey: config.STRIPE_SECRET_KEY, webhookSecret: config.STRIPE_WEBHOOK_SECRET, apiUrl: config.STRIPE_API_URL }));
    }
    if (!config.PAYMENTS_ENABLED) return {};

    const resource = services.get('resources').register({
      name: 'payments',
      schema: paymentSchema,
      operations: ['list', 'get', 'create'],
      // Personal data for the privacy plugin: money records are kept, only the payer's name goes.
      gdpr_fields: ['user_name'],
      subject_field: 'user_id',
      input: { create: createPaymentInput(() => svc.providers()), update: updatePaymentInput },
      routes: paymentRoutes(svc, paymentResponses(() => services.get('resources').documentSchema('payments'))),
    });
    const payouts = new PayoutsService({ model: payoutModel(db), payments: resource, tenancy, events: services.get('events') }, {
      feePercent: config.PAYOUT_FEE_PERCENT, autoApproveThreshold: config.PAYOUT_AUTO_APPROVE_THRESHOLD,
    });
    svc.attach(resource, payouts);

    return {
      hooks: [
        onHook('BEFORE_UPDATE', (e) => svc.checkUpdate(e.old, e.data), { resources: ['payments'] }),
      ],
      routes: [...(ledger ? ledgerRoutes(ledger) : []), ...payoutRoutes(payouts)],
      graphql: (builder) => paymentsGraphql(builder, { svc, payouts, ledger }),
      jobs: paymentJobs(svc, payouts, { ledger: !!ledger, refundReconcileSeconds: config.PAYMENT_REFUND_RECONCILE_SECONDS }),
      // Each transition stores `payment.<new status>` in the payment's outbox with the write (store.ts).
      eventTypes: paymentEventTypes(),
      errorCodes: paymentErrorCodes,
    };
  },
});

export default paymentsPlugin;
