/**
 * Provider presets built on the providers' own libraries rather than on our own header parsing:
 * Stripe (`stripe`'s webhook helper), Standard Webhooks (`standardwebhooks`) and GitHub.
 * A preset fills in the verifier and the header/path defaults; a registration may override those.
 */
import type { IncomingHttpHeaders } from 'node:http';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { hmacVerifier, TIMESTAMP_TOLERANCE_SECONDS, unixSeconds, type WebhookVerifier } from './verifiers.ts';

/** Defaults a preset contributes to a registration. */
export interface PresetDefaults {
  verifier: WebhookVerifier;
  /**
   * The delivery's signed timestamp (Unix seconds), for presets that sign one; the receiver refuses
   * a delivery whose timestamp is missing or outside the tolerance, in either direction.
   */
  timestamp?: (signature: string, headers: IncomingHttpHeaders) => number | undefined;
  signature_header: string;
  event_id_path?: string;
  event_type_path?: string;
  event_id_header?: string;
  event_type_header?: string;
  delivery_id_header?: string;
}

const one = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
};

const stripe: PresetDefaults = {
  verifier: {
    async verify(payload, signature, secret) {
      try {
        // Verifies `t=…,v1=…` over the exact bytes. The SDK refuses only old timestamps; the receiver checks both directions.
        return Stripe.webhooks.signature.verifyHeader(payload as unknown as string, signature, secret, TIMESTAMP_TOLERANCE_SECONDS);
      } catch {
        return false;
      }
    },
  },
  timestamp: (signature) => unixSeconds(/(?:^|,)\s*t=([^,]*)/.exec(signature)?.[1]),
  signature_header: 'stripe-signature',
  event_id_path: 'id',
  event_type_path: 'type',
};

const standardWebhooks: PresetDefaults = {
  verifier: {
    async verify(payload, signature, secret, headers) {
      const id = one(headers, 'webhook-id');
      const timestamp = one(headers, 'webhook-timestamp');
      if (!id || !timestamp) return false;
      try {
        // Checks the signed `id.timestamp.body` (and the library's own 5-minute tolerance, both ways).
        new Webhook(secret).verify(payload, { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature });
        return true;
      } catch {
        return false;
      }
    },
  },
  timestamp: (_signature, headers) => unixSeconds(one(headers, 'webhook-timestamp')),
  signature_header: 'webhook-signature',
  // The idempotency key is the message id, which Standard Webhooks puts in a header.
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
