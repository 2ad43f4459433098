/**
 * Signature verifiers. Each checks the signature over the raw request bytes, exactly as received.
 * HMAC comparisons run in constant time (`crypto.timingSafeEqual`, after a length check).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * A custom verifier: any object with an async `verify`. `headers` (lower-cased names) is passed
 * too, for schemes that sign more than the body (timestamps, message ids).
 *
 * @example { verify: async (bytes, signature, secret) => signature === myMac(bytes, secret) }
 */
export interface WebhookVerifier {
  verify(payload: Buffer, signature: string, secret: string, headers: IncomingHttpHeaders): Promise<boolean>;
}

/** The data form of an HMAC verifier. */
export interface HmacVerifierSpec {
  type: 'hmac-sha256' | 'hmac-sha512';
  /** Stripped from the start of the header value before comparing, e.g. `sha256=`. */
  prefix?: string | undefined;
  /** How the header encodes the MAC. @default 'hex' */
  encoding?: 'hex' | 'base64' | undefined;
}

/**
 * How far a delivery's signed timestamp may lie from now, in either direction. Too old is a replay;
 * too far ahead is refused too, or a delivery signed for next year would stay valid until then.
 */
export const TIMESTAMP_TOLERANCE_SECONDS = 300;

/** Reads a timestamp in whole Unix seconds; anything else is no timestamp. */
export function unixSeconds(value: string | undefined): number | undefined {
  return value && /^\d{1,12}$/.test(value.trim()) ? Number(value.trim()) : undefined;
}

/** Whether `seconds` (Unix time) lies within the tolerance of `now`, before or after it. */
export const withinTolerance = (seconds: number, now = Date.now()): boolean =>
  Math.abs(now / 1000 - seconds) <= TIMESTAMP_TOLERANCE_SECONDS;

/** Constant-time comparison of two byte strings; different lengths are unequal without comparing. */
export function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Verifier for HMAC-SHA256 / HMAC-SHA512 with optional prefix and hex or base64 encoding. */
export function hmacVerifier(spec: HmacVerifierSpec): WebhookVerifier {
  const algorithm = spec.type === 'hmac-sha512' ? 'sha512' : 'sha256';
  const encoding = spec.encoding ?? 'hex';
  const prefix = spec.prefix ?? '';
  const pattern = encoding === 'hex' ? /^[0-9a-fA-F]+$/ : /^[A-Za-z0-9+/]+={0,2}$/;
  return {
    async verify(payload, signature, secret) {
      const value = signature.trim();
      if (!value.startsWith(prefix)) return false;
      const given = value.slice(prefix.length);
      // Buffer.from silently drops bad characters; refuse them so only one spelling matches.
      if (!pattern.test(given)) return false;
      const expected = createHmac(algorithm, secret).update(payload).digest();
      return safeEqual(Buffer.from(given, encoding), expected);
    },
  };
}

/** A registration's `verifier` is a custom verifier when it has a `verify` function. */
export const isCustomVerifier = (v: unknown): v is WebhookVerifier =>
  !!v && typeof v === 'object' && typeof (v as { verify?: unknown }).verify === 'function';
