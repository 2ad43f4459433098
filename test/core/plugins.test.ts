import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import mongoose from 'mongoose';
import { printSchema } from 'graphql';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins, loadPlugins, corePlugins } from '../../builtin-plugins.ts';
import { createApp, PluginError } from '../../core/kernel.ts';
import { definePlugin, type Plugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { ADMIN_KEY, buildTestApp, TEST_SECRETS, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

const testConfig = (extra: Record<string, string> = {}) =>
  loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS, ...extra });

/** A plugin that records when it is set up and closed. */
const recorder = (name: string, log: { setup: string[]; close: string[] }, dependsOn: string[] = []): Plugin =>
  definePlugin({
    name,
    dependsOn,
    setup: () => {
      log.setup.push(name);
      return { close: () => void log.close.push(name) };
    },
  });

const run = promisify(execFile);

const openConnections = () => mongoose.connections.filter((c) => c.readyState === 1).length;

/** Settings that enable the example fixture by module path and leave every built-in plugin out. */
const exampleOnly = () => ({
  PLUGINS: './test/fixtures/example-plugin.ts',
  DISABLED_PLUGINS: builtinPlugins()
    .map((p) => p.name)
    .join(','),
});

// The core + example app, with the example loaded the way an operator enables a third-party plugin.
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: await loadPlugins(loadConfig(exampleOnly())) });
});
afterAll(() => t?.close());

describe('plugin ordering', () => {
  it('sets plugins up after their dependencies and closes them in reverse', async () => {
    const log = { setup: [] as string[], close: [] as string[] };
    const app = await createApp({ corePlugins: corePlugins(),
      config: testConfig(),
      plugins: [
        recorder('c', log, ['b']),
        recorder('b', log, ['a']),
        recorder('free', log),
        recorder('a', log, ['identity']),
      ],
    });
    try {
      expect(log.setup).toEqual(['a', 'b', 'c', 'free']);
      expect(app.kernel.plugins()).toEqual(['rate-limit', 'identity', 'events', 'idempotency', 'health', 'a', 'b', 'c', 'free']);
      expect(log.close).toEqual([]);
    } finally {
      await app.close();
    }
    expect(log.close).toEqual(['free', 'c', 'b', 'a']);
  });

  it('keeps the given order of independent plugins', async () => {
    const log = { setup: [] as string[], close: [] as string[] };
    const app = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [recorder('y', log), recorder('x', log), recorder('z', log)] });
    await app.close();
    expect(log.setup).toEqual(['y', 'x', 'z']);
    expect(log.close).toEqual(['z', 'x', 'y']);
  });

  it('close is idempotent', async () => {
    const log = { setup: [] as string[], close: [] as string[] };
    const app = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [recorder('once', log)] });
    await Promise.all([app.close(), app.close()]);
    await app.close();
    expect(log.close).toEqual(['once']);
  });
});

describe('invalid plugin lists fail createApp with a readable message', () => {
  const fails = async (plugins: Plugin[]) => {
    const err = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins }).then(
      () => {
        throw new Error('createApp should have failed');
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PluginError);
    return (err as Error).message;
  };
  const log = { setup: [] as string[], close: [] as string[] };

  it('missing dependency', async () => {
    expect(await fails([recorder('billing', log, ['payments'])])).toBe('Plugin "billing" depends on "payments", which is not enabled');
  });

  it('dependency cycle', async () => {
    const msg = await fails([recorder('p', log, ['q']), recorder('q', log, ['r']), recorder('r', log, ['p'])]);
    expect(msg).toBe('Plugin dependency cycle: p -> q -> r -> p');
  });

  it('self dependency', async () => {
    expect(await fails([recorder('selfish', log, ['selfish'])])).toBe('Plugin dependency cycle: selfish -> selfish');
  });

  it('duplicate name', async () => {
    expect(await fails([recorder('twin', log), recorder('twin', log)])).toBe('Plugin "twin" is enabled twice');
  });

  it.each(['rate-limit', 'identity', 'events', 'idempotency', 'health'])('reserved core name %s', async (name) => {
    expect(await fails([recorder(name, log)])).toBe(`Plugin name "${name}" is reserved for a core plugin`);
  });

  it('invalid options name the plugin and every bad option', async () => {
    const msg = await fails([examplePlugin.configure({ greeting: 42, checks: ['ok', 'explode'] })]);
    expect(msg).toMatch(/^Invalid options for plugin "example":\n/);
    expect(msg).toMatch(/^ {2}greeting: /m);
    expect(msg).toMatch(/^ {2}checks\.1: /m);
  });

  it('options that are not an object', async () => {
    const strict = definePlugin({ name: 'strict-opts', options: z.object({ n: z.number() }).strict(), setup: () => ({}) });
    const msg = await fails([strict.configure('nope')]);
    expect(msg).toMatch(/^Invalid options for plugin "strict-opts":\n {2}\(options\): /);
  });

  it('none of these set a plugin up', () => {
    expect(log.setup).toEqual([]);
  });
});

describe('start-up failures after set-up release everything', () => {
  it('a duplicate health check name fails start-up, closes the plugins and the database', async () => {
    const log = { setup: [] as string[], close: [] as string[] };
    const dup = definePlugin({ name: 'dup-health', setup: () => ({ health: { database: () => true } }) });
    const before = openConnections();
    const err = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [recorder('first', log), dup] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Health check "database" registered by "dup-health" is already registered by "health"');
    expect(log.close).toEqual(['first']);
    expect(openConnections()).toBe(before);
  });

  it('personal-data declarations are collected from every plugin; a duplicate name fails start-up', async () => {
    const decl = (name: string) => ({ name, model: 'X', gdpr_fields: ['email'] });
    let seen: unknown[] = [];
    const a = definePlugin({ name: 'pd-a', setup: () => ({ personalData: [decl('a')] }) });
    const b = definePlugin({ name: 'pd-b', setup: ({ kernel }) => ({ personalData: () => [decl('b')], ready: () => void (seen = [...kernel.personalData()]) }) });
    const app = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [a, b] });
    await app.close();
    // The core plugins declare the account itself (identity) and the store of idempotent answers; every other entry is what the plugins contribute.
    expect(seen).toEqual([
      { name: 'users', plugin: 'identity', model: 'User', subject_field: '_id', gdpr_fields: ['email', 'name', 'attributes'], tenant_field: 'tenant_id', neutral: { attributes: {} }, on_erasure: 'account' },
      expect.objectContaining({ name: 'idempotency_keys', plugin: 'idempotency', model: 'IdempotencyKey', on_erasure: 'scrub' }),
      { ...decl('a'), plugin: 'pd-a' },
      { ...decl('b'), plugin: 'pd-b' },
    ]);
    const c = definePlugin({ name: 'pd-c', setup: () => ({ personalData: [decl('a')] }) });
    const before = openConnections();
    const err = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [a, c] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Personal data "a" of plugin "pd-c" is already declared');
    expect(openConnections()).toBe(before);
  });

  it("a second declaration of the account (on_erasure: 'account') fails start-up and releases the database", async () => {
    const other = definePlugin({ name: 'pd-account', setup: () => ({ personalData: [{ name: 'members', model: 'X', subject_field: '_id', gdpr_fields: ['email'], on_erasure: 'account' as const }] }) });
    const before = openConnections();
    const err = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [other] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Personal data "members" of plugin "pd-account" declares the account, already declared by "users" of plugin "identity"');
    expect(openConnections()).toBe(before);
  });

  it("a declaration erased by scrubbing (on_erasure: 'scrub') without its scrub() fails start-up", async () => {
    const copies = definePlugin({ name: 'pd-copies', setup: () => ({ personalData: [{ name: 'copies', model: 'X', gdpr_fields: [], on_erasure: 'scrub' as const }] }) });
    const err = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [copies] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Personal data "copies" of plugin "pd-copies" is erased by scrubbing but has no scrub()');
  });

  it('a route registered twice fails start-up, closes the plugins and the database', async () => {
    const log = { setup: [] as string[], close: [] as string[] };
    const route = (p: string) => defineRoute({ method: 'GET', path: p, auth: 'public', handler: () => ({}) });
    const one = definePlugin({ name: 'one', setup: () => ({ routes: [route('/same')] }) });
    const two = definePlugin({ name: 'two', setup: () => ({ routes: [route('/same')], close: () => void log.close.push('two') }) });
    const before = openConnections();
    const err = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [one, two] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Route GET /same is registered twice: by plugin "one" and by plugin "two"');
    expect(log.close).toEqual(['two']);
    expect(openConnections()).toBe(before);
  });

  it('a route clashing with a core route fails start-up', async () => {
    const clash = definePlugin({
      name: 'clash',
      setup: () => ({ routes: [defineRoute({ method: 'GET', path: '/health', auth: 'public', handler: () => ({}) })] }),
    });
    await expect(createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [clash] })).rejects.toThrow('Route GET /health is registered twice');
  });

  it('the same path with another method is not a duplicate', async () => {
    const both = definePlugin({
      name: 'both',
      setup: () => ({
        routes: [
          defineRoute({ method: 'GET', path: '/thing', auth: 'public', handler: () => ({ m: 'get' }) }),
          defineRoute({ method: 'POST', path: '/thing', auth: 'public', handler: () => ({ m: 'post' }) }),
        ],
      }),
    });
    const app = await createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [both] });
    await app.close();
  });

  it('conflicting GraphQL fields fail start-up and release the database', async () => {
    const gql = (name: string) =>
      definePlugin({ name, setup: () => ({ graphql: (b) => b.queryField('clash', (f) => f.string({ resolve: () => name })) }) });
    const before = openConnections();
    await expect(createApp({ corePlugins: corePlugins(), config: testConfig(), plugins: [gql('g1'), gql('g2')] })).rejects.toThrow(/clash/);
    expect(openConnections()).toBe(before);
  });
});

describe('a third-party plugin loaded by module path (PLUGINS)', () => {
  it('loadPlugins imports the module and finds its plugin object', async () => {
    const withBuiltins = await loadPlugins(loadConfig({ PLUGINS: './test/fixtures/example-plugin.ts' }));
    expect(withBuiltins.map((p) => p.name)).toEqual([...builtinPlugins().map((p) => p.name), 'example']);
    const plugins = await loadPlugins(loadConfig(exampleOnly()));
    expect(plugins.map((p) => p.name)).toEqual(['example']);
    expect(t.app.kernel.plugins()).toEqual(['rate-limit', 'identity', 'events', 'idempotency', 'health', 'example']);
  });

  it('rejects a module without a plugin export, naming the entry', async () => {
    await expect(loadPlugins(loadConfig({ PLUGINS: './test/helpers/global-setup.ts' }))).rejects.toThrow(
      'PLUGINS entry "./test/helpers/global-setup.ts" does not export a plugin object',
    );
  });

  // Run by Node itself: vitest's module runner does not decode percent-escaped file URLs.
  it('resolves relative paths against a working directory whose name needs URL escaping', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'plugins #%20 '));
    try {
      await writeFile(join(dir, 'tiny.mjs'), "export default { name: 'tiny', dependsOn: [], setup: () => ({}) };\n");
      const script = [
        "import { loadConfig } from './config/index.ts';",
        "import { loadPlugins } from './builtin-plugins.ts';",
        "const list = await loadPlugins(loadConfig({ PLUGINS: './tiny.mjs' }), process.argv[1]);",
        'process.stdout.write(JSON.stringify(list.map((p) => p.name).slice(-1)));',
      ].join('\n');
      const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, dir]);
      expect(JSON.parse(stdout)).toEqual(['tiny']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('its route answers', async () => {
    const res = await t.http('GET', '/example/hello?name=ann', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ greeting: 'Hello, ann' });
  });

  it('its GraphQL field answers', async () => {
    const res = await t.gql('{ exampleGreeting(name: "zoe") }');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { exampleGreeting: 'Hello, zoe' } });
  });

  it('its health check answers', async () => {
    const res = await t.http('GET', '/admin/health/detailed', { key: ADMIN_KEY });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    expect(Object.keys(res.body.checks).sort()).toEqual(['database', 'example_ok']);
    expect(res.body.checks.example_ok).toEqual({ status: 'ok', duration_ms: expect.any(Number) });
  });

  it('the printed GraphQL schema of core + example', () => {
    expect(printSchema(t.app.schema)).toMatchSnapshot();
  });
});
