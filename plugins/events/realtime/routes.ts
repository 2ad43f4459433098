import type Koa from 'koa';
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../../../core/http/route.ts';
import type { AppError } from '../../../core/errors.ts';
import type { Logger } from '../../../core/logger.ts';
import type { AppState } from '../../../core/http/middleware.ts';
import type { EventRecord } from '../public/contributions.ts';
import type { RealtimeService } from './service.ts';
import { EVENT_PERMISSIONS } from '../service.ts';
import { presentedOf, type LiveSession } from './sessions.ts';
import { Channel } from './channel.ts';

export const streamQuery = z.object({
  types: z.string().max(4000).optional().describe('Comma-separated event types (default: every type the caller may see)'),
  last_event_id: z.string().max(100).optional().describe('Resume after this event (as the `Last-Event-ID` header, which wins when both are sent)'),
});

const frames = new WeakMap<EventRecord, string>();
/**
 * One server-sent event of the stream: the event id, its type and the event as `GET /events/{id}`
 * shows it. Made once per event, however many streams send it (the tail hands all the same object).
 */
export function sseFrame(e: EventRecord): string {
  let frame = frames.get(e);
  if (frame === undefined) frames.set(e, (frame = `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`));
  return frame;
}

/** Chunks already made, by their first event: each with the exact events it holds. */
const chunks = new WeakMap<EventRecord, { events: EventRecord[]; chunk: Buffer }[]>();
/** Different batches kept per first event (views of one event: visibility keys, type filters). */
const CHUNK_VARIANTS = 16;

/**
 * One chunk of server-sent events for a batch a stream drained, made once for every stream that
 * drains the same events: streams of one visibility key and filter get the same batch from the
 * tail, so the batch is formatted and encoded once per view rather than once per subscriber. A
 * batch is the same only when it holds the very same event objects, in the same order.
 */
export function sseChunk(events: EventRecord[]): Buffer {
  const first = events[0]!;
  let variants = chunks.get(first);
  const same = variants?.find((v) => v.events.length === events.length && v.events.every((e, i) => e === events[i]));
  if (same) return same.chunk;
  let text = '';
  for (const e of events) text += sseFrame(e);
  const chunk = Buffer.from(text);
  if (!variants) chunks.set(first, (variants = []));
  if (variants.length >= CHUNK_VARIANTS) variants.shift();
  variants.push({ events, chunk });
  return chunk;
}

/** Writes `events` to the response as server-sent events, with keep-alive comments, until either side ends. */
function pipeStream(ctx: Koa.Context, session: LiveSession, events: AsyncIterableIterator<EventRecord>, keepAliveMs: number, log: Logger): void {
  // Written to the socket directly: Koa would report a client that leaves as a stream error.
  ctx.respond = false;
  const res = ctx.res;
  res.writeHead(200, {
    ...(ctx.response.headers as Record<string, string>),
    'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no',
  });
  const write = (chunk: string | Buffer) => {
    if (!res.writableEnded && !res.destroyed) res.write(chunk);
  };
  write(': event stream\n\n');
  const ping = setInterval(() => write(': keep-alive\n\n'), keepAliveMs);
  // The response closes when the client goes (the request itself "closes" once read).
  res.on('close', () => void events.return?.());
  void (async () => {
    try {
      for await (const e of events) {
        // The events already waiting (a batch of the tail) go in the same write: one chunk, one
        // system call, formatted once for every stream with the same batch.
        write(sseChunk(events instanceof Channel ? [e, ...events.drain()] : [e]));
      }
    } catch (err) {
      const e = err as AppError;
      // The stream's end, said once: the credential ended (401) or the reader fell behind (503).
      if (e?.code) write(`event: error\ndata: ${JSON.stringify({ error: { code: e.code, message: e.message, details: e.details ?? {} }, request_id: (ctx.state as AppState).ctx?.requestId ?? null })}\n\n`);
      else log.warn({ err }, 'event stream failed');
    } finally {
      clearInterval(ping);
      session.end();
      res.end();
    }
  })();
}

/** `GET /events/stream`: the caller's events as server-sent events, resumable with `Last-Event-ID`. */
export function realtimeRoutes(realtime: RealtimeService, opts: { keepAliveMs: number; log: Logger }): RouteDef[] {
  return [
    defineRoute({
      method: 'GET', path: '/events/stream', auth: EVENT_PERMISSIONS.stream, tags: ['events'], query: streamQuery,
      summary: 'Server-sent events: the events the caller may see, live, resumable with Last-Event-ID',
      description:
        'Each event is `id:` (the event id), `event:` (its type) and `data:` (the event as `GET /events/{id}` shows it). Reconnecting with `Last-Event-ID` first sends every missed event in committed order, then live ones. ' +
        'Who sees what: docs/realtime.md. A comment line every 15 s keeps the connection open; a final `event: error` says why the server ended the stream (credential revoked or expired, reader too slow).',
      docs: { errors: [410], mediaTypes: ['text/event-stream'], headers: { 'Last-Event-ID': { description: 'Resume after this event id (410 GONE when older than the log keeps)' } } },
      handler: async ({ actor, query, ctx }) => {
        const types = query.types ? query.types.split(',').map((t) => t.trim()).filter(Boolean) : null;
        realtime.checkTypes(types, ['query', 'types']);
        const lastId = ctx.get('Last-Event-ID') || query.last_event_id;
        const after = lastId ? await realtime.resumePoint(lastId) : null;
        const session = await realtime.open(presentedOf((h) => ctx.get(h) || undefined), actor);
        const events = realtime.stream(session, { types }, after);
        // The 200 goes out once the stream listens: a client that writes after seeing it gets its event.
        await events.ready;
        pipeStream(ctx, session, events, opts.keepAliveMs, opts.log);
      },
    }),
  ];
}
