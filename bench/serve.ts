/**
 * One server under test, in its own process so the load generator does not share its event loop.
 * BENCH_MODE: `app` (the real server), `app-noaudit` (AUDIT_LOG_ENABLED=false) or `bare` (a bare
 * Koa handler running the same raw-driver queries). Prints `READY <port>` when listening.
 */
import Koa from 'koa';
import mongoose, { Types } from 'mongoose';
import { loadConfig } from '../config/index.ts';
import { builtinPlugins } from '../config/plugins.ts';
import { createApp } from '../core/kernel.ts';

const mode = process.env.BENCH_MODE ?? 'app';
const uri = process.env.MONGODB_URI!;
const tenantId = process.env.BENCH_TENANT_ID!;

if (mode === 'bare') {
  const conn = await mongoose.createConnection(uri).asPromise();
  const projects = conn.db!.collection('projects');
  const koa = new Koa();
  koa.use(async (ctx) => {
    const tenant = new Types.ObjectId(tenantId);
    const m = /^\/projects\/([0-9a-f]{24})$/.exec(ctx.path);
    if (m) {
      ctx.body = await projects.findOne({ _id: new Types.ObjectId(m[1]), tenant_id: tenant, is_deleted: false });
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
    RATE_LIMIT_ENABLED: 'false',
    AUDIT_LOG_ENABLED: mode === 'app-noaudit' ? 'false' : 'true',
  });
  const app = await createApp({ config, plugins: builtinPlugins() });
  const port = await app.listen(0, '127.0.0.1');
  process.stdout.write(`READY ${port}\n`);
}

// An orderly exit on SIGINT lets `--cpu-prof` write its profile (bench/profile.ts).
process.once('SIGINT', () => process.exit(0));
