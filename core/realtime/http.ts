import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { useServer } from 'graphql-ws/use/ws';
import { GraphQLError, type ExecutionArgs } from 'graphql';
import type { YogaServerInstance } from 'graphql-yoga';
import { AppError, ErrorCode } from '../errors.ts';
import { withRequest, type Actor } from '../context.ts';
import type { Logger } from '../logger.ts';
import type { GraphQLContext } from '../graphql.ts';
import { checkVariablesDepth } from '../graphql-limits.ts';
import { authenticatePresented, presentedOf, type CredentialCheck, type PresentedCredential } from './sessions.ts';
import type { FrameSink } from './shared.ts';

/** `connection_init` payload: the credential, as an API key or a bearer token, and a system administrator's tenant. */
type InitPayload = { apiKey?: unknown; authorization?: unknown; tenantId?: unknown } | undefined;

type Extra = { presented?: PresentedCredential };

export interface GraphqlWsOptions {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  yoga: YogaServerInstance<any, any>;
  identity: CredentialCheck;
  maxInputDepth: number;
  log: Logger;
  path?: string;
}

/** Bytes a connection may have waiting in its socket before graphql-ws waits for each write. */
const SEND_HIGH_WATER = 1 << 20;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);

/** The credential of a connection: its `connection_init` payload, else the upgrade request's headers. */
function presentedFrom(payload: InitPayload, req: IncomingMessage): PresentedCredential {
  const headers = presentedOf((h) => str(req.headers[h]));
  const apiKey = str(payload?.apiKey);
  const bearer = /^Bearer\s+(\S+)$/i.exec(str(payload?.authorization) ?? '')?.[1];
  const tenantId = str(payload?.tenantId) ?? headers.tenantId;
  if (!apiKey && !bearer) return headers;
  return { ...(apiKey ? { apiKey } : { token: bearer! }), ...(tenantId ? { tenantId } : {}) };
}

/** A GraphQL error in the form resolver errors take: the code, status and details in `extensions`. */
const graphqlError = (err: unknown, requestId: string): GraphQLError => {
  if (err instanceof GraphQLError) return new GraphQLError(err.message, { extensions: { ...err.extensions, request_id: requestId } });
  const e = err instanceof AppError ? err : new AppError(500, ErrorCode.INTERNAL_ERROR, 'Internal server error');
  return new GraphQLError(e.message, { extensions: { code: e.code, status: e.status, details: e.details, request_id: requestId } });
};

/** The end of every `next` message written by a group. */
const SUFFIX = Buffer.from('}');

/** The header of an unmasked, final text frame of `length` bytes (RFC 6455 5.2), as servers send. */
function textFrameHeader(length: number): Buffer {
  if (length < 126) return Buffer.from([0x81, length]);
  if (length < 0x10000) return Buffer.from([0x81, 126, length >> 8, length & 0xff]);
  const h = Buffer.alloc(10);
  h[0] = 0x81;
  h[1] = 127;
  h.writeBigUInt64BE(BigInt(length), 2);
  return h;
}

/**
 * Subscription `id`'s `next` messages on `ws`, for its group to write (shared.ts): each message is
 * `{"id":…,"type":"next","payload":<the group's JSON>}`, byte for byte what graphql-ws sends; the
 * messages of a batch go to the socket as one buffer of WebSocket frames. Without extensions
 * (the server negotiates none: no compression), ws's sender keeps no queue of its own, so a frame
 * written to the socket keeps its place among ws's. Past the mark, the writer waits for the socket.
 */
function frameSink(ws: WebSocket, socket: Duplex, id: string): FrameSink {
  const prefix = Buffer.from(`{"id":${JSON.stringify(id)},"type":"next","payload":`);
  const raw = ws.extensions === '';
  return {
    next(payloads) {
      if (ws.readyState !== ws.OPEN || !raw) {
        for (const p of payloads) ws.send(`${prefix.toString()}${p.toString()}}`);
        return undefined;
      }
      const parts: Buffer[] = [];
      for (const p of payloads) parts.push(textFrameHeader(prefix.length + p.length + 1), prefix, p, SUFFIX);
      const frames = Buffer.concat(parts);
      if (ws.bufferedAmount <= SEND_HIGH_WATER) return void socket.write(frames);
      return new Promise<void>((resolve) => socket.write(frames, () => resolve()));
    },
  };
}

/**
 * GraphQL over WebSocket (the graphql-ws protocol) on `path` of the app's HTTP server: the same
 * schema, cost and depth limits (Yoga's envelop plugins: parse, validate, execute, subscribe) and
 * error masking as `/graphql` over HTTP. The connection authenticates in `connection_init`
 * (`{apiKey}` or `{authorization: 'Bearer ...'}`, or the upgrade request's headers); no credential,
 * or a rejected one, closes it with 4403. Each operation checks the credential again.
 * @returns a function that closes every connection and the WebSocket server
 */
export function attachGraphqlWs(server: Server, opts: GraphqlWsOptions): () => Promise<void> {
  const path = opts.path ?? '/graphql';
  const wss = new WebSocketServer({ noServer: true });
  /** Each connection's TCP socket, for frames written by their group (frameSink). */
  const sockets = new WeakMap<WebSocket, Duplex>();
  server.on('upgrade', (req, socket, head) => {
    if ((req.url ?? '').split('?')[0] !== path) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.set(ws, socket);
      const send = ws.send.bind(ws) as (data: unknown, cb?: (err?: Error) => void) => void;
      let corked = false;
      const uncork = () => {
        corked = false;
        socket.uncork();
      };
      ws.send = ((data: unknown, cb?: (err?: Error) => void) => {
        // The messages of one tick (a batch of events, for every subscription of the connection)
        // leave in one write rather than one system call each.
        if (!corked) {
          corked = true;
          socket.cork();
          process.nextTick(uncork);
        }
        // graphql-ws waits for each message to be written before taking the next: told at once
        // while little is buffered, so that the next one joins the same write; past the mark it
        // waits for the socket, and a slow reader's queue fills up to REALTIME_MAX_QUEUE (503).
        if (!cb || ws.bufferedAmount > SEND_HIGH_WATER) return send(data, cb);
        send(data);
        cb();
      }) as typeof ws.send;
      wss.emit('connection', ws, req);
    });
  });
  const disposable = useServer<InitPayload, Extra>(
    {
      onConnect: async (ctx) => {
        const presented = presentedFrom(ctx.connectionParams, ctx.extra.request);
        try {
          if (!(await authenticatePresented(opts.identity, presented))) return false;
        } catch (err) {
          if (err instanceof AppError && err.status < 500) return false;
          throw err;
        }
        ctx.extra.presented = presented;
        return true;
      },
      onSubscribe: async (ctx, id, payload) => {
        const requestId = randomUUID();
        const presented = ctx.extra.presented ?? {};
        let actor: Actor | null;
        try {
          actor = await authenticatePresented(opts.identity, presented);
          checkVariablesDepth(payload.variables, opts.maxInputDepth);
        } catch (err) {
          return [graphqlError(err, requestId)];
        }
        const rlog = opts.log.child({ request_id: requestId });
        const ip = ctx.extra.request.socket.remoteAddress ?? null;
        const context: GraphQLContext = { actor: actor ? withRequest(actor, { requestId, ip, actor, log: rlog }) : null, requestId, presented, frames: frameSink(ctx.extra.socket, sockets.get(ctx.extra.socket)!, id) };
        const { schema, execute, subscribe, parse, validate, contextFactory } = opts.yoga.getEnveloped(context);
        let document;
        try {
          document = parse(payload.query);
        } catch (err) {
          return [graphqlError(err, requestId)];
        }
        const errors: readonly GraphQLError[] = validate(schema, document);
        if (errors.length) return errors.map((e) => graphqlError(e, requestId));
        const args: ExecutionArgs = {
          schema, document, operationName: payload.operationName ?? null, variableValues: payload.variables ?? null,
          contextValue: await contextFactory(), rootValue: { execute, subscribe },
        };
        return args;
      },
      execute: (args) => (args.rootValue as { execute: (a: ExecutionArgs) => never }).execute(args),
      subscribe: (args) => (args.rootValue as { subscribe: (a: ExecutionArgs) => never }).subscribe(args),
      onNext: (_ctx, _id, _payload, args, result) => {
        // Every error carries its operation's request id, as over HTTP.
        const requestId = (args.contextValue as GraphQLContext).requestId;
        // The result itself (graphql-ws would copy it). Shared results without errors do not come
        // here: their group writes them (frameSink).
        if (!result.errors?.length) return result;
        return { ...result, errors: result.errors.map((e) => ({ ...e.toJSON(), extensions: { ...e.extensions, request_id: requestId } })) };
      },
    },
    wss,
  );
  return async () => {
    for (const client of wss.clients) client.close(1001, 'Server shutting down');
    await disposable.dispose();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  };
}
