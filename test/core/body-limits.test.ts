/**
 * Bodies above BODY_LIMIT (1mb here) get a readable 413 in the envelope, not a broken pipe: sent
 * from a raw socket that keeps writing the whole body while it reads, as real clients do.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, type TestApp } from '../helpers/app.ts';
import { rawExchange, type RawResponse } from '../helpers/raw-http.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';

let t: TestApp;
/** BODY_DRAIN_LIMIT 2mb: what happens past the drain cap. */
let capped: TestApp;
beforeAll(async () => {
  [t, capped] = await Promise.all([buildTestApp({ plugins: [resourcesPlugin] }), buildTestApp({ plugins: [resourcesPlugin], config: { BODY_DRAIN_LIMIT: '2mb' } })]);
});
afterAll(() => Promise.all([t?.close(), capped?.close()]));

const MB = 1024 * 1024;

/**
 * Sends a request head and `size` bytes of JSON-looking body (plain or chunked), honouring
 * back-pressure as real clients do, then `after` (a next request on the same connection), and
 * reads until `want` responses arrived or the connection ended.
 */
function sendBody(app: TestApp, opts: { path: string; size: number; chunked?: boolean; after?: string; want?: number }) {
  return rawExchange(Number(new URL(app.url).port), async (write) => {
    const framing = opts.chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${opts.size}`;
    await write(`POST ${opts.path} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${ADMIN_KEY}\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`);
    const piece = Buffer.alloc(256 * 1024, 'a');
    piece.write('{"name":"');
    for (let sent = 0; sent < opts.size; sent += piece.length) {
      const chunk = piece.subarray(0, Math.min(piece.length, opts.size - sent));
      await write(opts.chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk);
    }
    if (opts.chunked) await write('0\r\n\r\n');
    if (opts.after) await write(opts.after);
  }, opts.want ?? 1, 15_000);
}

const expect413 = (r: RawResponse | undefined) => {
  expect(r?.status).toBe(413);
  expect(r!.headers['content-type']).toMatch(/^application\/json/);
  const body = JSON.parse(r!.body) as { error: { code: string; message: string; details: unknown }; request_id: string };
  expect(body.error.code).toBe('PAYLOAD_TOO_LARGE');
  expect(body.request_id).toBe(r!.headers['x-request-id']);
};

const NEXT = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';

describe('bodies above BODY_LIMIT, within BODY_DRAIN_LIMIT (64mb)', () => {
  for (const [path, size] of [['/projects', 5 * MB], ['/projects', 50 * MB], ['/graphql', 50 * MB]] as const) {
    it(`${size / MB} MB with Content-Length to ${path}: a readable 413 PAYLOAD_TOO_LARGE, no broken pipe, the connection stays usable`, async () => {
      const res = await sendBody(t, { path, size, after: NEXT, want: 2 });
      expect(res.timedOut).toBe(false);
      expect(res.error).toBeNull();
      expect413(res.responses[0]);
      expect(res.responses[0]!.headers.connection).toBe('keep-alive');
      expect(res.responses[1]?.status).toBe(200);
    });
  }

  it('5 MB chunked, then a next request on the same connection: 413, then the next answer', async () => {
    const res = await sendBody(t, { path: '/projects', size: 5 * MB, chunked: true, after: NEXT, want: 2 });
    expect(res.timedOut).toBe(false);
    expect(res.error).toBeNull();
    expect413(res.responses[0]);
    expect(res.responses[1]?.status).toBe(200);
  });

  it('nothing was created', async () => {
    expect((await t.http('GET', '/projects')).body.total).toBe(0);
  });
});

describe('bodies above BODY_DRAIN_LIMIT', () => {
  it('a declared Content-Length above the cap: 413 with Connection: close, then the connection is closed', async () => {
    const res = await sendBody(capped, { path: '/projects', size: 5 * MB, after: NEXT, want: 2 });
    expect(res.timedOut).toBe(false);
    expect413(res.responses[0]);
    expect(res.responses[0]!.headers.connection).toBe('close');
    expect(res.responses).toHaveLength(1);
    expect(res.closed).toBe(true);
  });

  it('a chunked body that passes the cap: 413 first, then the connection is cut off', async () => {
    const res = await sendBody(capped, { path: '/projects', size: 5 * MB, chunked: true, after: NEXT, want: 2 });
    expect(res.timedOut).toBe(false);
    expect413(res.responses[0]);
    expect(res.responses).toHaveLength(1);
    expect(res.closed).toBe(true);
  });
});
