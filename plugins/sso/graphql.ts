/**
 * The GraphQL fragment of SSO: `ssoProviders`, `ssoProvider`, `createSsoProvider`,
 * `updateSsoProvider`, `deleteSsoProvider` (administrators), and for the console's sign-in screen
 * `ssoSignInOptions` and `exchangeSsoCode` (public). The same services and zod schemas as REST.
 */
import type { Builder } from '../../core/graphql.ts';
import { givenArgs, pageObject, parseInput, scopes } from '../../core/graphql.ts';
import { idParams } from '../../core/http/schemas.ts';
import { PROVIDER_PERMISSIONS, type ProviderService } from './providers.ts';
import { SIGN_IN_PERMISSIONS, type SignInService } from './service.ts';
import { createProviderInput, exchangeBody, providerListQuery, tenantParams, updateProviderInput, type ProviderView } from './schemas.ts';

export function ssoGraphql(builder: Builder, svc: ProviderService, signIn: SignInService): void {
  const Provider = builder.objectRef<ProviderView>('SsoProvider');
  Provider.implement({
    description: 'An OpenID Connect provider of the tenant (its client secret is never shown)',
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      name: t.exposeString('name', { nullable: false }),
      issuer: t.exposeString('issuer', { nullable: false }),
      client_id: t.exposeString('client_id', { nullable: false }),
      allowed_domains: t.exposeStringList('allowed_domains', { nullable: false }),
      role_mapping: t.expose('role_mapping', { type: 'JSON', nullable: false, description: 'Group → roles granted' }),
      groups_claim: t.exposeString('groups_claim', { nullable: false }),
      scopes: t.exposeStringList('scopes', { nullable: false }),
      jit: t.exposeBoolean('jit', { nullable: false }),
      login_url: t.exposeString('login_url', { nullable: false }),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
      updated_at: t.expose('updated_at', { type: 'DateTime', nullable: false }),
    }),
  });
  const Page = pageObject(builder, 'SsoProviderPage', Provider);
  const Option = builder.objectRef<{ name: string; login_url: string }>('SsoSignInOption');
  Option.implement({
    description: 'A provider on a tenant\'s sign-in screen',
    fields: (t) => ({ name: t.exposeString('name', { nullable: false }), login_url: t.exposeString('login_url', { nullable: false }) }),
  });
  const id = (a: { id: string | number }) => parseInput(idParams, { id: String(a.id) }).id;
  const fields = (t: Parameters<Parameters<Builder['mutationFields']>[0]>[0]) => ({
    name: t.arg.string(), issuer: t.arg.string(), client_id: t.arg.string(), client_secret: t.arg.string(),
    allowed_domains: t.arg.stringList(), role_mapping: t.arg({ type: 'JSON' }), groups_claim: t.arg.string(), scopes: t.arg.stringList(), jit: t.arg.boolean(),
  });

  builder.queryFields((t) => ({
    ssoSignInOptions: t.withAuth(scopes(PROVIDER_PERMISSIONS.publicList)).field({
      type: [Option], nullable: false, description: "A tenant's providers for its sign-in screen, names and sign-in paths only (no credential needed; as GET /auth/sso/{tenant}/providers)",
      args: { tenant_id: t.arg.id({ required: true }) },
      resolve: (_r, a) => svc.publicList(parseInput(tenantParams, { tenant: String(a.tenant_id) }).tenant),
    }),
    ssoProviders: t.withAuth(scopes(PROVIDER_PERMISSIONS.list)).field({
      type: Page, nullable: false, description: "The tenant's SSO providers, as GET /admin/sso/providers (administrators)",
      args: { page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => svc.list(ctx.actor, parseInput(providerListQuery, givenArgs(a))),
    }),
    ssoProvider: t.withAuth(scopes(PROVIDER_PERMISSIONS.get)).field({
      type: Provider, nullable: false, description: 'One SSO provider of the tenant',
      args: { id: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => svc.get(ctx.actor, id(a)),
    }),
  }));
  builder.mutationFields((t) => ({
    exchangeSsoCode: t.withAuth(scopes(SIGN_IN_PERMISSIONS.exchange)).field({
      type: 'TokenResponse' as never, nullable: false,
      description: "The console's hand-over after a single sign-on: the one-time code (valid a minute) for a bearer token (as POST /auth/sso/exchange)",
      args: { code: t.arg.string({ required: true }) },
      resolve: (_r, a) => signIn.exchange(parseInput(exchangeBody, a).code) as never,
    }),
    createSsoProvider: t.withAuth(scopes(PROVIDER_PERMISSIONS.create)).field({
      type: Provider, nullable: false, description: 'Configure an OpenID Connect provider (the secret is stored encrypted, never returned)',
      args: fields(t),
      resolve: (_r, a, ctx) => svc.create(ctx.actor, parseInput(createProviderInput, givenArgs(a))),
    }),
    updateSsoProvider: t.withAuth(scopes(PROVIDER_PERMISSIONS.update)).field({
      type: Provider, nullable: false, description: 'Change a provider; a client_secret given replaces the stored one',
      args: { id: t.arg.id({ required: true }), ...fields(t) },
      resolve: (_r, { id: raw, ...a }, ctx) => svc.update(ctx.actor, id({ id: raw }), parseInput(updateProviderInput, givenArgs(a))),
    }),
    deleteSsoProvider: t.withAuth(scopes(PROVIDER_PERMISSIONS.remove)).field({
      type: 'Boolean', nullable: false, description: 'Remove a provider: its sign-in stops and the tokens it issued stop working',
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_r, a, ctx) => {
        await svc.remove(ctx.actor, id(a));
        return true;
      },
    }),
  }));
}
