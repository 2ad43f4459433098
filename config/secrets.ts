import { randomBytes } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, MIN_SECRET_BYTES, SECRET_SETTINGS, type Config, type LoadedConfig, type SecretSetting } from './index.ts';
import type { Logger } from 'pino';

/** File under `DATA_DIR` holding generated secrets (JSON, mode 0600). */
const SECRETS_FILE = 'secrets.json';

const generate = (): string => randomBytes(48).toString('base64url');

/**
 * Fills every secret setting left unset (outside production only: `loadConfig` refuses a missing
 * secret in production) from `DATA_DIR/secrets.json`, creating that file with fresh random values
 * (48 bytes each, mode 0600) on first start, so tokens and cursors survive restarts. Logs a warning
 * naming each setting taken from the file. Processes starting together on one `DATA_DIR` agree: the
 * file is written aside and hard-linked into place, which fails for all but the first.
 *
 * @throws ConfigError when the file exists but cannot be read or lacks a valid secret
 */
export function resolveSecrets(config: LoadedConfig | Config, log: Logger): Config {
  const missing = SECRET_SETTINGS.filter((name) => !config[name]);
  if (!missing.length) return config as Config;
  if (config.NODE_ENV === 'production') throw new ConfigError(`Invalid configuration:\n${missing.map((n) => `  ${n}: required in production`).join('\n')}`);

  const dir = resolve(config.DATA_DIR);
  const file = join(dir, SECRETS_FILE);
  const stored = readOrCreate(dir, file);
  const mode = statSync(file).mode & 0o777;
  if (mode & 0o077) log.warn({ file, mode: mode.toString(8) }, `${file} is readable by other users (mode ${mode.toString(8)}); chmod 600 it`);
  const filled: Partial<Record<SecretSetting, string>> = {};
  for (const name of missing) {
    const value = stored[name];
    if (typeof value !== 'string' || Buffer.byteLength(value) < MIN_SECRET_BYTES)
      throw new ConfigError(`Invalid configuration:\n  ${name}: ${file} holds no valid value; delete the file or set ${name}`);
    filled[name] = value;
    log.warn(
      { setting: name, file },
      `${name} is not set: using a generated secret kept in ${file}. Set ${name} to a random value of at least ${MIN_SECRET_BYTES} bytes (required in production).`,
    );
  }
  return { ...config, ...filled } as Config;
}

function readOrCreate(dir: string, file: string): Record<string, unknown> {
  try {
    return parse(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fresh = Object.fromEntries(SECRET_SETTINGS.map((name) => [name, generate()]));
  writeFileSync(tmp, `${JSON.stringify(fresh, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  // The umask cannot widen 0600, but a pre-existing ACL default could; make sure.
  chmodSync(tmp, 0o600);
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  return parse(file);
}

function parse(file: string): Record<string, unknown> {
  const text = readFileSync(file, 'utf8');
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new ConfigError(`Invalid configuration:\n  ${file}: not a JSON object of secrets; delete it to have new secrets generated`);
}
