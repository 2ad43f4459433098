import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins } from '../../builtin-plugins.ts';
import { notesPlugin } from '../../docs/examples/notes/index.ts';
import { ADMIN_KEY, buildTestApp, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { ROOT, runServerToExit } from './helpers.ts';

const temps: string[] = [];
afterAll(() => Promise.all(temps.map((d) => rm(d, { recursive: true, force: true }))));

describe('start-up without a MongoDB', () => {
  it('prints one paragraph naming MONGODB_URI and MONGOMS_SYSTEM_BINARY and exits with 1', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dx-nodb-'));
    temps.push(dir);
    const { code, stdout, stderr } = await runServerToExit({
      MONGODB_URI: '',
      DATA_DIR: join(dir, 'data'),
      MONGOMS_SYSTEM_BINARY: join(dir, 'no-such-mongod'),
      // Never a real download: an unreachable local mirror and a private download folder.
      MONGOMS_DOWNLOAD_MIRROR: 'http://127.0.0.1:9',
      MONGOMS_DOWNLOAD_DIR: join(dir, 'binaries'),
      MONGOMS_DISABLE_POSTINSTALL: '1',
      LOG_LEVEL: 'warn',
    });
    expect(code).toBe(1);
    const text = stderr.trim();
    expect(text.split('\n'), text).toHaveLength(1);
    expect(text).toContain('MONGODB_URI');
    expect(text).toContain('MONGOMS_SYSTEM_BINARY');
    expect(text).toContain('no-such-mongod');
    expect(stdout + stderr).not.toMatch(/\n\s+at /);
  });
});

describe('a clean shutdown', () => {
  it('does not log that the database disconnected', async () => {
    const server = await startServerProcess({ MONGODB_URI: uniqueDbUri(), DISABLED_PLUGINS: builtinPlugins().map((p) => p.name).join(',') });
    let stderr = '';
    server.proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await server.stop('SIGTERM');
    const messages = server.logs.map((l) => String(l.msg));
    expect(code, `${JSON.stringify(messages)}\n${stderr}`).toBe(0);
    expect(messages).toContain('stopped');
    expect(messages.filter((m) => m.includes('disconnected'))).toEqual([]);
  });
});

describe('Ctrl-C in a terminal, or a stop signal to the whole process group', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)('%s to the group stops the server and its embedded database without a database warning', async (signal) => {
    const dir = await mkdtemp(join(tmpdir(), 'dx-ctrl-c-'));
    temps.push(dir);
    const server = await startServerProcess({ MONGODB_URI: '', DATA_DIR: join(dir, 'data') }, { detached: true, timeoutMs: 90_000 });
    // Counted requests, so the rate limiter has counts to flush on the way out.
    for (let i = 0; i < 3; i++) expect((await fetch(`${server.url}/auth/me`, { headers: { 'X-API-Key': ADMIN_KEY } })).status).toBe(200);
    const exited = once(server.proc, 'exit') as Promise<[number | null, string | null]>;
    process.kill(-server.proc.pid!, signal);
    const [code] = await exited;
    const noisy = server.logs.filter((l) => l.level === 'warn' || l.level === 'error' || Number(l.level) >= 40).map((l) => String(l.msg));
    expect(code, JSON.stringify(server.logs.map((l) => l.msg))).toBe(0);
    expect(server.logs.map((l) => String(l.msg))).toContain('stopped');
    expect(noisy).toEqual([]);
  }, 120_000);
});

describe('schedules without a time zone', () => {
  it('default to UTC', () => {
    expect(loadConfig({}).JOBS_DEFAULT_TIMEZONE).toBe('UTC');
    expect(loadConfig({ JOBS_DEFAULT_TIMEZONE: 'Europe/Stockholm' }).JOBS_DEFAULT_TIMEZONE).toBe('Europe/Stockholm');
  });
});

describe('names the docs use exist in the server', () => {
  it('every schedule target in the docs is a registered job; every erasure preview entry a declared collection', async () => {
    const t = await buildTestApp({
      plugins: [...builtinPlugins(), notesPlugin],
      config: { JOBS_ENABLED: 'true', PAYMENTS_ENABLED: 'true', PAYMENTS_LEDGER_ENABLED: 'true' },
    });
    try {
      const jobs = t.app.kernel.jobs().map((j) => j.name);
      const declared = t.app.kernel.personalData().map((d) => d.name);
      for (const file of ['README.md', 'docs/jobs.md', 'docs/plugins.md', 'docs/privacy.md']) {
        const text = await readFile(join(ROOT, file), 'utf8');
        for (const [, target] of text.matchAll(/"target":\s*"([a-z_]+)"/g)) expect(jobs, `${file}: schedule target ${target}`).toContain(target);
        for (const [, name] of text.matchAll(/\{ "name": "([a-z_]+)", "action"/g)) expect(declared, `${file}: erasure preview ${name}`).toContain(name);
      }
    } finally {
      await t.close();
    }
  });
});
