/**
 * HTTP protocol edges (found by black-box probes): corrupt compressed bodies,
 * oversized chunked bodies on a keep-alive connection, unknown methods, overlong URLs and requests
 * Node's parser refuses. Every answer is the error envelope with a request id; raw sockets where
 * fetch cannot express the request (TRACE, chunked bodies, pipelining, broken request lines).
 */
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { rawExchange as exchange, type RawResponse } from '../helpers/raw-http.ts';

let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await buildTestApp();
  port = Number(new URL(t.url).port);
});
afterAll(() => t?.close());

const rawExchange = (send: Parameters<typeof exchange>[1], want: number, timeoutMs?: number) => exchange(port, send, want, timeoutMs);

const rawEnvelope = (r: RawResponse) => {
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  const body = JSON.parse(r.body) as { error: { code: string; message: string; details: unknown }; request_id: string };
  expect(body.request_id).toBeTruthy();
  expect(r.headers['x-request-id']).toBe(body.request_id);
  return body;
};

describe('compressed request bodies', () => {
  const post = (encoding: string, body: Buffer) =>
    fetch(`${t.url}/admin/tenants`, {
      method: 'POST',
      headers: { 'X-API-Key': ADMIN_KEY, 'Content-Type': 'application/json', 'Content-Encoding': encoding },
      body: new Uint8Array(body),
    });

  it('a validly compressed body is decoded (gzip, deflate, br)', async () => {
    const json = Buffer.from(JSON.stringify({ name: 'x'.repeat(500) }));
    for (const [enc, body] of [['gzip', gzipSync(json)], ['deflate', deflateSync(json)], ['br', brotliCompressSync(json)]] as const) {
      const res = await post(enc, body);
      // Too long a name: the body reached validation, so it was decoded.
      expect(res.status, enc).toBe(422);
    }
  });

  it('a body that is not validly compressed answers 400 BAD_REQUEST in the envelope, not 500', async () => {
    const valid = gzipSync(Buffer.from('{"name":"acme"}'));
    const cases: [string, Buffer][] = [
      ['gzip', Buffer.from('this is not gzip at all')],
      ['gzip', valid.subarray(0, valid.length - 6)], // truncated
      ['deflate', Buffer.from('not deflate either')],
      ['br', Buffer.from([0xff, 0xff, 0xff, 0xff, 0x00, 0x01, 0x02])],
    ];
    for (const [enc, body] of cases) {
      const res = await post(enc, body);
      const text = await res.text();
      expect(res.status, `${enc}: ${text}`).toBe(400);
      const env = JSON.parse(text) as { error: { code: string; message: string }; request_id: string };
      expect(env.error.code).toBe('BAD_REQUEST');
      expect(env.error.message).toMatch(/Content-Encoding/);
      expect(env.request_id).toBe(res.headers.get('x-request-id'));
    }
    const tenants = await t.http('GET', '/admin/tenants?per_page=500');
    expect(tenants.body.items.map((x: { name: string }) => x.name)).not.toContain('acme');
  });
});

describe('oversized chunked body', () => {
  it('answers 413 in the envelope, then either answers the next request on the socket or closes it; never hangs', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const res = await rawExchange(async (write) => {
      write(
        `POST /admin/tenants HTTP/1.1\r\nHost: x\r\nX-API-Key: ${ADMIN_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      for (let sent = 0; sent < 5 * 1024 * 1024; sent += chunk.length) {
        await write(`${chunk.length.toString(16)}\r\n`);
        await write(chunk);
        await write('\r\n');
      }
      write('0\r\n\r\n');
      write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    }, 2);
    expect(res.timedOut).toBe(false);
    const [first, second] = res.responses;
    expect(first?.status).toBe(413);
    expect(rawEnvelope(first!).error.code).toBe('PAYLOAD_TOO_LARGE');
    if (second) expect(second.status).toBe(200);
    else {
      expect(res.closed).toBe(true);
      expect(first!.headers.connection).toBe('close');
    }
  });

  it('a body within the limit on a keep-alive connection leaves the connection usable', async () => {
    const body = JSON.stringify({ name: 'chunked-ok' });
    const res = await rawExchange((write) => {
      write(
        `POST /admin/tenants HTTP/1.1\r\nHost: x\r\nX-API-Key: ${ADMIN_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
          `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n` +
          'GET /health HTTP/1.1\r\nHost: x\r\n\r\n',
      );
    }, 2);
    expect(res.responses.map((r) => r.status)).toEqual([201, 200]);
  });
});

describe('unknown methods', () => {
  for (const method of ['TRACE', 'PROPFIND']) {
    it(`${method} on a known path answers 405 METHOD_NOT_ALLOWED with Allow, in the envelope`, async () => {
      const res = await rawExchange((write) => write(`${method} /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), 1);
      const r = res.responses[0]!;
      expect(r.status).toBe(405);
      expect(rawEnvelope(r).error.code).toBe('METHOD_NOT_ALLOWED');
      expect(r.headers.allow).toMatch(/\bGET\b/);
    });

    it(`${method} on an unknown path answers 404 NOT_FOUND in the envelope`, async () => {
      const res = await rawExchange((write) => write(`${method} /no/such/path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), 1);
      const r = res.responses[0]!;
      expect(r.status).toBe(404);
      expect(rawEnvelope(r).error.code).toBe('NOT_FOUND');
    });
  }

  it('TRACE and PROPFIND on /graphql (mounted for every method) answer 405 in the envelope too', async () => {
    for (const method of ['TRACE', 'PROPFIND']) {
      const res = await rawExchange((write) => write(`${method} /graphql HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), 1);
      const r = res.responses[0]!;
      expect(r.status, method).toBe(405);
      expect(rawEnvelope(r).error.code).toBe('METHOD_NOT_ALLOWED');
    }
  });

  it('a method the HTTP parser does not know answers 400 in the envelope (written by the server, not a route)', async () => {
    const res = await rawExchange((write) => write('FROBNICATE /health HTTP/1.1\r\nHost: x\r\n\r\n'), 1);
    const r = res.responses[0]!;
    expect(r.status).toBe(400);
    expect(rawEnvelope(r).error.code).toBe('BAD_REQUEST');
    expect(r.headers.connection).toBe('close');
  });
});

describe('overlong URLs and headers', () => {
  it(`a URL longer than MAX_URL_LENGTH answers 414 URI_TOO_LONG in the envelope`, async () => {
    const res = await t.http('GET', `/health?pad=${'a'.repeat(t.config.MAX_URL_LENGTH)}`, { key: null });
    expect(res.status).toBe(414);
    expect(envelope(res).code).toBe('URI_TOO_LONG');
    expect(res.headers.get('x-request-id')).toBe(res.body.request_id);
    const ok = await t.http('GET', `/health?pad=${'a'.repeat(t.config.MAX_URL_LENGTH - 20)}`, { key: null });
    expect(ok.status).toBe(200);
  });

  it('a request head past MAX_HEADER_SIZE answers 431 HEADERS_TOO_LARGE in the envelope, with a request id', async () => {
    const res = await rawExchange((write) => write(`GET /health?pad=${'a'.repeat(t.config.MAX_HEADER_SIZE)} HTTP/1.1\r\nHost: x\r\n\r\n`), 1);
    const r = res.responses[0]!;
    expect(r.status).toBe(431);
    expect(rawEnvelope(r).error.code).toBe('HEADERS_TOO_LARGE');
    const big = await rawExchange((write) => write(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(t.config.MAX_HEADER_SIZE)}\r\n\r\n`), 1);
    expect(big.responses[0]?.status).toBe(431);
  });

  it('a malformed request head answers 400 BAD_REQUEST in the envelope', async () => {
    const res = await rawExchange((write) => write('GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n'), 1);
    const r = res.responses[0]!;
    expect(r.status).toBe(400);
    expect(rawEnvelope(r).error.code).toBe('BAD_REQUEST');
  });
});
