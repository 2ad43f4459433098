/**
 * `npm run bench:observability`: the cost of metrics and tracing, as throughput ratios measured in
 * one run against the same seeded database (never absolute numbers: the database here may be a
 * stand-in and the machine shared). Each pair alternates its two sides `BENCH_ROUNDS` times and
 * compares the means, so drift and load from other processes weigh on both alike:
 * - metrics on / off (`METRICS_ENABLED`), tracing off on both sides; aim >= 0.95
 * - tracing at 100% sampling / off, metrics on on both sides; aim >= 0.8
 * - tracing at 10% sampling / off; aim >= 0.95
 * Spans go to a local OTLP/HTTP sink that accepts and drops them, so export costs what it costs.
 * Prints each ratio with its rounds and the load average.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import mongoose from 'mongoose';
import { seed, startServer } from './seed.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PRELOAD = new URL('../core/tracing-preload.ts', import.meta.url).pathname;
const log = (s: string) => process.stdout.write(`${s}\n`);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');

async function main() {
  // A connection to a server process this bench already stopped is refused after its side ended
  // (seen at the very end of a run, nobody awaiting it); failed requests during a measurement are
  // counted by autocannon and invalidate it.
  process.on('unhandledRejection', (err) => {
    if ((err as { code?: string }).code !== 'ECONNREFUSED') throw err;
  });
  const { mem, MONGODB_URI, tenant, key, sample } = await seed(Number(process.env.BENCH_DOCS ?? 5000), log);
  let spansReceived = 0;
  const sink = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      spansReceived++;
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const otlp = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const base = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, METRICS_ENABLED: 'true', OTEL_TRACES_EXPORTER: 'none' };
  const path = `/projects/${String(sample._id)}`;
  const headers = { 'X-API-Key': key };

  /** Requests per second of one server process started with `env`. */
  const rate = async (env: NodeJS.ProcessEnv): Promise<number> => {
    const { child, port } = await startServer('app', env, ['--import', 'tsx', '--import', PRELOAD]);
    try {
      const url = `http://127.0.0.1:${port}${path}`;
      await autocannon({ url, connections: CONNECTIONS, duration: 1, headers });
      const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
      if (r.non2xx + r.errors) throw new Error(`${r.non2xx + r.errors} non-2xx responses or errors; the measurement is invalid`);
      return r.requests.total / ((new Date(r.finish).getTime() - new Date(r.start).getTime()) / 1000);
    } finally {
      child.kill('SIGTERM');
    }
  };

  const pair = async (label: string, off: NodeJS.ProcessEnv, on: NodeJS.ProcessEnv, aim: number) => {
    const offs: number[] = [];
    const ons: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      offs.push(await rate(off));
      ons.push(await rate(on));
    }
    const ratio = mean(ons) / mean(offs);
    log(`${label.padEnd(34)} ratio ${ratio.toFixed(3)} (aim >= ${aim})  off ${offs.map((x) => x.toFixed(0)).join(' / ')}  on ${ons.map((x) => x.toFixed(0)).join(' / ')} req/s  load ${load()}`);
    return ratio;
  };

  log(`GET /projects/:id, ${CONNECTIONS} connections, ${DURATION} s per side, ${ROUNDS} rounds; load average ${load()}`);
  const tracing = (ratio: string) => ({ ...base, OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: otlp, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio });
  await pair('metrics on / off', { ...base, METRICS_ENABLED: 'false' }, base, 0.95);
  await pair('tracing 100% / off', base, tracing('1'), 0.8);
  await pair('tracing 10% / off', base, tracing('0.1'), 0.95);
  log(`OTLP export requests received by the sink: ${spansReceived}`);
  sink.close();
  await mongoose.disconnect();
  await mem?.stop();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
