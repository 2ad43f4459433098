import { z } from 'zod';
import { defineRoute, type RouteDef } from '../../../core/http/route.ts';
import { etagOf } from '../../../lib/etag.ts';
import { responseSchemas } from '../output.ts';
import { RESOURCE_PERMISSIONS, type ResourceService } from '../service.ts';
import type { Versions } from './service.ts';

const versionEntry = z
  .object({
    version: z.number().int(),
    operation: z.enum(['created', 'updated', 'deleted', 'restored', 'draft_saved', 'published', 'unpublished']),
    created_at: z.date(),
    actor: z.string().nullable().describe('User id of whoever made the write; null for the system'),
    request_id: z.string().nullable(),
    changed_fields: z.array(z.string()).describe('The fields the write changed (those the caller may read)'),
    restored_from: z.number().int().nullable().describe('The version this write restored, if it was a restore'),
  })
  .meta({ id: 'ResourceVersionEntry' });

/** `GET …/versions`: a page by version number, newest first. */
export const historyQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(25).describe('Versions per page (1–100)'),
  before: z.coerce.number().int().min(1).optional().describe('Only versions numbered below this one: the previous page\'s next_before'),
});

const historyPage = z
  .object({
    items: z.array(versionEntry),
    next_before: z.number().int().nullable().describe('Pass as before for the next (older) page; null when no older version is kept'),
  })
  .meta({ id: 'ResourceVersionPage' });

const versionDiff = z
  .object({
    version: z.number().int(),
    against: z.number().int().nullable().describe('The version compared against; null when there is none before'),
    changes: z.array(z.object({ field: z.string(), before: z.unknown(), after: z.unknown() })),
  })
  .meta({ id: 'ResourceVersionDiff' });

/** Any string: a malformed id or number is a 404 like an unknown one (the service decides). */
const versionPath = z.object({ id: z.string().describe('24-character hex object id'), n: z.string().describe('Version number') });
const params = (p: unknown) => {
  const { id, n } = p as { id: string; n?: string };
  return { id, n: n !== undefined && /^\d{1,15}$/.test(n) ? Number(n) : 0 };
};
/** `<Type>Version`, built once per definition (a schema id is registered once). */
const viewSchemas = new WeakMap<object, z.ZodType>();
const viewSchema = (svc: ResourceService): z.ZodType => {
  let s = viewSchemas.get(svc.def);
  if (!s) viewSchemas.set(svc.def, (s = versionEntry.extend({ document: responseSchemas(svc.def).document }).meta({ id: `${svc.def.graphqlName}Version` })));
  return s;
};
const ifMatch = { 'If-Match': { description: 'ETag of the current revision (from GET)', required: true } };

/** The history routes of a versioned resource: `<path>/{id}/versions`, one version, a diff, a restore. */
export function versionRoutes(svc: ResourceService, versions: Versions): RouteDef[] {
  const { def } = svc;
  if (!def.versions) return [];
  const tags = [def.name];
  const features = def.guards.features;
  const base = `${def.path}/:id/versions`;
  const document = responseSchemas(def).document;
  return [
    defineRoute({
      method: 'GET', path: base, auth: RESOURCE_PERMISSIONS.history, tags, features, summary: `History of a document of ${def.name}, newest first, without the documents`,
      params: z.object({ id: z.string().describe('24-character hex object id') }), query: historyQuery, response: historyPage,
      docs: { errors: [404] },
      handler: async ({ actor, params: p, query }) => versions.history(svc, actor, params(p).id, query),
    }),
    defineRoute({
      method: 'GET', path: `${base}/:n`, auth: RESOURCE_PERMISSIONS.version, tags, features, summary: `One version of a document of ${def.name}: the document as it was, masked by the caller's read rules`,
      params: versionPath, response: viewSchema(svc), docs: { errors: [404] },
      handler: async ({ actor, params: p }) => versions.at(svc, actor, params(p).id, params(p).n),
    }),
    defineRoute({
      method: 'GET', path: `${base}/:n/diff`, auth: RESOURCE_PERMISSIONS.diff, tags, features, summary: `Field-by-field changes between two versions of a document of ${def.name}`,
      params: versionPath, query: z.object({ against: z.coerce.number().int().min(1).optional().describe('The version to compare with (default: the one before)') }),
      response: versionDiff, docs: { errors: [404] },
      handler: async ({ actor, params: p, query }) => versions.diff(svc, actor, params(p).id, params(p).n, query.against),
    }),
    defineRoute({
      method: 'POST', path: `${base}/:n/restore`, auth: RESOURCE_PERMISSIONS.restoreVersion, tags, features, summary: `Write a version's fields back as a new version of a document of ${def.name}`,
      params: versionPath, response: document,
      docs: { headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [404, 409, 412, 422, 428] },
      async handler({ actor, params: p, ctx }) {
        const doc = await versions.restore(svc, actor, params(p).id, params(p).n, ctx.get('If-Match'));
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      },
    }),
  ];
}
