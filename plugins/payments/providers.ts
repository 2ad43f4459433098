/**
 * The payment provider contract and the built-in `manual` provider. A provider is plain data plus
 * functions; the payments service looks it up by the payment's `provider` name.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ProviderRegistrationInput } from '../webhooks/index.ts';
import type { PaymentStatus } from './model.ts';

/** What `create_payment` is asked to charge. */
export interface PaymentIntent {
  payment_id: string;
  tenant_id: string | null;
  /** Decimal string in the currency's exact minor digits, e.g. `"12.50"`. */
  amount: string;
  /** The same amount in integer minor units (what most provider APIs take). */
  amount_minor: number;
  currency: string;
  user_id: string;
  resource_type: string;
  resource_id: string;
  metadata: Record<string, unknown>;
  /** Stable per payment: send it to the provider so a repeated call creates nothing new. */
  idempotency_key: string;
}

/** A provider's answer to `create_payment`. */
export interface ProviderPaymentResult {
  /** In the provider's own vocabulary; normalised through `status_map`. */
  status: string;
  /** The provider's payment id (e.g. a Stripe PaymentIntent id). */
  provider_reference?: string | null;
  receipt_url?: string | null;
  /** Data the paying client needs to finish at the provider (e.g. `{ client_secret }`); returned by `POST /payments/{id}/process`. */
  client_data?: Record<string, unknown>;
  /** Why the provider declined (stored as `failure_reason`). */
  failure_reason?: string | null;
}

export interface RefundRequest {
  payment_id: string;
  provider_reference: string | null;
  amount: string;
  amount_minor: number;
  currency: string;
  reason: string | null;
  /** The refund's id: send it as the provider's idempotency key, so re-driving a refund after a crash never pays twice. */
  idempotency_key: string;
}

/** Resolve when the provider accepted the refund; throw when it refused (the reservation is released). */
export interface ProviderRefundResult {
  provider_refund_id?: string | null;
}

/** What a verified webhook means for a payment; `null` when the event is irrelevant. */
export type WebhookOutcome =
  | {
      kind: 'payment';
      /** Our payment id, when the provider echoes it (metadata). */
      payment_id?: string | null;
      /** The provider's payment id; used when `payment_id` is absent. */
      provider_reference?: string | null;
      /** Provider vocabulary, normalised through `status_map`. */
      status: string;
      receipt_url?: string | null;
      failure_reason?: string | null;
    }
  | {
      kind: 'refund';
      payment_id?: string | null;
      provider_reference?: string | null;
      /** The provider's cumulative refunded total, in minor units: anything above what we know is applied as an external refund. */
      refunded_total_minor: number;
    };

/**
 * A payment provider, registered with `services.get('payments').registerProvider(...)`.
 *
 * @example
 * services.get('payments').registerProvider({
 *   name: 'acmepay',
 *   status_map: { AUTHORISED: 'processing', CAPTURED: 'completed', DECLINED: 'failed' },
 *   async create_payment(intent) { const r = await acme.charge(intent); return { status: r.state, provider_reference: r.id }; },
 *   async refund_payment(req) { return { provider_refund_id: (await acme.refund(req)).id }; },
 *   async handle_webhook(payload) { return { kind: 'payment', provider_reference: payload.id, status: payload.state }; },
 *   webhook: { secret: config.ACME_SECRET, verifier: { type: 'hmac-sha256' }, event_id_path: 'event_id' },
 * });
 */
export interface PaymentProvider {
  /** Unique; stored in `Payment.provider`. `[a-z0-9][a-z0-9_-]{0,63}` (it is also the webhook path). */
  name: string;
  create_payment(intent: PaymentIntent): Promise<ProviderPaymentResult>;
  refund_payment(req: RefundRequest): Promise<ProviderRefundResult>;
  /** Interprets a verified webhook payload. Required when `webhook` is given. */
  handle_webhook?(payload: Record<string, unknown>, headers: IncomingHttpHeaders | Record<string, string>): Promise<WebhookOutcome | null>;
  /** Provider status → Payment status. Unmapped statuses are refused (502 `PROVIDER_ERROR` / a failed webhook event). */
  status_map: Record<string, PaymentStatus>;
  /**
   * Receive this provider's webhooks at `POST /webhooks/<name>` through the webhooks plugin
   * (signature check, exactly-once storage, dead-letter queue). Same parameters as the webhooks
   * plugin's `register()`, without `provider` and `handler`.
   */
  webhook?: Omit<ProviderRegistrationInput, 'provider' | 'handler'>;
}

/**
 * `manual`: bank transfer, cash, cheque. No external call: `create_payment` accepts at once
 * (processing) and an operator completes the payment with `POST /payments/{id}/complete`.
 */
export const manualProvider: PaymentProvider = {
  name: 'manual',
  status_map: {
    accepted: 'processing', awaiting_funds: 'processing', processing: 'processing',
    paid: 'completed', received: 'completed', completed: 'completed', succeeded: 'completed',
    declined: 'failed', failed: 'failed', bounced: 'failed',
  },
  async create_payment() {
    return { status: 'awaiting_funds' };
  },
  async refund_payment(req) {
    // The money goes back by hand; the refund id is the reference to quote.
    return { provider_refund_id: `manual_${req.idempotency_key}` };
  },
};
