import Router from '@koa/router';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { indexRoutes } from '../../core/http/route-index.ts';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';

/** Routes whose order and path syntax the index must respect: a literal before a parameter, a parameter first segment, the root. */
const routing = definePlugin({
  name: 'routing',
  setup: () => ({
    routes: [
      defineRoute({ method: 'GET', path: '/rx/bulk', auth: 'public', handler: () => ({ route: 'bulk' }) }),
      defineRoute({ method: 'GET', path: '/rx/:id', auth: 'public', handler: ({ params }) => ({ route: 'id', params }) }),
      defineRoute({ method: 'GET', path: '/:anything/rx-any', auth: 'public', handler: ({ params }) => ({ route: 'any', params }) }),
      defineRoute({ method: 'DELETE', path: '/rx/:id', auth: 'public', handler: () => ({ route: 'delete' }) }),
    ],
  }),
});

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [routing] });
});
afterAll(() => t?.close());

describe('the route index', () => {
  it('answers what the router answers, for every route of the app and paths around them', () => {
    const router = new Router();
    for (const r of t.app.kernel.routes()) router.register(r.path, [r.method], () => undefined);
    router.all('/graphql', () => undefined);
    const index = indexRoutes(router);
    const paths = ['/', '//', '/graphql', '/GRAPHQL/', '/nope', '/rx', '/rx/', '/RX/Bulk', '/rx/bulk/', '/rx/1/2', '/x/rx-any', '/rx/rx-any', '/%72x/bulk'];
    for (const r of t.app.kernel.routes()) {
      const filled = r.path.replace(/:\w+/g, '0123456789abcdef01234567');
      paths.push(filled, `${filled}/`, filled.toUpperCase(), `${filled}/more`, filled.replace(/\/[^/]*$/, ''));
    }
    for (const path of paths) {
      for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE']) {
        const m = router.match(path, method);
        expect(index.match(path, method), `${method} ${path}`).toBe(m.pathAndMethod[0]);
        expect(index.matchPath(path), path).toBe(m.path[0]);
      }
    }
  });

  it('over HTTP: a literal route registered first wins over a parameter, paths match whatever their case, a parameter first segment matches any', async () => {
    expect((await t.http('GET', '/rx/bulk', { key: null })).body).toEqual({ route: 'bulk' });
    expect((await t.http('GET', '/RX/Bulk/', { key: null })).body).toEqual({ route: 'bulk' });
    expect((await t.http('GET', '/rx/7', { key: null })).body).toEqual({ route: 'id', params: { id: '7' } });
    expect((await t.http('GET', '/zz/rx-any', { key: null })).body).toEqual({ route: 'any', params: { anything: 'zz' } });
    expect((await t.http('GET', '/rx/rx-any', { key: null })).body).toEqual({ route: 'id', params: { id: 'rx-any' } });
  });

  it('over HTTP: a known path with another method is still a 405 with Allow, an unknown path a 404', async () => {
    const res = await t.http('POST', '/rx/7', { key: null });
    expect(res.status).toBe(405);
    envelope(res);
    expect(res.body.error.code).toBe('METHOD_NOT_ALLOWED');
    expect(String(res.headers.get('allow'))).toContain('DELETE');
    const miss = await t.http('GET', '/rx-nothing/here', { key: null });
    expect(miss.status).toBe(404);
    expect(envelope(miss).code).toBe('NOT_FOUND');
  });
});
