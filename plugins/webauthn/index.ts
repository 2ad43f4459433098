import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import type { AppState } from '../../core/http/middleware.ts';
import { webauthnModels } from './model.ts';
import { authenticateBody, authenticateOptionsBody, loginTenant, authenticationOptionsResponse, credentialParams, credentialResponse, registerBody, registrationOptionsResponse, tokenResponse } from './schemas.ts';
import { PASSKEY_CREDENTIAL_KIND, WEBAUTHN_PERMISSIONS, WebAuthnService, passkeyErrorCodes } from './service.ts';
import { webauthnGraphql } from './graphql.ts';
import { DEMO_CSP, DEMO_HTML } from './demo.ts';

export { PASSKEY_CLONE_DETECTED, PASSKEY_CREDENTIAL_KIND, WebAuthnService } from './service.ts';

/** Options of the webauthn plugin: `webauthnPlugin.configure({ ... })`. */
export const webauthnOptions = z.object({
  /** Option `timeout` sent to browsers, and the lifetime of a stored challenge (ms). @default 60000 */
  timeout_ms: z.number().int().min(1_000).max(600_000).default(60_000),
});

/**
 * Passkeys: WebAuthn registration for an authenticated user and passwordless login returning the
 * same bearer token as `POST /auth/token`, bound to the passkey. Options and verification by
 * @simplewebauthn/server; challenges in MongoDB (TTL), shared by replicas.
 */
export const webauthnPlugin = definePlugin({
  name: 'webauthn',
  options: webauthnOptions,
  setup({ db, config, options, services, tenancy, log }) {
    const identity = services.get('identity');
    const service = new WebAuthnService({
      models: webauthnModels(db),
      identity,
      memberships: services.get('memberships'),
      failures: services.get('authFailures'),
      tenancy,
      settings: {
        rpId: config.WEBAUTHN_RP_ID,
        rpName: config.WEBAUTHN_RP_NAME,
        origins: config.WEBAUTHN_ORIGIN,
        timeoutMs: options.timeout_ms,
        decoySecret: createHmac('sha256', config.TOKEN_SECRET).update('webauthn-decoy').digest('hex'),
      },
      log,
    });
    // A passkey is its person's: its tokens may act as any of the person's memberships.
    identity.registerCredentialKind(PASSKEY_CREDENTIAL_KIND, (id) => service.resolveCredential(id), { personal: true });
    const tags = ['passkeys'];
    const demo = config.WEBAUTHN_DEMO_ENABLED ?? config.NODE_ENV === 'development';

    return {
      errorCodes: passkeyErrorCodes,
      routes: [
        defineRoute({
          method: 'POST', path: '/auth/webauthn/register/options', auth: WEBAUTHN_PERMISSIONS.registerOptions, tags, summary: 'Start passkey registration: creation options with a fresh challenge', response: registrationOptionsResponse,
          handler: ({ actor }) => service.registerOptions(actor),
        }),
        defineRoute({
          method: 'POST', path: '/auth/webauthn/register', auth: WEBAUTHN_PERMISSIONS.register, tags, status: 201, summary: 'Finish passkey registration (attestation verified, format none)',
          body: registerBody, response: credentialResponse, docs: { errors: [422] },
          handler: ({ actor, body }) => service.register(actor, body),
        }),
        defineRoute({
          method: 'POST', path: '/auth/webauthn/authenticate/options', tags, auth: WEBAUTHN_PERMISSIONS.authenticateOptions, summary: 'Start passkey login: request options with a fresh challenge',
          body: authenticateOptionsBody, response: authenticationOptionsResponse,
          handler: ({ body }) => service.authenticateOptions(body.email),
        }),
        defineRoute({
          method: 'POST', path: '/auth/webauthn/authenticate', tags, auth: WEBAUTHN_PERMISSIONS.authenticate, summary: 'Finish passkey login: a bearer token bound to the passkey',
          body: authenticateBody, response: tokenResponse, docs: { errors: [400, 401, 409, 429] },
          handler: ({ body, ctx }) => service.authenticate(body, ctx.ip || null, (ctx.state as AppState).ctx.log, loginTenant(ctx.get('X-Tenant-Id'))),
        }),
        defineRoute({
          method: 'GET', path: '/auth/webauthn/credentials', auth: WEBAUTHN_PERMISSIONS.listOwn, tags, summary: "The caller's passkeys",
          response: z.array(credentialResponse),
          handler: ({ actor }) => service.listOwn(actor),
        }),
        defineRoute({
          method: 'DELETE', path: '/auth/webauthn/credentials/:credential_id', auth: WEBAUTHN_PERMISSIONS.deleteOwn, tags, status: 204, summary: 'Remove one of your passkeys',
          params: credentialParams, docs: { errors: [404] },
          handler: async ({ actor, params }) => {
            await service.deleteOwn(actor, params.credential_id);
          },
        }),
        ...(demo
          ? [
              defineRoute({
                method: 'GET', path: '/auth/webauthn/demo', tags, auth: 'public', summary: 'Passkey demo page (development)', docs: { mediaTypes: ['text/html'] },
                handler: ({ ctx }) => {
                  ctx.set('Content-Security-Policy', DEMO_CSP);
                  ctx.set('Cache-Control', 'no-store');
                  ctx.type = 'html';
                  ctx.body = DEMO_HTML;
                },
              }),
            ]
          : []),
      ],
      // A user cut off (disabled or deleted): a durable consumer of identity's events, so a crash
      // after the change still ends the passkeys (within EVENTS_POLL_INTERVAL_MS).
      eventConsumers: [{
        name: 'webauthn.user-cut-off',
        types: ['user.disabled', 'user.deleted'],
        handle: (e) => service.onUserDisabled({ user_id: String(e.data.id), reason: e.type === 'user.deleted' ? 'deleted' : 'disabled' }),
      }],
      graphql: (builder) => webauthnGraphql(builder, service),
      personalData: [
        {
          name: 'passkeys',
          model: 'WebAuthnCredential',
          subject_field: 'user_id',
          gdpr_fields: ['device_name'],
          on_erasure: 'delete',
          export_exclude: ['public_key', 'attestation_object'],
        },
      ],
    };
  },
});

export default webauthnPlugin;
