import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { builtinPlugins } from '../../config/plugins.ts';
import { notesPlugin } from '../../docs/examples/notes/index.ts';
import { buildTestApp, uniqueDbUri } from '../helpers/app.ts';
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
