/**
 * `npm run bench:events`: what the durable event log, its audit sink and outbound webhooks cost.
 *
 * 1. Create throughput, as ratios in the same run (median of `BENCH_ROUNDS` rounds, sides rotating):
 *    - the event log on against off (both with audit off, so only the event differs): aim >= 0.9;
 *    - audit on against off (both with the event log on, the default): aim >= 0.85.
 * 2. Delay from a change to the receiver's 2xx (the event's `timestamp` to its receipt): creates at `BENCH_RATE` (200) per second
 *    for `BENCH_SECONDS`, one webhook endpoint subscribed to `projects.created`, on one server
 *    process and on two (the rate split between them). p50 / p99 of (receipt time - event timestamp).
 * 3. Fan-out: `BENCH_FANOUT_EVENTS` (1000) creates to `BENCH_FANOUT_ENDPOINTS` (10) endpoints: all
 *    delivered, and how long from the first create to the last delivery.
 *
 * The database: `MONGODB_URI`, or an embedded MongoDB (mongodb-memory-server). Results print as a
 * table and go to bench/events-results.json. `BENCH_PARTS=create` runs only part 1 (also `delay`,
 * `fanout`); `BENCH_BASE_DIR=<checkout of older code>` adds that code's event log on / off pair to
 * part 1 (`base:` sides), so old and new are measured in the same rounds.
 */
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { startServer } from './seed.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const RATE = Number(process.env.BENCH_RATE ?? 200);
const FANOUT_EVENTS = Number(process.env.BENCH_FANOUT_EVENTS ?? 1000);
const FANOUT_ENDPOINTS = Number(process.env.BENCH_FANOUT_ENDPOINTS ?? 10);
const KEY = 'bench-admin-key-0123456789abcdef';
const PARTS = (process.env.BENCH_PARTS ?? 'create,delay,fanout').split(',');

const log = (s: string) => process.stdout.write(`${s}\n`);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call(port: number, method: string, path: string, json?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: { 'X-API-Key': KEY, ...(json !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A receiver on loopback: answers 204 and records each delivery's delay and endpoint. */
async function receiver(): Promise<{ server: Server; port: number; got: { delayMs: number; path: string; id: string }[] }> {
  const got: { delayMs: number; path: string; id: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; timestamp: string };
      got.push({ delayMs: at - Date.parse(body.timestamp), path: req.url ?? '/', id: body.id });
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, got };
}

async function main() {
  const mem = process.env.MONGODB_URI ? null : await MongoMemoryServer.create();
  const base = process.env.MONGODB_URI ?? mem!.getUri();
  const dbUri = (name: string) => {
    const u = new URL(base);
    u.pathname = `/${name}`;
    return u.toString();
  };
  const results: Record<string, unknown> = { load_before: loadavg() };
  const children: ChildProcess[] = [];
  const start = async (mode: string, db: string, extra: Record<string, string> = {}) => {
    const s = await startServer(mode, { ...process.env, MONGODB_URI: dbUri(db), ADMIN_API_KEY: KEY, NODE_ENV: 'development', ...extra });
    children.push(s.child);
    return s;
  };
  try {
    // --- 1. create throughput -------------------------------------------------------------
    log(`# create throughput (${CONNECTIONS} connections, ${SECONDS} s, ${ROUNDS} rounds), load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
    if (PARTS.includes('create')) {
      const sides = ['app', 'app-noaudit', 'app-noaudit-noevents', ...(process.env.BENCH_BASE_DIR ? ['base:app-noaudit', 'base:app-noaudit-noevents'] : [])];
      const ports = new Map<string, number>();
      for (const side of sides) ports.set(side, (await start(side, `bench_events_${side.replace(/[-:]/g, '_')}`)).port);
      const rates: Record<string, number[]> = {};
      for (let round = 0; round < ROUNDS; round++) {
        const order = [...sides.slice(round % sides.length), ...sides.slice(0, round % sides.length)];
        for (const side of order) {
          const r = await autocannon({
            url: `http://127.0.0.1:${ports.get(side)}/projects`, method: 'POST', connections: CONNECTIONS, duration: SECONDS,
            headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'bench', description: 'x'.repeat(100) }),
          });
          const rate = r.requests.total / ((new Date(r.finish).getTime() - new Date(r.start).getTime()) / 1000);
          (rates[side] ??= []).push(rate);
          log(`  round ${round + 1} ${side.padEnd(22)} ${rate.toFixed(0).padStart(6)} creates/s   p99 ${r.latency.p99} ms${r.non2xx + r.errors ? `   (${r.non2xx + r.errors} non-2xx/errors!)` : ''}`);
        }
      }
      const ratio = (a: string, b: string) => median(rates[a]!.map((x, i) => x / rates[b]![i]!));
      const eventsRatio = ratio('app-noaudit', 'app-noaudit-noevents');
      const auditRatio = ratio('app', 'app-noaudit');
      results.create = { rates, event_log_on_vs_off: eventsRatio, audit_on_vs_off: auditRatio };
      log(`  => event log on / off: ${eventsRatio.toFixed(2)} (aim >= 0.9)   audit on / off: ${auditRatio.toFixed(2)} (aim >= 0.85)`);
      const rounds = (a: string, b: string) => rates[a]!.map((x, i) => (x / rates[b]![i]!).toFixed(2)).join(', ');
      log(`     rounds: event log on / off ${rounds('app-noaudit', 'app-noaudit-noevents')}; audit on / off ${rounds('app', 'app-noaudit')}`);
      if (rates['base:app-noaudit']) {
        const baseRatio = ratio('base:app-noaudit', 'base:app-noaudit-noevents');
        (results.create as Record<string, unknown>).base_event_log_on_vs_off = baseRatio;
        log(`  => old code (BENCH_BASE_DIR): event log on / off ${baseRatio.toFixed(2)} (rounds ${rounds('base:app-noaudit', 'base:app-noaudit-noevents')}); new/old with the event log on ${ratio('app-noaudit', 'base:app-noaudit').toFixed(2)} (rounds ${rounds('app-noaudit', 'base:app-noaudit')})`);
      }
      for (const c of children.splice(0)) c.kill('SIGINT');
    }

    // --- 2. write -> receiver delay, one process and two ------------------------------------
    for (const procs of PARTS.includes('delay') ? [1, 2] : []) {
      const rcv = await receiver();
      const db = `bench_events_delay_${procs}`;
      const env = { WEBHOOKS_ENABLED: 'true', WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1' };
      const servers = [];
      for (let i = 0; i < procs; i++) servers.push(await start('app', db, env));
      const ep = await call(servers[0]!.port, 'POST', '/webhook-endpoints', { url: `http://127.0.0.1:${rcv.port}/delay`, event_types: ['projects.created'] });
      if (ep.status !== 201) throw new Error(`endpoint: ${ep.status} ${JSON.stringify(ep.body)}`);
      await sleep(1000);
      const per = RATE / procs;
      const runs = await Promise.all(servers.map((s) => autocannon({
        url: `http://127.0.0.1:${s.port}/projects`, method: 'POST', connections: Math.max(2, Math.ceil(CONNECTIONS / procs)), overallRate: per, duration: SECONDS,
        headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'delay' }),
      })));
      const sent = runs.reduce((n, r) => n + r.requests.total - r.non2xx - r.errors, 0);
      const deadline = Date.now() + 60_000;
      while (rcv.got.length < sent && Date.now() < deadline) await sleep(100);
      const delays = rcv.got.map((g) => g.delayMs);
      const dup = rcv.got.length - new Set(rcv.got.map((g) => g.id)).size;
      const row = { processes: procs, creates: sent, delivered: rcv.got.length, duplicates: dup, p50_ms: pct(delays, 50), p99_ms: pct(delays, 99), max_ms: Math.max(...delays) };
      results[`delay_${procs}`] = row;
      log(`# write -> receiver 2xx at ${RATE} creates/s on ${procs} process(es): ${sent} created, ${rcv.got.length} delivered (${dup} duplicates), p50 ${row.p50_ms} ms, p99 ${row.p99_ms} ms, max ${row.max_ms} ms`);
      for (const c of children.splice(0)) c.kill('SIGINT');
      rcv.server.close();
    }

    // --- 3. fan-out ----------------------------------------------------------------------------
    if (PARTS.includes('fanout')) {
      const rcv = await receiver();
      const s = await start('app', 'bench_events_fanout', { WEBHOOKS_ENABLED: 'true', WEBHOOK_ENDPOINTS_ALLOWED_HOSTS: '127.0.0.1' });
      for (let i = 0; i < FANOUT_ENDPOINTS; i++) {
        const ep = await call(s.port, 'POST', '/webhook-endpoints', { url: `http://127.0.0.1:${rcv.port}/e${i}`, event_types: ['projects.created'] });
        if (ep.status !== 201) throw new Error(`endpoint: ${ep.status}`);
      }
      await sleep(1000);
      const t0 = Date.now();
      const r = await autocannon({
        url: `http://127.0.0.1:${s.port}/projects`, method: 'POST', connections: CONNECTIONS, amount: FANOUT_EVENTS,
        headers: { 'X-API-Key': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'fanout' }),
      });
      const created = r.requests.total - r.non2xx - r.errors;
      const expected = created * FANOUT_ENDPOINTS;
      const deadline = Date.now() + 300_000;
      while (rcv.got.length < expected && Date.now() < deadline) await sleep(100);
      const took = Date.now() - t0;
      const pairs = new Set(rcv.got.map((g) => `${g.path} ${g.id}`)).size;
      results.fanout = { events: created, endpoints: FANOUT_ENDPOINTS, expected, delivered: rcv.got.length, distinct: pairs, seconds: took / 1000 };
      log(`# fan-out: ${created} events x ${FANOUT_ENDPOINTS} endpoints = ${expected}; delivered ${rcv.got.length} (${pairs} distinct) in ${(took / 1000).toFixed(1)} s (${(rcv.got.length / (took / 1000)).toFixed(0)} deliveries/s)`);
      for (const c of children.splice(0)) c.kill('SIGINT');
      rcv.server.close();
    }
    results.load_after = loadavg();
    writeFileSync(new URL('./events-results.json', import.meta.url), JSON.stringify(results, null, 2));
  } finally {
    for (const c of children) c.kill('SIGINT');
    await mem?.stop();
  }
}

await main();
