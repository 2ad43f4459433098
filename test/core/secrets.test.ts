import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { SignJWT } from 'jose';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, PLACEHOLDER_TOKEN_SECRET } from '../../config/index.ts';
import { createApp } from '../../core/kernel.ts';
import { resolveSecrets } from '../../config/secrets.ts';
import { buildTestApp, envelope, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { corePlugins } from '../../builtin-plugins.ts';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'secrets-test-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A logger whose JSON lines land in `lines`. */
function capture() {
  const lines: { level: number; msg: string; setting?: string; file?: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { lines, logger: pino({ level: 'warn' }, stream) };
}

/** A development-mode app without secrets, on `dataDir` (and `dbUri`). */
const devApp = (dataDir: string, dbUri = uniqueDbUri(), logger?: ReturnType<typeof capture>['logger']) =>
  buildTestApp({ config: { NODE_ENV: 'development', TOKEN_SECRET: '', CURSOR_HMAC_SECRET: '', DATA_DIR: dataDir, MONGODB_URI: dbUri }, ...(logger ? { logger } : {}) });

describe('secrets outside production', () => {
  it('a token signed with the published placeholder is refused (401) in development mode', async () => {
    const t = await devApp(tempDir());
    try {
      const admin = (await t.http('GET', '/auth/me')).body.id as string;
      const forged = await new SignJWT({ tid: 'x' })
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(admin)
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(new TextEncoder().encode(PLACEHOLDER_TOKEN_SECRET));
      const res = await t.http('GET', '/admin/tenants', { token: forged });
      expect(res.status).toBe(401);
      expect(envelope(res).code).toBe('AUTH_REQUIRED');
      expect(t.config.TOKEN_SECRET).not.toBe(PLACEHOLDER_TOKEN_SECRET);
    } finally {
      await t.close();
    }
  });

  it('generates random secrets into DATA_DIR/secrets.json (mode 0600) and reuses them: tokens survive a restart', async () => {
    const dir = tempDir();
    const db = uniqueDbUri();
    let token: string;
    let first: TestApp | undefined = await devApp(dir, db);
    try {
      const file = join(dir, 'secrets.json');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const stored = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
      expect(stored.TOKEN_SECRET).toBe(first.config.TOKEN_SECRET);
      expect(stored.CURSOR_HMAC_SECRET).toBe(first.config.CURSOR_HMAC_SECRET);
      for (const v of Object.values(stored)) expect(Buffer.from(v, 'base64url').length).toBeGreaterThanOrEqual(32);
      expect(stored.TOKEN_SECRET).not.toBe(stored.CURSOR_HMAC_SECRET);
      token = (await first.http('POST', '/auth/token')).body.token as string;
      expect((await first.http('GET', '/auth/me', { token })).status).toBe(200);
    } finally {
      await first.close();
      first = undefined;
    }
    const second = await devApp(dir, db);
    try {
      expect((await second.http('GET', '/auth/me', { token })).status).toBe(200);
    } finally {
      await second.close();
    }
    // Another data directory means other secrets: the token is worthless there.
    const other = await devApp(tempDir(), db);
    try {
      expect((await other.http('GET', '/auth/me', { token })).status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it('logs a warning naming each setting taken from the file, and none for a set one', async () => {
    const dir = tempDir();
    const { lines, logger } = capture();
    const t = await buildTestApp({
      config: { NODE_ENV: 'development', TOKEN_SECRET: '', CURSOR_HMAC_SECRET: 'set-by-the-operator-0123456789abcdef', DATA_DIR: dir },
      logger,
    });
    try {
      const warnings = lines.filter((l) => l.level === 40 && l.setting);
      expect(warnings.map((w) => w.setting)).toEqual(['TOKEN_SECRET']);
      expect(warnings[0]!.msg).toContain('TOKEN_SECRET is not set');
      expect(warnings[0]!.file).toBe(join(dir, 'secrets.json'));
      expect(t.config.CURSOR_HMAC_SECRET).toBe('set-by-the-operator-0123456789abcdef');
    } finally {
      await t.close();
    }
  });

  it('warns when the secrets file is readable by others', () => {
    const dir = tempDir();
    const cfg = loadConfig({ NODE_ENV: 'development', DATA_DIR: dir });
    resolveSecrets(cfg, capture().logger);
    chmodSync(join(dir, 'secrets.json'), 0o644);
    const { lines, logger } = capture();
    resolveSecrets(cfg, logger);
    expect(lines.some((l) => l.level === 40 && l.msg.includes('readable by other users'))).toBe(true);
  });

  it('with every secret set, nothing is written to DATA_DIR', async () => {
    const dir = tempDir();
    const t = await buildTestApp({ config: { DATA_DIR: dir } });
    try {
      expect(() => statSync(join(dir, 'secrets.json'))).toThrow();
    } finally {
      await t.close();
    }
  });

  it('a damaged secrets file stops start-up with a ConfigError naming it', () => {
    const dir = tempDir();
    const log = capture().logger;
    const cfg = loadConfig({ NODE_ENV: 'development', DATA_DIR: dir });
    resolveSecrets(cfg, log);
    const file = join(dir, 'secrets.json');
    rmSync(file);
    // not JSON
    writeFileSync(file, 'garbage', { mode: 0o600 });
    expect(() => resolveSecrets(cfg, log)).toThrow(ConfigError);
  });
});

describe('production', () => {
  it('refuses to start without real secrets, and writes no secrets file', async () => {
    const dir = tempDir();
    expect(() => loadConfig({ NODE_ENV: 'production', DATA_DIR: dir })).toThrow(ConfigError);
    // Even a config built past loadConfig is refused by createApp, before the database opens.
    const cfg = { ...loadConfig({ NODE_ENV: 'development', DATA_DIR: dir, MONGODB_URI: uniqueDbUri(), LOG_LEVEL: 'silent' }), NODE_ENV: 'production' as const };
    await expect(createApp({ corePlugins: corePlugins(), config: cfg, plugins: [] })).rejects.toThrow(/TOKEN_SECRET: required in production/);
    expect(() => statSync(join(dir, 'secrets.json'))).toThrow();
  });
});
