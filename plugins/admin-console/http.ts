/**
 * Sending the console's page and files: security headers, ETag validation (304), cache lifetime
 * and compression.
 */
import type Koa from 'koa';
import compress from 'koa-compress';
import { CONSOLE_HEADERS, type ConsoleFile } from './service.ts';

const compressor = compress({ threshold: 1024 });

const matches = (ifNoneMatch: string, etag: string) =>
  ifNoneMatch.split(',').some((t) => t.trim().replace(/^W\//, '') === etag.replace(/^W\//, '')) || ifNoneMatch.trim() === '*';

/** Sends `file` with the console's headers; 304 when `If-None-Match` holds its ETag. */
export async function sendConsoleFile(ctx: Koa.Context, file: ConsoleFile, cacheControl: string): Promise<void> {
  for (const [k, v] of Object.entries(CONSOLE_HEADERS)) ctx.set(k, v);
  ctx.set('Cache-Control', cacheControl);
  ctx.set('ETag', file.etag);
  ctx.vary('Accept-Encoding');
  const inm = ctx.get('If-None-Match');
  if (inm && matches(inm, file.etag)) {
    ctx.status = 304;
    ctx.body = null;
    return;
  }
  await compressor(ctx, async () => {
    ctx.type = file.type;
    ctx.body = file.body;
  });
  const tag = ctx.response.get('ETag');
  if (ctx.response.get('Content-Encoding') && tag && !tag.startsWith('W/')) ctx.set('ETag', `W/${tag}`);
}
