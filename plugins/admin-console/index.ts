/**
 * `admin-console` plugin: serves the admin console, a single-page app (Preact, built by Vite from
 * the top-level `admin-console/` folder) that talks to `/graphql` alone. `GET /admin` is the page,
 * `GET /admin-console/assets/:file` its hashed scripts and styles, both under a strict
 * Content-Security-Policy. On by default; `ADMIN_CONSOLE_ENABLED=false` mounts nothing.
 * See docs/console.md.
 */
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { NotFoundError } from '../../core/errors.ts';
import { adminConsoleOptions, assetParams } from './schemas.ts';
import { ASSET_MEDIA_TYPES, ASSETS_PREFIX, CONSOLE_PATH, ConsoleAssets, DEFAULT_DIST } from './service.ts';
import { sendConsoleFile } from './http.ts';

const tags = ['console'];

export const adminConsolePlugin = definePlugin({
  name: 'admin-console',
  enabledBy: 'ADMIN_CONSOLE_ENABLED',
  options: adminConsoleOptions,
  setup({ config, options, log }) {
    if (!config.ADMIN_CONSOLE_ENABLED) return {};
    const assets = new ConsoleAssets(options.dist_dir ?? DEFAULT_DIST);
    if (!assets.built) log.warn({ dist: options.dist_dir ?? DEFAULT_DIST }, 'admin console not built: run npm run build:console');
    return {
      routes: [
        defineRoute({
          method: 'GET', path: CONSOLE_PATH, auth: 'public', tags,
          summary: 'The admin console (HTML page of a single-page app on /graphql)',
          description: 'Served with a strict Content-Security-Policy; sign-in happens in the page (API key or passkey → bearer token kept in memory).',
          docs: { mediaTypes: ['text/html'] },
          handler: async ({ ctx }) => {
            await sendConsoleFile(ctx, assets.index(), 'no-cache');
          },
        }),
        defineRoute({
          method: 'GET', path: `${ASSETS_PREFIX}/:file`, auth: 'public', tags,
          summary: 'A script or style sheet of the admin console',
          params: assetParams,
          docs: { errors: [404], mediaTypes: ASSET_MEDIA_TYPES },
          handler: async ({ ctx, params }) => {
            const file = assets.asset(params.file);
            if (!file) throw new NotFoundError('asset', params.file);
            // Names carry a content hash: a new build has new names.
            await sendConsoleFile(ctx, file, 'public, max-age=31536000, immutable');
          },
        }),
      ],
    };
  },
});

export default adminConsolePlugin;
