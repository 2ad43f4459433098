/**
 * `openapi` plugin: `GET /openapi.json`, an OpenAPI 3.1 document of every plugin's routes, and
 * `GET /docs`, a Swagger UI reference page served from node_modules.
 *
 * The document is generated once, in `ready()` (every plugin's routes are known by then), and
 * served from memory. Generation lives in `service.ts`, the page in `ui.ts`, HTTP caching in
 * `http.ts`; this file only wires.
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { NotFoundError } from '../../core/errors.ts';
import { buildOpenApiDocument, type OpenApiInfo } from './service.ts';
import { ASSETS_PATH, DOCS_PATH, DocsUi, memoryFile, type DocsFile } from './ui.ts';
import { CONDITIONAL_GET, serveFile } from './http.ts';

/** URL of the OpenAPI document. */
const SPEC_PATH = '/openapi.json';

/** `info` from package.json (read with fs: no JSON import assertions). */
async function packageInfo(): Promise<OpenApiInfo> {
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { name?: string; version?: string; description?: string };
  const intro = pkg.description ? `${pkg.description}\n\n` : '';
  return {
    title: pkg.name ?? 'API',
    version: pkg.version ?? '0.0.0',
    description:
      `${intro}Authenticate with an API key (\`X-API-Key\`) or a bearer token (\`Authorization: Bearer <token>\`, from \`POST /auth/token\`). ` +
      'Every failure answers with the `ErrorEnvelope` `{ error: { code, message, details }, request_id }`; every response carries `X-Request-Id`.',
  };
}

/** Serves the OpenAPI document of all plugins and an interactive reference. */
export const openapiPlugin = definePlugin({
  name: 'openapi',
  async setup({ kernel, config, log, services }) {
    const info = await packageInfo();
    const ui = new DocsUi(SPEC_PATH);
    const page = ui.html(info);
    let spec: DocsFile | undefined;

    const generate = (): DocsFile => {
      const doc = buildOpenApiDocument(kernel.routes(), {
        info,
        rateLimitEnabled: config.RATE_LIMIT_ENABLED,
        graphql: true,
        eventTypes: services.get('events').types(),
        errorCodes: kernel.errorCodes(),
        successMediaTypes: {
          [`GET ${DOCS_PATH}`]: ['text/html'],
          [`GET ${ASSETS_PATH}/:file`]: ['text/javascript', 'text/css', 'application/json'],
        },
        log,
      });
      const operations = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
      log.debug({ paths: Object.keys(doc.paths).length, operations }, 'OpenAPI document generated');
      return memoryFile('openapi.json', Buffer.from(JSON.stringify(doc)));
    };

    return {
      ready() {
        spec = generate();
      },
      routes: [
        defineRoute({
          method: 'GET', path: SPEC_PATH, auth: 'public', rateLimitExempt: false, tags: ['docs'],
          summary: 'This OpenAPI 3.1 document',
          description: 'Generated at start-up from the routes of every enabled plugin.',
          docs: {
            headers: CONDITIONAL_GET,
            responseHeaders: { ETag: 'Validator of the document.', 'Cache-Control': '`no-cache`: revalidate with `If-None-Match`.' },
          },
          handler: async ({ ctx }) => {
            spec ??= generate();
            await serveFile(ctx, spec, 'no-cache');
          },
        }),
        defineRoute({
          method: 'GET', path: DOCS_PATH, auth: 'public', rateLimitExempt: false, tags: ['docs'],
          summary: 'Interactive API reference (Swagger UI)',
          description: `An HTML page that renders \`${SPEC_PATH}\`; it loads nothing but \`${ASSETS_PATH}/*\`.`,
          docs: { headers: CONDITIONAL_GET, responseHeaders: { ETag: 'Validator of the page.', 'Cache-Control': '`no-cache`.' } },
          handler: async ({ ctx }) => {
            await serveFile(ctx, page, 'no-cache');
          },
        }),
        defineRoute({
          method: 'GET', path: `${ASSETS_PATH}/:file`, auth: 'public', rateLimitExempt: false, tags: ['docs'],
          summary: 'A script, style sheet or source map of the reference page',
          params: z.object({ file: z.string().describe(`One of: ${ui.assetNames().join(', ')}.`) }),
          query: z.object({ v: z.string().optional().describe('Version of the file; with the current one the answer is cacheable for a year.') }),
          docs: {
            headers: CONDITIONAL_GET,
            responseHeaders: { ETag: 'Validator of the file.', 'Cache-Control': 'A year (`immutable`) with the current `v`, else 5 minutes.' },
            errors: [404],
          },
          handler: async ({ ctx, params, query }) => {
            const asset = ui.asset(params.file);
            if (!asset) throw new NotFoundError('asset', params.file);
            await serveFile(ctx, asset, ui.cacheControl(params.file, query.v));
          },
        }),
      ],
    };
  },
});

export default openapiPlugin;
