/**
 * One server under test, in its own process so the load generator does not share its event loop.
 * BENCH_MODE: `app` (the real server with the default settings: rate limiter on with the MongoDB
 * store, audit on; only `RATE_LIMIT_MAX` is raised so the load stays under it), with suffixes
 * `-nolimit` (RATE_LIMIT_ENABLED=false), `-noaudit` (AUDIT_LOG_ENABLED=false), `-nometrics`
 * (METRICS_ENABLED=false) and `-noevents`
 * (resource writes stage no event: the event log's baseline), or `bare` (a bare Koa handler
 * running the same raw-driver reads and writes), or `bare-durable` (the bare handler whose create
 * also does what the event log and audit need at the least, as any design with their guarantees
 * on this database would: the event staged in the document's own insert, then per batch of 50 ms
 * one insert of the events into `events` and one of their entries into `audit_log`, the documents
 * shaped as the app's; the floor of a create with the defaults), or `bare-events` (the same without
 * the audit entries: the floor of the event log alone). Prints `READY <port>` when listening.
 */
import Koa from 'koa';
import getRawBody from 'raw-body';
import mongoose, { Types } from 'mongoose';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins } from '../config/plugins.ts';
import { createApp } from '../core/kernel.ts';
import { definePlugin } from '../core/plugin.ts';
import { defineRoute } from '../core/http/route.ts';
import { z } from 'zod';

const mode = process.env.BENCH_MODE ?? 'app';
/** The body of `/ping/:id` on both sides: the size of a seeded project. */
const PING = { name: 'Project 1', description: 'seeded project number 1', status: 'active', tags: ['t1'], budget: 1, owner_email: null, version: 1, padding: 'x'.repeat(200) };
const uri = process.env.MONGODB_URI!;
const tenantId = process.env.BENCH_TENANT_ID!;
const userId = process.env.BENCH_USER_ID!;

if (mode === 'bare' || mode === 'bare-durable' || mode === 'bare-events') {
  const conn = await mongoose.createConnection(uri).asPromise();
  const projects = conn.db!.collection('projects');
  const durable = mode === 'bare' ? null : durableBatches(conn.db!, mode === 'bare-durable');
  const koa = new Koa();
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
      const version = Number(/^"(\d+)"$/.exec(ctx.get('If-Match'))?.[1]);
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
      const now = new Date();
      const actor = new Types.ObjectId(userId);
      const doc = {
        ...body, tenant_id: tenant, created_at: now, updated_at: now, created_by: actor, updated_by: actor,
        is_deleted: false, deleted_at: null, deleted_by: null, version: 1,
      };
      if (durable) {
        const _id = new Types.ObjectId();
        const entry = { id: `evt_${String(new Types.ObjectId())}`, type: 'projects.created', tenant_id: tenant, created_at: now, actor: userId, request_id: crypto.randomUUID(), version: 1, meta: { resource: 'projects', ip: ctx.ip, bulk: false, audit: { operation: 'insert', resource: 'projects', actor_name: 'Bench', ip: ctx.ip } } };
        await projects.insertOne({ _id, ...doc, _outbox: [entry] });
        durable.add(entry, { ...doc, _id });
        Object.assign(doc, { _id });
      } else await projects.insertOne(doc);
      ctx.status = 201;
      ctx.body = doc;
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
  });
  // `/ping/:id`: the request pipeline alone (auth, validation, routing, envelope), no database.
  const ping = definePlugin({
    name: 'bench-ping',
    setup: () => ({
      routes: [defineRoute({ method: 'GET', path: '/ping/:id', params: z.object({ id: z.string().regex(/^[0-9a-f]{24}$/) }), handler: () => PING })],
    }),
  });
  const app = await createApp({ config, plugins: [...builtinPlugins(), ping] });
  if (mode.includes('-noevents')) {
    // The baseline of bench/events.ts: resource writes stage no event (an empty outbox). Bench only:
    // the event log is always on in the product.
    const events = app.services.get('events');
    events.outbox.insert = () => [];
    events.outbox.update = () => [];
  }
  const port = await app.listen(0, '127.0.0.1');
  process.stdout.write(`READY ${port}\n`);
}

/** `bare-durable` / `bare-events`: the events (and audit entries) of the creates, inserted once per 50 ms batch. */
function durableBatches(db: NonNullable<mongoose.Connection['db']>, withAudit: boolean) {
  let events: Record<string, unknown>[] = [];
  let audit: Record<string, unknown>[] = [];
  let timer: NodeJS.Timeout | null = null;
  const flush = async () => {
    timer = null;
    const [e, a] = [events, audit];
    events = [];
    audit = [];
    const committed = new Date();
    await db.collection('events').insertMany(e.map((x) => ({ ...x, committed_at: committed })), { ordered: false });
    if (withAudit) await db.collection('audit_log').insertMany(a, { ordered: false });
  };
  return {
    add(entry: { id: string; type: string; tenant_id: Types.ObjectId; created_at: Date; actor: string; request_id: string; meta: Record<string, unknown> }, doc: Record<string, unknown> & { _id: Types.ObjectId }) {
      const { id, version: _v, ...rest } = entry as typeof entry & { version: number };
      events.push({ _id: id, ...rest, data: doc, previous: null, source: { collection: 'projects', id: String(doc._id), version: 1 } });
      audit.push({ _id: new Types.ObjectId(id.slice(4)), resource: 'projects', item_id: doc._id, operation: 'insert', user_id: new Types.ObjectId(entry.actor), user_name: 'Bench', ip: (entry.meta as { ip: string }).ip, changes: null, snapshot: null, created_at: entry.created_at, tenant_id: entry.tenant_id });
      timer ??= setTimeout(() => void flush().catch(() => undefined), 50);
    },
  };
}

// CPU time of this process so far, for bench/cpu.ts (µs of user + system time).
process.on('SIGUSR2', () => {
  const u = process.cpuUsage();
  process.stdout.write(`CPU ${u.user + u.system}\n`);
});

// An orderly exit on SIGINT lets `--cpu-prof` write its profile (bench/profile.ts).
process.once('SIGINT', () => process.exit(0));
