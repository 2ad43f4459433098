/**
 * `npx tsx bench/profile.ts [path]`: seeds the bench database, runs the app under `--cpu-prof` with
 * autocannon load on one scenario (default: get-one), then prints self time per function and per
 * module, grouped into the request pipeline's components. Only samples taken during the measured
 * run count (after `PROFILE_WARMUP_SECONDS` of warm-up, default 3: start-up and JIT are not request
 * work). Not a measurement: profiling slows
 * everything; read the shares, not the rates. `PROFILE_MODE=bare` profiles the bare baseline,
 * `PROFILE_MODE=app-noaudit` the app without audit. `PROFILE_BODY='{"name":"x"}'` POSTs that JSON
 * body instead of GETting (e.g. `npx tsx bench/profile.ts /projects` profiles create); the path
 * `patch` profiles updates (PATCH with the right `If-Match`, seeded documents in turn).
 * `PROFILE_TOP` (40): how many functions the list by self time shows.
 * `PROFILE_AS=ruled` calls as the seeded user whose role has a `rows` rule (get-one of a row it may read).
 * `PROFILE_MODE=metrics` (or `nometrics`, `trace100`, `trace10`, `trace0`, `als`) profiles a side of
 * bench/observability-sides.ts: metrics and tracing show as components of their own.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { patchRequests, seed, startServer } from './seed.ts';
import { isObservabilitySide, startObservabilitySide, startOtlpSink } from './observability-sides.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const DURATION = Number(process.env.BENCH_SECONDS ?? 8);

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
interface Profile { nodes: Node[]; startTime: number; samples: number[]; timeDeltas: number[] }

/** Component of the pipeline a frame belongs to (by module path, then by function name). */
function component(url: string, fn: string): string {
  if (url.includes('/zod/')) return 'validation (zod)';
  if (url.includes('/prom-client/') || url.includes('/core/observability/metrics')) return 'metrics (prom-client, core/observability/metrics*)';
  if (url.includes('/@opentelemetry/') || url.includes('/core/observability/tracing') || url.includes('/import-in-the-middle/') || url.includes('/require-in-the-middle/') || url.includes('/shimmer/')) return 'tracing (opentelemetry, core/observability/tracing*)';
  if (url.includes('/mongodb/lib/cmap/command_monitoring')) return 'driver command monitoring';
  if (url.includes('/pino') || url.includes('thread-stream') || url.includes('sonic-boom')) return 'logging (pino)';
  // Before mongoose: mongoose ships its own copy of the driver under mongoose/node_modules.
  if (url.includes('/mongodb/') || url.includes('/bson/')) return 'driver (mongodb, bson)';
  if (url.includes('/mongoose/') || url.includes('/mquery/') || url.includes('/kareem/')) return 'mongoose (query building, casting)';
  if (url.includes('/koa') || url.includes('/@koa/') || url.includes('path-to-regexp') || url.includes('/statuses/') || url.includes('/content-') || url.includes('/accepts/') || url.includes('/type-is/') || url.includes('/cookies/')) return 'koa + router';
  if (url.includes('rate-limiter')) return 'rate limiter';
  if (url.includes('/plugins/identity/')) return 'auth (identity, access filter)';
  if (url.includes('/core/http/') || url.includes('/core/kernel')) return 'kernel (envelope, context, route)';
  if (url.includes('/core/context')) return 'context';
  if (url.includes('/plugins/resources/')) return 'resources (service, rest, parser)';
  if (url.includes('/plugins/audit/')) return 'audit';
  if (url.startsWith('node:') || url === '') {
    if (/garbage|GC/i.test(fn)) return 'GC';
    if (fn === '(idle)' || fn === '(program)') return fn;
    if (/async_hooks|AsyncLocalStorage|runInAsyncScope|emitInit|emitDestroy/.test(url + fn)) return 'context';
    return 'node internals (http, streams, JSON)';
  }
  return `other: ${url.replace(/.*node_modules\//, '').split('/')[0]}`;
}

async function main() {
  const path = process.argv[2];
  const seeded = await seed(Number(process.env.BENCH_DOCS ?? 20_000), log);
  const { mem, MONGODB_URI, tenant, user, sample, updIds } = seeded;
  // PROFILE_AS=ruled: the seeded user whose role has a rows rule, on a row the rule lets it read.
  const ruled = process.env.PROFILE_AS === 'ruled';
  const key = ruled ? seeded.ruledKey : seeded.key;
  const dir = mkdtempSync(join(tmpdir(), 'prof-'));
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  const mode = process.env.PROFILE_MODE ?? 'app';
  const sink = await startOtlpSink();
  // PROFILE_NODE_FLAGS: more flags for the server, e.g. `--no-turbo-inlining` to charge inlined callees to themselves.
  const flags = ['--cpu-prof', `--cpu-prof-dir=${dir}`, ...(process.env.PROFILE_NODE_FLAGS ?? '').split(' ').filter(Boolean)];
  const { child, port } = await (isObservabilitySide(mode) ? startObservabilitySide(mode, env, sink.url, flags) : startServer(mode, env, flags));
  const patch = path === 'patch';
  const url = `http://127.0.0.1:${port}${patch ? '/projects' : path ?? `/projects/${ruled ? seeded.activeId : String(sample._id)}`}`;
  const body = process.env.PROFILE_BODY;
  const opts = {
    url, connections: 10,
    ...(body ? { method: 'POST' as const, body, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' } } : { headers: { 'X-API-Key': key } }),
    ...(patch ? { requests: patchRequests(updIds, new Map()) } : {}),
  };
  // Warm-up (JIT, pools, caches) and start-up are left out: only samples taken during the measured
  // run count. The profile's timestamps and hrtime are both the monotonic clock, in µs and ns.
  await autocannon({ ...opts, duration: Number(process.env.PROFILE_WARMUP_SECONDS ?? 3) });
  const from = Number(process.hrtime.bigint() / 1000n);
  const r = await autocannon({ ...opts, duration: DURATION });
  const to = Number(process.hrtime.bigint() / 1000n);
  log(`${url}: ${(r.requests.total / DURATION).toFixed(0)} req/s under the profiler, ${r.non2xx} non-2xx`);
  await new Promise((res) => { child.once('exit', res); child.kill('SIGINT'); });
  sink.close();
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
  const prof = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
  let at = prof.startTime;
  const measured = prof.timeDeltas.map((d) => (at += d) >= from && at <= to);
  const self = new Map<number, number>();
  prof.samples.forEach((id, i) => measured[i] && self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
  const byFn = new Map<string, number>();
  const byComp = new Map<string, number>();
  let total = 0;
  for (const n of prof.nodes) {
    const t = self.get(n.id) ?? 0;
    if (!t) continue;
    const { functionName, url: u, lineNumber } = n.callFrame;
    if (functionName === '(idle)') continue;
    // Start-up (module loading, TypeScript transform) is not request work.
    if (/node:internal\/modules\/|\/tsx\/|cjs-module-lexer|realm|wasm:/.test(u) || /^(internalModuleStat|readFileUtf8|compileFunction)$/.test(functionName)) continue;
    total += t;
    const short = u.replace(/^file:\/\//, '').replace(/.*node_modules\//, '').replace(/.*\/refactor\//, '');
    const k = `${functionName || '(anonymous)'} ${short}:${lineNumber + 1}`;
    byFn.set(k, (byFn.get(k) ?? 0) + t);
    const c = component(u, functionName);
    byComp.set(c, (byComp.get(c) ?? 0) + t);
  }
  const pct = (t: number) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
  log(`\nbusy time ${(total / 1000).toFixed(0)} ms, ${(total / r.requests.total).toFixed(0)} µs per request (profiled)`);
  log('\nself time by component (busy time, idle excluded):');
  for (const [k, t] of [...byComp].sort((a, b) => b[1] - a[1])) log(`  ${pct(t)}  ${k}`);
  // Inclusive time of named functions (their callees included), e.g. what the driver's command
  // monitoring costs with the reply deserialization it forces: PROFILE_INCLUSIVE=name,name.
  const names = (process.env.PROFILE_INCLUSIVE ?? 'emitAndLogCommand,incomingRequest,_onServerResponseFinish,observeRequests').split(',').filter(Boolean);
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const nodeById = new Map(prof.nodes.map((n) => [n.id, n]));
  const inclusive = new Map<string, number>();
  prof.samples.forEach((id, i) => {
    if (!measured[i]) return;
    const hit = new Set<string>();
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
      const fn = nodeById.get(n)!.callFrame.functionName;
      if (names.includes(fn)) hit.add(fn);
    }
    for (const fn of hit) inclusive.set(fn, (inclusive.get(fn) ?? 0) + (prof.timeDeltas[i] ?? 0));
  });
  log('\ninclusive time of named functions:');
  for (const fn of names) log(`  ${pct(inclusive.get(fn) ?? 0)}  ${fn}  (${((inclusive.get(fn) ?? 0) / r.requests.total).toFixed(1)} µs per request)`);
  // PROFILE_JSON=<file>: µs per request of every function, to diff two profiles.
  if (process.env.PROFILE_JSON) writeFileSync(process.env.PROFILE_JSON, JSON.stringify(Object.fromEntries([...byFn].map(([k, t]) => [k, t / r.requests.total]))));
  log('\ntop functions by self time:');
  for (const [k, t] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.PROFILE_TOP ?? 40))) log(`  ${pct(t)}  ${k}`);
  await mem?.stop();
}

main().then(() => process.exit(0), (err: unknown) => { process.stderr.write(`${String(err instanceof Error ? err.stack : err)}\n`); process.exit(1); });
