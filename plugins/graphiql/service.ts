/**
 * GraphiQL's page and files (no Koa or GraphQL here: http.ts sends the files, yoga.ts the page). The page is
 * a few KB that loads the script, style sheet, editor workers and icon of
 * `@graphql-yoga/render-graphiql` as separate files under `/graphql/assets/`, served from this
 * process (no CDN: machines may have no internet). The package ships them as strings that its own
 * `renderGraphiQL` inlines, an 8.9 MB page on every load; served apart, a browser fetches them once.
 *
 * File names carry a hash of their content, so each answer is cacheable for good (`immutable`);
 * a new package version yields new names. Bodies are compressed once per encoding and kept.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlib, gzip } from 'node:zlib';
import { escapeHtml } from '../../lib/html.ts';

/** GraphiQL's options (Yoga's `GraphiQLOptions`), passed to the page as they are; `title` and `favicon` also go in its head. */
export type GraphiQLPageOptions = { title?: string; favicon?: string } & Record<string, unknown>;

/** Prefix of every asset URL; the file name follows. */
export const GRAPHIQL_ASSETS_PATH = '/graphql/assets';

export interface Asset {
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

/** JSON inside a `<script>`: `<` escaped so that no value can close the element. */
const scriptJson = (v: unknown): string => JSON.stringify(v).replace(/</g, '\\u003c');

/**
 * The GraphiQL page: the package's own markup, with its inlined
 * parts replaced by links to `/graphql/assets/*`. Monaco's workers start from those URLs too.
 */
export async function renderGraphiQLPage(opts?: GraphiQLPageOptions): Promise<string> {
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

/** The file `name` (a hashed name of the page's links), or undefined for any other name. */
export async function graphiqlAsset(name: string): Promise<Asset | undefined> {
  return (await load()).files.get(name);
}

/**
 * The body of `asset` in `coding`: compressed on first request and kept. Brotli's default quality
 * (11) takes seconds on the 5 MB script; 5 is close in size at a fraction of the time.
 */
export function encodedBody(asset: Asset, coding: 'br' | 'gzip'): Promise<Buffer> {
  let body = asset.encoded.get(coding);
  if (!body) {
    body = coding === 'br' ? compressors.br(asset.body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 5 } }) : compressors.gzip(asset.body);
    asset.encoded.set(coding, body);
  }
  return body;
}
