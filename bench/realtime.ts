/**
 * Realtime: one server process (bench/realtime-serve.ts) with N concurrent subscribers, half over
 * SSE (`GET /events/stream`), half over graphql-ws; measures
 * - memory per subscriber (server heap + external after GC, with N open minus with none),
 * - write → delivery delay, p50 and p99, at `BENCH_RT_RATE` writes per second (default 100),
 *   measured on every delivery to every subscriber (send time from the writer, same machine clock),
 * - database commands per second of the server with 10 and with N subscribers (aim: the same).
 * Events are appended directly, so they reach subscribers through the tail's poll (250 ms by
 * default), as events written on another replica do. All subscribers use one API key (one
 * credential check per AUTH_CACHE_TTL_MS for all of them).
 *
 * Standalone: `npx tsx bench/realtime.ts` (MONGODB_URI optional; an embedded MongoDB otherwise).
 * Env: BENCH_RT_SUBSCRIBERS (default 2000, half per transport), BENCH_RT_SECONDS (default 10),
 * BENCH_RT_TRANSPORT (`both`, `sse` or `ws`), BENCH_RT_CLIENT_PROCESSES (default 1: the subscribers
 * in the bench's own process; more spreads them over that many processes, bench/realtime-clients.ts),
 * BENCH_RT_CLIENTS (`wire`, the default: the protocols spoken directly; `library`: graphql-ws's client
 * and fetch, see bench/realtime-clients.ts).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { loadavg } from 'node:os';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { percentile, Subscribers, type Histogram } from './realtime-clients.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const N = Number(process.env.BENCH_RT_SUBSCRIBERS ?? 2000);
const SECONDS = Number(process.env.BENCH_RT_SECONDS ?? 10);
const RATE = Number(process.env.BENCH_RT_RATE ?? 100);
/** `both` (default: alternate), `sse` or `ws`: which transport the subscribers use. */
const TRANSPORT = process.env.BENCH_RT_TRANSPORT ?? 'both';
const KEY = 'bench-admin-key-0123456789abcdef';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CLIENT_PROCESSES = Math.max(1, Number(process.env.BENCH_RT_CLIENT_PROCESSES ?? 1));

/** Subscribers in this process or in a forked one (bench/realtime-clients.ts). */
interface ClientGroup {
  open(n: number, first: number): Promise<void>;
  reset(): Promise<void>;
  report(): Promise<{ hist: Histogram; delivered: number; busy: number }>;
  close(): Promise<void>;
}

async function clientGroups(base: string): Promise<ClientGroup[]> {
  if (CLIENT_PROCESSES === 1) {
    const subs = new Subscribers(base, KEY, TRANSPORT);
    return [{ open: (n, first) => subs.open(n, first), reset: async () => subs.reset(), report: async () => subs.report(), close: () => subs.close() }];
  }
  return Promise.all(Array.from({ length: CLIENT_PROCESSES }, async () => {
    const child = fork(resolve(import.meta.dirname, 'realtime-clients.ts'), [], {
      env: { ...process.env, BENCH_RT_CLIENT: '1', BENCH_RT_BASE: base, BENCH_RT_KEY: KEY, BENCH_RT_TRANSPORT: TRANSPORT },
      execArgv: ['--import', 'tsx'],
    });
    const reply = async <T>(type: string, extra: Record<string, unknown> = {}): Promise<T> => {
      child.send({ type, ...extra });
      for (;;) {
        const [m] = (await once(child, 'message')) as [T & { type: string }];
        if (m.type === type) return m;
      }
    };
    const [hello] = (await once(child, 'message')) as [{ type: string }];
    if (hello.type !== 'ready') throw new Error('client process did not start');
    return {
      open: async (n: number, first: number) => void (await reply('open', { n, first })),
      reset: async () => void (await reply('reset')),
      report: () => reply<{ hist: Histogram; delivered: number; busy: number }>('report'),
      close: async () => {
        const exited = once(child, 'exit');
        await reply('close');
        await exited;
      },
    };
  }));
}

type Stats = { heap: number; external: number; rss: number; commands: number; by_kind: Record<string, number>; elu: { idle: number; active: number }; cpu?: { user: number; system: number }; at?: number; listeners: number; sessions: number; tail_queries: number; executions: number; reused: number; groups: number; serialized?: number; frames?: number };

export async function benchRealtime(mongodbUri: string) {
  const uri = new URL(mongodbUri);
  uri.pathname = '/bench_realtime';
  const server: ChildProcess = fork(resolve(import.meta.dirname, 'realtime-serve.ts'), [], {
    env: { ...process.env, MONGODB_URI: uri.toString(), ADMIN_API_KEY: KEY },
    execArgv: ['--import', 'tsx', '--expose-gc', ...(process.env.BENCH_RT_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_RT_PROF_DIR}`] : [])],
  });
  const [ready] = (await once(server, 'message')) as [{ port: number }];
  const base = `http://127.0.0.1:${ready.port}`;
  const stats = async (): Promise<Stats> => {
    server.send({ type: 'stats' });
    for (;;) {
      const [m] = (await once(server, 'message')) as [Stats & { type: string }];
      if (m.type === 'stats') return m;
    }
  };
  const groups = await clientGroups(base);
  let opened = 0;
  /** Opens `n` more subscribers, spread over the client groups (alternating transports by overall index). */
  const open = async (n: number) => {
    const per = Math.ceil(n / groups.length);
    await Promise.all(groups.map((g, j) => {
      const k = Math.max(0, Math.min(per, n - j * per));
      return k ? g.open(k, opened + j * per) : Promise.resolve();
    }));
    opened += n;
  };
  const reports = async () => {
    const rs = await Promise.all(groups.map((g) => g.report()));
    return { hists: rs.map((r) => r.hist), delivered: rs.reduce((a, r) => a + r.delivered, 0), busy: Math.max(...rs.map((r) => r.busy)) };
  };
  /** Writes at RATE/s for `seconds`; returns the database commands per second meanwhile. */
  const write = async (seconds: number) => {
    const before = await stats();
    await Promise.all(groups.map((g) => g.reset()));
    const start = Date.now();
    let n = 0;
    while (Date.now() - start < seconds * 1000) {
      const due = start + (n * 1000) / RATE;
      if (due > Date.now()) await sleep(due - Date.now());
      void fetch(`${base}/bench-events`, { method: 'POST', headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ sent_at: Date.now(), n: n++ }) }).then((r) => r.text()).catch(() => undefined);
    }
    await sleep(1500); // the last deliveries
    const after = await stats();
    const clients = await reports();
    const client = clients.busy;
    const kinds = Object.entries(after.by_kind).map(([k, v]) => [k, (v - (before.by_kind[k] ?? 0)) / (seconds + 1.5)] as const).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    const busy = (after.elu.active - before.elu.active) / (after.elu.active - before.elu.active + after.elu.idle - before.elu.idle);
    const cpuMs = (c?: { user: number; system: number }) => (c ? (c.user + c.system) / 1000 : 0);
    // CPU time the server used (user + system) per second of the window: unlike the loop's busy
    // share, not inflated by the time the process waits for a core on a loaded machine.
    // Per second of the server's own clock between the two readings (a saturated server answers late).
    const cpu = (cpuMs(after.cpu) - cpuMs(before.cpu)) / ((after.at ?? 0) - (before.at ?? 0) || (seconds + 1.5) * 1000);
    const elapsedMs = (after.at ?? 0) - (before.at ?? 0) || (seconds + 1.5) * 1000;
    return { clients, busy, client, cpu, cpuMs: cpuMs(after.cpu) - cpuMs(before.cpu), elapsedMs, byKind: kinds.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', '), perSecond: (after.commands - before.commands) / (seconds + 1.5), tailPerSecond: (after.tail_queries - before.tail_queries) / (seconds + 1.5), writes: n, executions: after.executions - before.executions, reused: after.reused - before.reused, groups: after.groups, serialized: (after.serialized ?? 0) - (before.serialized ?? 0), frames: (after.frames ?? 0) - (before.frames ?? 0) };
  };

  try {
    await sleep(500);
    const idle = await stats();
    await open(10);
    await sleep(1000);
    const ten = await write(Math.min(5, SECONDS));
    await open(N - 10);
    await until(async () => (await stats()).listeners >= N, 60_000);
    await sleep(1000);
    const full = await stats();
    const many = await write(SECONDS);
    const delivered = many.clients.delivered;
    const perSub = (full.heap + full.external - idle.heap - idle.external) / N;
    const result = {
      subscribers: N,
      memory_per_subscriber_kb: +(perSub / 1024).toFixed(1),
      rss_per_subscriber_kb: +((full.rss - idle.rss) / N / 1024).toFixed(1),
      delay_ms: { p50: percentile(many.clients.hists, 50), p99: percentile(many.clients.hists, 99), deliveries: delivered, expected: many.writes * N },
      db_commands_per_s: { with_10: +ten.perSecond.toFixed(1), [`with_${N}`]: +many.perSecond.toFixed(1) },
      tail_queries_per_s: { with_10: +ten.tailPerSecond.toFixed(1), [`with_${N}`]: +many.tailPerSecond.toFixed(1) },
      graphql: { executions: many.executions, reused: many.reused, groups: many.groups, serialized: many.serialized, frames: many.frames },
    };
    log(`realtime: ${N} subscribers (${TRANSPORT === 'both' ? `${N / 2} SSE + ${N / 2} graphql-ws` : TRANSPORT}), ${RATE} writes/s for ${SECONDS} s, load average ${loadavg()[0]!.toFixed(1)}`);
    log(`  memory per subscriber: ${result.memory_per_subscriber_kb} KiB heap+external (${result.rss_per_subscriber_kb} KiB RSS)`);
    log(`  write → delivery: p50 ${result.delay_ms.p50} ms, p99 ${result.delay_ms.p99} ms (${delivered} of ${result.delay_ms.expected} deliveries)`);
    log(`  database commands/s: ${result.db_commands_per_s.with_10} with 10 subscribers, ${result.db_commands_per_s[`with_${N}`]} with ${N} (tail queries/s ${result.tail_queries_per_s.with_10} / ${result.tail_queries_per_s[`with_${N}`]})`);
    log(`  server event loop busy while writing: ${(100 * ten.busy).toFixed(0)}% with 10 subscribers, ${(100 * many.busy).toFixed(0)}% with ${N} (the bench's clients, ${CLIENT_PROCESSES} process${CLIENT_PROCESSES > 1 ? 'es, the busiest' : ''}: ${(100 * ten.client).toFixed(0)}% / ${(100 * many.client).toFixed(0)}%)`);
    // The CPU the subscribers add (with N minus with 10: the writes themselves cost the same), per delivery.
    const perThousand = (many.cpuMs - ten.cpu * many.elapsedMs) / (delivered / 1000);
    log(`  server CPU while writing (user + system, of one core): ${(100 * ten.cpu).toFixed(0)}% with 10, ${(100 * many.cpu).toFixed(0)}% with ${N}; the subscribers' share ${perThousand.toFixed(1)} ms per 1,000 deliveries`);
    log(`    by collection and method, with 10: ${ten.byKind}`);
    log(`    with ${N}: ${many.byKind}`);
    log(`  GraphQL executions of events: ${many.executions} (${many.reused} results reused, ${many.groups} groups); ${many.frames} graphql-ws frames written by their group, ${many.serialized} payloads serialized`);
    return result;
  } finally {
    await Promise.all(groups.map((g) => g.close()));
    server.send({ type: 'stop' });
    await once(server, 'exit');
  }
}

async function until(fn: () => Promise<boolean>, ms: number) {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error('subscribers did not all connect');
    await sleep(200);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mongo = process.env.MONGODB_URI ? null : await MongoMemoryServer.create();
  try {
    await benchRealtime(process.env.MONGODB_URI ?? mongo!.getUri());
  } finally {
    await mongo?.stop();
  }
}
