/** REST routes of the files plugin (besides list and get, which the files resource generates). */
import type Koa from 'koa';
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../../core/http/route.ts';
import { AuthRequiredError } from '../../core/errors.ts';
import type { FilesService } from './service.ts';
import { FILE_PERMISSIONS, INLINE_TYPES } from './service.ts';
import { readMultipart } from './multipart.ts';
import { TUS_PATH, type tusUploads } from './tus.ts';
import type { Actor } from '../../core/context.ts';
import { contentQuery, fileIdParams, signedUrlView } from './schemas.ts';

/** The server's own origin as the client reached it (`X-Forwarded-*` only with `TRUST_PROXY`). */
export const originOf = (ctx: Koa.Context) => `${ctx.protocol}://${ctx.host}`;

type TusUploads = ReturnType<typeof tusUploads>;

const uploadParams = z.object({ id: z.string().max(64).describe('Upload id (from the Location of POST /files/uploads)') });

/** The tus 1.0 routes: the tus server answers on the raw response (`Tus-Resumable`, `Upload-Offset`, ...). */
function tusRoutes(tus: TusUploads): RouteDef[] {
  const docs = { mediaTypes: ['application/offset+octet-stream'], errors: [404, 409, 413, 415, 460] };
  const pass = (id: string | null) => async ({ actor, ctx }: { actor: Actor; ctx: Koa.Context }) => {
    await tus.handle(actor, id, ctx.req, ctx.res, () => {
      ctx.respond = false;
    });
    return undefined;
  };
  return [
    defineRoute({ method: 'POST', path: TUS_PATH, auth: FILE_PERMISSIONS.upload, tags: ['files'], docs, summary: 'tus: create a resumable upload (Upload-Length, Upload-Metadata filename/filetype/metadata)', handler: (a) => pass(null)(a) }),
    defineRoute({ method: 'GET', path: `${TUS_PATH}/:id`, auth: FILE_PERMISSIONS.upload, tags: ['files'], params: uploadParams, docs, summary: 'tus: HEAD answers the stored offset (Upload-Offset) to resume from', handler: (a) => pass(a.params.id)(a) }),
    defineRoute({ method: 'PATCH', path: `${TUS_PATH}/:id`, auth: FILE_PERMISSIONS.upload, tags: ['files'], params: uploadParams, docs, summary: 'tus: append bytes at Upload-Offset; the last one makes the file (Upload-File-Id)', handler: (a) => pass(a.params.id)(a) }),
    defineRoute({ method: 'DELETE', path: `${TUS_PATH}/:id`, auth: FILE_PERMISSIONS.upload, tags: ['files'], params: uploadParams, docs, summary: 'tus: abandon an upload and its parts', handler: (a) => pass(a.params.id)(a) }),
  ];
}

export function fileRoutes(svc: FilesService, fileSchema: () => z.ZodType, tus: TusUploads): RouteDef[] {
  const doc = z.lazy(fileSchema);
  return [
    ...tusRoutes(tus),
    defineRoute({
      method: 'POST', path: '/files', auth: FILE_PERMISSIONS.store, tags: ['files'], status: 201, response: doc,
      summary: 'Upload one file (multipart/form-data: a file part, optional `metadata` JSON field), streamed to storage',
      docs: { errors: [413, 415], mediaTypes: ['application/json'] },
      handler: async ({ actor, ctx }) => {
        const { result, fields } = await readMultipart(ctx.req, (part) => svc.store(actor, part.stream, { filename: part.filename, declared_type: part.mime_type }));
        return svc.finish(result, fields.metadata);
      },
    }),
    defineRoute({
      method: 'GET', path: '/files/:id/content', auth: FILE_PERMISSIONS.content, tags: ['files'], params: fileIdParams, query: contentQuery,
      summary: 'The bytes of a ready file (Range, ETag / If-None-Match); with `expires` and `signature` no credential is needed',
      docs: {
        mediaTypes: ['application/octet-stream'], errors: [304, 403, 404, 409, 416],
        headers: { Range: { description: 'One `bytes=` range (206)' }, 'If-None-Match': { description: 'The ETag (sha256) of a copy held (304)' } },
        responseHeaders: { ETag: 'The sha256 of the content, quoted', 'Content-Disposition': 'attachment, or inline for raster images', 'Accept-Ranges': 'bytes' },
      },
      handler: async ({ actor, params, query, ctx }) => {
        const signed = query.signature !== undefined || query.expires !== undefined;
        const who = signed ? { signed: { expires: query.expires ?? '', signature: query.signature ?? '' } } : actor ? { actor } : null;
        if (!who) throw new AuthRequiredError();
        const transform = { w: query.w, h: query.h, fit: query.fit, format: query.format };
        const c = await svc.content(who, params.id, { range: ctx.get('Range') || null, ifNoneMatch: ctx.get('If-None-Match') || null, transform, variant: query.variant });
        const type = c.content_type;
        ctx.set('X-Content-Type-Options', 'nosniff');
        ctx.set('ETag', c.etag);
        ctx.set('Accept-Ranges', 'bytes');
        ctx.set('Cache-Control', signed ? 'private, max-age=60' : 'private, no-cache');
        if (!c.body) {
          ctx.status = 304;
          ctx.body = null;
          return undefined;
        }
        ctx.attachment(String(c.file.filename), { type: INLINE_TYPES.has(type) ? 'inline' : 'attachment' });
        ctx.type = type;
        // Only raster images render inline; anything else the browser is told not to run.
        if (!INLINE_TYPES.has(type)) ctx.set('Content-Security-Policy', "default-src 'none'; sandbox");
        ctx.status = c.range ? 206 : 200;
        if (c.range) ctx.set('Content-Range', `bytes ${c.range.start}-${c.range.end}/${c.size}`);
        ctx.body = c.body;
        ctx.length = c.range ? c.range.end - c.range.start + 1 : c.size;
        return undefined;
      },
    }),
    defineRoute({
      method: 'POST', path: '/files/:id/signed-url', auth: FILE_PERMISSIONS.signedUrl, tags: ['files'], params: fileIdParams, response: signedUrlView,
      summary: 'A URL serving the file without credentials until it expires (FILES_SIGNED_URL_TTL_SECONDS)',
      handler: ({ actor, params, ctx }) => svc.signedUrl(actor, params.id, originOf(ctx)),
    }),
    defineRoute({
      method: 'DELETE', path: '/files/:id', auth: FILE_PERMISSIONS.remove, tags: ['files'], params: fileIdParams, response: doc,
      summary: 'Soft-delete a file (status `deleted`); its bytes are purged after FILES_PURGE_AFTER_DAYS',
      docs: { headers: { 'If-Match': { description: 'ETag of the record (from GET /files/{id})', required: true } }, errors: [412, 428] },
      handler: ({ actor, params, ctx }) => svc.remove(actor, params.id, ctx.get('If-Match') || null),
    }),
  ];
}
