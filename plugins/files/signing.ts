/** Signed download URLs: `expires` (unix seconds) and an HMAC-SHA256 `signature` over the file id and it. */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The signing key: `FILES_SIGNED_URL_SECRET`, else one derived from `TOKEN_SECRET` (never the token key itself). */
export const signingKey = (explicit: string | undefined, tokenSecret: string): Buffer =>
  explicit ? Buffer.from(explicit) : createHmac('sha256', tokenSecret).update('files:signed-url').digest();

const mac = (key: Buffer, id: string, expires: number) => createHmac('sha256', key).update(`${id}\n${expires}`).digest('base64url');

/** The query string of a signed URL of file `id`, valid until `expires` (unix seconds). */
export const sign = (key: Buffer, id: string, expires: number): string => `expires=${expires}&signature=${mac(key, id, expires)}`;

/** True when `signature` is this server's for `id` and `expires`, and `expires` has not passed. */
export function verify(key: Buffer, id: string, expires: string, signature: string, now = Date.now()): boolean {
  if (!/^\d{1,12}$/.test(expires)) return false;
  const exp = Number(expires);
  const want = Buffer.from(mac(key, id, exp));
  const got = Buffer.from(signature);
  return got.length === want.length && timingSafeEqual(got, want) && exp * 1000 > now;
}
