import type { Builder } from '../../core/graphql.ts';
import { parseInput, scopes } from '../../core/graphql.ts';
import type { CredentialView } from './model.ts';
import { authenticateBody, authenticateOptionsBody, credentialParams, loginTenant, registerBody, userPasskeysArgs } from './schemas.ts';
import type { AppState } from '../../core/http/middleware.ts';
import { WEBAUTHN_PERMISSIONS, type WebAuthnService } from './service.ts';

/**
 * GraphQL fragment: `Passkey`, `User.passkeys` (own ones on `me`; an administrator's view of users
 * in their tenant on `users`), `userPasskeys(user_id)` for administrators and `deletePasskey`.
 */
export function webauthnGraphql(builder: Builder, service: WebAuthnService): void {
  const Passkey = builder.objectRef<CredentialView>('Passkey');
  Passkey.implement({
    description: 'A registered passkey (WebAuthn credential); the public key is never exposed',
    fields: (t) => ({
      credential_id: t.exposeString('credential_id', { nullable: false }),
      device_name: t.exposeString('device_name', { nullable: false }),
      registered_at: t.expose('registered_at', { type: 'DateTime', nullable: false }),
      last_used_at: t.expose('last_used_at', { type: 'DateTime' }),
    }),
  });
  // `User` is the identity plugin's type; it is extended by name (plugins never import each other's refs).
  builder.objectField('User' as never, 'passkeys', (t) =>
    t.withAuth(scopes(WEBAUTHN_PERMISSIONS.passkeysOf)).field({
      type: [Passkey],
      nullable: false,
      description: "The user's passkeys: your own, or as an administrator those of users in your tenant",
      resolve: (parent, _a, ctx) => service.listForUser(ctx.actor, (parent as { id: string }).id),
    }),
  );
  builder.queryFields((t) => ({
    userPasskeys: t.withAuth(scopes(WEBAUTHN_PERMISSIONS.userPasskeys)).field({
      type: [Passkey],
      nullable: false,
      description: "Administrators: a user's passkeys (users of your own tenant only)",
      args: { user_id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => service.listForUser(ctx.actor, parseInput(userPasskeysArgs, a).user_id),
    }),
  }));
  builder.mutationFields((t) => ({
    passkeyRegistrationOptions: t.withAuth(scopes(WEBAUTHN_PERMISSIONS.registerOptions)).field({
      type: 'JSON', nullable: false,
      description: 'Start registering a passkey for yourself: creation options for navigator.credentials.create (as POST /auth/webauthn/register/options)',
      resolve: (_r, _a, ctx) => service.registerOptions(ctx.actor),
    }),
    registerPasskey: t.withAuth(scopes(WEBAUTHN_PERMISSIONS.register)).field({
      type: Passkey, nullable: false,
      description: 'Finish registering: credential_id, client_data_json, attestation_object (base64url), transports, device_name (as POST /auth/webauthn/register)',
      args: { input: t.arg({ type: 'JSON', required: true }) },
      resolve: (_r, a, ctx) => service.register(ctx.actor, parseInput(registerBody, a.input)),
    }),
    passkeyLoginOptions: t.withAuth(scopes(WEBAUTHN_PERMISSIONS.authenticateOptions)).field({
      type: 'JSON', nullable: false,
      description: 'Start a passkey login (no credential needed): request options for navigator.credentials.get (as POST /auth/webauthn/authenticate/options)',
      args: { email: t.arg.string({ required: true }) },
      resolve: (_r, a) => service.authenticateOptions(parseInput(authenticateOptionsBody, a).email),
    }),
    passkeyLogin: t.withAuth(scopes(WEBAUTHN_PERMISSIONS.authenticate)).field({
      type: 'TokenResponse' as never, nullable: false,
      description: 'Finish a passkey login: email, credential_id, client_data_json, authenticator_data, signature (base64url); a bearer token bound to the passkey (as POST /auth/webauthn/authenticate)',
      args: {
        input: t.arg({ type: 'JSON', required: true }),
        tenant_id: t.arg.string({ description: 'The tenant to act in, for a person with several memberships (as X-Tenant-Id; without it: TENANT_REQUIRED lists them)' }),
      },
      resolve: (_r, a, ctx) => service.authenticate(
        parseInput(authenticateBody, a.input), ctx.koa?.ip || null, (ctx.koa?.state as AppState | undefined)?.ctx.log,
        loginTenant(a.tenant_id ?? ctx.koa?.get('X-Tenant-Id')),
      ) as never,
    }),
    deletePasskey: t.withAuth(scopes(WEBAUTHN_PERMISSIONS.deleteOwn)).field({
      type: 'Boolean',
      nullable: false,
      description: 'Remove one of your own passkeys (true when done); tokens issued from it stop working',
      args: { credential_id: t.arg.string({ required: true }) },
      resolve: async (_r, a, ctx) => {
        await service.deleteOwn(ctx.actor, parseInput(credentialParams, a).credential_id);
        return true;
      },
    }),
  }));
}
