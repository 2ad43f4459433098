/**
 * The built-in `stripe` provider on the official `stripe` SDK: PaymentIntents for
 * `create_payment`, Refunds for `refund_payment`, and webhooks received through the webhooks
 * plugin (`POST /webhooks/stripe`, verified by the SDK's signature helper in the `stripe` preset).
 * Registered only when `STRIPE_SECRET_KEY` and `STRIPE_WEBHOOK_SECRET` are set.
 */
import Stripe from 'stripe';
import type { PaymentProvider, WebhookOutcome } from './providers.ts';

export interface StripeSettings {
  secretKey: string;
  webhookSecret: string;
  /** Base URL of the API (`STRIPE_API_URL`); default Stripe's own. */
  apiUrl?: string | undefined;
}

/**
 * Stripe's PaymentIntent statuses (and the event names we read) → Payment states. An intent that
 * exists has been accepted by Stripe: every open status is `processing`.
 */
export const STRIPE_STATUS_MAP = {
  requires_payment_method: 'processing',
  requires_confirmation: 'processing',
  requires_action: 'processing',
  requires_capture: 'processing',
  processing: 'processing',
  succeeded: 'completed',
  canceled: 'cancelled',
  payment_failed: 'failed',
} as const;

const str = (v: unknown): string | null => (typeof v === 'string' && v ? v : null);

export function stripeProvider(s: StripeSettings): PaymentProvider {
  const url = s.apiUrl ? new URL(s.apiUrl) : null;
  const client = new Stripe(s.secretKey, {
    maxNetworkRetries: 2,
    ...(url ? { host: url.hostname, port: url.port || (url.protocol === 'https:' ? 443 : 80), protocol: url.protocol === 'http:' ? 'http' : 'https' } : {}),
  });
  return {
    name: 'stripe',
    status_map: { ...STRIPE_STATUS_MAP },
    async create_payment(intent) {
      // Stripe's amounts are in the currency's smallest unit, as our minor units (ISO 4217 digits).
      const pi = await client.paymentIntents.create(
        {
          amount: intent.amount_minor,
          currency: intent.currency.toLowerCase(),
          metadata: { payment_id: intent.payment_id, tenant_id: intent.tenant_id ?? '', resource_type: intent.resource_type, resource_id: intent.resource_id },
        },
        { idempotencyKey: intent.idempotency_key },
      );
      return { status: pi.status, provider_reference: pi.id, client_data: { client_secret: pi.client_secret } };
    },
    async refund_payment(req) {
      if (!req.provider_reference) throw new Error('the payment has no Stripe PaymentIntent id');
      const refund = await client.refunds.create(
        { payment_intent: req.provider_reference, amount: req.amount_minor, metadata: { payment_id: req.payment_id, reason: req.reason ?? '' } },
        { idempotencyKey: `refund-${req.idempotency_key}` },
      );
      if (refund.status === 'failed' || refund.status === 'canceled') throw new Error(`refund ${refund.id} is ${refund.status}`);
      return { provider_refund_id: refund.id };
    },
    async handle_webhook(payload): Promise<WebhookOutcome | null> {
      const type = str(payload.type);
      const obj = ((payload.data as { object?: Record<string, unknown> } | undefined)?.object ?? {}) as Record<string, unknown>;
      const meta = (obj.metadata ?? {}) as Record<string, unknown>;
      switch (type) {
        case 'payment_intent.succeeded':
        case 'payment_intent.processing':
        case 'payment_intent.canceled':
          return { kind: 'payment', payment_id: str(meta.payment_id), provider_reference: str(obj.id), status: String(obj.status) };
        case 'payment_intent.payment_failed': {
          const err = obj.last_payment_error as { message?: string } | undefined;
          return { kind: 'payment', payment_id: str(meta.payment_id), provider_reference: str(obj.id), status: 'payment_failed', failure_reason: err?.message ?? null };
        }
        case 'charge.refunded':
          return { kind: 'refund', payment_id: str(meta.payment_id), provider_reference: str(obj.payment_intent), refunded_total_minor: Number(obj.amount_refunded ?? 0) };
        default:
          return null;
      }
    },
    webhook: { secret: s.webhookSecret, verifier: { type: 'stripe' } },
  };
}
