import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { useServer } from 'graphql-ws/use/ws';
import { context as otelContext, type Context } from '@opentelemetry/api';
import { GraphQLError, getOperationAST, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { YogaServerInstance } from 'graphql-yoga';
import { AppError, BadRequestError, ErrorCode } from '../../../core/errors.ts';
import { withRequest, type Actor } from '../../../core/context.ts';
import type { Logger } from '../../../core/logger.ts';
import type { GraphQLContext } from '../../../core/graphql.ts';
import { checkVariablesDepth } from '../../../core/graphql-limits.ts';
import { hashKey } from '../../../core/authentication.ts';
import { apiKeyClient, userClient, type GuardedOperation, type OperationGuards } from '../../../core/guards.ts';
import type { OperationResult } from '../../../core/idempotency.ts';
import { authenticatePresented, presentedOf, type CredentialCheck } from './sessions.ts';
import type { FrameSink, PresentedCredential } from '../../../core/transport.ts';

/** `connection_init` payload: the credential, as an API key or a bearer token, and a system administrator's tenant. */
type InitPayload = { apiKey?: unknown; authorization?: unknown; tenantId?: unknown } | undefined;

type Extra = {
  presented?: PresentedCredential;
  /** The connection's rate-limit identity: the one its credential has over HTTP. */
  client?: string;
  /** Operations under way, by subscription id, ended at their completion. */
  ops?: Map<string, GuardedOperation>;
};

/** What an operation's `execute` needs besides its arguments (carried in `rootValue`). */
interface Root {
  execute(a: ExecutionArgs): Promise<ExecutionResult> | ExecutionResult;
  subscribe(a: ExecutionArgs): unknown;
  /** The operation's span context, to run it under. */
  trace: Context | null;
  /** A mutation with `extensions.idempotencyKey`: runs it at most once per key. */
  idempotent?: (run: () => Promise<ExecutionResult>) => Promise<ExecutionResult>;
}
export interface GraphqlWsOptions {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  yoga: YogaServerInstance<any, any>;
  identity: CredentialCheck;
  /** The guards HTTP requests pass (rate limit, failed authentications, idempotency, metrics, access log, tracing). */
  guards: OperationGuards;
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

/**
 * A mutation's run at most once per `extensions.idempotencyKey` (the same store and answers as the
 * `Idempotency-Key` header on `POST /graphql`): the reservation is taken now, so that a conflict
 * refuses the operation before it runs; a replay answers the stored result, marked
 * `extensions.idempotentReplayed`.
 */
async function idempotent(guards: OperationGuards, actor: Actor, key: string, payload: { query: string; operationName?: string | null; variables?: unknown; extensions?: Record<string, unknown> | null }, log: Logger): Promise<(run: () => Promise<ExecutionResult>) => Promise<ExecutionResult>> {
  const { idempotencyKey: _key, ...extensions } = payload.extensions ?? {};
  // The body the same operation has over HTTP, so that a retry over either transport matches.
  const body = { query: payload.query, operationName: payload.operationName ?? undefined, variables: payload.variables ?? undefined, extensions: Object.keys(extensions).length ? extensions : undefined };
  const held = await guards.idempotency.reserveOperation(actor, key, body, log);
  if ('replay' in held) {
    const result = { ...held.replay, extensions: { ...held.replay.extensions, idempotentReplayed: true } };
    return async () => result as ExecutionResult;
  }
  return async (run) => {
    let result: ExecutionResult;
    try {
      result = await run();
    } catch (err) {
      await held.finish(null);
      throw err;
    }
    await held.finish(result as OperationResult);
    return result;
  };
}

/** A GraphQL error in the form resolver errors take: the code, status and details in `extensions`. */
const graphqlError = (err: unknown, requestId: string): GraphQLError => {
  if (err instanceof GraphQLError) return new GraphQLError(err.message, { extensions: { ...err.extensions, request_id: requestId } });
  const e = err instanceof AppError ? err : new AppError(500, ErrorCode.INTERNAL_ERROR, 'Internal server error');
  // `retry_after` of a refusal also at the top, where HTTP has it in a header (`Retry-After`).
  const retry = e.code === ErrorCode.RATE_LIMITED ? { retry_after: e.details?.retry_after } : {};
  return new GraphQLError(e.message, { extensions: { code: e.code, status: e.status, details: e.details, ...retry, request_id: requestId } });
};

/** The status an HTTP request refused for `err` would have answered. */
const statusOf = (err: unknown): number => {
  if (err instanceof AppError) return err.status;
  if (err instanceof GraphQLError) return Number(err.extensions.status ?? (err.extensions.http as { status?: number } | undefined)?.status ?? 400);
  return 500;
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
 * or a rejected one, closes it with 4403 (and counts as a failed authentication). Each operation
 * checks the credential again and passes the guards of an HTTP request (`opts.guards`): it spends
 * one request of the credential's rate-limit budget, honours `extensions.idempotencyKey` on
 * mutations, and is timed, traced and access-logged as one request (docs/realtime.md).
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
  const { guards } = opts;
  const disposable = useServer<InitPayload, Extra>(
    {
      onConnect: async (ctx) => {
        const presented = presentedFrom(ctx.connectionParams, ctx.extra.request);
        try {
          const actor = await authenticatePresented(opts.identity, presented);
          if (!actor) return false;
          ctx.extra.client = presented.apiKey ? apiKeyClient(hashKey(presented.apiKey)) : userClient(actor.id);
        } catch (err) {
          // Counted as over HTTP, so that a WebSocket is no way around AUTH_FAILURE_LIMIT.
          if (err instanceof AppError && err.status === 401) await guards.authFailure(guards.ip(ctx.extra.request), presented.apiKey);
          if (err instanceof AppError && err.status < 500) return false;
          throw err;
        }
        ctx.extra.presented = presented;
        ctx.extra.ops = new Map();
        return true;
      },
      onSubscribe: async (ctx, id, payload) => {
        const requestId = randomUUID();
        const presented = ctx.extra.presented ?? {};
        const ip = guards.ip(ctx.extra.request);
        const op = guards.begin('ws', requestId, ip);
        // Authentication, parse, validation and the idempotency reservation run under the operation's span.
        const prepare = async (): Promise<ExecutionArgs | GraphQLError[]> => {
          let actor: Actor | null = null;
          const refuse = (err: unknown) => {
            op.end(statusOf(err));
            return [graphqlError(err, requestId)];
          };
          try {
            try {
              actor = await authenticatePresented(opts.identity, presented);
              op.actor = actor;
            } catch (err) {
              if (err instanceof AppError && err.status === 401) throw (await guards.authFailure(ip, presented.apiKey)) ?? err;
              throw err;
            }
            // The budget of the connection's credential, spent as by an HTTP request of the same key.
            if (ctx.extra.client) guards.admit(ctx.extra.client);
            checkVariablesDepth(payload.variables, opts.maxInputDepth);
          } catch (err) {
            return refuse(err);
          }
          const rlog = opts.log.child({ request_id: requestId });
          const context: GraphQLContext = { actor: actor ? withRequest(actor, { requestId, ip, actor, log: rlog }) : null, requestId, presented, frames: frameSink(ctx.extra.socket, sockets.get(ctx.extra.socket)!, id) };
          const { schema, execute, subscribe, parse, validate, contextFactory } = opts.yoga.getEnveloped(context);
          let document;
          try {
            document = parse(payload.query);
          } catch (err) {
            return refuse(err);
          }
          const errors: readonly GraphQLError[] = validate(schema, document);
          if (errors.length) {
            op.end(400);
            return errors.map((e) => graphqlError(e, requestId));
          }
          const operationName = payload.operationName ?? null;
          const ast = getOperationAST(document, operationName);
          op.name(ast?.operation ?? 'unknown', ast?.name?.value);
          const root: Root = { execute, subscribe, trace: op.trace };
          const key = (payload.extensions as { idempotencyKey?: unknown } | undefined)?.idempotencyKey;
          if (key !== undefined && ast?.operation === 'mutation' && context.actor) {
            try {
              if (typeof key !== 'string') throw new BadRequestError('extensions.idempotencyKey must be a string', { extension: 'idempotencyKey' });
              root.idempotent = await idempotent(guards, context.actor, key, payload, rlog);
            } catch (err) {
              return refuse(err);
            }
          }
          ctx.extra.ops?.set(id, op);
          const args: ExecutionArgs = {
            schema, document, operationName, variableValues: payload.variables ?? null,
            contextValue: await contextFactory(), rootValue: root,
          };
          return args;
        };
        try {
          return await (op.trace ? otelContext.with(op.trace, prepare) : prepare());
        } catch (err) {
          // graphql-ws closes the socket for a throw here (4500): the operation still ends, counted as a 5xx.
          op.end(500);
          throw err;
        }
      },
      execute: (args) => {
        const root = args.rootValue as Root;
        const run = async () => root.execute(args);
        const go = () => (root.idempotent ? root.idempotent(run) : root.execute(args));
        return (root.trace ? otelContext.with(root.trace, go) : go()) as never;
      },
      subscribe: (args) => {
        const root = args.rootValue as Root;
        return (root.trace ? otelContext.with(root.trace, () => root.subscribe(args)) : root.subscribe(args)) as never;
      },
      onComplete: (ctx, id) => {
        // Every operation that ran, completed by the server, cancelled by the client or its connection closed.
        const op = ctx.extra.ops?.get(id);
        ctx.extra.ops?.delete(id);
        op?.end(200);
      },
      onClose: (ctx) => {
        // Operations still open when their connection closed ended with it (as an event stream whose reader left).
        for (const op of ctx.extra.ops?.values() ?? []) op.end(200);
        ctx.extra.ops?.clear();
      },
      onNext: (_ctx, _id, _payload, args, result) => {
        // Every error carries its operation's request id, as over HTTP.
        const requestId = (args.contextValue as GraphQLContext).requestId;
        // The result itself (graphql-ws would copy it). Shared results without errors do not come
        // here: their group writes them (frameSink).
        if (!result.errors?.length) return result;
        // A replayed result's errors are JSON already.
        return { ...result, errors: result.errors.map((e) => {
          const json = e instanceof GraphQLError ? e.toJSON() : (e as ReturnType<GraphQLError['toJSON']>);
          return { ...json, extensions: { ...json.extensions, request_id: requestId } };
        }) };
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
