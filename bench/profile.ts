/**
 * `npx tsx bench/profile.ts [path]`: seeds the bench database, runs the app under `--cpu-prof` with
 * autocannon load on one scenario (default: get-one), then prints self time per function and per
 * module, grouped into the request pipeline's components. Not a measurement: profiling slows
 * everything; read the shares, not the rates. `PROFILE_MODE=bare` profiles the bare baseline,
 * `PROFILE_MODE=app-noaudit` the app without audit. `PROFILE_BODY='{"name":"x"}'` POSTs that JSON
 * body instead of GETting (e.g. `npx tsx bench/profile.ts /projects` profiles create); the path
 * `patch` profiles updates (PATCH with the right `If-Match`, seeded documents in turn).
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { patchRequests, seed, startServer } from './seed.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);
const DURATION = Number(process.env.BENCH_SECONDS ?? 8);

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
interface Profile { nodes: Node[]; samples: number[]; timeDeltas: number[] }

/** Component of the pipeline a frame belongs to (by module path, then by function name). */
function component(url: string, fn: string): string {
  if (url.includes('/zod/')) return 'validation (zod)';
  if (url.includes('/pino') || url.includes('thread-stream') || url.includes('sonic-boom')) return 'logging (pino)';
  // Before mongoose: mongoose ships its own copy of the driver under mongoose/node_modules.
  if (url.includes('/mongodb/') || url.includes('/bson/')) return 'driver (mongodb, bson)';
  if (url.includes('/mongoose/') || url.includes('/mquery/') || url.includes('/kareem/')) return 'mongoose (query building, casting)';
  if (url.includes('/koa') || url.includes('/@koa/') || url.includes('path-to-regexp') || url.includes('/statuses/') || url.includes('/content-') || url.includes('/accepts/') || url.includes('/type-is/') || url.includes('/cookies/')) return 'koa + router';
  if (url.includes('rate-limiter')) return 'rate limiter';
  if (url.includes('/core/identity/')) return 'auth (identity, access filter)';
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
  const { mem, MONGODB_URI, tenant, user, key, sample, updIds } = await seed(Number(process.env.BENCH_DOCS ?? 20_000), log);
  const dir = mkdtempSync(join(tmpdir(), 'prof-'));
  const env = { ...process.env, MONGODB_URI, BENCH_TENANT_ID: tenant.id, BENCH_USER_ID: user.id };
  const { child, port } = await startServer(process.env.PROFILE_MODE ?? 'app', env, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
  const patch = path === 'patch';
  const url = `http://127.0.0.1:${port}${patch ? '/projects' : path ?? `/projects/${String(sample._id)}`}`;
  const body = process.env.PROFILE_BODY;
  const r = await autocannon({
    url, connections: 10, duration: DURATION,
    ...(body ? { method: 'POST' as const, body, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' } } : { headers: { 'X-API-Key': key } }),
    ...(patch ? { requests: patchRequests(updIds, new Map()) } : {}),
  });
  log(`${url}: ${(r.requests.total / DURATION).toFixed(0)} req/s under the profiler, ${r.non2xx} non-2xx`);
  await new Promise((res) => { child.once('exit', res); child.kill('SIGINT'); });
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
  const prof = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
  const self = new Map<number, number>();
  prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
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
  log('\ntop functions by self time:');
  for (const [k, t] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 40)) log(`  ${pct(t)}  ${k}`);
  await mem?.stop();
}

main().then(() => process.exit(0), (err: unknown) => { process.stderr.write(`${String(err instanceof Error ? err.stack : err)}\n`); process.exit(1); });
