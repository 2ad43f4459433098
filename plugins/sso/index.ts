import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { ssoModels } from './model.ts';
import { SecretBox } from './crypto.ts';
import { ProviderService } from './providers.ts';
import { SignInService, SSO_CREDENTIAL_KIND, type IdentityPort } from './service.ts';
import { ssoRoutes } from './routes.ts';
import { ssoGraphql } from './graphql.ts';
import { ssoEventTypes } from './schemas.ts';

export { SSO_CREDENTIAL_KIND, SignInRefusedError, type RefusalReason } from './service.ts';

/** Options of the SSO plugin: `ssoPlugin.configure({ ... })`. */
export const ssoOptions = z.object({
  /** Where a console sign-in ends (the console's page), with `#sso_code=` for its hand-over. @default /admin */
  console_path: z.string().startsWith('/').default('/admin'),
});

/**
 * Single sign-on with OpenID Connect, per tenant: administrators configure their providers; people
 * sign in with the authorization code flow (PKCE, state, nonce; openid-client verifies the ID
 * token) and get the same bearer token as any other sign-in, bound to their link to the provider.
 */
export const ssoPlugin = definePlugin({
  name: 'sso',
  options: ssoOptions,
  setup({ db, config, options, services, tenancy, log }) {
    const identity = services.get('identity');
    const events = services.get('events');
    const models = ssoModels(db);
    const development = config.NODE_ENV === 'development';
    const providers = new ProviderService({
      models, events, tenancy, box: new SecretBox(config.TOKEN_SECRET), development,
      unknownRoles: (tenantId, roles) => identity.unknownRoles(tenantId, roles),
    });
    const signIn = new SignInService({ models, providers, identity: identity as unknown as IdentityPort, events, log, development, consolePath: options.console_path });
    events.addSource(providers.source);
    events.addSource(signIn.source);
    identity.registerCredentialKind(SSO_CREDENTIAL_KIND, (id) => signIn.resolveCredential(id));
    return {
      routes: ssoRoutes(providers, signIn),
      graphql: (builder) => ssoGraphql(builder, providers, signIn),
      eventTypes: ssoEventTypes(),
    };
  },
});

export default ssoPlugin;
