/**
 * The soak's floor (`BENCH_MODE=bare-soak`, bench/serve.ts): a Koa middleware in front of the bare
 * handler that adds what the soak's mix needs beyond the bare reads and writes, with the least work:
 *
 * - `ETag` (`"<version>"`) on the bare create's and update's answers, which the soak sends back;
 * - `DELETE /projects/:id` with `If-Match`: one conditional soft delete (`updateOne` with the
 *   revision in the filter), 204;
 * - `POST /graphql`: no GraphQL parsing; a body asking for `projects(` is the bare offset page
 *   (`find` + `countDocuments`) and anything else the bare get-one of `variables.id`, answered as
 *   `{ data: … }`;
 * - `GET /events/stream`: the response is kept open; each write's event is written to every open
 *   stream in process, framed as the app's (`id:`, `event:`, `data:`), nothing stored for it.
 */
import type Koa from 'koa';
import getRawBody from 'raw-body';
import { Types, type mongo } from 'mongoose';
import type { ServerResponse } from 'node:http';

export function soakFloor(projects: mongo.Collection, tenantId: string, userId: string): Koa.Middleware {
  const tenant = new Types.ObjectId(tenantId);
  const streams = new Set<ServerResponse>();
  const publish = (type: string, data: unknown) => {
    if (!streams.size) return;
    const frame = `id: evt_${String(new Types.ObjectId())}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const res of streams) res.write(frame);
  };
  const page = async () => {
    const filter = { tenant_id: tenant, is_deleted: false };
    const [items, total] = await Promise.all([
      projects.find(filter).sort({ created_at: -1, _id: -1 }).limit(25).toArray(),
      projects.countDocuments(filter),
    ]);
    return { total, page: 1, per_page: 25, total_pages: Math.ceil(total / 25), items };
  };
  return async (ctx, next) => {
    if (ctx.path === '/events/stream') {
      ctx.respond = false;
      const res = ctx.res;
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      res.write(': event stream\n\n');
      streams.add(res);
      res.once('close', () => streams.delete(res));
      return;
    }
    if (ctx.path === '/graphql' && ctx.method === 'POST') {
      const body = await getRawBody(ctx.req, { encoding: 'utf-8' });
      if (body.includes('projects(')) {
        ctx.body = { data: { projects: await page() } };
        return;
      }
      const { variables } = JSON.parse(body) as { variables: { id: string } };
      ctx.body = { data: { project: await projects.findOne({ _id: new Types.ObjectId(variables.id), tenant_id: tenant, is_deleted: false }) } };
      return;
    }
    const m = /^\/projects\/([0-9a-f]{24})$/.exec(ctx.path);
    if (m && ctx.method === 'DELETE') {
      const version = Number(/^"(\d+)"$/.exec(ctx.get('If-Match'))?.[1]);
      const now = new Date();
      const { modifiedCount } = await projects.updateOne(
        { _id: new Types.ObjectId(m[1]), tenant_id: tenant, is_deleted: false, version },
        { $set: { is_deleted: true, deleted_at: now, deleted_by: new Types.ObjectId(userId), updated_at: now }, $inc: { version: 1 } },
      );
      if (!modifiedCount) return void (ctx.status = 412);
      ctx.status = 204;
      publish('projects.deleted', { id: m[1], version: version + 1 });
      return;
    }
    await next();
    const written = ctx.status < 300 && (ctx.method === 'POST' || ctx.method === 'PATCH') && ctx.path.startsWith('/projects');
    const doc = ctx.body as { version?: number } | null;
    if (!written || !doc?.version) return;
    ctx.set('ETag', `"${doc.version}"`);
    publish(ctx.method === 'POST' ? 'projects.created' : 'projects.updated', doc);
  };
}
