import type { Builder } from '../../core/graphql.ts';
import { pageObject, parseInput, givenArgs, scopes } from '../../core/graphql.ts';
import { idParams } from '../../core/http/schemas.ts';
import type { ConsentView, ErasureRequestView } from './model.ts';
import { ERASURE_PERMISSIONS, type ErasureExecution } from './erasure.ts';
import { CONSENT_PERMISSIONS } from './consents.ts';
import { EXPORT_PERMISSIONS } from './export.ts';
import { consentsQuery, erasureBody, erasureListQuery, grantBody, userParams } from './schemas.ts';
import type { PrivacyService } from './service.ts';

/**
 * GraphQL fragment: `consents`, `erasureRequests`, `erasureRequest`, `personalDataExport`; mutations
 * `grantConsent`, `revokeConsent`, `requestErasure`, `executeErasure`. Same service and rules as REST.
 */
export function privacyGraphql(builder: Builder, { consents, erasures, exports }: PrivacyService): void {
  const Export = builder.objectRef<{ filename: string; data: unknown }>('PersonalDataExport');
  Export.implement({
    description: 'Everything held about a user, as GET /privacy/users/{user_id}/export answers it',
    fields: (t) => ({
      filename: t.exposeString('filename', { nullable: false, description: 'The name REST gives the download' }),
      data: t.field({ type: 'JSON', nullable: false, resolve: (e) => e.data }),
    }),
  });
  const Consent = builder.objectRef<ConsentView>('Consent');
  Consent.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      user_id: t.exposeString('user_id', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      purpose: t.exposeString('purpose', { nullable: false }),
      granted_at: t.expose('granted_at', { type: 'DateTime', nullable: false }),
      revoked_at: t.expose('revoked_at', { type: 'DateTime' }),
      source: t.exposeString('source', { nullable: false }),
      active: t.exposeBoolean('active', { nullable: false }),
    }),
  });
  const ConsentPage = pageObject(builder, 'ConsentPage', Consent);
  type Count = ErasureRequestView['preview']['collections'][number];
  const CollectionCount = builder.objectRef<Count>('ErasureCollectionCount');
  CollectionCount.implement({
    fields: (t) => ({
      name: t.exposeString('name', { nullable: false }),
      action: t.exposeString('action', { nullable: false }),
      count: t.exposeInt('count', { nullable: false }),
      fields: t.exposeStringList('fields', { nullable: false }),
    }),
  });
  const Preview = builder.objectRef<ErasureRequestView['preview']>('ErasurePreview');
  Preview.implement({
    fields: (t) => ({
      collections: t.expose('collections', { type: [CollectionCount], nullable: false }),
      consents: t.exposeInt('consents', { nullable: false }),
      api_keys: t.exposeInt('api_keys', { nullable: false }),
      account: t.exposeBoolean('account', { nullable: false }),
    }),
  });
  const Result = builder.objectRef<NonNullable<ErasureRequestView['result']>>('ErasureResult');
  Result.implement({
    fields: (t) => ({
      documents_depersonalized: t.exposeInt('documents_depersonalized', { nullable: false }),
      documents_deleted: t.exposeInt('documents_deleted', { nullable: false }),
      consents_revoked: t.exposeInt('consents_revoked', { nullable: false }),
      api_keys_revoked: t.exposeInt('api_keys_revoked', { nullable: false }),
      account_disabled: t.exposeBoolean('account_disabled', { nullable: false }),
      audit_entries_scrubbed: t.exposeInt('audit_entries_scrubbed', { nullable: false }),
    }),
  });
  const Request = builder.objectRef<ErasureRequestView>('ErasureRequest');
  Request.implement({
    fields: (t) => ({
      id: t.exposeID('id', { nullable: false }),
      tenant_id: t.exposeString('tenant_id', { nullable: false }),
      user_id: t.exposeString('user_id', { nullable: false }),
      requested_by: t.exposeString('requested_by'),
      status: t.exposeString('status', { nullable: false }),
      preview: t.expose('preview', { type: Preview, nullable: false }),
      result: t.expose('result', { type: Result }),
      error: t.exposeString('error'),
      attempts: t.exposeInt('attempts', { nullable: false }),
      job_run_id: t.exposeString('job_run_id'),
      created_at: t.expose('created_at', { type: 'DateTime', nullable: false }),
      started_at: t.expose('started_at', { type: 'DateTime' }),
      completed_at: t.expose('completed_at', { type: 'DateTime' }),
    }),
  });
  const RequestPage = pageObject(builder, 'ErasureRequestPage', Request);
  const Execution = builder.objectRef<ErasureExecution>('ErasureExecution');
  Execution.implement({
    fields: (t) => ({
      request: t.expose('request', { type: Request, nullable: false }),
      queued: t.exposeBoolean('queued', { nullable: false }),
    }),
  });

  builder.queryFields((t) => ({
    consents: t.withAuth(scopes(CONSENT_PERMISSIONS.list)).field({
      type: ConsentPage, nullable: false, description: "The current user's consents (administrators: `user_id` of their tenant), as GET /privacy/consents",
      args: { user_id: t.arg.string(), purpose: t.arg.string(), active: t.arg.boolean(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => {
        const args = givenArgs(a);
        if (typeof args.active === 'boolean') args.active = String(args.active);
        return consents.list(ctx.actor, parseInput(consentsQuery, args));
      },
    }),
    erasureRequests: t.withAuth(scopes(ERASURE_PERMISSIONS.list)).field({
      type: RequestPage, nullable: false, description: 'Erasure requests of the caller\'s tenant (administrators), as GET /privacy/erasure-requests',
      args: { status: t.arg.string(), user_id: t.arg.string(), page: t.arg.int(), per_page: t.arg.int() },
      resolve: (_r, a, ctx) => erasures.list(ctx.actor, parseInput(erasureListQuery, givenArgs(a))),
    }),
    erasureRequest: t.withAuth(scopes(ERASURE_PERMISSIONS.get)).field({
      type: Request, nullable: false, description: 'One erasure request (administrators), as GET /privacy/erasure-requests/{id}',
      args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => erasures.get(ctx.actor, parseInput(idParams, a).id),
    }),
    personalDataExport: t.withAuth(scopes(EXPORT_PERMISSIONS.exportData)).field({
      type: Export, nullable: false,
      description: "A user's data export (the user, or an administrator of the user's tenant), as GET /privacy/users/{user_id}/export; read whole into memory, so REST suits very large exports better",
      args: { user_id: t.arg.string({ required: true }) },
      resolve: async (_r, a, ctx) => {
        const out = await exports.exportData(ctx.actor, parseInput(userParams, a).user_id, { origin: ctx.koa ? `${ctx.koa.protocol}://${ctx.koa.host}` : '' });
        const chunks: Buffer[] = [];
        for await (const c of out.stream) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(String(c)));
        return { filename: out.filename, data: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown };
      },
    }),
  }));
  builder.mutationFields((t) => ({
    grantConsent: t.withAuth(scopes(CONSENT_PERMISSIONS.grant)).field({
      type: Consent, nullable: false, description: "Grant the current user's consent to a purpose (idempotent while active)",
      args: { purpose: t.arg.string({ required: true }), source: t.arg.string() },
      resolve: async (_r, a, ctx) => (await consents.grant(ctx.actor, parseInput(grantBody, givenArgs(a)), 'graphql', ['args'])).consent,
    }),
    revokeConsent: t.withAuth(scopes(CONSENT_PERMISSIONS.revoke)).field({
      type: Consent, nullable: false, description: "Revoke one of the current user's consents (idempotent)",
      args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => consents.revoke(ctx.actor, parseInput(idParams, a).id),
    }),
    requestErasure: t.withAuth(scopes(ERASURE_PERMISSIONS.create)).field({
      type: Request, nullable: false, description: 'Create an erasure request with its preview (administrators)',
      args: { user_id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => erasures.create(ctx.actor, parseInput(erasureBody, a).user_id),
    }),
    executeErasure: t.withAuth(scopes(ERASURE_PERMISSIONS.execute)).field({
      type: Execution, nullable: false, description: 'Execute an erasure request: as a job when the jobs plugin is enabled (queued), inline otherwise',
      args: { id: t.arg.string({ required: true }) },
      resolve: (_r, a, ctx) => erasures.execute(ctx.actor, parseInput(idParams, a).id),
    }),
  }));
}
