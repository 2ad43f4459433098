import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEPRECATED_SETTINGS, loadConfig, PLACEHOLDER_CURSOR_SECRET, PLACEHOLDER_TOKEN_SECRET, readConfig } from '../../config/index.ts';
import { loadPlugins } from '../../builtin-plugins.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { buildTestApp, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';

const SECRET_32 = 'x'.repeat(32);
const prod = (extra: Record<string, string> = {}) =>
  loadConfig({ NODE_ENV: 'production', CURSOR_HMAC_SECRET: SECRET_32, TOKEN_SECRET: 'y'.repeat(40), METRICS_PORT: '9464', ...extra });

/** The ConfigError thrown by `fn`, failing the test when it throws nothing or something else. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig rejects bad values, naming the variable', () => {
  it.each([
    ['PORT', 'abc'],
    ['PORT', '3.5'],
    ['MULTI_TENANT_ENABLED', 'maybe'],
    ['MONGODB_URI', 'notaurl'],
    ['HEALTH_CHECK_TIMEOUT_MS', '-1'],
    ['HEALTH_CHECK_TIMEOUT_MS', '0'],
    ['RATE_LIMIT_MAX', '0'],
    ['BODY_LIMIT', 'lots'],
    ['ADMIN_API_KEY', 'short'],
    ['LOG_LEVEL', 'loud'],
    ['NODE_ENV', 'staging'],
  ])('%s=%s', (name, value) => {
    const err = configError(() => loadConfig({ [name]: value }));
    expect(err.message).toMatch(/^Invalid configuration:\n/);
    expect(err.message).toMatch(new RegExp(`^ {2}${name}: `, 'm'));
    expect(err.message.split('\n')).toHaveLength(2);
  });

  it('names every bad variable at once', () => {
    const err = configError(() => loadConfig({ PORT: 'abc', MULTI_TENANT_ENABLED: 'maybe', MONGODB_URI: 'notaurl' }));
    for (const name of ['PORT', 'MULTI_TENANT_ENABLED', 'MONGODB_URI']) expect(err.message).toMatch(new RegExp(`^ {2}${name}: `, 'm'));
  });

  it('ignores empty values (as unset) and unrelated variables', () => {
    const cfg = loadConfig({ PORT: '', SOMETHING_ELSE: 'whatever' });
    expect(cfg.PORT).toBe(3000);
  });
});

describe('defaults', () => {
  it('match the documented values', () => {
    const cfg = loadConfig({});
    expect(cfg).toMatchObject({
      NODE_ENV: 'development',
      PORT: 3000,
      HEALTH_CHECK_TIMEOUT_MS: 5000,
      MULTI_TENANT_ENABLED: true,
      RATE_LIMIT_ENABLED: true,
      RATE_LIMIT_MAX: 1000,
      BODY_LIMIT: '1mb',
      PLUGINS: [],
      DISABLED_PLUGINS: [],
      // Jobs (README.md and docs/jobs.md, Settings).
      JOBS_ENABLED: false,
      JOBS_AUDIT_RETENTION_DAYS: 365,
      JOB_RUN_RETENTION_DAYS: 90,
      JOBS_LOCK_TTL_SECONDS: 3600,
      JOBS_POLL_INTERVAL_MS: 1000,
      JOBS_RETRY_DELAY_MS: 2000,
      JOBS_CONCURRENCY: 10,
      JOBS_DEFAULT_TIMEZONE: 'UTC',
      REVOKED_API_KEY_RETENTION_DAYS: 30,
      AUDIT_LOG_RETENTION_DAYS: 90,
      WEBHOOK_EVENT_RETENTION_DAYS: 90,
      SOFT_DELETE_RETENTION_DAYS: 30,
    });
    expect(cfg.MONGODB_URI).toBeUndefined();
    // No secret defaults: createApp fills them from DATA_DIR outside production (test/core/secrets.test.ts).
    expect(cfg.TOKEN_SECRET).toBeUndefined();
    expect(cfg.CURSOR_HMAC_SECRET).toBeUndefined();
    expect(cfg.ADMIN_API_KEY).toBeUndefined();
  });

  it('parses booleans, integers and lists', () => {
    const cfg = loadConfig({ MULTI_TENANT_ENABLED: 'false', RATE_LIMIT_ENABLED: '0', TRUST_PROXY: 'yes', PORT: '8080', PLUGINS: ' ./a.ts , pkg-b ,' });
    expect(cfg.MULTI_TENANT_ENABLED).toBe(false);
    expect(cfg.RATE_LIMIT_ENABLED).toBe(false);
    expect(cfg.TRUST_PROXY).toBe(true);
    expect(cfg.PORT).toBe(8080);
    expect(cfg.PLUGINS).toEqual(['./a.ts', 'pkg-b']);
  });
});

describe('deprecated setting names', () => {
  it.each(Object.entries(DEPRECATED_SETTINGS))('%s still works, as %s, with one warning naming both', (old, current) => {
    const { config, warnings } = readConfig({ [old]: '7' });
    expect(config[current as keyof typeof config]).toBe(7);
    expect(warnings).toEqual([{ setting: old, replacement: current, message: `${old} is deprecated: rename it to ${current} (its value is used for now)` }]);
    expect(config).not.toHaveProperty(old);
  });

  it('the new name wins when both are set; the old one is reported as ignored', () => {
    const { config, warnings } = readConfig({ JOBS_CLEANUP_DAYS: '7', JOB_RUN_RETENTION_DAYS: '12' });
    expect(config.JOB_RUN_RETENTION_DAYS).toBe(12);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toBe('JOBS_CLEANUP_DAYS is deprecated and ignored: JOB_RUN_RETENTION_DAYS is set too; remove JOBS_CLEANUP_DAYS');
  });

  it('no warning with the new names only; a bad value under the old name is reported under it', () => {
    expect(readConfig({ JOB_RUN_RETENTION_DAYS: '5', REVOKED_API_KEY_RETENTION_DAYS: '5' }).warnings).toEqual([]);
    const err = configError(() => loadConfig({ JOBS_REVOKED_KEY_RETENTION_DAYS: '0' }));
    expect(err.message).toMatch(/^ {2}JOBS_REVOKED_KEY_RETENTION_DAYS: /m);
    expect(err.message.split('\n')).toHaveLength(2);
  });

  it('start-up logs the warning once, at warn level', async () => {
    const server = await startServerProcess({ MONGODB_URI: uniqueDbUri(), JOBS_CLEANUP_DAYS: '45', DISABLED_PLUGINS: 'openapi,webauthn,privacy' }, { timeoutMs: 50_000 });
    try {
      const warned = server.logs.filter((l) => l.level === 'warn');
      expect(warned).toEqual([expect.objectContaining({ setting: 'JOBS_CLEANUP_DAYS', replacement: 'JOB_RUN_RETENTION_DAYS', msg: expect.stringContaining('JOB_RUN_RETENTION_DAYS') })]);
    } finally {
      await server.stop();
    }
  }, 60_000);
});

describe('turning a plugin off', () => {
  const routesOf = async (config: Record<string, string>) => {
    const t = await buildTestApp({ plugins: await loadPlugins(loadConfig({ DISABLED_PLUGINS: 'resources,access,audit,jobs,payments,files,privacy,webauthn,openapi', ...config })), config });
    try {
      return { plugins: t.app.kernel.plugins(), webhookRoutes: t.app.kernel.routes().filter((r) => r.path.startsWith('/webhooks')).length };
    } finally {
      await t.close();
    }
  };

  it('a *_ENABLED flag keeps the plugin loaded but mounts none of its routes while off', async () => {
    expect(await routesOf({})).toEqual({ plugins: expect.arrayContaining(['webhooks']), webhookRoutes: 0 });
    const on = await routesOf({ WEBHOOKS_ENABLED: 'true' });
    expect(on.webhookRoutes).toBeGreaterThan(0);
  });

  it('DISABLED_PLUGINS wins over the flag: the plugin is not loaded at all', async () => {
    const plugins = await loadPlugins(loadConfig({ WEBHOOKS_ENABLED: 'true', DISABLED_PLUGINS: 'webhooks' }));
    expect(plugins.map((p) => p.name)).not.toContain('webhooks');
    expect((await loadPlugins(loadConfig({ WEBHOOKS_ENABLED: 'true' }))).map((p) => p.name)).toContain(webhooksPlugin.name);
  });
});

describe('production secrets', () => {
  it('accepts secrets of 32 bytes or more', () => {
    const cfg = prod();
    expect(cfg.CURSOR_HMAC_SECRET).toBe(SECRET_32);
    expect(cfg.NODE_ENV).toBe('production');
  });

  it.each(['CURSOR_HMAC_SECRET', 'TOKEN_SECRET'])('refuses the shipped placeholder %s', (name) => {
    const err = configError(() => prod({ [name]: name === 'TOKEN_SECRET' ? PLACEHOLDER_TOKEN_SECRET : PLACEHOLDER_CURSOR_SECRET }));
    expect(err.message).toContain(`${name}: is the placeholder published in the source`);
    expect(err.message.split('\n')).toHaveLength(2);
  });

  it('refuses to start without secrets, naming both', () => {
    const err = configError(() => loadConfig({ NODE_ENV: 'production' }));
    expect(err.message).toContain('CURSOR_HMAC_SECRET: required in production');
    expect(err.message).toContain('TOKEN_SECRET: required in production');
  });

  it.each(['CURSOR_HMAC_SECRET', 'TOKEN_SECRET'])('refuses a %s shorter than 32 bytes', (name) => {
    const err = configError(() => prod({ [name]: 'z'.repeat(31) }));
    expect(err.message).toContain(`${name}: must be at least 32 bytes in production`);
  });

  it('counts bytes, not characters', () => {
    // 16 two-byte characters = 32 bytes.
    expect(prod({ TOKEN_SECRET: 'é'.repeat(16) }).TOKEN_SECRET).toBe('é'.repeat(16));
    expect(() => prod({ TOKEN_SECRET: 'é'.repeat(15) })).toThrow(ConfigError);
  });

  it.each(['development', 'test'])('the published placeholders are refused in %s mode too', (mode) => {
    const err = configError(() => loadConfig({ NODE_ENV: mode, TOKEN_SECRET: PLACEHOLDER_TOKEN_SECRET, CURSOR_HMAC_SECRET: PLACEHOLDER_CURSOR_SECRET }));
    expect(err.message).toContain('TOKEN_SECRET: is the placeholder published in the source');
    expect(err.message).toContain('CURSOR_HMAC_SECRET: is the placeholder published in the source');
  });

  it('outside production short secrets are allowed (developer machines)', () => {
    expect(loadConfig({ NODE_ENV: 'development', TOKEN_SECRET: 'short' }).TOKEN_SECRET).toBe('short');
  });
});

describe('server start-up with a bad setting', () => {
  it('exits non-zero, names the variable on stderr, prints no stack trace', async () => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: 'abc' };
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      // node --import tsx rather than npx: npx alone takes seconds on a loaded machine.
      const child = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], { cwd: process.cwd(), env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 50_000 });
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.on('error', reject);
      child.on('close', (c) => resolve({ code: c, stderr: err }));
    });
    expect(code).not.toBe(0);
    expect(code).not.toBeNull();
    expect(stderr).toMatch(/^Invalid configuration:$/m);
    expect(stderr).toMatch(/^ {2}PORT: /m);
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(stderr).not.toContain('ConfigError');
  }, 60_000);
});
