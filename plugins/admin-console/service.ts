import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join, resolve } from 'node:path';

/** URL of the console page. Client-side routes live in the fragment (`/admin#/resources/projects`), so no `/admin/*` API path is shadowed. */
export const CONSOLE_PATH = '/admin';
/** URL prefix of the build's files: a path no API route uses (the build's `base`, admin-console/vite.config.ts). */
export const ASSETS_PREFIX = '/admin-console/assets';
/** Default build folder: `npm run build:console` writes it (prestart, and the test set-up, run it when stale). */
export const DEFAULT_DIST = resolve(import.meta.dirname, '../../admin-console/dist');

/**
 * The console's Content-Security-Policy: scripts, styles and fetches from this origin only; no
 * inline script or style (the build emits none), no frames, no plugins, no form posts.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/** Headers of every console answer, the page and its files. */
export const CONSOLE_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

export interface ConsoleFile {
  name: string;
  body: Buffer;
  etag: string;
  type: string;
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.woff2': 'font/woff2',
  '.png': 'image/png',
};
/** Media types an asset may have, for the route's OpenAPI document. */
export const ASSET_MEDIA_TYPES = [...new Set(Object.values(TYPES).map((t) => t.split(';')[0]!))];

const file = (name: string, body: Buffer, type: string): ConsoleFile => ({
  name, body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
});

/** Shown at `/admin` when the console was never built (a checkout without `npm run build:console`). */
const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Admin console not built</title></head>
<body><main><h1>Admin console not built</h1>
<p>Run <code>npm run build:console</code> (npm start does it), then reload.</p></main></body></html>
`;

/**
 * The built console, read into memory once at start-up: `index.html` and the hashed files of
 * `assets/`. A missing build is not an error: `/admin` then explains how to build it.
 */
export class ConsoleAssets {
  readonly built: boolean;
  private readonly page: ConsoleFile;
  private readonly files = new Map<string, ConsoleFile>();

  constructor(distDir: string) {
    const index = join(distDir, 'index.html');
    this.built = existsSync(index);
    this.page = file('index.html', this.built ? readFileSync(index) : Buffer.from(NOT_BUILT), 'text/html; charset=utf-8');
    const assets = join(distDir, 'assets');
    if (!this.built || !existsSync(assets)) return;
    for (const name of readdirSync(assets)) {
      const type = TYPES[extname(name)];
      if (type) this.files.set(name, file(name, readFileSync(join(assets, name)), type));
    }
  }

  /** The single page (or the "not built" page). */
  index(): ConsoleFile {
    return this.page;
  }

  /** A file of `assets/` by name, or undefined. */
  asset(name: string): ConsoleFile | undefined {
    return this.files.get(name);
  }

  assetNames(): string[] {
    return [...this.files.keys()];
  }
}
