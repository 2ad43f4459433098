import { z } from 'zod';
import { AppError, ValidationError, type ValidationIssue } from '../../core/errors.ts';
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import { objectId } from '../../core/http/schemas.ts';
import { setPageHeaders } from '../../core/page.ts';
import { etagOf } from '../../core/etag.ts';
import type { BulkItemError, ResourceService } from './service.ts';
import type { Operation } from './define.ts';
import { getOneQuerySchema, listQuerySchema, type RawQuery } from './params.ts';

/** Any string: a malformed id is a 404 like an unknown one (the service decides), unlike core's `idParams` (422). */
const documentPath = z.object({ id: z.string().describe('24-character hex object id') });
/** Generated handlers go through `custom()`, which erases the param type; the route schema guarantees it. */
const idOf = (params: unknown) => (params as { id: string }).id;
/** As `idOf`, for the validated query (its schema's output is a query object). */
const queryOf = (query: unknown) => query as RawQuery;
const ifMatch = { 'If-Match': { description: 'ETag of the revision being changed (from GET)', required: true } };

const flatten = (errors: BulkItemError[]): ValidationIssue[] =>
  errors.flatMap((e) => {
    const nested = (e.error.details.errors as ValidationIssue[] | undefined) ?? [];
    return nested.length ? nested : [{ loc: ['body', e.index], msg: e.error.message, type: e.error.code.toLowerCase() }];
  });

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
  const custom = (op: Operation, fallback: RouteDef['handler']): RouteDef['handler'] => def.handlers[op] ?? fallback;
  const routes: RouteDef[] = [];

  const offers = (op: Operation) => def.operations.has(op);
  if (def.allow_bulk_create && offers('create')) {
    routes.push(
      defineRoute({
        method: 'POST', path: `${base}/bulk`, tags, features, status: 201,
        summary: `Create up to ${def.max_bulk_size} ${def.name}: 201 all created, 207 some, 422 none`,
        body: z.object({ items: z.array(z.unknown()).min(1).max(def.max_bulk_size) }).strict(),
        docs: { errors: [422] },
        async handler({ actor, body, ctx }) {
          const res = await svc.bulkCreate(actor!, body.items);
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
        method: 'DELETE', path: `${base}/bulk`, tags, features,
        summary: `Soft-delete up to ${def.max_bulk_size} ${def.name}, each with its ETag: 200 all, 207 some, 409 none`,
        body: z.object({ items: z.array(z.object({ id: objectId, etag: z.string().min(1) }).strict()).min(1).max(def.max_bulk_size) }).strict(),
        docs: { errors: [409] },
        async handler({ actor, body, ctx }) {
          const res = await svc.bulkDelete(actor!, body.items);
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
      method: 'GET', path: base, tags, features, summary: `List ${def.name} (offset or cursor mode)`, query: listQuerySchema,
      docs: { responseHeaders: { 'X-Total-Count': 'Offset mode: matching rows', 'X-Page': 'Offset mode: page', 'X-Per-Page': 'Offset mode: page size', 'X-Total-Pages': 'Offset mode: pages' } },
      handler: custom('list', async ({ user, query, ctx }) => {
        const res = await svc.list(actor!, queryOf(query));
        if (res.mode === 'cursor') return { items: res.items, cursors: res.cursors };
        const { mode: _mode, ...page } = res;
        return setPageHeaders(ctx, page);
      }),
    })],
    ['get', defineRoute({
      method: 'GET', path: `${base}/:id`, tags, features, summary: `Get one ${def.name} document`, params: documentPath, query: getOneQuerySchema,
      docs: { responseHeaders: { ETag: 'Current revision; send it back as If-Match' }, errors: [404] },
      handler: custom('get', async ({ user, params, query, ctx }) => {
        const { doc, etag } = await svc.getOne(actor!, idOf(params), queryOf(query));
        ctx.set('ETag', etag);
        return doc;
      }),
    })],
    ['create', defineRoute({
      method: 'POST', path: base, tags, features, status: 201, summary: `Create a ${def.name} document`,
      docs: { body: def.inputs.create, responseHeaders: { ETag: 'Revision of the new document', Location: 'URL of the new document' } },
      handler: custom('create', async ({ user, ctx }) => {
        const doc = await svc.create(actor!, ctx.request.body);
        ctx.set('ETag', etagOf(doc.version));
        ctx.set('Location', `${base}/${String(doc._id)}`);
        return doc;
      }),
    })],
    ['update', defineRoute({
      method: 'PATCH', path: `${base}/:id`, tags, features, summary: `Partially update a ${def.name} document`, params: documentPath,
      docs: { body: def.inputs.update, headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [404, 412, 428] },
      handler: custom('update', async ({ user, params, ctx }) => {
        const doc = await svc.update(actor!, idOf(params), ctx.get('If-Match'), ctx.request.body, false);
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      }),
    })],
    ['replace', defineRoute({
      method: 'PUT', path: `${base}/:id`, tags, features, summary: `Replace a ${def.name} document`, params: documentPath,
      docs: { body: def.inputs.replace, headers: ifMatch, responseHeaders: { ETag: 'New revision' }, errors: [404, 412, 428] },
      handler: custom('replace', async ({ user, params, ctx }) => {
        const doc = await svc.update(actor!, idOf(params), ctx.get('If-Match'), ctx.request.body, true);
        ctx.set('ETag', etagOf(doc.version));
        return doc;
      }),
    })],
    ['delete', defineRoute({
      method: 'DELETE', path: `${base}/:id`, tags, features, status: 204, summary: `Soft-delete a ${def.name} document (204)`, params: documentPath,
      docs: { headers: ifMatch, errors: [404, 412, 422, 428] },
      handler: custom('delete', async ({ user, params, ctx }) => {
        await svc.remove(actor!, idOf(params), ctx.get('If-Match'));
        return undefined;
      }),
    })],
  ];
  for (const [op, route] of generated) if (offers(op)) routes.push(route);
  return [...def.routes, ...routes];
}

