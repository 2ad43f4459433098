/**
 * The app a console browser test drives: all built-in plugins (or `plugins`) on a free port, with
 * the console's test settings plus `settings`, and an API-key client for the test's own set-up.
 */
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins, corePlugins } from '../../builtin-plugins.ts';
import { createApp, type App } from '../../core/kernel.ts';
import type { Plugin } from '../../core/plugin.ts';
import { ADMIN_KEY, TEST_SECRETS, uniqueDbUri } from '../helpers/app.ts';
import { freePort } from './helpers.ts';

export interface ConsoleApp {
  app: App;
  /** What the browser opens (`localhost`, an origin WebAuthn accepts). */
  origin: string;
  /** What the test's own calls use. */
  api: string;
  /** A JSON request with an API key; `body` is null for a 204. */
  call(method: string, path: string, key: string, json?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** A user of `tenantId` with `roles` (name from the e-mail), and an API key of theirs. */
  mkUser(tenantId: string, email: string, roles: string[]): Promise<{ id: string; key: string }>;
}

/** `settings` may be a function of the origin the browser opens (for links and WebAuthn settings that name it). */
export async function startConsoleApp(settings: Record<string, string> | ((origin: string) => Record<string, string>) = {}, plugins: Plugin[] = builtinPlugins()): Promise<ConsoleApp> {
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const origin = `http://localhost:${port}`;
  const config = loadConfig({
    NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY, MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS,
    AUTH_CACHE_TTL_MS: '0', METRICS_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false', ...(typeof settings === 'function' ? settings(origin) : settings),
  });
  const app = await createApp({ corePlugins: corePlugins(), config, plugins });
  await app.listen(port, '127.0.0.1');
  const call: ConsoleApp['call'] = async (method, path, key, json, headers = {}) => {
    const res = await fetch(api + path, {
      method,
      headers: { 'X-API-Key': key, ...(json !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
      ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
    });
    return { status: res.status, body: res.status === 204 ? null : ((await res.json()) as any) };
  };
  const mkUser: ConsoleApp['mkUser'] = async (tenantId, email, roles) => {
    const u = await call('POST', '/admin/users', ADMIN_KEY, { email, name: email.split('@')[0], tenant_id: tenantId, roles, features: [] });
    const k = await call('POST', '/admin/api-keys', ADMIN_KEY, { user_id: u.body.id, name: 'laptop' });
    return { id: u.body.id as string, key: k.body.key as string };
  };
  return { app, origin, api, call, mkUser };
}
