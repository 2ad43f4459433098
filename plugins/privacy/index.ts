import { z } from 'zod';
import { definePlugin, type JobDefinition } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { idParams, objectId } from '../../core/http/schemas.ts';
import { privacyModels } from './model.ts';
import {
  consentPageResponse, consentResponse, consentsQuery, erasureBody, erasureListQuery, erasurePageResponse, erasureResponse, exportResponse, grantBody, userParams,
} from './schemas.ts';
import { ERASURE_JOB, PrivacyService } from './service.ts';
import { privacyGraphql } from './graphql.ts';

export { ERASURE_JOB, auditActorOf } from './service.ts';
export type { PrivacyService } from './service.ts';

declare module '../../core/services.ts' {
  interface Services {
    privacy: PrivacyService;
  }
}

const erasureJobParams = z.object({ request_id: objectId.describe('The erasure request to execute') });

/**
 * Privacy (GDPR): consents, the right of access (`/privacy/users/{id}/export`) and the erasure
 * flow (spec document 2, audit rule 3), driven by the personal-data declarations every plugin
 * contributes (`personalData`). Uses the audit and jobs plugins when they are enabled.
 * See docs/privacy.md.
 */
export const privacyPlugin = definePlugin({
  name: 'privacy',
  setup({ db, config, services, kernel, log }) {
    const svc = new PrivacyService(privacyModels(db), {
      db,
      identity: services.get('identity'),
      audit: () => services.maybe('audit'),
      jobs: () => services.maybe('jobs'),
      declarations: () => kernel.personalData(),
      log,
      settings: {
        pseudonym: config.PRIVACY_PSEUDONYM,
        emailDomain: config.PRIVACY_ERASED_EMAIL_DOMAIN,
        leaseMs: config.PRIVACY_ERASURE_LEASE_SECONDS * 1000,
        purposes: config.PRIVACY_CONSENT_PURPOSES,
      },
    });
    services.provide('privacy', svc);
    const tags = ['privacy'];

    const erasureJob: JobDefinition<typeof erasureJobParams> = {
      name: ERASURE_JOB,
      description: 'Execute a privacy erasure request (depersonalize, revoke consents, disable the account); resumes a crashed execution',
      timeout: 3600,
      params: erasureJobParams,
      async run(ctx, params) {
        ctx.log(`executing erasure request ${params.request_id}`);
        const r = await svc.runErasure(ctx.actor, params.request_id, { progress: ctx.progress, signal: ctx.signal });
        ctx.log(`erasure request ${r.id}: ${r.status}`);
        return { request_id: r.id, status: r.status, result: r.result };
      },
    };

    return {
      // Every declaration must name a model that exists, or erasure would silently miss data.
      ready: () => svc.checkDeclarations(),
      jobs: [erasureJob as unknown as JobDefinition],
      routes: [
        defineRoute({
          method: 'GET', path: '/privacy/consents', tags, summary: "The caller's consents; administrators may name a user of their tenant",
          query: consentsQuery, response: consentPageResponse,
          handler: ({ user, query }) => svc.listConsents(user!, query),
        }),
        defineRoute({
          method: 'POST', path: '/privacy/consents', tags, status: 201,
          summary: "Grant the caller's consent to a purpose (201; 200 with the active consent when already granted)",
          body: grantBody, response: consentResponse,
          handler: async ({ user, body, ctx }) => {
            const res = await svc.grantConsent(user!, body, 'api');
            ctx.status = res.created ? 201 : 200;
            ctx.body = res.consent;
          },
        }),
        defineRoute({
          method: 'DELETE', path: '/privacy/consents/:id', tags, summary: "Revoke one of the caller's consents (idempotent); returns it",
          params: idParams, response: consentResponse,
          handler: ({ user, params }) => svc.revokeConsent(user!, params.id),
        }),
        defineRoute({
          method: 'GET', path: '/privacy/users/:user_id/export', tags,
          summary: "Every document linked to a user, their consents and account, as one JSON download (the user or an administrator of the user's tenant)",
          params: userParams, response: exportResponse,
          docs: { responseHeaders: { 'Content-Disposition': 'attachment; filename="personal-data-<user id>-<timestamp>.json"' } },
          handler: async ({ user, params, ctx }) => {
            const out = await svc.exportData(user!, params.user_id);
            ctx.set('Content-Disposition', `attachment; filename="${out.filename}"`);
            ctx.body = out.stream;
            ctx.type = out.contentType;
          },
        }),
        defineRoute({
          method: 'POST', path: '/privacy/erasure-requests', tags, auth: 'admin', status: 201,
          summary: 'Request the erasure of a user of your tenant; the answer previews what execution will change',
          body: erasureBody, response: erasureResponse,
          handler: ({ user, body }) => svc.createErasure(user!, body.user_id),
        }),
        defineRoute({
          method: 'GET', path: '/privacy/erasure-requests', tags, auth: 'admin', summary: "Erasure requests of the caller's tenant",
          query: erasureListQuery, response: erasurePageResponse,
          handler: ({ user, query }) => svc.listErasures(user!, query),
        }),
        defineRoute({
          method: 'GET', path: '/privacy/erasure-requests/:id', tags, auth: 'admin', summary: 'One erasure request',
          params: idParams, response: erasureResponse,
          handler: ({ user, params }) => svc.getErasure(user!, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/privacy/erasure-requests/:id/execute', tags, auth: 'admin',
          summary: 'Execute an erasure request: 200 with the finished request (inline, or already completed), 202 when queued as a job',
          params: idParams, response: erasureResponse, docs: { errors: [409] },
          handler: async ({ user, params, ctx }) => {
            const res = await svc.executeErasure(user!, params.id);
            ctx.status = res.queued ? 202 : 200;
            ctx.body = res.request;
          },
        }),
      ],
      graphql: (builder) => privacyGraphql(builder, svc),
    };
  },
});

export default privacyPlugin;
