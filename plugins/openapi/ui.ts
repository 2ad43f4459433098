/**
 * The interactive reference at `/docs`: Swagger UI from the `swagger-ui-dist` npm package, served
 * from node_modules (no CDN: machines may have no internet). No Koa here; `index.ts` serves it.
 *
 * The page has no inline script or style, so it also works under a strict
 * `Content-Security-Policy: default-src 'self'`: the initialiser is a served file (`init.js`).
 */
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import etag from 'etag';
import { escapeHtml } from '../../lib/html.ts';

/** Where the page and its assets live. */
export const DOCS_PATH = '/docs';
/** Prefix of every asset URL; the file name follows. */
export const ASSETS_PATH = '/docs/assets';

/**
 * A servable file: a file of swagger-ui-dist on disk (`root` + `name`, sent with koa-send) or a
 * generated one in memory (`body`). `etag` is strong (the `etag` package: size and mtime of a
 * file, size and hash of a body).
 */
export type DocsFile = { name: string; etag: string } & ({ root: string; body?: undefined } | { body: Buffer; root?: undefined });

/** Files of swagger-ui-dist the page may load (an allow-list: nothing else of node_modules is reachable). */
const PACKAGE_FILES = ['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui.css.map', 'swagger-ui-bundle.js.map'];

/** An in-memory file. */
export const memoryFile = (name: string, body: Buffer): DocsFile => ({ name, body, etag: etag(body) });

/** The Swagger UI page and its assets. */
export class DocsUi {
  /** Version of swagger-ui-dist, part of the asset URLs (so they can be cached for good). */
  readonly packageVersion: string;
  private readonly files = new Map<string, DocsFile>();
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
      const stats = statSync(join(dir, name), { throwIfNoEntry: false });
      if (!stats?.isFile()) {
        if (name.endsWith('.map')) continue;
        throw new Error(`swagger-ui-dist ${this.packageVersion} has no ${name}; the openapi plugin cannot serve /docs`);
      }
      this.files.set(name, { name, root: dir, etag: etag(stats, { weak: false }) });
      this.versions.set(name, this.packageVersion);
    }
    const init = memoryFile('init.js', Buffer.from(initScript(specUrl)));
    this.files.set('init.js', init);
    this.versions.set('init.js', init.etag.replace(/\W/g, '').slice(-10));
  }

  /** Names of every servable asset. */
  assetNames(): string[] {
    return [...this.files.keys()];
  }

  /** URL of an asset, with a `v` query naming its version (cache busting). */
  assetUrl(name: string): string {
    return `${ASSETS_PATH}/${name}?v=${encodeURIComponent(this.versions.get(name) ?? '')}`;
  }

  /** The asset; undefined for a name outside the allow-list. */
  asset(name: string): DocsFile | undefined {
    return this.files.get(name);
  }

  /**
   * Cache-Control of an asset: cached for good when requested with its current `v` (the page links
   * it so), else for a short while and revalidated by ETag.
   */
  cacheControl(name: string, v: string | undefined): string {
    return v !== undefined && v === this.versions.get(name) ? 'public, max-age=31536000, immutable' : 'public, max-age=300';
  }

  /** The HTML page. Every URL in it is local. */
  html(info: { title: string; version: string }): DocsFile {
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
    return memoryFile('index.html', Buffer.from(page));
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
