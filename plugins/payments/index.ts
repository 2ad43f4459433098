import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { onHook } from '../../core/hooks.ts';
import { etagOf } from '../../core/etag.ts';
import type { Actor } from '../../core/context.ts';
// Types only: the declaration merging that gives `services.get('webhooks')` its type.
import type {} from '../webhooks/index.ts';
import { ledgerModel, payoutModel, paymentSchema, refundModel } from './model.ts';
import {
  cancelInput, completeInput, createPaymentInput, executeInput, failPayoutInput, ifMatchHeader, ledgerQuery, paymentIdParams, payoutIdParams, payoutListQuery, refundInput,
  settleParams, updatePaymentInput,
} from './schemas.ts';
import { PaymentsService, type PaymentsApi, type PaymentView } from './service.ts';
import { LedgerService } from './ledger.ts';
import { PayoutsService } from './payouts.ts';
import { paymentJobs } from './jobs.ts';
import { manualProvider } from './providers.ts';
import { stripeProvider } from './stripe.ts';
import { paymentsGraphql } from './graphql.ts';

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
  dependsOn: ['resources', 'webhooks'],
  setup({ db, config, services, hooks, log, tenancy }) {
    const ledger = config.PAYMENTS_LEDGER_ENABLED ? new LedgerService(ledgerModel(db), tenancy) : null;
    const svc = new PaymentsService({ hooks, log, refunds: refundModel(db), webhooks: services.get('webhooks'), ledger });
    services.provide('payments', svc);
    svc.registerProvider(manualProvider);
    if (config.STRIPE_SECRET_KEY && config.STRIPE_WEBHOOK_SECRET) {
      svc.registerProvider(stripeProvider({ secretKey: config.STRIPE_SECRET_KEY, webhookSecret: config.STRIPE_WEBHOOK_SECRET, apiUrl: config.STRIPE_API_URL }));
    }
    if (!config.PAYMENTS_ENABLED) return {};

    const tags = ['payments'];
    const id = paymentIdParams;
    const resource = services.get('resources').register({
      name: 'payments',
      schema: paymentSchema,
      operations: ['list', 'get', 'create'],
      // Personal data for the privacy plugin: money records are kept, only the payer's name goes.
      gdpr_fields: ['user_name'],
      subject_field: 'user_id',
      input: { create: createPaymentInput(() => svc.providers()), update: updatePaymentInput },
      routes: [
        defineRoute({
          method: 'PUT', path: '/payments/:id', tags, params: id, summary: 'Update provider_reference, receipt_url and metadata (other fields are 422)',
          docs: { body: updatePaymentInput, headers: ifMatchHeader, responseHeaders: { ETag: 'New revision' }, errors: [404, 409, 412, 428] },
          handler: async ({ actor, params, ctx }) => {
            const doc = await svc.update(actor!, params.id, ctx.get('If-Match'), ctx.request.body);
            ctx.set('ETag', etagOf(doc.version));
            return doc;
          },
        }),
        defineRoute({
          method: 'POST', path: '/payments/:id/process', tags, params: id, summary: "Ask the payment's provider to accept it: pending → processing (→ completed / failed)",
          docs: { errors: [404, 409, 502] },
          handler: ({ actor, params }) => svc.process(actor!, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/payments/:id/complete', tags, auth: 'admin', params: id, body: completeInput,
          summary: 'Mark captured: processing → completed; idempotent for the same provider_reference', docs: { errors: [404, 409] },
          handler: ({ actor, params, body }) => svc.complete(actor!, params.id, body),
        }),
        defineRoute({
          method: 'POST', path: '/payments/:id/cancel', tags, params: id, body: cancelInput, summary: 'Cancel before capture: pending → cancelled',
          docs: { errors: [404, 409] },
          handler: ({ actor, params, body }) => svc.cancel(actor!, params.id, body.reason ?? null),
        }),
        defineRoute({
          method: 'GET', path: '/payments/:id/refunds', tags, params: id, summary: 'Refund attempts of a payment, oldest first', docs: { errors: [404] },
          handler: ({ actor, params }) => svc.refundsOf(actor!, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/payments/:id/refund', tags, auth: 'admin', params: id, body: refundInput,
          summary: 'Full or partial refund; a total above the captured amount is 400', docs: { errors: [400, 404, 409, 502] },
          handler: ({ actor, params, body }) => svc.refund(actor!, params.id, body),
        }),
      ],
    });
    const payouts = new PayoutsService({ model: payoutModel(db), payments: resource, hooks, tenancy }, {
      feePercent: config.PAYOUT_FEE_PERCENT, autoApproveThreshold: config.PAYOUT_AUTO_APPROVE_THRESHOLD,
    });
    svc.attach(resource, payouts);
    const ptags = ['payouts'];
    const payoutId = payoutIdParams;

    return {
      hooks: [
        onHook('BEFORE_UPDATE', (e) => {
          if (e.resource === 'payments') svc.checkUpdate(e.old, e.data);
        }),
      ],
      routes: [
        ...(ledger
          ? [
              defineRoute({
                method: 'GET', path: '/ledger/entries', tags: ['ledger'], auth: 'admin', query: ledgerQuery, summary: "Ledger lines of the caller's tenant, newest first",
                handler: ({ actor, query }) => ledger.entries(actor!, query),
              }),
              defineRoute({
                method: 'GET', path: '/ledger/balance', tags: ['ledger'], auth: 'admin', summary: 'Debits, credits and balance per tenant, account and currency',
                handler: ({ actor }) => ledger.balance(actor!),
              }),
            ]
          : []),
        defineRoute({
          method: 'GET', path: '/payouts', tags: ptags, auth: 'system', query: payoutListQuery, summary: 'List payout batches, newest first',
          handler: ({ actor, query }) => payouts.list(actor!, query),
        }),
        defineRoute({
          method: 'POST', path: '/payouts/settle', tags: ptags, auth: 'system', body: settleParams, summary: 'Run settlement now as the caller (the batches record the caller as creator)',
          handler: ({ actor, body }) => payouts.settle(actor!, body),
        }),
        defineRoute({
          method: 'GET', path: '/payouts/:id', tags: ptags, auth: 'system', params: payoutId, summary: 'One payout batch', docs: { errors: [404] },
          handler: ({ actor, params }) => payouts.get(actor!, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/payouts/:id/approve', tags: ptags, auth: 'system', params: payoutId, summary: 'approve_payout: draft → approved',
          docs: { errors: [403, 404, 409] },
          handler: ({ actor, params }) => payouts.approve(actor!, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/payouts/:id/process', tags: ptags, auth: 'system', params: payoutId,
          summary: 'process_payout: approved (or failed, to retry) → processing: the transfer was handed to the bank', docs: { errors: [404, 409] },
          handler: ({ actor, params }) => payouts.process(actor!, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/payouts/:id/fail', tags: ptags, auth: 'system', params: payoutId, body: failPayoutInput,
          summary: 'fail_payout: processing → failed with a reason (the bank rejected the transfer)', docs: { errors: [404, 409] },
          handler: ({ actor, params, body }) => payouts.fail(actor!, params.id, body.reason),
        }),
        defineRoute({
          method: 'POST', path: '/payouts/:id/execute', tags: ptags, auth: 'system', params: payoutId, body: executeInput,
          summary: 'execute_payout: approved or processing → completed with bank_reference and paid_at', docs: { errors: [404, 409] },
          handler: ({ actor, params, body }) => payouts.execute(actor!, params.id, body.bank_reference),
        }),
      ],
      graphql: (builder) => paymentsGraphql(builder, { svc, payouts, ledger }),
      jobs: paymentJobs(svc, payouts, { ledger: !!ledger, refundReconcileSeconds: config.PAYMENT_REFUND_RECONCILE_SECONDS }),
    };
  },
});

export default paymentsPlugin;
