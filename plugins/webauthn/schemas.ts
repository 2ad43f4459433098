import { BadRequestError } from '../../core/errors.ts';
import { z } from 'zod';
import { objectId } from '../../core/http/schemas.ts';

/** Unpadded base64url (RFC 4648 §5), as browsers and the WebAuthn JSON encodings produce it. */
export const base64url = (max: number) =>
  z.string().min(1).max(max).regex(/^[A-Za-z0-9_-]+$/, 'must be base64url (A-Z a-z 0-9 - _, no padding)');

/** WebAuthn credential ids are at most 1023 bytes (1364 base64url characters). */
const credentialId = base64url(1364);

/** `POST /auth/webauthn/register` body. */
export const registerBody = z
  .object({
    credential_id: credentialId,
    client_data_json: base64url(16_384),
    attestation_object: base64url(65_536),
    /** `AuthenticatorTransport` values the browser reported; may be empty. */
    transports: z.array(z.string().min(1).max(32)).max(10).default([]),
    device_name: z.string().trim().min(1).max(200),
  })
  .strict();
export type RegisterBody = z.output<typeof registerBody>;

const email = z.string().trim().toLowerCase().pipe(z.email()).pipe(z.string().max(320));

/** `POST /auth/webauthn/authenticate/options` body. */
export const authenticateOptionsBody = z.object({ email }).strict();

/** `POST /auth/webauthn/authenticate` body. */
export const authenticateBody = z
  .object({
    email,
    credential_id: credentialId,
    client_data_json: base64url(16_384),
    authenticator_data: base64url(16_384),
    signature: base64url(2_048),
  })
  .strict();
export type AuthenticateBody = z.output<typeof authenticateBody>;

/** `DELETE /auth/webauthn/credentials/{credential_id}` path. */
export const credentialParams = z.object({ credential_id: credentialId }).strict();

/** GraphQL `userPasskeys(user_id)`. */
export const userPasskeysArgs = z.object({ user_id: objectId }).strict();

export const credentialResponse = z.object({
  credential_id: z.string(),
  device_name: z.string(),
  registered_at: z.iso.datetime(),
  last_used_at: z.iso.datetime().nullable(),
});

export const tokenResponse = z.object({ token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int() });

/** `POST /auth/webauthn/register/options`: WebAuthn creation options (JSON form; binary values base64url). */
export const registrationOptionsResponse = z
  .object({
    challenge: z.string(),
    rp: z.object({ id: z.string().optional(), name: z.string() }),
    user: z.object({ id: z.string(), name: z.string(), displayName: z.string() }),
    pubKeyCredParams: z.array(z.object({ alg: z.number().int(), type: z.literal('public-key') })),
    timeout: z.number().int().optional(),
  })
  .passthrough();

/** `POST /auth/webauthn/authenticate/options`: WebAuthn request options (JSON form). */
export const authenticationOptionsResponse = z
  .object({
    challenge: z.string(),
    rpId: z.string().optional(),
    allowCredentials: z.array(z.object({ id: z.string(), type: z.literal('public-key') }).passthrough()).optional(),
    timeout: z.number().int().optional(),
  })
  .passthrough();

/**
 * The tenant a login names (`X-Tenant-Id`, or GraphQL `passkeyLogin(tenant_id:)`): the membership
 * to act in, for a person with several; null when none is named.
 * @throws BadRequestError when malformed
 */
export const loginTenant = (value: string | null | undefined): string | null => {
  if (!value) return null;
  if (!/^[0-9a-fA-F]{24}$/.test(value)) throw new BadRequestError('X-Tenant-Id must be an object id');
  return value.toLowerCase();
};
