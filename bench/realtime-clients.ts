/**
 * The subscribers of bench/realtime.ts: SSE (`GET /events/stream`) and graphql-ws clients that
 * record, for every delivery, the delay from the write (`sent_at`, same machine clock) to its
 * arrival, as a histogram by millisecond. They run in the bench's own process, or spread over
 * `BENCH_RT_CLIENT_PROCESSES` processes of this file (forked), so that on a machine with several
 * cores the clients' own queueing (2,000 connections parsing 200,000 messages a second) weighs
 * less on the delays measured: real subscribers do not share one event loop.
 *
 * `BENCH_RT_CLIENTS` chooses how they speak:
 * - `wire` (default): each protocol directly, as autocannon speaks HTTP: SSE over `node:http`,
 *   graphql-ws as its messages (`connection_init`, `subscribe`, then `next` frames) over `ws`, each
 *   delivery found by its `sent_at` in the bytes received. The load generator then costs the
 *   machine less than the server it measures (on two cores it shares them with the server);
 * - `library`: graphql-ws's own client and `fetch` with WHATWG streams, as an application would.
 */
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { createClient, type Client } from 'graphql-ws';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Delays by millisecond (index) and how many deliveries had each. */
export type Histogram = number[];

const SENT_AT = Buffer.from('"sent_at":');

/**
 * Calls `found` with each `sent_at` in `chunk`. `carry` is the end of the previous chunk of the
 * same stream that may hold the start of a split `"sent_at":<digits>`; returns the new carry.
 */
export function scanSentAt(chunk: Buffer, carry: Buffer | null, found: (sentAt: number) => void): Buffer | null {
  const buf = carry ? Buffer.concat([carry, chunk]) : chunk;
  // Where a match split by the chunk's end could begin: a partial `"sent_at":`, or a whole one whose digits reach the end.
  let keepFrom = Math.max(0, buf.length - SENT_AT.length + 1);
  for (let at = buf.indexOf(SENT_AT); at !== -1; at = buf.indexOf(SENT_AT, at + 1)) {
    let i = at + SENT_AT.length;
    let n = 0;
    while (i < buf.length && buf[i]! >= 48 && buf[i]! <= 57) n = n * 10 + buf[i++]! - 48;
    if (i === buf.length) {
      keepFrom = at;
      break;
    }
    found(n);
    keepFrom = Math.max(keepFrom, i);
  }
  return keepFrom < buf.length ? Buffer.from(buf.subarray(keepFrom)) : null;
}

export class Subscribers {
  private readonly sse: AbortController[] = [];
  private readonly ws: Client[] = [];
  private readonly sockets: { close(): void }[] = [];
  private readonly wire = (process.env.BENCH_RT_CLIENTS ?? 'wire') === 'wire';
  private hist: Histogram = [];
  delivered = 0;
  private elu = performance.eventLoopUtilization();

  constructor(
    private readonly base: string,
    private readonly key: string,
    private readonly transport: string,
  ) {}

  private record(sentAt: number): void {
    this.delivered++;
    const d = Math.max(0, Date.now() - sentAt);
    this.hist[d] = (this.hist[d] ?? 0) + 1;
  }

  /** SSE over `node:http`: each chunk scanned for its deliveries' `sent_at`. */
  private openSseWire(): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = request(`${this.base}/events/stream?types=bench.tick`, { headers: { 'X-API-Key': this.key, Accept: 'text/event-stream' } }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`SSE answered ${res.statusCode}`));
        let carry: Buffer | null = null;
        res.on('data', (chunk: Buffer) => (carry = scanSentAt(chunk, carry, (t) => this.record(t))));
        res.on('error', () => undefined);
        resolve();
      });
      req.on('error', reject);
      this.sockets.push({ close: () => req.destroy() });
      req.end();
    });
  }

  /** graphql-ws's messages over `ws` (subprotocol `graphql-transport-ws`); `next` frames scanned for `sent_at`. */
  private openWsWire(): void {
    const socket = new WebSocket(this.base.replace('http', 'ws') + '/graphql', 'graphql-transport-ws');
    this.sockets.push({ close: () => socket.terminate() });
    let acked = false;
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { apiKey: this.key } })));
    socket.on('message', (data: Buffer) => {
      if (acked) return void scanSentAt(data, null, (t) => this.record(t));
      const m = JSON.parse(data.toString()) as { type: string };
      if (m.type !== 'connection_ack') return;
      acked = true;
      socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: 'subscription { events(types: ["bench.tick"]) { data } }' } }));
    });
    socket.on('error', () => undefined);
  }

  private async openSse(): Promise<void> {
    if (this.wire) return this.openSseWire();
    const abort = new AbortController();
    this.sse.push(abort);
    const res = await fetch(`${this.base}/events/stream?types=bench.tick`, { headers: { 'X-API-Key': this.key }, signal: abort.signal });
    void (async () => {
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          for (const m of value.matchAll(/"sent_at":(\d+)/g)) this.record(Number(m[1]));
        }
      } catch {
        // closed
      }
    })();
  }

  private openWs(): void {
    if (this.wire) return this.openWsWire();
    const client = createClient({ url: this.base.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { apiKey: this.key }, retryAttempts: 0 });
    this.ws.push(client);
    client.subscribe<{ events: { data: { sent_at: number } } }>(
      { query: 'subscription { events(types: ["bench.tick"]) { data } }' },
      { next: (r) => r.data && this.record(r.data.events.data.sent_at), error: () => undefined, complete: () => undefined },
    );
  }

  /** Opens `n` subscriptions; `first` is the overall index of the first (`both` alternates SSE and graphql-ws by index). */
  async open(n: number, first: number): Promise<void> {
    for (let i = first; i < first + n; i++) {
      if (this.transport === 'ws' || (this.transport === 'both' && i % 2)) this.openWs();
      else await this.openSse();
      if (i % 100 === 99) await sleep(50);
    }
  }

  /** Forgets the deliveries so far and starts the clients' busy share anew. */
  reset(): void {
    this.hist = [];
    this.delivered = 0;
    this.elu = performance.eventLoopUtilization();
  }

  /** The deliveries since the last reset, and the clients' event-loop busy share meanwhile. */
  report(): { hist: Histogram; delivered: number; busy: number } {
    return { hist: this.hist, delivered: this.delivered, busy: performance.eventLoopUtilization(this.elu).utilization };
  }

  async close(): Promise<void> {
    for (const a of this.sse) a.abort();
    for (const s of this.sockets) s.close();
    await Promise.all(this.ws.map((c) => c.dispose()));
  }
}

/** The delay at percentile `p` of the merged histograms. */
export function percentile(hists: Histogram[], p: number): number {
  const merged: number[] = [];
  for (const h of hists) h.forEach((n, ms) => (merged[ms] = (merged[ms] ?? 0) + (n ?? 0)));
  const total = merged.reduce((a, n) => a + (n ?? 0), 0);
  const rank = Math.min(total - 1, Math.floor((p / 100) * total));
  let seen = 0;
  for (let ms = 0; ms < merged.length; ms++) {
    seen += merged[ms] ?? 0;
    if (seen > rank) return ms;
  }
  return NaN;
}

type Command = { type: 'open'; n: number; first: number } | { type: 'reset' } | { type: 'report' } | { type: 'close' };

// A forked client process: commands from the bench, answers with the same type.
if (process.send && process.env.BENCH_RT_CLIENT === '1') {
  const subs = new Subscribers(process.env.BENCH_RT_BASE!, process.env.BENCH_RT_KEY!, process.env.BENCH_RT_TRANSPORT ?? 'both');
  process.on('message', (m: Command) => {
    void (async () => {
      if (m.type === 'open') await subs.open(m.n, m.first);
      if (m.type === 'reset') subs.reset();
      if (m.type === 'close') await subs.close();
      process.send!({ type: m.type, ...(m.type === 'report' ? subs.report() : {}) });
      if (m.type === 'close') process.exit(0);
    })();
  });
  process.send({ type: 'ready' });
}
