/**
 * Provider presets built on the providers' own libraries rather than on our own header parsing:
 * Stripe (`stripe`'s webhook helper), Standard Webhooks (`standardwebhooks`) and GitHub.
 * A preset fills in the verifier and the header/path defaults; a registration may override those.
 */
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { hmacVerifier, type WebhookVerifier } from './verifiers.ts';

/** Stripe's tolerance between the signed timestamp and now. */
export const STRIPE_TOLERANCE_SECONDS = 300;

/** Defaults a preset contributes to a registration. */
export interface PresetDefaults {
  verifier: WebhookVerifier;
  signature_header: string;
  event_id_path?: string;
  event_type_path?: string;
  event_id_header?: string;
  event_type_header?: string;
  delivery_id_header?: string;
}

const stripe: PresetDefaults = {
  verifier: {
    async verify(payload, signature, secret) {
      try {
        // Verifies `t=…,v1=…` over the exact bytes, with the 300 s timestamp tolerance.
        return Stripe.webhooks.signature.verifyHeader(payload as unknown as string, signature, secret, STRIPE_TOLERANCE_SECONDS);
      } catch {
        return false;
      }
    },
  },
  signature_header: 'stripe-signature',
  event_id_path: 'id',
  event_type_path: 'type',
};

const standardWebhooks: PresetDefaults = {
  verifier: {
    async verify(payload, signature, secret, headers) {
      const one = (name: string) => {
        const v = headers[name];
        return Array.isArray(v) ? v[0] : v;
      };
      const id = one('webhook-id');
      const timestamp = one('webhook-timestamp');
      if (!id || !timestamp) return false;
      try {
        // Checks the signed `id.timestamp.body` and the library's 5-minute timestamp tolerance.
        new Webhook(secret).verify(payload, { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature });
        return true;
      } catch {
        return false;
      }
    },
  },
  signature_header: 'webhook-signature',
  // The spec's idempotency key: the message id, which Standard Webhooks puts in a header.
  event_id_header: 'webhook-id',
  event_type_path: 'type',
  delivery_id_header: 'webhook-id',
};

const github: PresetDefaults = {
  verifier: hmacVerifier({ type: 'hmac-sha256', prefix: 'sha256=', encoding: 'hex' }),
  signature_header: 'x-hub-signature-256',
  // GitHub's payloads carry no event id; the delivery GUID is the idempotency key.
  event_id_header: 'x-github-delivery',
  event_type_header: 'x-github-event',
  delivery_id_header: 'x-github-delivery',
};

/** Every preset, by the name used as `verifier: { type: name }`. */
export const PRESETS = { stripe, 'standard-webhooks': standardWebhooks, github } as const;
export type PresetName = keyof typeof PRESETS;
export const PRESET_NAMES = Object.keys(PRESETS) as PresetName[];
