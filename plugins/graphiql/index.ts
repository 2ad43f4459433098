/**
 * `graphiql` plugin: GraphiQL, the in-browser GraphQL IDE, at `GET /graphql` (a browser's request,
 * `Accept: text/html`) with its files under `/graphql/assets/`, all served by this process (works
 * offline). A developer tool: off when `NODE_ENV=production`; `DISABLED_PLUGINS=graphiql` leaves
 * it out anywhere. See docs/clients.md, "GraphiQL".
 */
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { GRAPHIQL_ASSETS_PATH } from './service.ts';
import { sendGraphiQLAsset } from './http.ts';
import { graphiqlPage } from './yoga.ts';
import { ASSET_MEDIA_TYPES, assetParams } from './schemas.ts';

export const graphiqlPlugin = definePlugin({
  name: 'graphiql',
  setup({ config }) {
    if (config.NODE_ENV === 'production') return {};
    return {
      // The page: a Yoga plugin in front of the kernel's GraphQL endpoint.
      transport: { yogaPlugins: () => [graphiqlPage()] },
      routes: [
        defineRoute({
          method: 'GET', path: `${GRAPHIQL_ASSETS_PATH}/:file`, auth: 'public', tags: ['graphiql'],
          summary: 'A script, style sheet or icon of the GraphiQL page (content-hashed name, cached for good)',
          params: assetParams,
          docs: { errors: [404], mediaTypes: ASSET_MEDIA_TYPES },
          handler: ({ ctx, params }) => sendGraphiQLAsset(ctx, params.file),
        }),
      ],
    };
  },
});

export default graphiqlPlugin;
