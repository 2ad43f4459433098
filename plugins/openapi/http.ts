/**
 * HTTP caching of the documentation files: ETag validation (304 to a matching `If-None-Match`),
 * `Cache-Control`, and compression, for the OpenAPI document, the reference page and its assets.
 */
import type Koa from 'koa';
import compress from 'koa-compress';
import send from 'koa-send';
import type { DocsFile } from './ui.ts';

/** Header parameter of every conditional GET, for `defineRoute({ docs: { headers } })`. */
export const CONDITIONAL_GET = { 'If-None-Match': { description: 'ETag of a copy held by the client: 304 Not Modified when it is current.' } };

/**
 * RFC 9110 If-None-Match (weak comparison). Not `ctx.fresh` (the `fresh` package): that also says
 * "stale" whenever the request carries `Cache-Control: no-cache`, which fetch() adds to every
 * conditional request, so a browser would never get a 304.
 */
function notModified(ifNoneMatch: string, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  return ifNoneMatch.split(',').some((tag) => opaque(tag) === opaque(etag));
}

/** koa-compress: br, gzip or deflate by `Accept-Encoding`, for compressible types above 1 KiB. */
const compressor = compress({ threshold: 1024 });

/**
 * Sends a file with its ETag (304 to a matching `If-None-Match`) and `Cache-Control`: a
 * swagger-ui-dist file with koa-send, an in-memory one as a buffer, both through koa-compress. As
 * nginx does, a compressed answer's ETag is made weak (it is another representation); a client
 * holding either one gets a 304, since If-None-Match compares weakly.
 */
export async function serveFile(ctx: Koa.Context, file: DocsFile, cacheControl: string): Promise<void> {
  ctx.set('Cache-Control', cacheControl);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('ETag', file.etag);
  ctx.vary('Accept-Encoding');
  if (notModified(ctx.get('If-None-Match'), file.etag)) {
    ctx.status = 304;
    ctx.body = null;
    return;
  }
  await compressor(ctx, async () => {
    if (file.root !== undefined) await send(ctx, file.name, { root: file.root, index: false });
    else {
      ctx.type = file.name.slice(file.name.lastIndexOf('.'));
      ctx.body = file.body;
    }
  });
  const tag = ctx.response.get('ETag');
  if (ctx.response.get('Content-Encoding') && tag && !tag.startsWith('W/')) ctx.set('ETag', `W/${tag}`);
}
