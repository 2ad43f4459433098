/**
 * Provider registration: bad registrations fail start-up with a readable PluginError; with
 * WEBHOOKS_ENABLED false no webhook route exists but registrations still succeed; providers
 * declared in WEBHOOK_PROVIDERS emit WEBHOOK_RECEIVED (a subscriber's throw fails the event).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { loadConfig, ConfigError } from '../../config/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { PluginError } from '../../core/kernel.ts';
import { onHook } from '../../core/hooks.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { webhookEventModel } from '../../plugins/webhooks/model.ts';
import { deliver, hmac, newCalls, providersPlugin, SECRET } from './helpers.ts';

const apps: TestApp[] = [];
afterAll(() => Promise.all(apps.map((a) => a.close())));
const ok = { secret: SECRET, verifier: { type: 'hmac-sha256' as const }, event_id_path: 'id' };

async function startupError(regs: Parameters<typeof providersPlugin>[1], extra: Parameters<typeof providersPlugin>[1] = []) {
  const plugins = [webhooksPlugin, providersPlugin(newCalls(), regs)];
  if (extra.length) plugins.push(providersPlugin(newCalls(), extra, 'second-provider-plugin'));
  try {
    apps.push(await buildTestApp({ plugins, config: { WEBHOOKS_ENABLED: 'true' } }));
  } catch (err) {
    return err as Error;
  }
  throw new Error('start-up succeeded');
}

describe('a bad registration fails start-up with a readable message', () => {
  it('a duplicate name (from another plugin too)', async () => {
    const err = await startupError([{ provider: 'dup', ...ok }], [{ provider: 'dup', ...ok }]);
    expect(err).toBeInstanceOf(PluginError);
    expect(err.message).toBe('Plugin "second-provider-plugin": Webhook provider "dup" is already registered');
  });

  it('a missing or empty secret', async () => {
    const err = await startupError([{ provider: 'nosecret', verifier: { type: 'hmac-sha256' }, event_id_path: 'id' } as never]);
    expect(err).toBeInstanceOf(PluginError);
    expect(err.message).toContain('Webhook provider "nosecret" is invalid');
    expect(err.message).toContain('secret: is required');
    const empty = await startupError([{ provider: 'empty', ...ok, secret: '' }]);
    expect(empty.message).toContain('secret: is required');
  });

  it('an unknown verifier, a bad encoding', async () => {
    const err = await startupError([{ provider: 'weird', ...ok, verifier: { type: 'md5' } as never }]);
    expect(err).toBeInstanceOf(PluginError);
    expect(err.message).toMatch(/verifier: must be \{ type: 'hmac-sha256'/);
    const enc = await startupError([{ provider: 'enc', ...ok, verifier: { type: 'hmac-sha256', encoding: 'base32' } as never }]);
    expect(enc.message).toContain('verifier');
  });

  it('no event id source, a bad provider name, a bad dotted path', async () => {
    expect((await startupError([{ provider: 'noid', secret: SECRET, verifier: { type: 'hmac-sha256' } }])).message).toContain('event_id_path: is required');
    expect((await startupError([{ provider: 'Bad Name', ...ok }])).message).toContain('provider:');
    expect((await startupError([{ provider: 'path', ...ok, event_id_path: 'a..b' }])).message).toContain('event_id_path:');
  });
});

describe('WEBHOOKS_ENABLED false (the default)', () => {
  it('no webhook route or GraphQL field exists, but providers can still register', async () => {
    const t = await buildTestApp({ plugins: [webhooksPlugin, providersPlugin(newCalls(), [{ provider: 'acme', ...ok }])] });
    apps.push(t);
    const body = '{"id":"1"}';
    const res = await deliver(t, 'acme', body, { 'X-Signature': hmac('sha256', body) });
    expect(res.status).toBe(404);
    expect(envelope(res).code).toBe('NOT_FOUND');
    expect((await t.http('GET', '/webhooks/events')).status).toBe(404);
    expect(t.app.schema.getQueryType()!.getFields().webhookEvents).toBeUndefined();
    expect(t.app.services.get('webhooks').providers()).toEqual(['acme']);
    expect(await webhookEventModel(t.app.db.conn).countDocuments({})).toBe(0);
  });
});

describe('WEBHOOK_PROVIDERS: a provider declared in configuration', () => {
  const setting = JSON.stringify([{ name: 'acme', verifier: { type: 'hmac-sha256', prefix: 'sha256=' }, secret_env: 'ACME_WEBHOOK_SECRET', event_id_path: 'id', event_type_path: 'type' }]);

  it('emits WEBHOOK_RECEIVED to subscribers; a subscriber that throws fails the event (dead-letter)', async () => {
    const seen: unknown[] = [];
    let fail = false;
    const subscriber = definePlugin({
      name: 'acme-subscriber',
      setup: () => ({
        hooks: [
          onHook('WEBHOOK_RECEIVED', async ({ payload, event }) => {
            seen.push({ payload, provider: event.provider, type: event.event_type, actor: event.actor.id });
            if (fail) throw new Error('subscriber down');
          }),
        ],
      }),
    });
    const t = await buildTestApp({
      plugins: [webhooksPlugin, subscriber],
      config: { WEBHOOKS_ENABLED: 'true', WEBHOOK_PROVIDERS: setting, ACME_WEBHOOK_SECRET: 'acme-secret-value' },
    });
    apps.push(t);
    const body = '{"id":"cfg_1","type":"order.created"}';
    const res = await deliver(t, 'acme', body, { 'X-Signature': `sha256=${hmac('sha256', body, 'acme-secret-value')}` });
    expect(res.body).toEqual({ status: 'ok', event_id: 'cfg_1' });
    expect(seen).toEqual([{ payload: { id: 'cfg_1', type: 'order.created' }, provider: 'acme', type: 'order.created', actor: 'system' }]);
    fail = true;
    const body2 = '{"id":"cfg_2","type":"order.created"}';
    const res2 = await deliver(t, 'acme', body2, { 'X-Signature': `sha256=${hmac('sha256', body2, 'acme-secret-value')}` });
    expect(res2.status).toBe(500);
    expect(await webhookEventModel(t.app.db.conn).findOne({ event_id: 'cfg_2' }).lean()).toMatchObject({ status: 'failed', error: 'subscriber down' });
  });

  it('a missing secret variable or bad JSON is a ConfigError naming the setting', () => {
    expect(() => loadConfig({ WEBHOOK_PROVIDERS: setting })).toThrow(ConfigError);
    expect(() => loadConfig({ WEBHOOK_PROVIDERS: setting })).toThrow(/provider "acme" names secret_env ACME_WEBHOOK_SECRET, which is not set/);
    expect(() => loadConfig({ WEBHOOK_PROVIDERS: '[{' })).toThrow(/WEBHOOK_PROVIDERS: must be a JSON array/);
    expect(() => loadConfig({ WEBHOOK_PROVIDERS: '[{"name":"x","verifier":{"type":"rot13"},"secret_env":"S"}]' })).toThrow(/WEBHOOK_PROVIDERS/);
    expect(loadConfig({ WEBHOOK_PROVIDERS: setting, ACME_WEBHOOK_SECRET: 's3' }).WEBHOOK_PROVIDERS[0]).toMatchObject({ name: 'acme', secret: 's3' });
  });
});
