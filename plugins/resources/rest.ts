import { z } from 'zod';
import { AppError, ValidationError, type ValidationIssue } from '../../core/errors.ts';
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import { objectId } from '../../core/http/schemas.ts';
import { setPageHeaders } from '../../lib/page.ts';
import { etagOf } from '../../lib/etag.ts';
import type { Actor } from '../../core/context.ts';
import { RESOURCE_PERMISSIONS, type BulkItemError, type ResourceService } from './service.ts';
import type { Operation } from './define.ts';
import { getOneQuerySchema, listQuerySchema, type RawQuery } from './params.ts';
import { responseSchemas } from './output.ts';
import { draftOptionsOf } from './drafts/fields.ts';
import { getWithDraft, saveDraft } from './drafts/service.ts';

/** Any string: a malformed id is a 404 like an unknown one (the service decides), unlike core's `idParams` (422). */
const documentPath = z.object({ id: z.string().describe('24-character hex object id') });
/** Generated handlers go through `custom()`, which erases the param type; the route schema guarantees it. */
const idOf = (params: unknown) => (params as { id: string }).id;
/** As `idOf`, for the validated query (its schema's output is a query object). */
const queryOf = (query: unknown) => query as RawQuery;
/** The handler of a generated route: every one requires an authenticated actor. */
type UserHandler = RouteDef<z.ZodType | undefined, z.ZodType | undefined, z.ZodType | undefined, 'user'>['handler'];

const ifMatch = { 'If-Match': { description: 'ETag of the revision being changed (from GET)', required: true } };

const flatten = (errors: BulkItemError[]): ValidationIssue[] =>
  errors.flatMap((e) => {
    const nested = (e.error.details.errors as ValidationIssue[] | undefined) ?? [];
    return nested.length ? nested : [{ loc: ['body', e.index], msg: e.error.message, type: e.error.code.toLowerCase() }];
  });

/** PATCH or PUT: with `?draft=true` on a drafts resource a draft save, else an update that publishes. */
function writeOrDraft(svc: ResourceService, actor: Actor, id: string, ifMatch: string, body: unknown, replace: boolean, query: RawQuery) {
  const draft = svc.def.drafts ? draftOptionsOf(query) : null;
  return draft ? saveDraft(svc, actor, id, ifMatch, body, replace, draft) : svc.update(actor, id, ifMatch, body, replace);
}

/**
 * Create/update/replace bodies are validated by the service (as for GraphQL), after the feature
 * guard and the If-Match check; the route only documents them (`docs.body`).
 * The generated REST endpoints of one resource (bulk routes first so `/bulk` never reads as an id). */
export function resourceRoutes(svc: ResourceService): RouteDef[] {
  const { def } = svc;
  const tags = [def.name];
  // Checked by the kernel before input validation, so an actor without the feature learns nothing of the schema.
  const features = def.guards.features;
  const base = def.path;
  const custom = (op: Operation, fallback: UserHandler): UserHandler => def.handlers[op] ?? fallback;
  const routes: RouteDef[] = [];
  const schemas = responseSchemas(def);
  // A replaced handler answers what it likes: its route documents no body.
  const out = (op: Operation) => (def.handlers[op] ? {} : { response: schemas[op === 'list' ? 'list' : 'document'] });

  const offers = (op: Operation) => def.operations.has(op);
  if (def.allow_bulk_create && offers('create')) {
    routes.push(
      defineRoute({
        method: 'POST', path: `${base}/bulk`, auth: RESOURCE_PERMISSIONS.bulkCreate, tags, features, status: 201,
        summary: `Create up to ${def.max_bulk_size} documents in ${def.name}: 201 all created, 207 some, 422 none`, response: schemas.bulkCreate,
        body: z.object({ items: z.array(z.unknown()).min(1).max(def.max_bulk_size) }).strict(),
        docs: { errors: [422] },
        async handler({ actor, body, ctx }) {
          const res = await svc.bulkCreate(actor, body.items);
          if (res.created_count === 0) {
            // Every item failed the same non-validation way (e.g. all 403): keep that status and code.
            const codes = new Set(res.errors.map((e) => e.error.code));
            const first = res.errors[0]!.error;
            if (codes.size === 1 && first.code !== 'VALIDATION_ERROR') {
              throw new AppError(first.status, first.code, 'Every item of the bulk create was rejected', { errors: res.errors });
            }
            throw new ValidationError(flatten(res.errors), 'Every item of the bulk create was rejected');
          }
          if (!res.error_count) return res;
          ctx.status = 207;
          ctx.body = res;
          return undefined;
        },
      }),
    );
  }
  if (def.allow_bulk_delete && offers('delete')) {
    routes.push(
      defineRoute({
        method: 'DELETE', path: `${base}/bulk`, auth: RESOURCE_PERMISSIONS.bulkDelete, tags, features,
        summary: `Soft-delete up to ${def.max_bulk_size} documents in ${def.name}, each with its ETag: 200 all, 207 some, 409 none`, response: schemas.bulkDelete,
        body: z.object({ items: z.array(z.object({ id: objectId, etag: z.string().min(1) }).strict()).min(1).max(def.max_bulk_size) }).strict(),
        docs: { errors: [409] },
        async handler({ actor, body, ctx }) {
          const res = await svc.bulkDelete(actor, body.items);
          if (res.error_count) {
            ctx.status = 207;
            ctx.body = res;
            return undefined;
          }
          return res;
        },
      }),
    );
  }

  const generated: [Operation, RouteDef][] = [
    ['list', defineRoute({
      method: 'GET', path: base, auth: RESOURCE_PERMISSIONS.list, tags, features, summary: `List ${def.name} (offset or cursor mode)`, query: listQuerySchema, ...out('list'),
      docs: { responseHeaders: { 'X-Total-Count': 'Offset mode: matching rows', 'X-Page': 'Offset mode: page', 'X-Per-Page': 'Offset mode: page size', 'X-Total-Pages': 'Offset mode: pages' } },
      handler: custom('list', async ({ actor, query, ctx }) => {
        const res = await svc.list(actor, queryOf(query));
        if (res.mode === 'cursor') return { items: res.items, cursors: res.cursors };
        // `mode` stays in an offset page: it tells the two page types apart (a cursor page has none).
        return { ...setPageHeaders(ctx, res), mode: res.mode };
      }),
    })],
    ['get', defineRoute({
      method: 'GET', path: `${base}/:id`, auth: RESOURCE_PERMISSIONS.get, tags, features, summary: `Get one document of ${def.name}`, params: documentPath, query: getOneQuerySchema, ...out('get'),
      docs: { responseHeaders: { ETag: 'Current revision; send it back as If-Match' }, errors: [404] },
      handler: custom('get', async ({ actor, params, query, ctx }) => {
        const { draft, ...rest } = queryOf(query);
        const { doc, etag } = def.drafts && draftOptionsOf({ draft }) ? await getWithDraft(svc, actor, idOf(params), rest) : await svc.getOne(actor, idOf(params), rest);
        ctx.set('ETag', etag);
        return doc;
      }),
    })],
    ['create', defineRoute({
      method: 'POST', path: base, auth: RESOURCE_PERMISSIONS.create, tags, features, status: 201, summary: `Create a document in ${def.name}`, ...out('create'),
      docs: { body: def.inputs.create, responseHeaders: { ETag: 'Revision of the new document', Location: 'URL of the new document' } },
      handler: custom('create', async ({ actor, ctx }) => {
        const doc = await svc.create(actor, ctx.request.body, { draft: def.drafts ? draftOptionsOf(ctx.query) : null });
        ctx.set('ETag', etagOf(doc.version));
        ctx.set('Location', `${base}/${String(doc._id)}`);
        return doc;
      }),
    })],
    ['update', defineRoute({
      method: 'PATCH', path: `${base}/:id`, auth: RESOURCE_PERMISSIONS.update, tags, features, summary: `Partially update a document of ${def.name}`, params: documentPath, ...out('update'),
      docs: { body: def.inputs.update, headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [404, 412, 428] },
      handler: custom('update', async ({ actor, params, ctx }) => {
        const doc = await writeOrDraft(svc, actor, idOf(params), ctx.get('If-Match'), ctx.request.body, false, ctx.query);
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      }),
    })],
    ['replace', defineRoute({
      method: 'PUT', path: `${base}/:id`, auth: RESOURCE_PERMISSIONS.replace, tags, features, summary: `Replace a document of ${def.name}`, params: documentPath, ...out('replace'),
      docs: { body: def.inputs.replace, headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [404, 412, 428] },
      handler: custom('replace', async ({ actor, params, ctx }) => {
        const doc = await writeOrDraft(svc, actor, idOf(params), ctx.get('If-Match'), ctx.request.body, true, ctx.query);
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      }),
    })],
    ['delete', defineRoute({
      method: 'DELETE', path: `${base}/:id`, auth: RESOURCE_PERMISSIONS.delete, tags, features, status: 204, summary: `Soft-delete a document of ${def.name} (204)`, params: documentPath,
      docs: { headers: ifMatch, errors: [404, 412, 422, 428] },
      handler: custom('delete', async ({ actor, params, ctx }) => {
        await svc.remove(actor, idOf(params), ctx.get('If-Match'));
        return undefined;
      }),
    })],
    ['delete', defineRoute({
      method: 'POST', path: `${base}/:id/restore`, auth: RESOURCE_PERMISSIONS.restore, tags, features, summary: `Restore a soft-deleted document of ${def.name} (administrators)`, params: documentPath, response: schemas.document,
      docs: { headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [403, 404, 409, 412, 428] },
      async handler({ actor, params, ctx }) {
        const doc = await svc.restore(actor, idOf(params), ctx.get('If-Match'));
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      },
    })],
  ];
  for (const [op, route] of generated) if (offers(op)) routes.push(route);
  return [...def.routes, ...routes];
}

