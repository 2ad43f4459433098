import type Router from '@koa/router';

type Layer = Router['stack'][number];

/** A first path segment any request path may have: a parameter, a wildcard or a group. */
const VARIABLE_SEGMENT = /[:*(){}?+\\[\]]/;

/** The first segment of a path (`/projects/1` → `projects`), lower-cased: the router's paths match case-insensitively. */
function headOf(path: string): string {
  const end = path.indexOf('/', 1);
  return (end === -1 ? path.slice(1) : path.slice(1, end)).toLowerCase();
}

/**
 * What the router's `match` answers for a request, found among the layers whose path can start
 * with the request's first segment instead of by testing every layer. Same answers, same order:
 * each candidate list keeps the router's registration order (the first route registered for a
 * path and method wins), and a layer whose first segment is not literal is a candidate for every
 * path. Built once, after every route is registered.
 */
export interface RouteIndex {
  /** The first layer matching the path and method (the router's `pathAndMethod[0]`). */
  match(path: string, method: string): Layer | undefined;
  /** The first layer matching the path, whatever its methods (the router's `path[0]`). */
  matchPath(path: string): Layer | undefined;
}

export function indexRoutes(router: Router): RouteIndex {
  const anywhere: { layer: Layer; at: number }[] = [];
  const byHead = new Map<string, { layer: Layer; at: number }[]>();
  router.stack.forEach((layer, at) => {
    const path = typeof layer.path === 'string' ? layer.path : null;
    const head = path === null || VARIABLE_SEGMENT.test(path.split('/')[1] ?? '') ? null : headOf(path);
    if (head === null) anywhere.push({ layer, at });
    else byHead.set(head, [...(byHead.get(head) ?? []), { layer, at }]);
  });
  const ordered = (xs: { layer: Layer; at: number }[]) => xs.sort((a, b) => a.at - b.at).map((x) => x.layer);
  const candidates = new Map([...byHead].map(([head, xs]) => [head, ordered([...xs, ...anywhere])]));
  const rest = ordered([...anywhere]);
  const of = (path: string) => candidates.get(headOf(path)) ?? rest;
  return {
    match(path, method) {
      method = method.toUpperCase();
      for (const layer of of(path)) {
        if ((layer.methods.length === 0 || layer.methods.includes(method)) && layer.match(path)) return layer;
      }
      return undefined;
    },
    matchPath(path) {
      for (const layer of of(path)) if (layer.match(path)) return layer;
      return undefined;
    },
  };
}
