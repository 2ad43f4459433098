import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

/** A route that waits `ms` (after telling the test it started) and a close hook, both recorded. */
const slowPlugin = (events: string[], started: () => void) =>
  definePlugin({
    name: 'slow',
    setup: () => ({
      routes: [
        defineRoute({
          method: 'GET', path: '/slow/:ms', auth: 'public',
          handler: async ({ ctx }) => {
            started();
            await sleep(Number(ctx.params.ms));
            events.push('handler done');
            return { waited: Number(ctx.params.ms) };
          },
        }),
      ],
      close: () => void events.push('plugin closed'),
    }),
  });

describe('graceful shutdown', () => {
  const events: string[] = [];
  let onStart: () => void = () => undefined;
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [slowPlugin(events, () => onStart())] });
  });
  afterAll(() => t?.close());

  it('finishes an in-flight request, then closes plugins; new connections are refused', async () => {
    const inHandler = new Promise<void>((resolve) => (onStart = resolve));
    const inFlight = t.http('GET', '/slow/300', { key: null });
    await inHandler;

    const closing = t.app.close();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ waited: 300 });

    const started = performance.now();
    await closing;
    expect(performance.now() - started).toBeLessThan(9000); // did not wait for SHUTDOWN_TIMEOUT_MS (10 s)
    expect(events).toEqual(['handler done', 'plugin closed']);
    expect(t.app.db.conn.readyState).toBe(0);

    const refused = await fetch(`${t.url}/health`).then(
      () => null,
      (err: unknown) => (err as { cause?: { code?: string } }).cause?.code,
    );
    expect(refused).toBe('ECONNREFUSED');
  });
});

describe('shutdown time-out', () => {
  const events: string[] = [];
  let onStart: () => void = () => undefined;
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ plugins: [slowPlugin(events, () => onStart())], config: { SHUTDOWN_TIMEOUT_MS: '200' } });
  });
  afterAll(() => t?.close());

  it('cuts off requests still running after SHUTDOWN_TIMEOUT_MS', async () => {
    const inHandler = new Promise<void>((resolve) => (onStart = resolve));
    const inFlight = t.http('GET', '/slow/8000', { key: null }).then(
      (r) => r.status,
      () => 'connection closed',
    );
    await inHandler;
    const started = performance.now();
    await t.app.close();
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(190);
    // 25 times the time-out, and well before the request would have ended by itself (8 s).
    expect(took).toBeLessThan(5000);
    expect(await inFlight).toBe('connection closed');
    expect(events).toEqual(['plugin closed']);
  });
});
