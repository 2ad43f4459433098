/**
 * A route's own rate-limit budget (`budget` of `defineRoute`), as a team's plugin declares it: `max`
 * per window per value of a path parameter and per client, apart from RATE_LIMIT_MAX, whose budget
 * it does not spend; and a budget the kernel cannot apply fails start-up with what is wrong.
 */
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { corePlugins } from '../../builtin-plugins.ts';
import { createApp, PluginError } from '../../core/kernel.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute, type RouteBudget } from '../../core/http/route.ts';
import { buildTestApp, envelope, TEST_SECRETS, uniqueDbUri, type TestApp } from '../helpers/app.ts';

const GENERAL = 2;
const OWN = 4;

/** A team's plugin: an inbox whose senders post in bursts, per channel, and a plain route beside it. */
const inbox = (budget: RouteBudget, path = '/inbox/:channel') => definePlugin({
  name: 'inbox',
  setup: () => ({
    routes: [
      defineRoute({ method: 'POST', path, auth: 'public', params: z.object({ channel: z.string() }), budget, handler: () => ({ received: true }) }),
      defineRoute({ method: 'GET', path: '/inbox-hello', auth: 'public', handler: () => ({ hello: true }) }),
    ],
  }),
});

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [inbox({ param: 'channel', name: 'inbox', max: OWN })], config: { TRUST_PROXY: 'true', RATE_LIMIT_MAX: String(GENERAL) } });
});
afterAll(() => t?.close());

const from = (ip: string) => ({ 'X-Forwarded-For': ip });
const post = (channel: string, ip: string) => t.http('POST', `/inbox/${channel}`, { key: null, headers: from(ip), json: {} });

describe('a route budget declared by a plugin', () => {
  it('counts per parameter value and client, up to its max, and spends nothing of the general budget', async () => {
    const ip = '10.3.0.1';
    for (let i = 0; i < OWN; i++) {
      const res = await post('a', ip);
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBe(String(OWN));
    }
    const over = await post('a', ip);
    expect(over.status).toBe(429);
    expect(envelope(over).code).toBe('RATE_LIMITED');
    // Another value has its own budget, another client too.
    expect((await post('b', ip)).status).toBe(200);
    expect((await post('a', '10.3.0.2')).status).toBe(200);
    // The general budget of the address is whole: GENERAL requests elsewhere, then 429.
    for (let i = 0; i < GENERAL; i++) expect((await t.http('GET', '/inbox-hello', { key: null, headers: from(ip) })).headers.get('ratelimit-limit')).toBe(String(GENERAL));
    expect((await t.http('GET', '/inbox-hello', { key: null, headers: from(ip) })).status).toBe(429);
  });

  it('a budget the kernel cannot apply fails start-up, naming the route and what is wrong', async () => {
    const config = () => loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS });
    const noParam = await createApp({ corePlugins: corePlugins(), config: config(), plugins: [inbox({ param: 'box', name: 'inbox', max: 5 })] }).catch((e: unknown) => e);
    expect(noParam).toBeInstanceOf(PluginError);
    expect((noParam as Error).message).toBe('Route POST /inbox/:channel of plugin "inbox": its budget is counted by ":box", which its path does not have');
    const noMax = await createApp({ corePlugins: corePlugins(), config: config(), plugins: [inbox({ param: 'channel', name: 'inbox', max: 0 })] }).catch((e: unknown) => e);
    expect(noMax).toBeInstanceOf(PluginError);
    expect((noMax as Error).message).toBe('Route POST /inbox/:channel of plugin "inbox": its budget\'s max must be a positive integer, not 0');
    // Two routes under one budget name would share their counts.
    const second = definePlugin({
      name: 'outbox',
      setup: () => ({ routes: [defineRoute({ method: 'POST', path: '/outbox/:channel', auth: 'public', budget: { param: 'channel', name: 'inbox', max: 5 }, handler: () => ({}) })] }),
    });
    const shared = await createApp({ corePlugins: corePlugins(), config: config(), plugins: [inbox({ param: 'channel', name: 'inbox', max: 5 }), second] }).catch((e: unknown) => e);
    expect(shared).toBeInstanceOf(PluginError);
    expect((shared as Error).message).toBe('Route POST /outbox/:channel of plugin "outbox": its budget\'s name "inbox" is already the budget of route POST /inbox/:channel of plugin "inbox"');
  });
});
