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

/** One POST to checked addresses; the default is node's http/https client (injectable in tests). */
export type Transport = (req: { url: URL; addresses: ResolvedAddress[]; headers: Record<string, string>; body: string; timeoutMs: number }) => Promise<TransportResult>;

const EXCERPT_CHARS = 500;
/** Bytes of a response body read at most: enough for the excerpt, never the whole of a large body. */
const READ_BYTES = 4096;

/** POSTs with node's http/https client, connecting only to `addresses` (no redirects are followed). */
export const httpTransport: Transport = ({ url, addresses, headers, body, timeoutMs }) =>
  new Promise((resolve) => {
    const client = url.protocol === 'https:' ? https : http;
    let status: number | null = null;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let timedOut = false;
    const excerpt = () => (chunks.length ? Buffer.concat(chunks).toString('utf8').slice(0, EXCERPT_CHARS) : status === null ? null : '');
    const finish = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve({ status, excerpt: excerpt(), error: error ?? (status !== null && (status < 200 || status > 299) ? `HTTP ${status}` : null), timedOut });
    };
    const req = client.request(
      url,
      {
        method: 'POST',
        agent: false,
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
        res.on('end', () => finish(null));
        res.on('error', (err) => finish(status === null ? err.message : null));
      },
    );
    // A status that came in time counts even if the body is still streaming at the deadline.
    const timer = setTimeout(() => {
      timedOut = status === null;
      finish(timedOut ? `no response within ${timeoutMs} ms` : null);
    }, timeoutMs);
    req.on('error', (err) => finish(status === null ? err.message : null));
    req.end(body);
  });
