/** `POST <path>/{id}/publish` and `POST <path>/{id}/unpublish` of a resource with drafts. */
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../../../core/http/route.ts';
import { etagOf } from '../../../lib/etag.ts';
import { RESOURCE_PERMISSIONS, type ResourceService } from '../service.ts';
import { responseSchemas } from '../output.ts';
import { publishDraft, unpublish } from './service.ts';

const documentPath = z.object({ id: z.string().describe('24-character hex object id') });
const ifMatch = { 'If-Match': { description: 'ETag of the revision being published or withdrawn (from GET)', required: true } };

/** The publishing routes of `svc` (none without `drafts`). */
export function draftRoutes(svc: ResourceService): RouteDef[] {
  const { def } = svc;
  if (!def.drafts || !def.operations.has('update')) return [];
  const common = { tags: [def.name], features: def.guards.features, params: documentPath, response: responseSchemas(def).document };
  return [
    defineRoute({
      ...common, method: 'POST', path: `${def.path}/:id/publish`, auth: RESOURCE_PERMISSIONS.publish,
      summary: `Publish the pending draft of a document of ${def.name} (read_drafts and publish permissions)`,
      docs: { headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [403, 404, 409, 412, 428] },
      async handler({ actor, params, ctx }) {
        const doc = await publishDraft(svc, actor, params.id, ctx.get('If-Match'));
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      },
    }),
    defineRoute({
      ...common, method: 'POST', path: `${def.path}/:id/unpublish`, auth: RESOURCE_PERMISSIONS.unpublish,
      summary: `Withdraw a published document of ${def.name}: readers without read_drafts get 404 until it is published again`,
      docs: { headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [403, 404, 409, 412, 428] },
      async handler({ actor, params, ctx }) {
        const doc = await unpublish(svc, actor, params.id, ctx.get('If-Match'));
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      },
    }),
  ];
}
