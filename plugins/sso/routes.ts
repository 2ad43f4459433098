/** REST routes of SSO: providers under `/admin/sso/providers`, the sign-in under `/auth/sso`. Each calls a service. */
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import { idParams } from '../../core/http/schemas.ts';
import { pageHeaderDocs, setPageHeaders } from '../../lib/page.ts';
import { callbackQuery, createProviderInput, exchangeBody, loginParams, publicProviders, tenantParams, loginQuery, providerListQuery, providerPage, providerView, tokenResponse, updateProviderInput } from './schemas.ts';
import { PROVIDER_PERMISSIONS, type ProviderService } from './providers.ts';
import { SIGN_IN_PERMISSIONS, type SignInService } from './service.ts';

const tags = ['sso'];
const errors = [403, 404];

export function ssoRoutes(providers: ProviderService, signIn: SignInService): RouteDef[] {
  return [
    defineRoute({
      method: 'POST', path: '/admin/sso/providers', tags, auth: PROVIDER_PERMISSIONS.create, status: 201, body: createProviderInput, response: providerView, docs: { errors: [403, 409] },
      summary: 'Configure an OpenID Connect provider for the tenant (its client secret is stored encrypted and never returned)',
      description: 'The issuer must be https and on the public internet (an http://127.0.0.1 or localhost issuer is accepted with NODE_ENV=development). Roles in role_mapping must exist in the tenant.',
      handler: ({ actor, body }) => providers.create(actor, body),
    }),
    defineRoute({
      method: 'GET', path: '/admin/sso/providers', tags, auth: PROVIDER_PERMISSIONS.list, query: providerListQuery, response: providerPage, summary: "The tenant's SSO providers",
      docs: { responseHeaders: pageHeaderDocs('Providers of the tenant'), errors: [403] },
      handler: async ({ actor, query, ctx }) => setPageHeaders(ctx, await providers.list(actor, query)),
    }),
    defineRoute({
      method: 'GET', path: '/admin/sso/providers/:id', tags, auth: PROVIDER_PERMISSIONS.get, params: idParams, response: providerView, docs: { errors }, summary: 'One SSO provider',
      handler: ({ actor, params }) => providers.get(actor, params.id),
    }),
    defineRoute({
      method: 'PATCH', path: '/admin/sso/providers/:id', tags, auth: PROVIDER_PERMISSIONS.update, params: idParams, body: updateProviderInput, response: providerView, docs: { errors: [403, 404, 409] },
      summary: 'Change a provider; a client_secret given replaces the stored one',
      handler: ({ actor, params, body }) => providers.update(actor, params.id, body),
    }),
    defineRoute({
      method: 'DELETE', path: '/admin/sso/providers/:id', tags, auth: PROVIDER_PERMISSIONS.remove, params: idParams, status: 204, docs: { errors },
      summary: 'Remove a provider: its sign-in stops, and the tokens its sign-ins issued stop working',
      handler: async ({ actor, params }) => {
        await providers.remove(actor, params.id);
      },
    }),
    defineRoute({
      method: 'GET', path: '/auth/sso/:tenant/providers', tags, auth: PROVIDER_PERMISSIONS.publicList, params: tenantParams, response: publicProviders,
      summary: "A tenant's providers for its sign-in screen: names and sign-in paths only (an unknown tenant has none)",
      handler: ({ params }) => providers.publicList(params.tenant),
    }),
    defineRoute({
      method: 'GET', path: '/auth/sso/:tenant/:provider/login', tags, auth: SIGN_IN_PERMISSIONS.start, params: loginParams, query: loginQuery, docs: { errors: [404], mediaTypes: ['text/plain'] },
      summary: "Start signing in through the tenant's provider: a redirect (302) to it, with PKCE, state and nonce",
      handler: async ({ params, query, ctx }) => {
        ctx.redirect(await signIn.start(params.tenant, params.provider, query.return_to, `${ctx.protocol}://${ctx.host}`));
      },
    }),
    defineRoute({
      method: 'GET', path: '/auth/sso/:tenant/:provider/callback', tags, auth: SIGN_IN_PERMISSIONS.callback, params: loginParams, query: callbackQuery, response: tokenResponse, docs: { errors: [401, 403, 503] },
      summary: "The provider's redirect back: verifies the ID token and answers a bearer token (or, for a console sign-in, a redirect to the console)",
      description: 'Refusals name their reason in details.reason: state_unknown (replayed or expired), provider_error, id_token_invalid, nonce_mismatch, token_expired, audience_mismatch, issuer_mismatch (401); email_missing, email_unverified, domain_not_allowed, not_granted, no_account, user_disabled (403).',
      handler: async ({ params, ctx }) => {
        const result = await signIn.callback(params.tenant, params.provider, new URL(ctx.href), ctx.ip || null);
        if (result.kind === 'token') return result.token;
        ctx.redirect(result.location);
        return undefined;
      },
    }),
    defineRoute({
      method: 'POST', path: '/auth/sso/exchange', tags, auth: SIGN_IN_PERMISSIONS.exchange, body: exchangeBody, response: tokenResponse, docs: { errors: [401] },
      summary: 'The console\'s hand-over: the one-time code of a console sign-in (valid one minute) for a bearer token',
      handler: ({ body }) => signIn.exchange(body.code),
    }),
  ];
}
