/** Shared by bench/run.ts and bench/profile.ts: seeds the bench database and starts servers under test. */
import { spawn, type ChildProcess } from 'node:child_process';
import type autocannon from 'autocannon';
import mongoose, { Types } from 'mongoose';
import { MongoMemoryServer } from 'mongodb-memory-server';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { encodeCursor } from '../lib/cursor.ts';

export const ADMIN_KEY = 'bench-admin-key-0123456789abcdef';

/** The bench's tenant, its user (role `user`) and the user's API key, created through the identity service. */
export async function benchAccount(seedApp: Awaited<ReturnType<typeof createApp>>) {
  const identity = seedApp.services.get('identity');
  const admin = await identity.authenticateApiKey(ADMIN_KEY);
  const tenant = await identity.createTenant(admin, { name: 'bench' });
  const user = await identity.createUser(admin, { email: 'bench@example.com', name: 'Bench', tenant_id: tenant.id, roles: ['user'], features: ['tasks'] });
  const { key } = await identity.createApiKey(admin, { user_id: user.id, name: 'bench' });
  return { identity, admin, tenant, user, key };
}
/** The bench role's rows rule, which is also the filter of the unrestricted side's `?where=`. */
export const ACTIVE_WHERE = { status: 'active' };

/** Seeds `DOCS` projects in one tenant; returns the credentials and sample ids the scenarios use. */
export async function seed(DOCS: number, log: (s: string) => void) {
  const mem = process.env.MONGODB_URI ? undefined : await MongoMemoryServer.create();
  const base = process.env.MONGODB_URI ?? mem!.getUri();
  const uri = new URL(base);
  uri.pathname = '/bench';
  const MONGODB_URI = uri.toString();

  log(`seeding ${DOCS} projects ...`);
  const seedApp = await createApp({ corePlugins: corePlugins(), config: loadConfig({ MONGODB_URI, LOG_LEVEL: 'silent', ADMIN_API_KEY: ADMIN_KEY }), plugins: builtinPlugins() });
  const { identity, admin, tenant, user, key } = await benchAccount(seedApp);
  // A custom role whose rows rule equals `?where={"status":"active"}` (ACTIVE_WHERE), and a user holding only it.
  const port = await seedApp.listen(0, '127.0.0.1');
  const role = await fetch(`http://127.0.0.1:${port}/admin/roles`, {
    method: 'POST', headers: { 'X-API-Key': ADMIN_KEY, 'X-Tenant-Id': tenant.id, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'active-reader', permissions: { projects: { read: { rows: ACTIVE_WHERE } } } }),
  });
  if (role.status !== 201) throw new Error(`bench role: ${role.status} ${await role.text()}`);
  const ruled = await identity.createUser(admin, { email: 'bench-ruled@example.com', name: 'Bench ruled', tenant_id: tenant.id, roles: ['active-reader'], features: ['tasks'] });
  const { key: ruledKey } = await identity.createApiKey(admin, { user_id: ruled.id, name: 'bench ruled' });
  const projects = seedApp.db.conn.db!.collection('projects');
  await projects.deleteMany({});
  const t0 = Date.now() - DOCS * 1000;
  for (let i = 0; i < DOCS; i += 1000) {
    await projects.insertMany(
      Array.from({ length: Math.min(1000, DOCS - i) }, (_, j) => {
        const n = i + j;
        const at = new Date(t0 + n * 1000);
        return {
          name: `Project ${n}`, description: `seeded project number ${n}`, status: n % 7 ? 'active' : 'archived', tags: [`t${n % 10}`],
          budget: n % 1000, owner_email: null, tenant_id: new Types.ObjectId(tenant.id), created_at: at, updated_at: at,
          created_by: new Types.ObjectId(user.id), updated_by: new Types.ObjectId(user.id), is_deleted: false, deleted_at: null, deleted_by: null, version: 1,
        };
      }),
    );
  }
  const sample = await projects.find({}).sort({ created_at: -1, _id: -1 }).skip(Math.floor(DOCS / 2)).limit(1).next();
  const active = await projects.find({ status: 'active' }).sort({ created_at: -1, _id: -1 }).skip(Math.floor(DOCS / 2)).limit(1).next();
  const sortSpec: [string, 1 | -1][] = [['created_at', -1], ['_id', -1]];
  const depthDoc = await projects.find({}).sort({ created_at: -1, _id: -1 }).skip(499 * 25 - 1).limit(1).next();
  const cursor500 = encodeCursor(sortSpec, depthDoc as Record<string, unknown>, seedApp.config.CURSOR_HMAC_SECRET);
  // Updates each hit their own document at version 1 (an ETag needs no round trip then).
  const updIds = (await projects.find({}).sort({ _id: 1 }).limit(20000).project({ _id: 1 }).toArray()).map((d) => String(d._id));
  await seedApp.close();

  return { mem, MONGODB_URI, tenant, user, key, ruledKey, activeId: String(active!._id), sample: sample!, cursor500, updIds };
}

/**
 * Starts bench/serve.ts in `mode` (extra node flags first, e.g. `--cpu-prof`); resolves once it listens.
 * A mode `base:<mode>` runs `<mode>` from the checkout in `BENCH_BASE_DIR` (e.g. a `git worktree` of
 * the commit before a change), so old and new code are measured in the same run on the same database.
 */
export function startServer(mode: string, env: NodeJS.ProcessEnv, nodeFlags: string[] = [], script = './serve.ts'): Promise<{ child: ChildProcess; port: number }> {
  const base = mode.startsWith('base:');
  if (base && !env.BENCH_BASE_DIR) throw new Error(`${mode}: set BENCH_BASE_DIR to the checkout of the old code`);
  const path = base ? `${env.BENCH_BASE_DIR}/bench/${script.replace(/^\.\//, '')}` : new URL(script, import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', path], { env: { ...env, BENCH_MODE: base ? mode.slice(5) : mode }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.once('exit', (code) => reject(new Error(`server (${mode}) exited with ${code}`)));
  });
}

/** A server's memory (bytes) and event-loop delay over the window since its previous report (bench/serve.ts, `BENCH_LOOP_STATS=1`). */
/** Memory in bytes: `heap` is V8's heap used, `heap_total` its committed size, `new_space` the young generation's committed size, `malloced` V8's own malloc'd memory outside the heap; `gc_minor` and `gc_major` the scavenges and full collections in the window. */
export interface LoopStats { rss: number; heap: number; heap_total: number; new_space: number; malloced: number; external: number; array_buffers: number; elu: number; gc_minor: number; gc_major: number; delay_p99_ms: number; delay_max_ms: number; delay_mean_ms: number }

/**
 * Asks a server started by {@link startServer} for its report through SIGUSR2: its CPU time so far
 * (µs), and its {@link LoopStats} when it runs with `BENCH_LOOP_STATS=1`.
 */
export function serverReport(child: ChildProcess): Promise<{ cpu: number; stats: LoopStats | null }> {
  return new Promise((resolve) => {
    let out = '';
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = /CPU (\d+)\n/.exec(out);
      if (!m) return;
      child.stdout!.off('data', onData);
      const s = /STATS (.*)\n/.exec(out);
      resolve({ cpu: Number(m[1]), stats: s ? (JSON.parse(s[1]!) as LoopStats) : null });
    };
    child.stdout!.on('data', onData);
    child.kill('SIGUSR2');
  });
}

/**
 * PATCH requests for autocannon that each change a document at its current version: ids are taken
 * in turn from `ids` (far more of them than connections, so one id is never in flight twice) and the
 * `If-Match` of each is the version the previous PATCH of that id produced (`versions`, shared by
 * every side of a run, starts at 1: the seeded version).
 */
/** Reads every project's current version from the database at `uri` (for `scenarios`' update runs). */
export function versionsOf(uri: string): () => Promise<[string, number][]> {
  let conn: Promise<mongoose.Connection> | null = null;
  return async () => {
    const c = await (conn ??= mongoose.createConnection(uri).asPromise());
    const docs = await c.db!.collection('projects').find({}, { projection: { version: 1 } }).toArray();
    return docs.map((d) => [String(d._id), Number(d.version)]);
  };
}

export function patchRequests(ids: string[], versions: Map<string, number>, body = JSON.stringify({ budget: 42 })): autocannon.Request[] {
  let i = 0;
  return [{
    method: 'PATCH', body,
    setupRequest: (req: autocannon.Request) => {
      const id = ids[i++ % ids.length]!;
      const v = versions.get(id) ?? 1;
      versions.set(id, v + 1);
      return { ...req, path: `/projects/${id}`, headers: { ...req.headers, 'Content-Type': 'application/json', 'If-Match': `"${v}"` } };
    },
  }];
}
