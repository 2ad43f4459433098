import { z } from 'zod';
import { objectId, pageQuery } from '../../core/http/schemas.ts';
import { pageSchema } from '../../lib/page.ts';

const slug = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be a slug: lower-case letters, digits and dashes, at most 63');
const domain = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/, 'must be a domain name such as example.com');
const roleName = z.string().min(1).max(100);
const issuerUrl = z
  .string()
  .max(2048)
  .refine((s) => URL.canParse(s) && ['http:', 'https:'].includes(new URL(s).protocol), 'must be an absolute https URL')
  .transform((s) => s.replace(/\/+$/, ''));

/** Group → roles: a person holding any listed group gets its roles (the union over their groups). */
export const roleMapping = z.record(z.string().min(1).max(200), z.array(roleName).min(1).max(20)).refine((m) => Object.keys(m).length <= 200, 'at most 200 groups');

/** `POST /admin/sso/providers` and GraphQL `createSsoProvider`. */
export const createProviderInput = z
  .object({
    /** The provider's slug in `/auth/sso/{tenant}/{name}/login`. @default derived from the issuer's host */
    name: slug.optional(),
    issuer: issuerUrl,
    client_id: z.string().min(1).max(500),
    client_secret: z.string().min(1).max(2000),
    /** E-mail domains allowed to sign in; empty or absent: any verified address. */
    allowed_domains: z.array(domain).max(100).optional(),
    role_mapping: roleMapping.optional(),
    /** The claim holding the person's groups. @default groups */
    groups_claim: z.string().min(1).max(100).optional(),
    /** Scopes asked for (`openid` is always included), e.g. `groups` for Okta. @default ['openid', 'email', 'profile'] */
    scopes: z.array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]{1,100}$/, 'must be a scope token')).max(20).optional(),
    /** Create the user at their first sign-in (just in time); otherwise only existing users may sign in. */
    jit: z.boolean(),
  })
  .strict();
export type CreateProviderInput = z.output<typeof createProviderInput>;

/** `PATCH /admin/sso/providers/{id}`: the fields to change (a new `client_secret` replaces the stored one). */
export const updateProviderInput = createProviderInput
  .omit({ jit: true })
  .partial()
  .extend({ jit: z.boolean().optional() })
  .strict()
  .refine((o) => Object.keys(o).length > 0, { message: 'Give at least one field to change' });
export type UpdateProviderInput = z.output<typeof updateProviderInput>;

export const providerListQuery = pageQuery(25, 100).strict();
export type ProviderListQuery = z.output<typeof providerListQuery>;

/** A provider as every answer shows it: never with its client secret. */
export const providerView = z.object({
  id: z.string(),
  name: z.string(),
  issuer: z.string(),
  client_id: z.string(),
  allowed_domains: z.array(z.string()),
  role_mapping: z.record(z.string(), z.array(z.string())),
  groups_claim: z.string(),
  scopes: z.array(z.string()),
  jit: z.boolean(),
  login_url: z.string().describe('Where a person starts signing in: GET it in a browser'),
  created_at: z.date(),
  updated_at: z.date(),
});
export type ProviderView = z.output<typeof providerView>;
export const providerPage = pageSchema(providerView);

export const loginParams = z.object({ tenant: objectId, provider: slug });
export const tenantParams = z.object({ tenant: objectId });
export const publicProviders = z.array(z.object({ name: z.string(), login_url: z.string() }));
/** `GET /auth/sso/{tenant}/{provider}/login`: `return_to=console` ends in the console, signed in; the default answers a token. */
export const loginQuery = z.object({ return_to: z.enum(['token', 'console']).default('token') }).strict();
export const callbackQuery = z
  .object({ state: z.string().min(1).max(200), code: z.string().min(1).max(4000).optional(), error: z.string().max(200).optional(), error_description: z.string().max(1000).optional(), iss: z.string().max(2048).optional() })
  .passthrough();
export const exchangeBody = z.object({ code: z.string().min(16).max(200) }).strict();

export const tokenResponse = z.object({ token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int() });
export type TokenResponse = z.output<typeof tokenResponse>;

/** The event types of SSO, for the catalogue. */
export const ssoEventTypes = () => {
  const provider = z.object(providerView.omit({ login_url: true }).shape);
  const signIn = z.object({ id: z.string(), provider: z.string(), outcome: z.enum(['succeeded', 'refused']), reason: z.string().nullable(), email: z.string().nullable(), user_id: z.string().nullable(), created_at: z.date() });
  return [
    { name: 'sso_provider.created', description: 'An SSO provider was configured; data is the provider without its secret', data: provider },
    { name: 'sso_provider.updated', description: 'An SSO provider was changed; data is the provider after the change, without its secret', data: provider },
    { name: 'sso_provider.deleted', description: 'An SSO provider was removed: its sign-ins and the tokens they issued stop working', data: provider },
    { name: 'sso.signed_in', description: 'A person signed in through a provider; data is the sign-in', data: signIn },
    { name: 'sso.sign_in_refused', description: 'A sign-in through a provider was refused; data says why (reason)', data: signIn },
  ];
};
