/**
 * One server under test, in its own process so the load generator does not share its event loop.
 * BENCH_MODE: `app` (the real server with the default settings: rate limiter on with the MongoDB
 * store, audit on; only `RATE_LIMIT_MAX` is raised so the load stays under it), with suffixes
 * `-nolimit` (RATE_LIMIT_ENABLED=false), `-memstore` (RATE_LIMIT_STORE=memory: the limiter without
 * its shared store's syncs), `-noaudit` (AUDIT_LOG_ENABLED=false), `-nometrics`
 * (METRICS_ENABLED=false), `-noevents`
 * (resource writes stage no event: the event log's baseline) and `-nosweep` (the outbox sweep's
 * ticks do nothing: what the sweep costs), or `bare` (a bare Koa handler
 * running the same raw-driver reads and writes; with `?limit=` a cursor page as the app's
 * default list reads it), or `bare-durable` (the bare handler whose create
 * also does what the event log and audit need at the least, as any design with their guarantees
 * on this database would: the event staged in the document's own insert, then per batch of 50 ms
 * one insert of the events into `events` and one of their entries into `audit_log`, the documents
 * shaped as the app's; the floor of a create with the defaults; its PATCH likewise stages the
 * entry in the conditional update and batches the event, with the object before it, and the audit
 * entry with its changes: the floor of an update), or `bare-events` (the same without
 * the audit entries: the floor of the event log alone), or `app-floor` (the app with the default
 * settings whose `/projects` create and update are the floor's writes instead of the resources
 * plugin's: the request pipeline's cost on a durable write; `app-floor-versions` also inserts each write's
 * version row in the batch, as a versioned resource must), or `bare-floor` (`/ping/:id` only:
 * bare Koa with the least each default feature needs, bench/ping-floor.ts), or `bare-soak` (`bare`
 * with what bench/soak.ts's mix needs besides: ETags, a delete, GraphQL reads and event streams, at
 * the least; bench/soak-floor.ts). Prints `READY <port>`.
 */
import { createServer } from 'node:http';
import { constants as perfConstants, monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import Koa from 'koa';
import getRawBody from 'raw-body';
import mongoose, { Types } from 'mongoose';
import { pino } from 'pino';
import { loadConfig } from '../config/index.ts';
import { resolveSecrets } from '../config/secrets.ts';
import { type SortSpec, cursorFilter, decodeCursor, encodeCursor, querySort } from '../lib/cursor.ts';
import { builtinPlugins, corePlugins } from '../builtin-plugins.ts';
import { createApp } from '../core/kernel.ts';
import { definePlugin } from '../core/plugin.ts';
import { resourcesPlugin } from '../plugins/resources/index.ts';
import { projectsResource, tasksResource } from '../plugins/resources/sample-resources.ts';
import { defineRoute } from '../core/http/route.ts';
import { z } from 'zod';
import type { LoopStats } from './seed.ts';

const mode = process.env.BENCH_MODE ?? 'app';
/** The body of `/ping/:id` on both sides: the size of a seeded project. */
const PING = { name: 'Project 1', description: 'seeded project number 1', status: 'active', tags: ['t1'], budget: 1, owner_email: null, version: 1, padding: 'x'.repeat(200) };
const uri = process.env.MONGODB_URI!;
/** The revision an `If-Match` header names (`"3"` → 3), NaN when it names none. */
const versionOf = (ifMatch: string) => Number(/^"(\d+)"$/.exec(ifMatch)?.[1]);
/** `:id` of the bench's routes: a document's object id. */
const idParams = z.object({ id: z.string().regex(/^[0-9a-f]{24}$/) });
const tenantId = process.env.BENCH_TENANT_ID!;
const userId = process.env.BENCH_USER_ID!;
/** The projects' default sort (`-created_at`, `_id` as the tiebreaker in the same direction). */
const SORT: SortSpec = [['created_at', -1], ['_id', -1]];

if (mode === 'bare-floor') {
  // `/ping/:id` only: the least the default features need on a request (bench/ping-floor.ts).
  const { startPingFloor } = await import('./ping-floor.ts');
  process.stdout.write(`READY ${await startPingFloor(uri, PING)}\n`);
} else if (mode === 'bare' || mode === 'bare-durable' || mode === 'bare-events' || mode === 'bare-soak') {
  const conn = await mongoose.createConnection(uri).asPromise();
  const projects = conn.db!.collection('projects');
  const durable = mode === 'bare' || mode === 'bare-soak' ? null : durableWrites(conn.db!, mode === 'bare-durable');
  // The app's cursor secret (set, or generated under DATA_DIR as the app's own start does).
  const cursorSecret = resolveSecrets(loadConfig({ ...process.env, LOG_LEVEL: 'silent' }), pino({ level: 'silent' })).CURSOR_HMAC_SECRET;
  const koa = new Koa();
  if (mode === 'bare-soak') koa.use((await import('./soak-floor.ts')).soakFloor(projects, tenantId, userId));
  koa.use(async (ctx) => {
    const tenant = new Types.ObjectId(tenantId);
    if (ctx.path.startsWith('/ping/')) {
      ctx.body = PING;
      return;
    }
    const m = /^\/projects\/([0-9a-f]{24})$/.exec(ctx.path);
    if (m && ctx.method === 'PATCH') {
      // The conditional update: the revision from If-Match in the filter, one atomic write.
      const body = JSON.parse(await getRawBody(ctx.req, { encoding: 'utf-8' })) as Record<string, unknown>;
      const version = versionOf(ctx.get('If-Match'));
      if (durable) {
        const after = await durable.update(m[1]!, version, body, ctx.ip);
        if (!after) ctx.status = 412;
        else ctx.body = after;
        return;
      }
      const doc = await projects.findOneAndUpdate(
        { _id: new Types.ObjectId(m[1]), tenant_id: tenant, is_deleted: false, version },
        { $set: { ...body, updated_at: new Date(), updated_by: new Types.ObjectId(userId) }, $inc: { version: 1 } },
        { returnDocument: 'after' },
      );
      if (!doc) ctx.status = 412;
      else ctx.body = doc;
      return;
    }
    if (m) {
      ctx.body = await projects.findOne({ _id: new Types.ObjectId(m[1]), tenant_id: tenant, is_deleted: false });
      return;
    }
    if (ctx.path === '/projects' && ctx.method === 'POST') {
      const body = JSON.parse(await getRawBody(ctx.req, { encoding: 'utf-8' })) as Record<string, unknown>;
      const doc = { _id: new Types.ObjectId(), ...newProject(body, new Date()) };
      ctx.status = 201;
      if (durable) ctx.body = await durable.create(doc, ctx.ip);
      else {
        await projects.insertOne(doc);
        ctx.body = doc;
      }
      return;
    }
    if (ctx.path === '/projects' && ctx.query.limit !== undefined) {
      // A cursor page, the least the app's list needs in cursor mode: the app's filter (tenant, live,
      // the drafts rule of a resource with drafts: published or the caller's own), its default sort,
      // the range of the boundary row when a cursor is given, limit + 1 rows, the next cursor.
      const limit = Number(ctx.query.limit);
      const values = typeof ctx.query.cursor === 'string' && ctx.query.cursor ? decodeCursor(ctx.query.cursor, SORT, cursorSecret) : null;
      const filter = { tenant_id: tenant, is_deleted: false, $or: [{ _published: { $ne: false } }, { '_draft.author': new Types.ObjectId(userId) }] };
      const rows = await projects
        .find(values ? { $and: [filter, cursorFilter(SORT, values, 'next')] } : filter, { projection: { _draft: 0, _outbox: 0 } })
        .sort(querySort(SORT, 'next')).limit(limit + 1).toArray();
      const items = rows.slice(0, limit);
      ctx.body = { items, cursors: { next: rows.length > limit ? encodeCursor(SORT, items[items.length - 1]!, cursorSecret) : null } };
      return;
    }
    if (ctx.path === '/projects') {
      const filter = { tenant_id: tenant, is_deleted: false };
      const perPage = Number(ctx.query.per_page ?? 25);
      const [items, total] = await Promise.all([
        projects.find(filter).sort({ created_at: -1, _id: -1 }).limit(perPage).toArray(),
        projects.countDocuments(filter),
      ]);
      ctx.body = { items, total };
      return;
    }
    ctx.status = 404;
  });
  const server = koa.listen(0, '127.0.0.1', () => {
    process.stdout.write(`READY ${(server.address() as { port: number }).port}\n`);
  });
} else {
  const config = loadConfig({
    ...process.env,
    LOG_LEVEL: 'silent',
    // The default limiter and store; a budget no bench scenario spends (one key sends them all).
    RATE_LIMIT_ENABLED: mode.includes('-nolimit') ? 'false' : 'true',
    RATE_LIMIT_MAX: '1000000000',
    AUDIT_LOG_ENABLED: mode.includes('-noaudit') ? 'false' : 'true',
    ...(mode.includes('-nometrics') ? { METRICS_ENABLED: 'false' } : {}),
    ...(mode.includes('-memstore') ? { RATE_LIMIT_STORE: 'memory' } : {}),
  });
  // `/ping/:id`: the request pipeline alone (auth, validation, routing, envelope), no database.
  const ping = definePlugin({
    name: 'bench-ping',
    setup: () => ({
      routes: [defineRoute({ method: 'GET', path: '/ping/:id', auth: 'user', params: idParams, handler: () => PING })],
    }),
  });
  // `/floor/projects`: the request pipeline (auth, rate limit, metrics, envelope) in front of the
  // floor's durable create and update instead of the resources plugin's (`app-floor` sends
  // `/projects` there): what the app's pipeline alone costs a durable write.
  // `app-floor-versions`: the floor of a versioned resource (the sample `/projects` keeps versions):
  // each batch also inserts the writes' version rows, shaped as the app's.
  const floor = mode.startsWith('app-floor') ? durableWrites((await mongoose.createConnection(uri).asPromise()).db!, true, mode.includes('-versions')) : null;
  const floorRoutes = definePlugin({
    name: 'bench-floor',
    setup: () => ({
      routes: floor ? [
        defineRoute({ method: 'POST', path: '/floor/projects', auth: 'user', status: 201, body: z.record(z.string(), z.unknown()), handler: ({ body, ctx }) => floor.create({ _id: new Types.ObjectId(), ...newProject(body, new Date()) }, ctx.ip) }),
        defineRoute({
          method: 'PATCH', path: '/floor/projects/:id', auth: 'user', params: idParams, body: z.record(z.string(), z.unknown()),
          handler: async ({ params, body, ctx }) => (await floor.update(params.id, versionOf(ctx.get('If-Match')), body, ctx.ip)) ?? ctx.throw(412),
        }),
      ] : [],
    }),
  });
  // `-noversions`: the same sample resources, `/projects` without versions (FILES_ENABLED stays off here).
  const noVersions = resourcesPlugin.configure({ resources: [{ ...projectsResource, versions: null }, tasksResource] });
  const plugins = builtinPlugins().map((p) => (p === resourcesPlugin && mode.includes('-noversions') ? noVersions : p));
  const app = await createApp({ corePlugins: corePlugins(), config, plugins: [...plugins, ping, floorRoutes] });
  // `BENCH_NOSWEEP=1`: every app side of a run without its sweep (the sweep is shared by lease, so
  // one side's `-nosweep` leaves the others sweeping its writes): what the sweep costs a whole run.
  if (mode.includes('-nosweep') || process.env.BENCH_NOSWEEP === '1') (app.services.get('events') as unknown as { sweeper: { tick: () => Promise<number> } }).sweeper.tick = () => Promise.resolve(0);
  if (mode.includes('-noevents')) {
    // The baseline of bench/events.ts: resource writes stage no event (an empty outbox). Bench only:
    // the event log is always on in the product.
    const events = app.services.get('events');
    events.outbox.insert = () => [];
    events.outbox.update = () => [];
  }
  if (floor) {
    const handle = app.koa.callback();
    const server = createServer((req, res) => {
      if (req.url?.startsWith('/projects')) req.url = `/floor${req.url}`;
      void handle(req, res);
    });
    server.listen(0, '127.0.0.1', () => process.stdout.write(`READY ${(server.address() as { port: number }).port}\n`));
  } else {
    const port = await app.listen(0, '127.0.0.1');
    process.stdout.write(`READY ${port}\n`);
  }
}

type Row = Record<string, unknown> & { _id: Types.ObjectId };

/**
 * A new project as the app stores it (without `_id`), from a create's body: the sample resource's
 * defaults for the fields the body leaves out, and its drafts state (`/projects` keeps drafts: a
 * create is published).
 */
function newProject(body: Record<string, unknown>, now: Date): Record<string, unknown> {
  const actor = new Types.ObjectId(userId);
  return {
    description: null, status: 'active', tags: [], budget: null, owner_email: null,
    ...body, tenant_id: new Types.ObjectId(tenantId), created_at: now, updated_at: now, created_by: actor, updated_by: actor,
    is_deleted: false, deleted_at: null, deleted_by: null, version: 1, _published: true, _draft: null,
  };
}
interface Entry { id: string; type: string; tenant_id: Types.ObjectId; created_at: Date; actor: string; request_id: string; version: number; meta: Record<string, unknown> }

/**
 * The floor of a durable create and update (`bare-durable`, `bare-events`, `app-floor`): the write
 * stages its entry in the document itself, and the events (and audit entries) are inserted once per
 * 50 ms batch, shaped as the app's. No validation, hooks or mongoose.
 */
function durableWrites(db: NonNullable<mongoose.Connection['db']>, withAudit: boolean, withVersions = false) {
  const projects = db.collection('projects');
  const tenant = new Types.ObjectId(tenantId);
  let events: Record<string, unknown>[] = [];
  let audit: Record<string, unknown>[] = [];
  let timer: NodeJS.Timeout | null = null;
  const flush = async () => {
    timer = null;
    const [e, a] = [events, audit];
    events = [];
    audit = [];
    const committed = new Date();
    // The version rows go first, as the app's sinks run before the events' insert.
    if (withVersions) await db.collection('resource_versions').insertMany(e.map(versionRow), { ordered: false });
    await db.collection('events').insertMany(e.map((x) => ({ ...x, committed_at: committed })), { ordered: false });
    if (withAudit) await db.collection('audit_log').insertMany(a, { ordered: false });
  };
  /**
   * `previous`: the document before an update (null for a create). The event and version rows hold
   * the document as the API shows it, without its drafts state.
   */
  const add = (entry: Entry, stored: Row, storedBefore: Record<string, unknown> | null) => {
    const doc = shown(stored);
    const previous = storedBefore && shown(storedBefore);
    const { id, version, ...rest } = entry;
    events.push({ _id: id, ...rest, data: doc, previous, source: { collection: 'projects', id: String(doc._id), version } });
    const changes = previous ? Object.fromEntries(Object.keys(doc).filter((k) => String(doc[k]) !== String(previous[k])).map((k) => [k, { from: previous[k], to: doc[k] }])) : null;
    audit.push({ _id: new Types.ObjectId(id.slice(4)), resource: 'projects', item_id: doc._id, operation: previous ? 'update' : 'insert', user_id: new Types.ObjectId(entry.actor), user_name: 'Bench', ip: (entry.meta as { ip: string }).ip, changes, snapshot: null, created_at: entry.created_at, tenant_id: entry.tenant_id });
    timer ??= setTimeout(() => void flush().catch(() => undefined), 50);
  };
  const entryOf = (type: string, version: number, now: Date, ip: string): Entry => ({
    id: `evt_${String(new Types.ObjectId())}`, type, tenant_id: tenant, created_at: now, actor: userId, request_id: crypto.randomUUID(), version,
    meta: { resource: 'projects', ip, bulk: false, audit: { operation: type === 'projects.created' ? 'insert' : 'update', resource: 'projects', actor_name: 'Bench', ip } },
  });
  return {
    /** Stores `doc` (a {@link newProject} with its `_id`) with its entry staged in the insert. */
    async create(doc: Row, ip: string): Promise<Row> {
      const entry = entryOf('projects.created', 1, doc.created_at as Date, ip);
      await projects.insertOne({ ...doc, _outbox: [entry] });
      add(entry, doc, null);
      return doc;
    },
    /**
     * The conditional update with its entry staged in the same write (kept to the last few); null
     * when the revision is stale. The entry keeps the values the update replaces (`before`), read by
     * the database in the write itself (an update pipeline): after a crash, the sweep's event needs
     * them for its `previous`, and its audit entry for its changes. Without them the floor would
     * skip a guarantee the app keeps.
     */
    async update(id: string, version: number, body: Record<string, unknown>, ip: string): Promise<Row | null> {
      const now = new Date();
      const set = { ...body, updated_at: now, updated_by: new Types.ObjectId(userId) };
      const entry = entryOf('projects.updated', version + 1, now, ip);
      const keys = [...Object.keys(set), 'version'];
      const staged = { $mergeObjects: [{ $literal: entry }, { before: { values: Object.fromEntries(keys.map((k) => [k, `$${k}`])), keys: { $literal: keys } } }] };
      const values = Object.fromEntries(Object.entries({ ...set, version: version + 1 }).map(([k, v]) => [k, { $literal: v }]));
      const before = await projects.findOneAndUpdate(
        { _id: new Types.ObjectId(id), tenant_id: tenant, is_deleted: false, version },
        [{ $set: { _outbox: { $concatArrays: [{ $slice: [{ $ifNull: ['$_outbox', []] }, -3] }, [staged]] } } }, { $set: values }],
        { returnDocument: 'before', projection: { _outbox: 0 } },
      );
      if (!before) return null;
      const after = { ...before, ...set, version: version + 1 } as Row;
      add(entry, after, before);
      return after;
    },
  };
}

/** A stored project without its drafts state (`_published`, `_draft`), as events and versions hold it. */
function shown<T extends Record<string, unknown>>(doc: T): T {
  const { _published: _p, _draft: _d, ...rest } = doc;
  return rest as T;
}

/** A version row of an event staged by `durableWrites`, as the app's versions store writes it. */
function versionRow(e: Record<string, unknown>): Record<string, unknown> {
  const data = e.data as Row;
  const previous = e.previous as Record<string, unknown> | null;
  const source = e.source as { version: number };
  // The client's fields (as the app's `changedFields`): those that differ, on a create those it holds.
  const client = Object.keys(data).filter((k) => !k.endsWith('_at') && !k.endsWith('_by') && !['_id', 'tenant_id', 'version', 'is_deleted'].includes(k));
  const changed = previous ? client.filter((k) => String(data[k]) !== String(previous[k])) : client.filter((k) => data[k] !== null);
  return {
    tenant_id: e.tenant_id, resource: 'projects', doc_id: data._id, version: source.version, operation: previous ? 'updated' : 'created', created_at: e.created_at,
    actor: e.actor, request_id: e.request_id, changed_fields: changed.sort(), restored_from: null, event_id: e._id, data,
  };
}

// With BENCH_LOOP_STATS=1 (bench/soak.ts): this process's memory and event-loop delay, the delay
// over the window since the previous report (the histogram restarts at each one).
const loop = process.env.BENCH_LOOP_STATS === '1' ? monitorEventLoopDelay({ resolution: 10 }) : null;
loop?.enable();
/** Collections in the window, by kind (reset at each report). */
const gcs = { minor: 0, major: 0 };
if (loop) {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      if (kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) gcs.minor++;
      else if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) gcs.major++;
    }
  }).observe({ entryTypes: ['gc'] });
}
let elu = performance.eventLoopUtilization();

// CPU time of this process so far, for bench/cpu.ts (µs of user + system time), after the window's
// `STATS` line when the event loop is monitored (`serverReport` in bench/seed.ts reads both).
process.on('SIGUSR2', () => {
  const u = process.cpuUsage();
  let out = '';
  if (loop) {
    const mem = process.memoryUsage();
    const now = performance.eventLoopUtilization();
    const stats: LoopStats = {
      rss: mem.rss, heap: mem.heapUsed, heap_total: mem.heapTotal, external: mem.external, array_buffers: mem.arrayBuffers,
      new_space: getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0, malloced: getHeapStatistics().malloced_memory, gc_minor: gcs.minor, gc_major: gcs.major, elu: performance.eventLoopUtilization(now, elu).utilization,
      delay_p99_ms: loop.percentile(99) / 1e6, delay_max_ms: loop.max / 1e6, delay_mean_ms: loop.mean / 1e6,
    };
    elu = now;
    loop.reset();
    gcs.minor = gcs.major = 0;
    out += `STATS ${JSON.stringify(stats)}\n`;
  }
  process.stdout.write(`${out}CPU ${u.user + u.system}\n`);
});

// An orderly exit on SIGINT lets `--cpu-prof` write its profile (bench/profile.ts).
process.once('SIGINT', () => process.exit(0));
