/**
 * A reader that leaves an event stream abruptly (its connection reset) is not a server failure:
 * it is logged at debug through the app's logger, nothing goes to stderr around the structured
 * log, and the server keeps serving. A failure of the server's own after its answer began is
 * logged at error, through the same logger.
 */
import { connect } from 'node:net';
import { once } from 'node:events';
import { Readable, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { ADMIN_KEY, buildTestApp, type TestApp } from '../helpers/app.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import { until } from './helpers.ts';

type Line = Record<string, unknown>;
const lines: Line[] = [];
const sink = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Line); cb(); } });

/** A body stream that fails after its first chunk: the answer has begun when the error comes. */
const failingStream = definePlugin({
  name: 'failing-stream',
  setup: () => ({
    routes: [defineRoute({
      method: 'GET', path: '/failing-stream', auth: 'public',
      handler: () => {
        const body = new Readable({ read() {} });
        body.push('first chunk\n');
        setTimeout(() => body.destroy(new Error('the disk went away')), 50);
        return body;
      },
    })],
  }),
});

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [failingStream], logger: pino({ level: 'debug', base: undefined }, sink), config: { RATE_LIMIT_ENABLED: 'false' } });
});
afterAll(async () => {
  vi.restoreAllMocks();
  await t?.close();
});

describe('a reader that resets its connection', () => {
  it('is logged at debug as a client that left, nothing is printed to stderr, and the server goes on', async () => {
    const stderr = vi.spyOn(console, 'error');
    const { hostname, port } = new URL(t.url);
    const socket = connect(Number(port), hostname);
    await once(socket, 'connect');
    socket.write(`GET /events/stream HTTP/1.1\r\nHost: ${hostname}\r\nX-API-Key: ${ADMIN_KEY}\r\nAccept: text/event-stream\r\n\r\n`);
    let head = '';
    socket.on('data', (b: Buffer) => (head += b.toString()));
    await until(async () => head.includes(': event stream'), 5000);
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    socket.resetAndDestroy();

    await until(async () => lines.some((l) => l.msg === 'client closed the connection during the answer'), 5000);
    const gone = lines.find((l) => l.msg === 'client closed the connection during the answer')!;
    expect(gone).toMatchObject({ level: 20, code: 'ECONNRESET' });
    expect(typeof gone.request_id).toBe('string');
    expect(lines.filter((l) => (l.level as number) >= 50)).toEqual([]);
    expect(stderr).not.toHaveBeenCalled();
    expect((await t.http('GET', '/health')).status).toBe(200);
  });

  it('a failure of the server after the answer began is logged at error with the request id, not printed to stderr', async () => {
    const stderr = vi.spyOn(console, 'error');
    const res = await fetch(`${t.url}/failing-stream`);
    expect(res.status).toBe(200);
    await res.text().catch(() => undefined);
    await until(async () => lines.some((l) => l.msg === 'request failed after its answer began'), 5000);
    const failed = lines.find((l) => l.msg === 'request failed after its answer began')!;
    expect(failed).toMatchObject({ level: 50, err: expect.objectContaining({ message: 'the disk went away' }) });
    expect(typeof failed.request_id).toBe('string');
    expect(stderr).not.toHaveBeenCalled();
    expect((await t.http('GET', '/health')).status).toBe(200);
  });
});
