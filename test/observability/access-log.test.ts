import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { buildTestApp, createTenantUser, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { crashPlugin } from '../fixtures/crash-plugin/index.ts';

type Line = Record<string, unknown>;

function capture(level = 'info') {
  const lines: Line[] = [];
  const sink = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Line); cb(); } });
  return { lines, logger: pino({ level, base: undefined }, sink) };
}
const requests = (lines: Line[]) => lines.filter((l) => l.msg === 'request');

describe('access log', () => {
  let t: TestApp;
  const log = capture();
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [resourcesPlugin, crashPlugin], logger: log.logger });
  });
  afterAll(() => t?.close());

  it('one line per request: method, route template, status, duration, request id, tenant, actor', async () => {
    const u = await createTenantUser(t);
    log.lines.length = 0;
    const created = await t.http('POST', '/projects', { key: u.key, json: { name: 'logged' } });
    const id = created.body._id ?? created.body.id;
    const read = await t.http('GET', `/projects/${id}`, { key: u.key, headers: { 'X-Request-Id': 'req-abc-1' } });
    expect(read.status).toBe(200);
    await t.http('GET', '/projects', { key: 'ak_wrong_key_0000000000000' });
    const lines = requests(log.lines);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatchObject({ level: 30, method: 'GET', route: '/projects/:id', status: 200, request_id: 'req-abc-1', tenant_id: u.tenantId, actor_id: u.userId });
    expect(typeof lines[1]!.duration_ms).toBe('number');
    expect(lines[2]).toMatchObject({ method: 'GET', route: '/projects', status: 401, actor_id: null, tenant_id: null });
    // No trace id without tracing.
    expect(lines[1]!.trace_id).toBeUndefined();
  });

  it('health probes and scrapes are left out by default', async () => {
    log.lines.length = 0;
    await t.http('GET', '/health');
    await t.http('GET', '/ready');
    await fetch(`${t.url}/metrics`);
    expect(requests(log.lines)).toHaveLength(0);
  });

  it('an unexpected error is logged once with its stack, and the access line says 500', async () => {
    log.lines.length = 0;
    expect((await t.http('GET', '/crash/now')).status).toBe(500);
    expect(log.lines.filter((l) => l.msg === 'unhandled error')).toHaveLength(1);
    expect(requests(log.lines)).toEqual([expect.objectContaining({ route: '/crash/:reason', status: 500 })]);
  });
});

describe('settings', () => {
  it('ACCESS_LOG_HEALTH=true logs probes; ACCESS_LOG_LEVEL sets the level; silent turns it off', async () => {
    const a = capture('debug');
    const withProbes = await buildTestApp({ logger: a.logger, config: { ACCESS_LOG_HEALTH: 'true', ACCESS_LOG_LEVEL: 'debug' } });
    try {
      await withProbes.http('GET', '/health');
      expect(requests(a.lines)).toEqual([expect.objectContaining({ level: 20, route: '/health', status: 200 })]);
    } finally {
      await withProbes.close();
    }
    const b = capture();
    const silent = await buildTestApp({ logger: b.logger, config: { ACCESS_LOG_LEVEL: 'silent' } });
    try {
      await silent.http('GET', '/auth/me');
      expect(requests(b.lines)).toHaveLength(0);
    } finally {
      await silent.close();
    }
  });
});

describe('source maps', () => {
  const file = resolve(import.meta.dirname, '../fixtures/crash-plugin/service.ts');
  const line = readFileSync(file, 'utf8').split('\n').findIndex((l) => l.includes('CRASH-LINE')) + 1;

  it('under tsx (npm start), a logged stack points at the real line of service.ts', async () => {
    const server = await startServerProcess({ MONGODB_URI: uniqueDbUri(), PLUGINS: './test/fixtures/crash-plugin/index.ts' });
    try {
      expect((await fetch(`${server.url}/crash/tsx`)).status).toBe(500);
      await new Promise((r) => setTimeout(r, 100));
      const logged = server.logs.find((l) => l.msg === 'unhandled error') as { err?: { stack?: string } } | undefined;
      expect(logged?.err?.stack).toContain(`crash-plugin/service.ts:${line}:`);
    } finally {
      await server.stop();
    }
  });

  it('in-process (tests), too', async () => {
    const log = capture('error');
    const t = await buildTestApp({ plugins: [crashPlugin], logger: log.logger });
    try {
      await t.http('GET', '/crash/vitest');
      const logged = log.lines.find((l) => l.msg === 'unhandled error') as { err?: { stack?: string } };
      expect(logged.err?.stack).toContain(`crash-plugin/service.ts:${line}:`);
    } finally {
      await t.close();
    }
  });
});
