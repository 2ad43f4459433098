/**
 * The interactive reference at `/docs`: Swagger UI from the `swagger-ui-dist` npm package, served
 * from node_modules (no CDN: machines may have no internet). No Koa here; `index.ts` serves it.
 *
 * The page has no inline script or style, so it also works under a strict
 * `Content-Security-Policy: default-src 'self'`: the initialiser is a served file (`init.js`).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { gzip as gzipCb } from 'node:zlib';

const gzip = promisify(gzipCb);

/** Where the page and its assets live. */
export const DOCS_PATH = '/docs';
/** Prefix of every asset URL; the file name follows. */
export const ASSETS_PATH = '/docs/assets';

/** A file ready to serve. */
export interface StaticAsset {
  contentType: string;
  body: Buffer;
  /** Strong ETag of `body`. */
  etag: string;
  /** `body` gzip-compressed, computed once on first call. */
  gzipped(): Promise<Buffer>;
}

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

const typeOf = (name: string): string => CONTENT_TYPES[name.slice(name.lastIndexOf('.'))] ?? 'application/octet-stream';

const etagOf = (body: Buffer): string => `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Files of swagger-ui-dist the page may load (an allow-list: nothing else of node_modules is reachable). */
const PACKAGE_FILES = ['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui.css.map', 'swagger-ui-bundle.js.map'];

/** Builds the asset from bytes, with a lazily computed, memoised gzip variant. */
export function makeAsset(name: string, body: Buffer): StaticAsset {
  let packed: Promise<Buffer> | undefined;
  return { contentType: typeOf(name), body, etag: etagOf(body), gzipped: () => (packed ??= gzip(body, { level: 9 })) };
}

/** The Swagger UI page and its assets. */
export class DocsUi {
  /** Version of swagger-ui-dist, part of the asset URLs (so they can be cached for good). */
  readonly packageVersion: string;
  private readonly files = new Map<string, () => Promise<Buffer>>();
  private readonly loaded = new Map<string, Promise<StaticAsset>>();
  private readonly versions = new Map<string, string>();

  /**
   * @param specUrl URL of the OpenAPI document the page loads
   * @throws Error when swagger-ui-dist is not installed
   */
  constructor(readonly specUrl = '/openapi.json') {
    const require = createRequire(import.meta.url);
    let dir: string;
    try {
      dir = dirname(require.resolve('swagger-ui-dist/package.json'));
    } catch {
      throw new Error('The openapi plugin needs the "swagger-ui-dist" package for /docs: run `npm install swagger-ui-dist`');
    }
    this.packageVersion = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
    for (const name of PACKAGE_FILES) {
      const file = join(dir, name);
      if (!existsSync(file)) {
        if (name.endsWith('.map')) continue;
        throw new Error(`swagger-ui-dist ${this.packageVersion} has no ${name}; the openapi plugin cannot serve /docs`);
      }
      this.files.set(name, () => readFile(file));
      this.versions.set(name, this.packageVersion);
    }
    const init = Buffer.from(initScript(specUrl));
    this.files.set('init.js', async () => init);
    this.versions.set('init.js', etagOf(init).slice(1, 11));
  }

  /** Names of every servable asset. */
  assetNames(): string[] {
    return [...this.files.keys()];
  }

  /** URL of an asset, with a `v` query naming its version (cache busting). */
  assetUrl(name: string): string {
    return `${ASSETS_PATH}/${name}?v=${encodeURIComponent(this.versions.get(name) ?? '')}`;
  }

  /** The asset, read from disk once; undefined for a name outside the allow-list. */
  asset(name: string): Promise<StaticAsset> | undefined {
    const read = this.files.get(name);
    if (!read) return undefined;
    let p = this.loaded.get(name);
    if (!p) {
      p = read().then((body) => makeAsset(name, body));
      // A failed read is retried next time rather than cached.
      p.catch(() => this.loaded.delete(name));
      this.loaded.set(name, p);
    }
    return p;
  }

  /**
   * Cache-Control of an asset: cached for good when requested with its current `v` (the page links
   * it so), else for a short while and revalidated by ETag.
   */
  cacheControl(name: string, v: string | undefined): string {
    return v !== undefined && v === this.versions.get(name) ? 'public, max-age=31536000, immutable' : 'public, max-age=300';
  }

  /** The HTML page. Every URL in it is local. */
  html(info: { title: string; version: string }): StaticAsset {
    const title = escapeHtml(`${info.title} ${info.version} — API reference`);
    const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="stylesheet" href="${escapeHtml(this.assetUrl('swagger-ui.css'))}">
</head>
<body>
<noscript>This reference needs JavaScript. The OpenAPI document itself is at <a href="${escapeHtml(this.specUrl)}">${escapeHtml(this.specUrl)}</a>.</noscript>
<div id="swagger-ui"></div>
<script src="${escapeHtml(this.assetUrl('swagger-ui-bundle.js'))}"></script>
<script src="${escapeHtml(this.assetUrl('init.js'))}"></script>
</body>
</html>
`;
    return makeAsset('index.html', Buffer.from(page));
  }
}

/** The Swagger UI initialiser (a served file, not an inline script). */
function initScript(specUrl: string): string {
  return `'use strict';
window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: ${JSON.stringify(specUrl)},
    dom_id: '#swagger-ui',
    deepLinking: true,
    filter: true,
    displayRequestDuration: true,
    persistAuthorization: false,
    // The default would send the document to validator.swagger.io.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'BaseLayout'
  });
});
`;
}
