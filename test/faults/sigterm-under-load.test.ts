/**
 * SIGTERM under load: 50 requests in flight (40 that take a second, 10 ordinary ones), then
 * SIGTERM. Every in-flight request finishes with 200; once the process has begun shutting down
 * it accepts no new connection (the listener is closed: ECONNREFUSED, not a 503 — there is no
 * listener left to answer one); the process exits 0 well within SHUTDOWN_TIMEOUT_MS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startServerProcess, type ServerProcess } from '../helpers/processes.ts';
import { scaled, waitFor } from '../helpers/wait.ts';

const SHUTDOWN_TIMEOUT_MS = 8000;
let server: ServerProcess;

beforeAll(async () => {
  server = await startServerProcess({
    MONGODB_URI: uniqueDbUri(), RATE_LIMIT_ENABLED: 'false', SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    PLUGINS: './test/fixtures/faults-plugin.ts',
  });
}, 60_000);
afterAll(() => server?.stop('SIGKILL'));

const get = (path: string, key?: string) =>
  fetch(server.url + path, { headers: key ? { 'X-API-Key': key } : {} }).then(
    async (r) => ({ status: r.status, body: (await r.json()) as Record<string, any>, error: null as string | null }),
    (err: unknown) => ({ status: 0, body: {} as Record<string, any>, error: String((err as { cause?: { code?: string } }).cause?.code ?? err) }),
  );

describe('SIGTERM with 50 requests in flight', () => {
  it('finishes them all, refuses new connections, and exits 0 within SHUTDOWN_TIMEOUT_MS', async () => {
    const slow = Array.from({ length: 40 }, () => get('/faults/slow/1000'));
    const normal = Array.from({ length: 10 }, () => get('/admin/tenants', ADMIN_KEY));
    await waitFor(async () => (await get('/faults/active')).body.active === 40, 'all 40 slow requests in their handler');

    const exited = new Promise<{ code: number | null; at: number }>((res) => server.proc.once('exit', (code) => res({ code, at: Date.now() })));
    const termAt = Date.now();
    server.proc.kill('SIGTERM');
    await waitFor(() => server.logs.some((l) => String(l.msg).startsWith('shutting down')), 'the shutdown to begin');
    const late = await get('/health');

    const answers = await Promise.all([...slow, ...normal]);
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(200));
    expect(answers.slice(0, 40).every((a) => a.body.waited === 1000)).toBe(true);
    // The listener closed when the shutdown began; a client (or load balancer) sees a refused connection.
    expect(late).toMatchObject({ status: 0, error: 'ECONNREFUSED' });

    const { code, at } = await exited;
    expect(code).toBe(0);
    // The slow requests needed at most a second more; the process did not wait for the time-out.
    expect(at - termAt, `exited ${at - termAt} ms after SIGTERM`).toBeLessThan(SHUTDOWN_TIMEOUT_MS + scaled(1000));
    expect(server.logs.some((l) => l.msg === 'stopped')).toBe(true);
  }, 60_000);
});
