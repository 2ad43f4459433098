import { definePlugin, type JobDefinition } from '../../core/plugin.ts';
import { AccessDeniedError } from '../../core/errors.ts';
import { defineRoute } from '../../core/http/route.ts';
import { idParams } from '../../core/http/schemas.ts';
import { privacyModels } from './model.ts';
import {
  consentPageResponse, consentResponse, consentsQuery, erasureBody, erasureJobParams, erasureListQuery, erasurePageResponse, erasureResponse, exportResponse, grantBody, userParams,
} from './schemas.ts';
import { PrivacyService } from './service.ts';
import { ERASURE_JOB, ERASURE_PERMISSIONS } from './erasure.ts';
import { CONSENT_PERMISSIONS } from './consents.ts';
import { EXPORT_PERMISSIONS } from './export.ts';
import { privacyEventTypes } from './events.ts';
import { privacyGraphql } from './graphql.ts';

export { ERASURE_JOB } from './erasure.ts';
export { auditActorOf } from './erasure-run.ts';
export type { PrivacyService } from './service.ts';

declare module '../../core/services.ts' {
  interface Services {
    privacy: PrivacyService;
  }
}

/**
 * Privacy (GDPR): consents, the right of access (`/privacy/users/{id}/export`) and erasure
 * requests that depersonalize or delete everything declared about a person, driven by the
 * personal-data declarations every plugin contributes (`personalData`). Uses the audit and jobs
 * plugins when they are enabled. See docs/privacy.md.
 */
export const privacyPlugin = definePlugin({
  name: 'privacy',
  setup({ db, config, services, kernel, log, tenancy }) {
    const svc = new PrivacyService(privacyModels(db), {
      db,
      identity: services.get('identity'),
      events: services.get('events'),
      tenancy,
      audit: () => services.maybe('audit'),
      jobs: () => services.maybe('jobs'),
      declarations: () => kernel.personalData(),
      // A declaration named after a resource is read under the actor's access rules.
      readAccess: async (actor, name) => {
        const access = services.maybe('access');
        if (!access || !services.maybe('resources')?.get(name)) return null;
        try {
          return await access.read(actor, name);
        } catch (err) {
          if (err instanceof AccessDeniedError) return false;
          throw err;
        }
      },
      log,
      settings: {
        pseudonym: config.PRIVACY_PSEUDONYM,
        emailDomain: config.PRIVACY_ERASED_EMAIL_DOMAIN,
        leaseMs: config.PRIVACY_ERASURE_LEASE_SECONDS * 1000,
        purposes: config.PRIVACY_CONSENT_PURPOSES,
      },
    });
    services.provide('privacy', svc);
    for (const source of svc.sources) services.get('events').addSource(source);
    const { consents, exports, erasures } = svc;
    const tags = ['privacy'];

    const erasureJob: JobDefinition<typeof erasureJobParams> = {
      name: ERASURE_JOB,
      description: 'Execute a privacy erasure request (depersonalize, revoke consents, disable the account); resumes a crashed execution',
      timeout: 3600,
      params: erasureJobParams,
      async run(ctx, params) {
        ctx.log(`executing erasure request ${params.request_id}`);
        const r = await erasures.run(ctx.actor, params.request_id, { progress: ctx.progress, signal: ctx.signal });
        ctx.log(`erasure request ${r.id}: ${r.status}`);
        return { request_id: r.id, status: r.status, result: r.result };
      },
    };

    return {
      // Every declaration must name a model that exists, or erasure would silently miss data.
      ready: () => svc.checkDeclarations(),
      jobs: [erasureJob],
      eventTypes: privacyEventTypes,
      routes: [
        defineRoute({
          method: 'GET', path: '/privacy/consents', auth: CONSENT_PERMISSIONS.list, tags, summary: "The caller's consents; administrators may name a user of their tenant",
          query: consentsQuery, response: consentPageResponse,
          handler: ({ actor: actor, query }) => consents.list(actor, query),
        }),
        defineRoute({
          method: 'POST', path: '/privacy/consents', auth: CONSENT_PERMISSIONS.grant, tags, status: 201,
          summary: "Grant the caller's consent to a purpose (201; 200 with the active consent when already granted)",
          body: grantBody, response: consentResponse,
          handler: async ({ actor: actor, body, ctx }) => {
            const res = await consents.grant(actor, body, 'api');
            ctx.status = res.created ? 201 : 200;
            ctx.body = res.consent;
          },
        }),
        defineRoute({
          method: 'DELETE', path: '/privacy/consents/:id', auth: CONSENT_PERMISSIONS.revoke, tags, summary: "Revoke one of the caller's consents (idempotent); returns it",
          params: idParams, response: consentResponse,
          handler: ({ actor: actor, params }) => consents.revoke(actor, params.id),
        }),
        defineRoute({
          method: 'GET', path: '/privacy/users/:user_id/export', auth: EXPORT_PERMISSIONS.exportData, tags,
          summary: "Every document linked to a user, their consents and account, as one JSON download (the user or an administrator of the user's tenant)",
          params: userParams, response: exportResponse,
          docs: { responseHeaders: { 'Content-Disposition': 'attachment; filename="personal-data-<user id>-<timestamp>.json"' } },
          handler: async ({ actor: actor, params, ctx }) => {
            const out = await exports.exportData(actor, params.user_id, { origin: `${ctx.protocol}://${ctx.host}` });
            ctx.set('Content-Disposition', `attachment; filename="${out.filename}"`);
            ctx.body = out.stream;
            ctx.type = out.contentType;
          },
        }),
        defineRoute({
          method: 'POST', path: '/privacy/erasure-requests', tags, auth: ERASURE_PERMISSIONS.create, status: 201,
          summary: 'Request the erasure of a user of your tenant; the answer previews what execution will change',
          body: erasureBody, response: erasureResponse,
          handler: ({ actor: actor, body }) => erasures.create(actor, body.user_id),
        }),
        defineRoute({
          method: 'GET', path: '/privacy/erasure-requests', tags, auth: ERASURE_PERMISSIONS.list, summary: "Erasure requests of the caller's tenant",
          query: erasureListQuery, response: erasurePageResponse,
          handler: ({ actor: actor, query }) => erasures.list(actor, query),
        }),
        defineRoute({
          method: 'GET', path: '/privacy/erasure-requests/:id', tags, auth: ERASURE_PERMISSIONS.get, summary: 'One erasure request',
          params: idParams, response: erasureResponse,
          handler: ({ actor: actor, params }) => erasures.get(actor, params.id),
        }),
        defineRoute({
          method: 'POST', path: '/privacy/erasure-requests/:id/execute', tags, auth: ERASURE_PERMISSIONS.execute,
          summary: 'Execute an erasure request: 200 with the finished request (inline, or already completed), 202 when queued as a job',
          params: idParams, response: erasureResponse, docs: { errors: [409] },
          handler: async ({ actor: actor, params, ctx }) => {
            const res = await erasures.execute(actor, params.id);
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
