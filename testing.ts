/**
 * Test support for plugins (`import { startTestServer } from 'plugin-api-server/testing'`): a real
 * server with your plugin on a real database, driven through HTTP as clients drive it.
 */
import { randomBytes } from 'node:crypto';
import { loadConfig } from './config/index.ts';
import { builtinPlugins, corePlugins } from './builtin-plugins.ts';
import { createApp, type App } from './core/kernel.ts';
import type { Plugin } from './core/plugin.ts';

export interface TestResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

export interface TestServer {
  app: App;
  url: string;
  /** The bootstrap system administrator's API key (the default credential of `http` and `gql`). */
  adminKey: string;
  /** One request; `json` is sent as the JSON body; `key: null` sends no credential. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests assert response bodies field by field
  http<T = any>(method: string, path: string, opts?: { json?: unknown; key?: string | null; headers?: Record<string, string> }): Promise<TestResponse<T>>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as http
  gql<T = any>(query: string, variables?: Record<string, unknown>, opts?: { key?: string | null }): Promise<TestResponse<{ data?: T; errors?: { message: string; extensions?: { code?: string } }[] }>>;
  /** A new tenant with one user of the given roles and that user's API key. */
  tenantUser(roles?: ('user' | 'admin')[]): Promise<{ tenantId: string; userId: string; key: string }>;
  close(): Promise<void>;
}

/**
 * Starts the server with `plugins` (plus the built-in ones unless `builtins: false`) on port 0.
 * The database is `MONGODB_URI` from `settings` or the environment (a fresh database name per
 * call), else an embedded MongoDB started for this server (mongodb-memory-server; set
 * `MONGOMS_SYSTEM_BINARY` on machines that cannot download one).
 */
export async function startTestServer(opts: { plugins: Plugin[]; settings?: Record<string, string>; builtins?: boolean }): Promise<TestServer> {
  const adminKey = `test-admin-${randomBytes(12).toString('hex')}`;
  const env = loadConfig();
  let uri = opts.settings?.MONGODB_URI ?? env.MONGODB_URI;
  let stopEmbedded: (() => Promise<unknown>) | undefined;
  if (!uri) {
    const { MongoMemoryServer } = await import('mongodb-memory-server');
    const server = await MongoMemoryServer.create();
    uri = server.getUri();
    stopEmbedded = () => server.stop();
  }
  const db = new URL(uri);
  db.pathname = `/t_${randomBytes(6).toString('hex')}`;
  const secret = () => randomBytes(32).toString('hex');
  const config = loadConfig({
    NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: adminKey, TOKEN_SECRET: secret(), CURSOR_HMAC_SECRET: secret(),
    ...opts.settings, MONGODB_URI: db.toString(),
  });
  const app = await createApp({ corePlugins: corePlugins(), config, plugins: [...(opts.builtins === false ? [] : builtinPlugins()), ...opts.plugins] });
  const url = `http://127.0.0.1:${await app.listen(0, '127.0.0.1')}`;

  const http: TestServer['http'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    const key = o.key === undefined ? adminKey : o.key;
    if (key) headers['X-API-Key'] = key;
    if (o.json !== undefined) headers['Content-Type'] ??= 'application/json';
    const res = await fetch(url + path, { method, headers, ...(o.json !== undefined ? { body: JSON.stringify(o.json) } : {}) });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text) as never };
  };
  const created = async (path: string, json: unknown) => {
    const r = await http<{ id: string; key?: string }>('POST', path, { json });
    if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  return {
    app, url, adminKey, http,
    gql: (query, variables, o = {}) => http('POST', '/graphql', { ...o, json: { query, variables } }),
    async tenantUser(roles = ['user']) {
      const tenant = await created('/admin/tenants', { name: `t-${randomBytes(3).toString('hex')}` });
      const user = await created('/admin/users', { email: `u-${randomBytes(4).toString('hex')}@example.com`, name: 'Test User', tenant_id: tenant.id, roles });
      const key = await created('/admin/api-keys', { user_id: user.id, name: 'test' });
      return { tenantId: tenant.id, userId: user.id, key: key.key! };
    },
    async close() {
      await app.close();
      await stopEmbedded?.();
    },
  };
}
