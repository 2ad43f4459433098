/**
 * Signing of outbound webhook requests, per Standard Webhooks: `v1,` and the base64 HMAC-SHA256, with
 * the secret's bytes (the base64 after `whsec_`), of `<id>.<timestamp>.<body>`, as the
 * `standardwebhooks` package signs (its `Webhook.verify` checks ours in the tests), with node's
 * native HMAC instead of its JavaScript one.
 */
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` and the base64 of 32 random bytes (Standard Webhooks format). */
export const newSecret = (): string => `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;

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
    'webhook-signature': secrets.map((s) => sign(s, msgId, at, body)).join(' '),
  };
}

/** One `v1,<base64>` signature of a request with `secret` (Standard Webhooks). */
export function sign(secret: string, msgId: string, at: Date, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${msgId}.${Math.floor(at.getTime() / 1000)}.${body}`).digest('base64')}`;
}
