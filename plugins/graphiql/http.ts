/**
 * `GET /graphql/assets/:file`: sending one of GraphiQL's files with its caching headers (ETag, 304,
 * a year-long immutable `Cache-Control`) and its compressed body (kept per encoding, service.ts).
 */
import type Koa from 'koa';
import { NotFoundError } from '../../core/errors.ts';
import { encodedBody, graphiqlAsset } from './service.ts';

const IMMUTABLE = 'public, max-age=31536000, immutable';

/** RFC 9110 If-None-Match (weak comparison) against any representation of the file (`"<hash>"`, `"<hash>-br"`, ...). */
function notModified(ifNoneMatch: string, hash: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '').replace(/-(br|gzip)"$/, '"') === `"${hash}"`);
}

/**
 * The file with `Cache-Control: public, max-age=31536000, immutable`, an ETag (304 to a matching
 * `If-None-Match`), brotli or gzip when accepted.
 * @throws NotFoundError for any other name (an old hash included)
 */
export async function sendGraphiQLAsset(ctx: Koa.Context, name: string): Promise<void> {
  const asset = await graphiqlAsset(name);
  if (!asset) throw new NotFoundError('asset', name);
  ctx.set('Cache-Control', IMMUTABLE);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.vary('Accept-Encoding');
  const encoding = ctx.acceptsEncodings('br', 'gzip', 'identity');
  const coding = encoding === 'br' || encoding === 'gzip' ? encoding : undefined;
  ctx.set('ETag', `"${asset.hash}${coding ? `-${coding}` : ''}"`);
  if (notModified(ctx.get('If-None-Match'), asset.hash)) {
    ctx.status = 304;
    ctx.body = null;
    return;
  }
  ctx.type = asset.type;
  if (!coding) {
    ctx.body = asset.body;
    return;
  }
  ctx.set('Content-Encoding', coding);
  ctx.body = await encodedBody(asset, coding);
}
