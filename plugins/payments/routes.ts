/** REST wiring of payments, the ledger and payouts: each route calls one service method. */
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import { etagOf } from '../../lib/etag.ts';
import {
  balanceResponse, cancelInput, completeInput, executeInput, failPayoutInput, ifMatchHeader, ledgerPageResponse, ledgerQuery, paymentIdParams, type paymentResponses,
  payoutIdParams, payoutListQuery, payoutPageResponse, payoutResponse, refundInput, refundsResponse, settleParams, settleResponse, updatePaymentInput,
} from './schemas.ts';
import { PAYMENT_PERMISSIONS, type PaymentsService } from './service.ts';
import { LEDGER_PERMISSIONS, type LedgerService } from './ledger.ts';
import { PAYOUT_PERMISSIONS, type PayoutsService } from './payouts.ts';

const tags = ['payments'];
const id = paymentIdParams;
const ptags = ['payouts'];
const payoutId = payoutIdParams;

/**
 * The payment routes besides the generated list, get and create of the `payments` resource;
 * `responses` holds the answers built on the resource's own `Payment` schema (`paymentResponses`).
 */
export const paymentRoutes = (svc: PaymentsService, { payment, processed }: ReturnType<typeof paymentResponses>): RouteDef[] => [
defineRoute({
  method: 'PUT', path: '/payments/:id', auth: PAYMENT_PERMISSIONS.update, tags, params: id, summary: 'Update provider_reference, receipt_url and metadata (other fields are 422)', response: payment,
  docs: { body: updatePaymentInput, headers: ifMatchHeader, responseHeaders: { ETag: 'New revision' }, errors: [404, 409, 412, 428] },
  handler: async ({ actor, params, ctx }) => {
    const doc = await svc.update(actor, params.id, ctx.get('If-Match'), ctx.request.body);
    ctx.set('ETag', etagOf(doc.version));
    return doc;
  },
}),
defineRoute({
  method: 'POST', path: '/payments/:id/process', auth: PAYMENT_PERMISSIONS.process, tags, params: id, summary: "Ask the payment's provider to accept it: pending → processing (→ completed / failed)",
  docs: { errors: [404, 409, 502] }, response: processed,
  handler: ({ actor, params }) => svc.process(actor, params.id),
}),
defineRoute({
  method: 'POST', path: '/payments/:id/complete', tags, auth: PAYMENT_PERMISSIONS.complete, params: id, body: completeInput,
  summary: 'Mark captured: processing → completed; idempotent for the same provider_reference', docs: { errors: [404, 409] }, response: payment,
  handler: ({ actor, params, body }) => svc.complete(actor, params.id, body),
}),
defineRoute({
  method: 'POST', path: '/payments/:id/cancel', auth: PAYMENT_PERMISSIONS.cancel, tags, params: id, body: cancelInput, summary: 'Cancel before capture: pending → cancelled', response: payment,
  docs: { errors: [404, 409] },
  handler: ({ actor, params, body }) => svc.cancel(actor, params.id, body.reason ?? null),
}),
defineRoute({
  method: 'GET', path: '/payments/:id/refunds', auth: PAYMENT_PERMISSIONS.refundsOf, tags, params: id, summary: 'Refund attempts of a payment, oldest first', docs: { errors: [404] }, response: refundsResponse,
  handler: ({ actor, params }) => svc.refundsOf(actor, params.id),
}),
defineRoute({
  method: 'POST', path: '/payments/:id/refund', tags, auth: PAYMENT_PERMISSIONS.refund, params: id, body: refundInput,
  summary: 'Full or partial refund; a total above the captured amount is 400', docs: { errors: [400, 404, 409, 502] }, response: payment,
  handler: ({ actor, params, body }) => svc.refund(actor, params.id, body),
}),
];

/** `/ledger/*` (with `PAYMENTS_LEDGER_ENABLED`). */
export const ledgerRoutes = (ledger: LedgerService): RouteDef[] => [
defineRoute({
  method: 'GET', path: '/ledger/entries', tags: ['ledger'], auth: LEDGER_PERMISSIONS.entries, query: ledgerQuery, summary: "Ledger lines of the caller's tenant, newest first", response: ledgerPageResponse,
  handler: ({ actor, query }) => ledger.entries(actor, query),
}),
defineRoute({
  method: 'GET', path: '/ledger/balance', tags: ['ledger'], auth: LEDGER_PERMISSIONS.balance, summary: 'Debits, credits and balance per tenant, account and currency', response: balanceResponse,
  handler: ({ actor }) => ledger.balance(actor),
}),
];

/** `/payouts/*` (system administrators). */
export const payoutRoutes = (payouts: PayoutsService): RouteDef[] => [
defineRoute({
  method: 'GET', path: '/payouts', tags: ptags, auth: PAYOUT_PERMISSIONS.list, query: payoutListQuery, summary: 'List payout batches, newest first', response: payoutPageResponse,
  handler: ({ actor, query }) => payouts.list(actor, query),
}),
defineRoute({
  method: 'POST', path: '/payouts/settle', tags: ptags, auth: PAYOUT_PERMISSIONS.settle, body: settleParams, summary: 'Run settlement now as the caller (the batches record the caller as creator)', response: settleResponse,
  handler: ({ actor, body }) => payouts.settle(actor, body),
}),
defineRoute({
  method: 'GET', path: '/payouts/:id', tags: ptags, auth: PAYOUT_PERMISSIONS.get, params: payoutId, summary: 'One payout batch', docs: { errors: [404] }, response: payoutResponse,
  handler: ({ actor, params }) => payouts.get(actor, params.id),
}),
defineRoute({
  method: 'POST', path: '/payouts/:id/approve', tags: ptags, auth: PAYOUT_PERMISSIONS.approve, params: payoutId, summary: 'approve_payout: draft → approved', response: payoutResponse,
  docs: { errors: [403, 404, 409] },
  handler: ({ actor, params }) => payouts.approve(actor, params.id),
}),
defineRoute({
  method: 'POST', path: '/payouts/:id/process', tags: ptags, auth: PAYOUT_PERMISSIONS.process, params: payoutId,
  summary: 'process_payout: approved (or failed, to retry) → processing: the transfer was handed to the bank', docs: { errors: [404, 409] }, response: payoutResponse,
  handler: ({ actor, params }) => payouts.process(actor, params.id),
}),
defineRoute({
  method: 'POST', path: '/payouts/:id/fail', tags: ptags, auth: PAYOUT_PERMISSIONS.fail, params: payoutId, body: failPayoutInput,
  summary: 'fail_payout: processing → failed with a reason (the bank rejected the transfer)', docs: { errors: [404, 409] }, response: payoutResponse,
  handler: ({ actor, params, body }) => payouts.fail(actor, params.id, body.reason),
}),
defineRoute({
  method: 'POST', path: '/payouts/:id/execute', tags: ptags, auth: PAYOUT_PERMISSIONS.execute, params: payoutId, body: executeInput,
  summary: 'execute_payout: approved or processing → completed with bank_reference and paid_at', docs: { errors: [404, 409] }, response: payoutResponse,
  handler: ({ actor, params, body }) => payouts.execute(actor, params.id, body.bank_reference),
}),
];
