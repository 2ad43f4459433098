import { randomBytes } from 'node:crypto';
import { relative } from 'node:path';
import { expect, inject } from 'vitest';
import { commandRecorder, tagRequests } from './command-log.ts';
import { loadConfig, type Config } from '../../config/index.ts';
import type { Logger } from '../../core/logger.ts';
import { createApp, type App } from '../../core/kernel.ts';
import type { JobRunContext, Plugin } from '../../core/plugin.ts';
import { systemActor } from '../../core/context.ts';
import { buildOpenApiDocument } from '../../plugins/openapi/service.ts';
import { ResponseChecker } from './response-check.ts';
import { corePlugins } from '../../builtin-plugins.ts';

export const ADMIN_KEY = 'test-admin-key-0123456789abcdef';
/** Secrets of test apps (so no test writes `.data/secrets.json`); pass `''` to leave one unset. */
export const TEST_SECRETS = { TOKEN_SECRET: 'test-token-secret-0123456789abcdef0123456789', CURSOR_HMAC_SECRET: 'test-cursor-secret-0123456789abcdef012345678' };

export interface TestApp {
  app: App;
  url: string;
  config: Config;
  /** fetch against the app; JSON-encodes `json`, returns status, headers and parsed body. */
  http<T = any>(method: string, path: string, opts?: { json?: unknown; body?: string; headers?: Record<string, string>; key?: string | null; token?: string }): Promise<HttpResult<T>>;
  /** POST /graphql with the given credential (default: the bootstrap admin key). */
  gql<T = any>(query: string, variables?: Record<string, unknown>, opts?: { key?: string | null; token?: string; headers?: Record<string, string> }): Promise<HttpResult<{ data?: T; errors?: GqlError[] }>>;
  close(): Promise<void>;
}

export interface GqlError {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; status?: number; details?: Record<string, unknown> };
}

export interface HttpResult<T> {
  status: number;
  headers: Headers;
  body: T;
}

export const uniqueDbUri = (): string => {
  const base = inject('mongoUri');
  const u = new URL(base);
  u.pathname = `/t_${randomBytes(6).toString('hex')}`;
  return u.toString();
};

/** Records the query shapes of every test app of this worker for the sharding check (test/sharding/check.ts). */
let recorder: ReturnType<typeof commandRecorder> | undefined;
const commands = () => (recorder ??= commandRecorder(inject('commandsDir'), () => relative(process.cwd(), expect.getState().testPath ?? 'unknown')));

/**
 * A fresh app on its own database, listening on a free port. The bootstrap admin key `ADMIN_KEY`
 * is set unless `config.ADMIN_API_KEY` says otherwise (pass `''` for none). With `checkResponses`
 * every JSON response of `http()`/`gql()` must match the schema the app's OpenAPI document gives it,
 * or the request throws (response-check.ts); on by default, for the whole suite.
 */
export async function buildTestApp({ plugins = [], config = {}, logger, checkResponses = true }: { plugins?: Plugin[]; config?: Record<string, string>; logger?: Logger; checkResponses?: boolean } = {}): Promise<TestApp> {
  // EVENTS_RELAY_INTERVAL_MS=0: a write answers once its event is in the log, so tests read settled documents and logs.
  const cfg = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY, MONGODB_URI: uniqueDbUri(), EVENTS_RELAY_INTERVAL_MS: '0', ...TEST_SECRETS, ...config });
  const app = await createApp({ corePlugins: corePlugins(), config: cfg, plugins, onDatabaseCommand: (e) => commands().onCommand(e, cfg.MULTI_TENANT_ENABLED), ...(logger ? { logger } : {}) });
  commands().collections(app.db.conn);
  app.koa.middleware.unshift(tagRequests(cfg.ADMIN_API_KEY ?? ADMIN_KEY) as never);
  const port = await app.listen(0, '127.0.0.1');
  const url = `http://127.0.0.1:${port}`;
  let checker: ResponseChecker | undefined;
  const checkerOf = () => (checker ??= new ResponseChecker(buildOpenApiDocument(app.kernel.routes(), { info: { title: 'test', version: '0' }, rateLimitEnabled: cfg.RATE_LIMIT_ENABLED, errorCodes: app.kernel.errorCodes() })));

  const http: TestApp['http'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    const key = opts.key === undefined ? (opts.token ? null : ADMIN_KEY) : opts.key;
    if (key) headers['X-API-Key'] = key;
    if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers['Content-Type'] ??= 'application/json';
    }
    const res = await fetch(url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let parsed: unknown = text;
    if ((res.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text);
    if (checkResponses) checkerOf().check(method, path, res.status, res.headers.get('content-type') ?? '', parsed);
    return { status: res.status, headers: res.headers, body: parsed as never };
  };

  return {
    app, url, config: app.config, http,
    gql: (query, variables, opts = {}) => http('POST', '/graphql', { ...opts, json: { query, variables } }),
    close: () => app.close(),
  };
}

/** Create a tenant, a user in it and an API key for that user, through the admin API. */
export async function createTenantUser(
  t: TestApp,
  opts: { tenant?: string; tenantId?: string; email?: string; roles?: ('user' | 'admin')[]; features?: string[]; attributes?: Record<string, unknown>; adminKey?: string } = {},
) {
  const adminKey = opts.adminKey ?? ADMIN_KEY;
  let tenantId = opts.tenantId;
  if (!tenantId) {
    const tr = await t.http('POST', '/admin/tenants', { key: adminKey, json: { name: opts.tenant ?? `t-${randomBytes(3).toString('hex')}` } });
    if (tr.status !== 201) throw new Error(`tenant: ${tr.status} ${JSON.stringify(tr.body)}`);
    tenantId = tr.body.id as string;
  }
  const ur = await t.http('POST', '/admin/users', {
    key: adminKey,
    json: {
      email: opts.email ?? `u-${randomBytes(4).toString('hex')}@example.com`,
      name: 'Test User',
      tenant_id: tenantId,
      roles: opts.roles ?? ['user'],
      features: opts.features ?? [],
      attributes: opts.attributes ?? {},
    },
  });
  if (ur.status !== 201) throw new Error(`user: ${ur.status} ${JSON.stringify(ur.body)}`);
  const kr = await t.http('POST', '/admin/api-keys', { key: adminKey, json: { user_id: ur.body.id, name: 'test' } });
  if (kr.status !== 201) throw new Error(`key: ${kr.status} ${JSON.stringify(kr.body)}`);
  return { tenantId: tenantId!, userId: ur.body.id as string, key: kr.body.key as string, keyId: kr.body.id as string };
}

/** Asserts the error envelope shape and returns the error. */
export function envelope(res: HttpResult<any>) {
  const b = res.body as { error?: { code: string; message: string; details: Record<string, unknown> }; request_id?: string };
  if (!b || typeof b !== 'object' || !b.error) throw new Error(`not an error envelope (${res.status}): ${JSON.stringify(res.body)}`);
  if (typeof b.error.code !== 'string' || typeof b.error.message !== 'string' || typeof b.error.details !== 'object' || typeof b.request_id !== 'string')
    throw new Error(`malformed envelope: ${JSON.stringify(b)}`);
  if (res.headers.get('x-request-id') !== b.request_id) throw new Error('request_id differs from X-Request-Id header');
  return b.error;
}

/** Asserts status and envelope code; returns the error. */
export function expectError(res: HttpResult<any>, status: number, code: string) {
  if (res.status !== status) throw new Error(`expected ${status} ${code}, got ${res.status}: ${JSON.stringify(res.body)}`);
  const err = envelope(res);
  if (err.code !== code) throw new Error(`expected code ${code}, got ${err.code}`);
  return err;
}

/** A job context for calling a `JobDefinition.run` directly (no jobs plugin): logs go to `lines`. */
export function jobContext(overrides: Partial<JobRunContext> = {}): JobRunContext & { lines: string[] } {
  const lines: string[] = [];
  return {
    run_id: 'test-run', attempt: 1, signal: new AbortController().signal, actor: systemActor(), tenant_id: null,
    log: (l: string) => void lines.push(l), progress: () => undefined, lines, ...overrides,
  };
}
