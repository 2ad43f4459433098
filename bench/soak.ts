/**
 * `npm run bench:soak`: the server with the default settings (`BENCH_MODE=app`, its own process;
 * `BENCH_SOAK_SIDE=bare-soak` the mix's floor instead, bench/soak-floor.ts) under a steady mixed load for a long time: `BENCH_SOAK_REQUESTS` (1,000,000) requests at
 * `BENCH_SOAK_RATE` (1,100) requests/s, about 15 minutes, while `BENCH_SOAK_SSE` (20) clients stay
 * on `GET /events/stream` for the whole run. Aims: no error; RSS at the end ≤ 1.2 × RSS after the
 * warm-up; the event loop's p99 delay flat (the median of the last third of the samples after the
 * warm-up ≤ 1.5 × the median of the first third); the rate held; every stream kept receiving.
 *
 * The load is one autocannon run of `REQUESTS / RATE` seconds paced by its `overallRate` (each
 * connection sends its share of every second). The mix, spread evenly over each 100 requests: REST get-one of seeded projects
 * (30), the first offset page (18), cursor page 20 (17), create (7), update with `If-Match` (8)
 * and delete with `If-Match` (5) of projects this run created, GraphQL list (8) and get-one (7).
 * A created project joins a queue once its create is answered; an update or delete takes one from
 * the queue (so no document is written twice at once or deleted twice) and an update puts it back
 * with the ETag it answered. Every answer that is not 2xx is an error, as is a GraphQL answer with
 * `errors`, a socket error, a timeout (10 s) and a stream that ends.
 *
 * Every `BENCH_SOAK_SAMPLE_S` (30 s; shorter for short runs) one line: requests and errors in the
 * window, client-side p99 latency, the server's RSS, heap used and committed, array buffers,
 * collections, event-loop delay p99 and max in the window (bench/serve.ts with
 * `BENCH_LOOP_STATS=1`), events per stream, load average. The warm-up lasts `BENCH_SOAK_WARMUP_S`
 * (60 s) and until `BENCH_SOAK_WARMUP_GC` (3) full collections have run; RSS after it is the highest
 * over the next full-collection cycle. Exits 1 when an aim is not met.
 * `BENCH_SOAK_REQUESTS=20000` is a check of about a minute.
 */
import { request, type ClientRequest } from 'node:http';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { seed, serverReport, startServer, type LoopStats } from './seed.ts';
import { loadAvg, log, median, runBench, scenarios } from './scenarios.ts';

const REQUESTS = Number(process.env.BENCH_SOAK_REQUESTS ?? 1_000_000);
const RATE = Number(process.env.BENCH_SOAK_RATE ?? 1_100);
const DOCS = Number(process.env.BENCH_SOAK_DOCS ?? 5_000);
/** The cursor page the mix reads (reached by following `next` from the first page before the load). */
const CURSOR_PAGE = 20;
const CONNECTIONS = Number(process.env.BENCH_SOAK_CONNECTIONS ?? 50);
const SSE_CLIENTS = Number(process.env.BENCH_SOAK_SSE ?? 20);
/** The server under load: `app` (the defaults) or `bare-soak` (the mix's floor, bench/soak-floor.ts). */
const SIDE = process.env.BENCH_SOAK_SIDE ?? 'app';
/** Node flags of the server's process (space-separated), e.g. `--max-semi-space-size=16`. */
const NODE_FLAGS = (process.env.BENCH_SOAK_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const PLANNED_S = REQUESTS / RATE;
const SAMPLE_S = Number(process.env.BENCH_SOAK_SAMPLE_S ?? Math.min(30, Math.max(2, Math.round(PLANNED_S / 30))));
const WARMUP_S = Number(process.env.BENCH_SOAK_WARMUP_S ?? Math.min(60, 2 * SAMPLE_S));
/**
 * The warm-up also lasts until the server has run this many full collections (mark-compact) under
 * the load: V8 raises the old generation's limit from the live set it finds at its first full
 * collections, and until then the heap, and with it RSS, grows toward its working size
 * (docs/performance.md, "Soak"). 0: by time alone.
 */
const WARMUP_GC = Number(process.env.BENCH_SOAK_WARMUP_GC ?? 3);
/** The aims. */
const RSS_RATIO_MAX = 1.2;
const FLAT_RATIO_MAX = 1.5;
const RATE_MIN = 0.95;

type Kind = 'get-one' | 'list' | 'cursor page' | 'create' | 'update' | 'delete' | 'graphql list' | 'graphql get';
const MIX: [Kind, number][] = [['get-one', 30], ['list', 18], ['cursor page', 17], ['create', 7], ['update', 8], ['delete', 5], ['graphql list', 8], ['graphql get', 7]];
/** Updates and deletes wait (a create goes instead) until this many created projects are queued. */
const MIN_QUEUE = 200;

/** The mix as a sequence of 100 in which each kind is spread evenly (smooth weighted round robin). */
function sequence(mix: [Kind, number][]): Kind[] {
  const total = mix.reduce((a, [, w]) => a + w, 0);
  const current = mix.map(() => 0);
  return Array.from({ length: total }, () => {
    mix.forEach(([, w], i) => (current[i]! += w));
    const best = current.indexOf(Math.max(...current));
    current[best]! -= total;
    return mix[best]![0];
  });
}

/** One subscriber of `GET /events/stream`: counts the events it receives. */
class Stream {
  events = 0;
  ended = false;
  private req: ClientRequest | null = null;
  private static readonly MARK = Buffer.from('\nevent: ');

  open(base: string, key: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.req = request(`${base}/events/stream`, { headers: { 'X-API-Key': key, Accept: 'text/event-stream' } }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`event stream answered ${res.statusCode}`));
        let carry = Buffer.alloc(0);
        res.on('data', (chunk: Buffer) => {
          // A mark split by the chunk's end is found with the next chunk.
          const buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
          for (let at = buf.indexOf(Stream.MARK); at !== -1; at = buf.indexOf(Stream.MARK, at + 1)) this.events++;
          carry = Buffer.from(buf.subarray(Math.max(0, buf.length - Stream.MARK.length + 1)));
        });
        res.on('close', () => (this.ended = true));
        resolve();
      });
      this.req.on('error', (err) => (this.ended ? undefined : reject(err)));
      this.req.end();
    });
  }

  close(): void {
    this.ended = true;
    this.req?.destroy();
  }
}

/** `cpuPerRequest`: the server's CPU time per request in the window (µs), which the machine's other work does not inflate as it does the loop's delay. */
interface Sample { t: number; window: number; requests: number; bad: number; p99: number; server: LoopStats; cpuPerRequest: number; streamEvents: number[]; load: string }

/** Client-side counters of the current window. */
class Window {
  requests = 0;
  bad = 0;
  latencies: number[] = [];
  take() {
    const s = [...this.latencies].sort((a, b) => a - b);
    const out = { requests: this.requests, bad: this.bad, p99: s.length ? s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]! : 0 };
    this.requests = this.bad = 0;
    this.latencies = [];
    return out;
  }
}

const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MB`;
const range = (xs: number[]) => (xs.length ? `${Math.min(...xs)}–${Math.max(...xs)}` : 'none');

async function main() {
  const { mem, MONGODB_URI, tenant, user, key, sample, updIds } = await seed(DOCS, log);
  const { child, port } = await startServer(SIDE, { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id, BENCH_LOOP_STATS: '1' }, NODE_FLAGS);
  // A soak stopped early (Ctrl-C, `timeout`) must not leave its server running.
  process.once('exit', () => child.kill('SIGTERM'));
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(130));
  try {
    await soak(child, port, key, { sampleId: String(sample._id), readIds: updIds.slice(0, 1000) });
  } finally {
    child.kill('SIGTERM');
    await mem?.stop();
  }
}

async function soak(child: ChildProcess, port: number, key: string, seeded: { sampleId: string; readIds: string[] }) {
  const base = `http://127.0.0.1:${port}`;
  // Fresh headers for every request: autocannon adds the body's `Content-Length` to the object it is given.
  const auth = () => ({ 'X-API-Key': key });
  const json = () => ({ 'X-API-Key': key, 'Content-Type': 'application/json' });
  const { reads } = scenarios({ key, sampleId: seeded.sampleId, updIds: [] });
  const gqlGet = (id: string) => JSON.stringify({ query: 'query ($id: ID!) { project(id: $id) { _id etag name status tags budget version updated_at } }', variables: { id } });
  const slots = sequence(MIX);
  let cursor = '';
  for (let p = 1; p < CURSOR_PAGE; p++) {
    const res = await fetch(`${base}/projects?limit=25${cursor ? `&cursor=${cursor}` : ''}`, { headers: auth() });
    cursor = ((await res.json()) as { cursors: { next: string } }).cursors.next;
  }
  const queue: { id: string; etag: string }[] = [];
  const sent: Record<string, number> = {};
  const failed: Record<string, number> = {};
  let graphqlErrors = 0;
  let writesDone = 0;
  const firstFailures: string[] = [];
  let n = 0;

  const streams = Array.from({ length: SSE_CLIENTS }, () => new Stream());
  await Promise.all(streams.map((s) => s.open(base, key)));
  log(`${SIDE}${NODE_FLAGS.length ? ` (${NODE_FLAGS.join(' ')})` : ''}: ${SSE_CLIENTS} event streams open; ${REQUESTS} requests at ${RATE}/s (${(PLANNED_S / 60).toFixed(1)} min planned), ${CONNECTIONS} connections, a sample every ${SAMPLE_S} s, warm-up ${WARMUP_S} s and ${WARMUP_GC} full collections (load average ${loadAvg()})`);

  type Ctx = { kind?: Kind; doc?: { id: string; etag: string } };
  const setupRequest = (req: autocannon.Request, context: Ctx): autocannon.Request => {
    const i = n++;
    let kind = slots[i % slots.length]!;
    let doc: { id: string; etag: string } | undefined;
    if (kind === 'update' || kind === 'delete') {
      if (queue.length > MIN_QUEUE) doc = queue.shift()!;
      else kind = 'create';
    }
    context.kind = kind;
    context.doc = doc;
    sent[kind] = (sent[kind] ?? 0) + 1;
    const readId = seeded.readIds[i % seeded.readIds.length]!;
    switch (kind) {
      case 'get-one': return { ...req, method: 'GET', path: `/projects/${readId}`, headers: auth() };
      case 'list': return { ...req, method: 'GET', path: reads.list.path, headers: auth() };
      case 'cursor page': return { ...req, method: 'GET', path: `/projects?limit=25&cursor=${cursor}`, headers: auth() };
      case 'create': return { ...req, method: 'POST', path: '/projects', headers: json(), body: JSON.stringify({ name: `soak ${i}`, tags: ['soak'], budget: i % 1000 }) };
      case 'update': return { ...req, method: 'PATCH', path: `/projects/${doc!.id}`, headers: { ...json(), 'If-Match': doc!.etag }, body: JSON.stringify({ budget: i % 1000 }) };
      case 'delete': return { ...req, method: 'DELETE', path: `/projects/${doc!.id}`, headers: { ...auth(), 'If-Match': doc!.etag } };
      case 'graphql list': return { ...req, method: 'POST', path: '/graphql', headers: json(), body: reads['graphql list'].body as string };
      case 'graphql get': return { ...req, method: 'POST', path: '/graphql', headers: json(), body: gqlGet(readId) };
    }
  };
  const onResponse = (status: number, body: string, context: Ctx, headers: Record<string, string | string[]>) => {
    const kind = context.kind!;
    const fail = (why: string) => {
      failed[kind] = (failed[kind] ?? 0) + 1;
      if (firstFailures.length < 10) firstFailures.push(`${kind} ${status}: ${why.slice(0, 300)}`);
    };
    if (status >= 300) return fail(body);
    if (kind === 'create' || kind === 'update' || kind === 'delete') writesDone++;
    if (kind.startsWith('graphql') && body.includes('"errors"')) {
      graphqlErrors++;
      return fail(body);
    }
    if (kind !== 'create' && kind !== 'update') return;
    const etag = Object.entries(headers).find(([h]) => h.toLowerCase() === 'etag')?.[1];
    const id = kind === 'create' ? (JSON.parse(body) as { _id: string })._id : context.doc!.id;
    if (typeof etag !== 'string') return fail('no ETag');
    queue.push({ id, etag });
  };

  const win = new Window();
  const samples: Sample[] = [];
  const t0 = Date.now();
  let last = t0;
  let lastEvents = streams.map(() => 0);
  let lastCpu = (await serverReport(child)).cpu;
  const take = async (): Promise<Sample> => {
    const { cpu, stats: server } = await serverReport(child);
    const now = Date.now();
    const w = win.take();
    const s: Sample = { t: (now - t0) / 1000, window: (now - last) / 1000, ...w, server: server!, cpuPerRequest: (cpu - lastCpu) / Math.max(1, w.requests), streamEvents: streams.map((x, i) => x.events - lastEvents[i]!), load: loadAvg() };
    last = now;
    lastEvents = streams.map((x) => x.events);
    lastCpu = cpu;
    samples.push(s);
    log(
      `${`${s.t.toFixed(0)} s`.padStart(6)}  ${String(s.requests).padStart(6)} req (${(s.requests / s.window).toFixed(0)}/s)  errors ${s.bad}  p99 ${s.p99.toFixed(0)} ms | rss ${mb(s.server.rss)} heap ${mb(s.server.heap)}/${mb(s.server.heap_total)} new ${mb(s.server.new_space)} malloc ${mb(s.server.malloced)} ext ${mb(s.server.external)} ab ${mb(s.server.array_buffers)} gc ${s.server.gc_minor}/${s.server.gc_major}` +
      `  loop p99 ${s.server.delay_p99_ms.toFixed(1)} ms max ${s.server.delay_max_ms.toFixed(0)} ms  elu ${s.server.elu.toFixed(2)} cpu/req ${s.cpuPerRequest.toFixed(0)} µs | events/stream ${range(s.streamEvents)} | load ${s.load}`,
    );
    return s;
  };
  let sampling = Promise.resolve();
  const timer = setInterval(() => (sampling = sampling.then(() => take().then(() => undefined))), SAMPLE_S * 1000);

  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({
      // Bounded by time, not by `amount`: autocannon splits an amount evenly between connections while
      // `overallRate` gives some of them one request a second more, so those would stop early and the
      // rate would sag at the end.
      url: base, connections: CONNECTIONS, overallRate: RATE, duration: Math.ceil(PLANNED_S), timeout: 10,
      requests: [{ setupRequest: setupRequest as autocannon.Request['setupRequest'], onResponse: onResponse as autocannon.Request['onResponse'] }],
    }, (err, res) => (err ? reject(err as Error) : resolve(res)));
    instance.on('response', (_c: unknown, status: number, _b: number, ms: number) => {
      win.requests++;
      win.latencies.push(ms);
      if (status >= 300) win.bad++;
    });
    instance.on('reqError', () => win.bad++);
  });
  clearInterval(timer);
  await sampling;
  const seconds = (new Date(result.finish).getTime() - new Date(result.start).getTime()) / 1000;
  // Events of the last writes are still on their way: let them arrive before the last sample.
  await new Promise((r) => setTimeout(r, 3000));
  const end = await take();
  const endedStreams = streams.filter((s) => s.ended).length;
  for (const s of streams) s.close();
  verdict({ result, seconds, samples, end, endedStreams, streams, sent, failed, graphqlErrors, writesDone, firstFailures });
}

function verdict(r: {
  result: autocannon.Result; seconds: number; samples: Sample[]; end: Sample; endedStreams: number; streams: Stream[];
  sent: Record<string, number>; failed: Record<string, number>; graphqlErrors: number; writesDone: number; firstFailures: string[];
}) {
  const { result, seconds, samples } = r;
  const total = result.requests.total;
  const errors = result.non2xx + result.errors + r.graphqlErrors + r.endedStreams;
  // The warm-up's end: the first sample at or after WARMUP_S by which WARMUP_GC full collections have run.
  let majors = 0;
  const warmedAt = samples.findIndex((s) => (majors += s.server.gc_major) >= WARMUP_GC && s.t >= WARMUP_S - SAMPLE_S / 2 && s !== r.end);
  const warmed = warmedAt !== -1;
  // Without the collections, the thirds still start after WARMUP_S (RSS is then not measured).
  const baseline = warmed ? samples[warmedAt]! : samples.filter((s) => s.t <= WARMUP_S + SAMPLE_S / 2).at(-1) ?? samples[0]!;
  // The thirds: full windows after the warm-up (the last, partial one only gives the RSS at the end).
  const after = samples.filter((s) => s.t > baseline.t && s !== r.end);
  const third = Math.floor(after.length / 3);
  const first = third ? median(after.slice(0, third).map((s) => s.server.delay_p99_ms)) : NaN;
  const lastThird = third ? median(after.slice(-third).map((s) => s.server.delay_p99_ms)) : NaN;
  // RSS is a sawtooth of the full collections' period (the old generation and the array buffers its
  // garbage holds fill up, then a full collection frees them): RSS after the warm-up is its highest
  // over the first full cycle after it (to the next full collection), so that a sample taken just
  // after a collection is not the reference.
  const nextFull = after.findIndex((s) => s.server.gc_major > 0);
  const cycle = [baseline, ...after.slice(0, nextFull === -1 ? after.length : nextFull + 1)];
  const highest = (xs: Sample[]) => xs.reduce((a, x) => (x.server.rss > a.server.rss ? x : a));
  const atSize = highest(cycle);
  // The end is read the same way, peak against peak: the highest over the last full cycle (from
  // the sample after the last but one full collection to the end), so that neither side is a trough.
  const tail = [...after, r.end];
  const fulls = tail.flatMap((s, i) => (s.server.gc_major > 0 ? [i] : []));
  const atEnd = highest(tail.slice(fulls.length >= 2 ? fulls.at(-2)! + 1 : 0));
  const rssRatio = atEnd.server.rss / atSize.server.rss;
  // Both sample a sawtooth (the heap grows to its next collection): the thirds' medians show the trend.
  const thirds = (f: (s: Sample) => number) => (third ? `${(median(after.slice(-third).map(f)) / median(after.slice(0, third).map(f))).toFixed(2)}` : 'n/a');
  const rate = total / seconds;
  const perStream = r.streams.map((s) => s.events);
  const silent = after.filter((s) => Math.min(...s.streamEvents) === 0).length;
  const checks: [string, boolean, string][] = [
    ['errors = 0', errors === 0, `${errors} (non-2xx ${result.non2xx}, socket errors and timeouts ${result.errors} of which timeouts ${result.timeouts}, GraphQL errors ${r.graphqlErrors}, streams ended ${r.endedStreams})`],
    [`RSS at the end / after the warm-up ≤ ${RSS_RATIO_MAX}`, warmed && rssRatio <= RSS_RATIO_MAX, `${warmed ? '' : `not measured: fewer than ${WARMUP_GC} full collections in the run; `}${rssRatio.toFixed(2)} (${mb(atEnd.server.rss)} at ${atEnd.t.toFixed(0)} s, the highest of the last cycle / ${mb(atSize.server.rss)} at ${atSize.t.toFixed(0)} s, the highest of the cycle after the warm-up's end at ${baseline.t.toFixed(0)} s; the last sample ${mb(r.end.server.rss)}; the last sample against the warm-up's last, ${mb(baseline.server.rss)}, ${(r.end.server.rss / baseline.server.rss).toFixed(2)}; full collections in the run ${samples.reduce((a, x) => a + x.server.gc_major, 0)}; max ${mb(Math.max(...samples.map((s) => s.server.rss)))})`],
    [`event-loop p99 flat: median of the last third ≤ ${FLAT_RATIO_MAX} × the first`, lastThird <= FLAT_RATIO_MAX * first, `${(lastThird / first).toFixed(2)} (${lastThird.toFixed(1)} ms / ${first.toFixed(1)} ms; ${third} samples per third; max p99 ${Math.max(...after.map((s) => s.server.delay_p99_ms)).toFixed(1)} ms, max delay ${Math.max(...after.map((s) => s.server.delay_max_ms)).toFixed(0)} ms)`],
    [`rate held ≥ ${RATE_MIN} × ${RATE}/s`, rate >= RATE_MIN * RATE, `${rate.toFixed(0)}/s (${total} requests in ${(seconds / 60).toFixed(1)} min)`],
    ['every stream received events in every window after the warm-up', silent === 0 && r.endedStreams === 0, `events per stream ${range(perStream)} (writes answered 2xx: ${r.writesDone}); windows with a silent stream: ${silent}`],
  ];
  log(`\nsent: ${Object.entries(r.sent).map(([k, v]) => `${k} ${v}`).join(', ')}; failed: ${Object.entries(r.failed).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}`);
  for (const f of r.firstFailures) log(`  ${f}`);
  const peaks = third ? Math.max(...after.slice(-third).map((s) => s.server.rss)) / Math.max(...after.slice(0, third).map((s) => s.server.rss)) : NaN;
  log(`trend, median of the last third / the first after the warm-up: RSS ${thirds((s) => s.server.rss)} (highest ${peaks.toFixed(2)}), heap used ${thirds((s) => s.server.heap)}, heap total ${thirds((s) => s.server.heap_total)}, external ${thirds((s) => s.server.external)}, server CPU per request ${thirds((s) => s.cpuPerRequest)}`);
  log(`client latency over the run: p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, max ${result.latency.max} ms (autocannon, corrected for coordinated omission)`);
  log(`\nverdict (load average ${loadAvg()}):`);
  for (const [aim, ok, value] of checks) log(`  ${ok ? 'met    ' : 'NOT MET'}  ${aim}: ${value}`);
  if (checks.some(([, ok]) => !ok)) throw new Error('soak: an aim is not met');
}

runBench(main);
