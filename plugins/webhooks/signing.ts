/** Signing of outbound webhook requests, per Standard Webhooks (the `standardwebhooks` package). */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/** A new endpoint secret: `whsec_` and the base64 of 32 random bytes (Standard Webhooks format). */
export const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

/** A secret an endpoint holds: the current one has no expiry; a rotated-out one signs until `expires_at`. */
export interface SigningSecret {
  value: string;
  expires_at?: Date | null;
}

/** The secrets that sign at `now`, current first. */
export const activeSecrets = (secrets: readonly SigningSecret[], now: Date): string[] =>
  secrets.filter((s) => !s.expires_at || s.expires_at > now).map((s) => s.value);

/**
 * The three Standard Webhooks headers of one request. `webhook-signature` holds one `v1,<base64>`
 * entry per active secret, space-separated, so a receiver holding either secret verifies it.
 */
export function signedHeaders(secrets: readonly string[], msgId: string, at: Date, body: string): Record<string, string> {
  return {
    'webhook-id': msgId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((s) => new Webhook(s).sign(msgId, at, body)).join(' '),
  };
}
