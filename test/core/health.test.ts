import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definePlugin } from '../../core/plugin.ts';
import { HealthCheckFailure, HealthRegistry } from '../../core/health.ts';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

const SLOW = { count: 5, ms: 150 };
/** Five checks that each take SLOW.ms, and two that report `failed` by their return value. */
const slowPlugin = definePlugin({
  name: 'slow-checks',
  setup: () => ({
    health: {
      ...Object.fromEntries(Array.from({ length: SLOW.count }, (_, i) => [`slow_${i + 1}`, () => sleep(SLOW.ms)])),
      returns_false: () => false,
      returns_error: () => new Error('an error value, not thrown'),
    },
  }),
});

let degraded: TestApp;
let healthy: TestApp;
let broken: TestApp;
beforeAll(async () => {
  [degraded, healthy, broken] = await Promise.all([
    buildTestApp({
      plugins: [examplePlugin.configure({ checks: ['ok', 'fail', 'throw', 'hang'] }), slowPlugin],
      config: { HEALTH_CHECK_TIMEOUT_MS: '300' },
    }),
    buildTestApp({ plugins: [examplePlugin] }),
    buildTestApp(),
  ]);
});
afterAll(() => Promise.all([degraded?.close(), healthy?.close(), broken?.close()]));

describe('liveness and readiness', () => {
  it('/health is 200 {status: ok}, without a credential', async () => {
    const res = await healthy.http('GET', '/health', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('/ready is 200 {status: ready} while the database answers', async () => {
    const res = await healthy.http('GET', '/ready', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { database: 'ok' } });
  });

  it('a bad credential does not break the probes', async () => {
    expect((await healthy.http('GET', '/health', { key: 'ak_wrong' })).status).toBe(200);
    expect((await healthy.http('GET', '/ready', { key: 'ak_wrong' })).status).toBe(200);
  });
});

describe('/admin/health/detailed', () => {
  it('is 401 for anonymous callers', async () => {
    const res = await healthy.http('GET', '/admin/health/detailed', { key: null });
    expect(res.status).toBe(401);
    expect(envelope(res).code).toBe('AUTH_REQUIRED');
  });

  it('is 403 for a plain user', async () => {
    const u = await createTenantUser(healthy);
    const res = await healthy.http('GET', '/admin/health/detailed', { key: u.key });
    expect(res.status).toBe(403);
    expect(envelope(res).code).toBe('ACCESS_DENIED');
  });

  it('all checks ok → status ok', async () => {
    const res = await healthy.http('GET', '/admin/health/detailed');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: 'ok',
      checks: {
        database: { status: 'ok', duration_ms: expect.any(Number) },
        example_ok: { status: 'ok', duration_ms: expect.any(Number) },
      },
    });
  });

  it('reports ok / failed / error / timeout per check, runs them in parallel, and is degraded', async () => {
    const started = performance.now();
    const res = await degraded.http('GET', '/admin/health/detailed');
    const elapsed = performance.now() - started;
    expect(res.status).toBe(200);
    const checks = res.body.checks as Record<string, { status: string; duration_ms: number }>;
    expect(res.body.status).toBe('degraded');
    expect(Object.fromEntries(Object.entries(checks).map(([k, v]) => [k, v.status]))).toEqual({
      database: 'ok',
      example_ok: 'ok',
      example_fail: 'failed',
      example_throw: 'error',
      example_hang: 'timeout',
      slow_1: 'ok',
      slow_2: 'ok',
      slow_3: 'ok',
      slow_4: 'ok',
      slow_5: 'ok',
      returns_false: 'failed',
      returns_error: 'failed',
    });
    for (const c of Object.values(checks)) {
      expect(Object.keys(c).sort()).toEqual(['duration_ms', 'status']);
      expect(Number.isInteger(c.duration_ms) && c.duration_ms >= 0).toBe(true);
    }
    expect(checks.example_hang!.duration_ms).toBeGreaterThanOrEqual(300);
    // Cut at the time-out (300 ms); a check left to hang would never end. A generous bound for busy machines.
    expect(checks.example_hang!.duration_ms).toBeLessThan(5000);
    for (let i = 1; i <= SLOW.count; i++) expect(checks[`slow_${i}`]!.duration_ms).toBeGreaterThanOrEqual(SLOW.ms - 5);
    // Run one after the other, the checks would take the sum of their durations (at least
    // 300 + 5 × 150 = 1050 ms); in parallel the whole is shorter. Compared with what they took
    // this time, not a fixed bound: on a busy machine every check takes longer too.
    const sum = Object.values(checks).reduce((n, c) => n + c.duration_ms, 0);
    expect(elapsed).toBeLessThan(sum);
  });

  it('the time-out applies to every check of the request', async () => {
    const [a, b] = await Promise.all([degraded.http('GET', '/admin/health/detailed'), degraded.http('GET', '/admin/health/detailed')]);
    expect(a.body.checks.example_hang.status).toBe('timeout');
    expect(b.body.checks.example_hang.status).toBe('timeout');
  });
});

// A dedicated app, since its database connection is closed.
describe('after the database connection is lost', () => {
  it('/ready is 503 SERVICE_UNAVAILABLE, /health stays 200, the database check reports error', async () => {
    // Prime the credential cache so the admin call below needs no database.
    expect((await broken.http('GET', '/admin/health/detailed')).body.status).toBe('ok');
    await broken.app.db.conn.close();

    const ready = await broken.http('GET', '/ready', { key: null });
    expect(ready.status).toBe(503);
    const err = envelope(ready);
    expect(err.code).toBe('SERVICE_UNAVAILABLE');
    expect(err.details).toEqual({ checks: { database: 'unavailable' } });

    const live = await broken.http('GET', '/health', { key: null });
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok' });

    const detailed = await broken.http('GET', '/admin/health/detailed');
    expect(detailed.status).toBe(200);
    expect(detailed.body.status).toBe('degraded');
    expect(detailed.body.checks.database.status).toBe('error');
  });
});

describe('HealthRegistry', () => {
  it('reports each problem once, with the error when there is one', async () => {
    const registry = new HealthRegistry();
    const boom = new Error('boom');
    const failure = new HealthCheckFailure('upstream says no');
    registry.register('fine', () => true, 'p');
    registry.register('false', () => false, 'p');
    registry.register('failure', () => Promise.reject(failure), 'p');
    registry.register('throws', () => {
      throw boom;
    }, 'p');
    const problems: [string, string, unknown][] = [];
    const report = await registry.run(100, (name, status, err) => problems.push([name, status, err]));
    expect(report.status).toBe('degraded');
    expect(problems.sort((a, b) => a[0].localeCompare(b[0]))).toEqual([
      ['failure', 'failed', failure],
      ['false', 'failed', null],
      ['throws', 'error', boom],
    ]);
  });
});
