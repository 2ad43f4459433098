import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [examplePlugin], config: { LOG_LEVEL: 'error' } });
});
afterAll(() => t?.close());

it('serves health and me', async () => {
  expect((await t.http('GET', '/health')).body).toEqual({ status: 'ok' });
  expect((await t.http('GET', '/ready')).status).toBe(200);
  const me = await t.http('GET', '/auth/me');
  expect(me.status).toBe(200);
  expect(me.body.scope).toBe('system');
  const g = await t.gql('{ me { email } exampleGreeting(name: " bob ") }');
  expect(g.body).toEqual({ data: { me: { email: 'admin@system.local' }, exampleGreeting: 'Hello, bob' } });
});
