/** Reading HTTP/1.1 answers off a raw socket (tests that need what fetch cannot express). */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits what the server sent into complete responses (each with Content-Length, as ours are). */
export function parseResponses(data: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = data;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const [statusLine, ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length'] ?? 0);
    if (rest.length < end + 4 + length) return out;
    out.push({ status: Number(statusLine!.split(' ')[1]), headers, body: rest.subarray(end + 4, end + 4 + length).toString('utf8') });
    rest = rest.subarray(end + 4 + length);
  }
}

export interface RawExchange {
  responses: RawResponse[];
  /** The server closed the connection. */
  closed: boolean;
  /** The first socket error the client saw (EPIPE, ECONNRESET), if any. */
  error: string | null;
  timedOut: boolean;
}

/**
 * Runs `send(write)` on one raw connection to 127.0.0.1:`port` and collects the answers until
 * `want` responses arrived or the server closed the connection. `write` resolves once the socket
 * takes more (back-pressure), and does nothing once the socket is gone. Never hangs: after
 * `timeoutMs` it reports what it got with `timedOut` set.
 */
export function rawExchange(port: number, send: (write: (chunk: string | Buffer) => Promise<void>) => unknown, want: number, timeoutMs = 5000): Promise<RawExchange> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let error: string | null = null;
    let done = false;
    const finish = (closed: boolean, timedOut = false) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ responses: parseResponses(data), closed, error, timedOut });
    };
    const timer = setTimeout(() => finish(false, true), timeoutMs);
    socket.on('data', (d) => {
      data = Buffer.concat([data, typeof d === 'string' ? Buffer.from(d) : d]);
      if (parseResponses(data).length >= want) finish(false);
    });
    socket.on('close', () => finish(true));
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    const write = (chunk: string | Buffer) => new Promise<void>((res) => (socket.destroyed || socket.write(chunk) ? res() : socket.once('drain', res)));
    socket.on('connect', () => {
      void Promise.resolve(send(write)).catch(() => undefined);
    });
  });
}
