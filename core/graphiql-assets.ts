/**
 * GraphiQL at `GET /graphql` (`Accept: text/html`, outside production): a page of a few KB that
 * loads the script, style sheet, editor workers and icon of `@graphql-yoga/render-graphiql` as
 * separate files under `/graphql/assets/`, served from this process (no CDN: machines may have no
 * internet). The package ships them as strings that its own `renderGraphiQL` inlines, an 8.9 MB
 * page on every load; served apart, a browser fetches them once.
 *
 * File names carry a hash of their content, so each answer is cacheable for good (`immutable`);
 * a new package version yields new names. Bodies are compressed once per encoding and kept.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlib, gzip } from 'node:zlib';
import type Koa from 'koa';
import type { GraphiQLOptions } from 'graphql-yoga';
import { NotFoundError } from './errors.ts';

/** Prefix of every asset URL; the file name follows. */
export const GRAPHIQL_ASSETS_PATH = '/graphql/assets';

const IMMUTABLE = 'public, max-age=31536000, immutable';

interface Asset {
  type: string;
  body: Buffer;
  hash: string;
  /** Compressed bodies, made on first request for each encoding. */
  encoded: Map<'br' | 'gzip', Promise<Buffer>>;
}

interface Loaded {
  files: Map<string, Asset>;
  /** URL of each part, by role. */
  urls: { js: string; css: string; favicon: string; workers: Record<'editorWorkerService' | 'json' | 'graphql', string> };
}

const compressors = {
  br: promisify(brotliCompress),
  gzip: promisify(gzip),
};

let loading: Promise<Loaded> | undefined;

/** The package's parts as named files, read once per process (the module is large: loaded on first use). */
function load(): Promise<Loaded> {
  return (loading ??= import('@graphql-yoga/render-graphiql/graphiql').then((p) => {
    const files = new Map<string, Asset>();
    const add = (stem: string, ext: string, type: string, body: Buffer): string => {
      const hash = createHash('sha256').update(body).digest('base64url').slice(0, 16);
      const name = `${stem}.${hash}.${ext}`;
      files.set(name, { type, body, hash, encoded: new Map() });
      return `${GRAPHIQL_ASSETS_PATH}/${name}`;
    };
    const icon = /^data:([^;,]+);base64,(.*)$/s.exec(p.favicon);
    return {
      files,
      urls: {
        js: add('graphiql', 'js', 'text/javascript; charset=utf-8', Buffer.from(p.js)),
        css: add('graphiql', 'css', 'text/css; charset=utf-8', Buffer.from(p.css)),
        favicon: icon ? add('favicon', 'ico', icon[1]!, Buffer.from(icon[2]!, 'base64')) : p.favicon,
        workers: {
          editorWorkerService: add('editor.worker', 'js', 'text/javascript; charset=utf-8', Buffer.from(p.editorWorkerService)),
          json: add('json.worker', 'js', 'text/javascript; charset=utf-8', Buffer.from(p.jsonWorker)),
          graphql: add('graphql.worker', 'js', 'text/javascript; charset=utf-8', Buffer.from(p.graphqlWorker)),
        },
      },
    };
  }));
}

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** JSON inside a `<script>`: `<` escaped so that no value can close the element. */
const scriptJson = (v: unknown): string => JSON.stringify(v).replace(/</g, '\\u003c');

/**
 * The GraphiQL page (Yoga's `renderGraphiQL` option): the package's own markup, with its inlined
 * parts replaced by links to `/graphql/assets/*`. Monaco's workers start from those URLs too.
 */
export async function renderGraphiQLPage(opts?: GraphiQLOptions): Promise<string> {
  const { urls } = await load();
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(opts?.title || 'Yoga GraphiQL')}</title>
<link rel="icon" href="${escapeHtml(opts?.favicon || urls.favicon)}">
<link rel="stylesheet" href="${urls.css}">
</head>
<body id="body" class="no-focus-outline">
<noscript>You need to enable JavaScript to run this app.</noscript>
<div id="root"></div>
<script>
self.MonacoEnvironment = { globalAPI: false, getWorkerUrl: function (moduleId, label) { return ${scriptJson(urls.workers)}[label]; } };
</script>
<script src="${urls.js}"></script>
<script>
YogaGraphiQL.renderYogaGraphiQL(document.querySelector('#root'), ${scriptJson(opts ?? {})});
</script>
</body>
</html>
`;
}

/** RFC 9110 If-None-Match (weak comparison) against any representation of the file (`"<hash>"`, `"<hash>-br"`, ...). */
function notModified(ifNoneMatch: string, hash: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '').replace(/-(br|gzip)"$/, '"') === `"${hash}"`);
}

/**
 * `GET /graphql/assets/:file`: the file with `Cache-Control: public, max-age=31536000, immutable`,
 * an ETag (304 to a matching `If-None-Match`), brotli or gzip when accepted.
 * @throws NotFoundError for any other name (an old hash included)
 */
export async function serveGraphiQLAsset(ctx: Koa.Context, name: string): Promise<void> {
  const asset = (await load()).files.get(name);
  if (!asset) throw new NotFoundError('asset', name);
  ctx.set('Cache-Control', IMMUTABLE);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.vary('Accept-Encoding');
  const encoding = ctx.acceptsEncodings('br', 'gzip', 'identity');
  const coding = encoding === 'br' || encoding === 'gzip' ? encoding : undefined;
  ctx.set('ETag', `"${asset.hash}${coding ? `-${coding}` : ''}"`);
  if (notModified(ctx.get('If-None-Match'), asset.hash)) {
    ctx.status = 304;
    return;
  }
  ctx.type = asset.type;
  if (!coding) {
    ctx.body = asset.body;
    return;
  }
  let body = asset.encoded.get(coding);
  if (!body) {
    // Brotli's default (11) takes seconds on the 5 MB script; 5 is close in size at a fraction of the time.
    body = coding === 'br' ? compressors.br(asset.body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 5 } }) : compressors.gzip(asset.body);
    asset.encoded.set(coding, body);
  }
  ctx.set('Content-Encoding', coding);
  ctx.body = await body;
}
