import { z } from 'zod';
import mongoose from 'mongoose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { corePlugins } from '../../builtin-plugins.ts';
import { createApp, PluginError } from '../../core/kernel.ts';
import { definePlugin, type Plugin } from '../../core/plugin.ts';
import type { EventConsumer } from '../../plugins/events/public/contributions.ts';
import { buildTestApp, TEST_SECRETS, uniqueDbUri, type TestApp } from '../helpers/app.ts';

/**
 * The events plugin collects every plugin's `eventTypes` and `eventConsumers` itself, from the
 * kernel's view of the contributions, once every plugin is set up: the kernel knows nothing of
 * the event log.
 */
const consumer = (name: string): EventConsumer => ({ name, types: ['ping'], handle: async () => {} });
const contributing = (name: string, contribution: Record<string, unknown>): Plugin => definePlugin({ name, setup: () => contribution });

const startWith = (...plugins: Plugin[]) =>
  createApp({
    corePlugins: corePlugins(),
    config: loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS }),
    plugins,
  }).catch((e: unknown) => e);

describe('event contributions', () => {
  let t: TestApp;
  beforeAll(async () => {
    // The function form is evaluated after every setup(); the array form as given.
    t = await buildTestApp({
      plugins: [
        contributing('greeter', { eventTypes: () => [{ name: 'greeter.said_hello', description: 'Said hello', data: z.object({ to: z.string() }) }] }),
        contributing('waver', { eventTypes: [{ name: 'waver.waved', description: 'Waved', data: z.object({}), outbound: false }], eventConsumers: [consumer('waver-ping')] }),
      ],
    });
  });
  afterAll(() => t.close());

  it('lists each plugin\'s event types in the catalogue, REST and GraphQL, with the plugin that declared it', async () => {
    const res = await t.http('GET', '/events/types');
    expect(res.status).toBe(200);
    const byName = new Map((res.body as { items: { name: string; plugin: string; outbound: boolean; schema: { properties?: object } }[] }).items.map((x) => [x.name, x]));
    expect(byName.get('greeter.said_hello')).toMatchObject({ plugin: 'greeter', outbound: true, schema: { properties: { to: { type: 'string' } } } });
    expect(byName.get('waver.waved')).toMatchObject({ plugin: 'waver', outbound: false });
    const g = await t.gql('{ eventTypes { name plugin } }');
    expect(g.body.data.eventTypes).toEqual(expect.arrayContaining([{ name: 'greeter.said_hello', plugin: 'greeter' }, { name: 'waver.waved', plugin: 'waver' }]));
  });

  it('runs each plugin\'s consumers: the lag gauge counts them by name', async () => {
    expect(Object.keys(await t.app.services.get('events').lag())).toContain('waver-ping');
  });
});

describe('event contributions that fail start-up name their plugin', () => {
  const before = () => mongoose.connections.filter((c) => c.readyState === 1).length;

  it('an event type declared by two plugins', async () => {
    const type = { name: 'shared.thing', description: 'x', data: z.object({}) };
    const open = before();
    const err = await startWith(contributing('first-types', { eventTypes: [type] }), contributing('second-types', { eventTypes: [type] }));
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Event type "shared.thing" of plugin "second-types" is already declared by plugin "first-types"');
    expect(before()).toBe(open);
  });

  it('a consumer name used twice', async () => {
    const err = await startWith(contributing('first-consumer', { eventConsumers: [consumer('same')] }), contributing('second-consumer', { eventConsumers: [consumer('same')] }));
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Plugin "second-consumer": Event consumer "same" is already registered');
  });

  it('an eventTypes function that throws', async () => {
    const err = await startWith(contributing('broken-types', { eventTypes: () => { throw new Error('no catalogue today'); } }));
    expect(err).toBeInstanceOf(PluginError);
    expect((err as Error).message).toBe('Plugin "broken-types": no catalogue today');
  });
});
