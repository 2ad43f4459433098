/**
 * Protocol-level guards around the Koa stack: the answer to requests
 * Node's HTTP parser refuses before any middleware runs (`clientError`), so that those too get
 * the error envelope and a request id. See docs/operations.md, "HTTP limits".
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ErrorCode } from '../errors.ts';
import type { Logger } from '../logger.ts';

/** Status, code and message for an error of Node's HTTP parser (as Node's own default handler picks the status). */
function classify(code: string | undefined): { status: number; code: ErrorCode; message: string } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: ErrorCode.HEADERS_TOO_LARGE, message: 'Request line and headers are too large' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, code: ErrorCode.PAYLOAD_TOO_LARGE, message: 'Chunk extensions are too large' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: ErrorCode.REQUEST_TIMEOUT, message: 'The request was not received in time' };
    default:
      return { status: 400, code: ErrorCode.BAD_REQUEST, message: 'Malformed HTTP request' };
  }
}

type ParserError = Error & { code?: string };

/**
 * `clientError` listener of the HTTP server: answers a request the parser refused (malformed
 * request line or header, unknown method, head above `maxHeaderSize`, request timeout) with the
 * error envelope, a generated `X-Request-Id` and `Connection: close`, instead of Node's bare
 * text response. Nothing is written when the peer is gone or a response is already under way.
 */
export function clientErrorHandler(log: Logger): (err: ParserError, socket: Duplex) => void {
  return (err, socket) => {
    // A response already started on this socket cannot be replaced (Node's own handler checks the same).
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const { status, code, message } = classify(err.code);
    const requestId = randomUUID();
    const body = JSON.stringify({ error: { code, message, details: {} }, request_id: requestId });
    log.info({ request_id: requestId, status, parser_error: err.code }, `HTTP request refused by the parser: ${message}`);
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  };
}

/** Bytes of a size setting such as `512kb` or `64mb` (the format of `BODY_LIMIT`; 1kb = 1024 bytes). */
export function byteSize(setting: string): number {
  const m = /^(\d+)(b|kb|mb)$/i.exec(setting);
  if (!m) throw new Error(`not a size: ${setting}`);
  return Number(m[1]) * { b: 1, kb: 1024, mb: 1024 * 1024 }[m[2]!.toLowerCase() as 'b' | 'kb' | 'mb'];
}

/**
 * The answer goes out before the request body was read to its end (413 past `BODY_LIMIT`, a
 * corrupt compressed body, a route that never read its body). Closing the connection at once
 * would discard a body the client is still sending: its next write fails (EPIPE, ECONNRESET)
 * and many clients then report that instead of the answer. So, as Node does for bodies nobody
 * read, the rest is read and discarded — up to `maxDrainBytes`:
 *
 * - a declared `Content-Length` within the cap, or a chunked body: drained, the connection stays
 *   usable for the next request; a chunked body that passes the cap is cut off (socket closed);
 * - a declared `Content-Length` above the cap: `Connection: close` is announced and the
 *   connection closed once the answer is sent (the client may see its upload reset then).
 */
export function settleUnreadBody(req: IncomingMessage, setHeader: (name: string, value: string) => void, maxDrainBytes: number): void {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxDrainBytes) {
    setHeader('Connection', 'close');
    return;
  }
  let drained = 0;
  req.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > maxDrainBytes) req.socket.destroy();
  });
  // The body reader that gave up paused the stream; Node's own drain skips a stream already read from.
  req.resume();
}
