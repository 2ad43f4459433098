/**
 * The GraphiQL page as a Yoga plugin (the `transport` contribution's `yogaPlugins`): a browser's
 * `GET /graphql` (`Accept: text/html`) gets the page before Yoga parses any request. The kernel
 * runs Yoga with `graphiql: false`, so without this plugin no page is rendered.
 */
import { shouldRenderGraphiQL, type Plugin as YogaPlugin } from 'graphql-yoga';
import { renderGraphiQLPage, type GraphiQLPageOptions } from './service.ts';

/** Answers GraphiQL's page to `GET /graphql` with `Accept: text/html`. */
export function graphiqlPage(options: GraphiQLPageOptions = {}): YogaPlugin {
  return {
    async onRequest({ request, url, fetchAPI, endResponse }) {
      if (!shouldRenderGraphiQL(request) || (url.pathname !== '/graphql' && url.pathname !== '/graphql/')) return;
      endResponse(new fetchAPI.Response(await renderGraphiQLPage(options), { status: 200, headers: { 'Content-Type': 'text/html' } }));
    },
  };
}
