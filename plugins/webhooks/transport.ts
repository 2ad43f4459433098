/** The HTTP client of outbound webhooks: one POST to addresses already checked (ssrf.ts). */
import http from 'node:http';
import https from 'node:https';
import { pinnedLookup, type ResolvedAddress } from './ssrf.ts';

/** What one HTTP attempt gave: the response status (null when none came), an excerpt of its body, the error. */
export interface TransportResult {
  status: number | null;
  excerpt: string | null;
  error: string | null;
  /** No response came within the timeout. */
  timedOut?: boolean;
}

/**
 * One POST to checked addresses; the default is node's http/https client (injectable in tests).
 * `agent`: a keep-alive agent whose connections go to `addresses` only (agents.ts); without one,
 * a new connection.
 */
export type Transport = (req: { url: URL; addresses: ResolvedAddress[]; headers: Record<string, string>; body: string; timeoutMs: number; agent?: http.Agent }) => Promise<TransportResult>;

const EXCERPT_CHARS = 500;
/** Bytes of a response body read at most: enough for the excerpt, never the whole of a large body. */
const READ_BYTES = 4096;
/** Errors of a kept-alive connection the receiver closed as it was reused: the request never reached it whole. */
const STALE_CONNECTION = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/**
 * POSTs with node's http/https client, connecting only to `addresses` (no redirects are followed).
 * On a reused keep-alive connection that the receiver had closed (reset before any response), the
 * request is sent once more on a new connection, within the same timeout, as node's documentation
 * advises: the receiver got no request it answered.
 */
export const httpTransport: Transport = ({ url, addresses, headers, body, timeoutMs, agent }) =>
  new Promise((resolve) => {
    const client = url.protocol === 'https:' ? https : http;
    let status: number | null = null;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let timedOut = false;
    let req: http.ClientRequest;
    const excerpt = () => (chunks.length ? Buffer.concat(chunks).toString('utf8').slice(0, EXCERPT_CHARS) : status === null ? null : '');
    /** `keep`: the response was read to its end, so its connection may serve the next request. */
    const finish = (error: string | null, keep = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!keep) req.destroy();
      resolve({ status, excerpt: excerpt(), error: error ?? (status !== null && (status < 200 || status > 299) ? `HTTP ${status}` : null), timedOut });
    };
    const send = (via: http.Agent | false) => {
      const r = client.request(
        url,
        {
          method: 'POST',
          agent: via,
          lookup: pinnedLookup(addresses),
          headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'plugin-api-server-webhooks/1' },
        },
        (res) => {
          status = res.statusCode ?? null;
          res.on('data', (c: Buffer) => {
            chunks.push(c);
            size += c.length;
            if (size >= READ_BYTES) finish(null);
          });
          res.on('end', () => finish(null, true));
          res.on('error', (err) => finish(status === null ? err.message : null));
        },
      );
      r.on('error', (err: NodeJS.ErrnoException) => {
        if (r.reusedSocket && status === null && !settled && STALE_CONNECTION.has(err.code ?? '')) {
          req = send(false);
          return;
        }
        finish(status === null ? err.message : null);
      });
      r.end(body);
      return r;
    };
    // A status that came in time counts even if the body is still streaming at the deadline.
    const timer = setTimeout(() => {
      timedOut = status === null;
      finish(timedOut ? `no response within ${timeoutMs} ms` : null);
    }, timeoutMs);
    req = send(agent ?? false);
  });
