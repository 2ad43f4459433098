/**
 * `Idempotency-Key` on POST and PATCH (REST routes and GraphQL mutations): retries without
 * duplicates. The first request with a key runs and its answer is stored per actor, tenant and key;
 * a repeat with the same request gets that answer again (`Idempotent-Replayed: true`), a repeat
 * with another request 422 `IDEMPOTENCY_KEY_REUSED`, a repeat while the first still runs 409
 * `IDEMPOTENCY_IN_PROGRESS`. See docs/operations.md, "Idempotent retries".
 */
import { createHash, randomUUID } from 'node:crypto';
import type Koa from 'koa';
import type { Connection } from 'mongoose';
import { getOperationAST, parse } from 'graphql';
import { AppError, BadRequestError, ErrorCode, type ErrorDetails } from '../../core/errors.ts';
import { scopedTenantId, type Actor } from '../../core/context.ts';
import type { Logger } from '../../core/logger.ts';
import { toAppError } from '../../core/http/map-error.ts';
import type { PersonalDataDeclaration } from '../../core/plugin.ts';
import type { IdempotencyStore, OperationResult } from '../../core/idempotency.ts';
import { bytesOf, idempotencyKeyModel, type IdempotencyKeyDoc, type IdempotencyKeyModel } from './model.ts';
import { scrubStoredAnswers } from './scrub.ts';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';
/** Longest accepted key (as Stripe's). */
export const MAX_KEY_LENGTH = 255;
/** Response headers that are part of the answer and replayed with it. */
const REPLAYED_HEADERS = ['content-type', 'etag', 'location', 'last-modified'];
/** 4xx answers about the caller or the load, not about the operation: not stored, a retry runs again. */
const NOT_STORED = new Set([401, 403, 408, 429]);

export interface IdempotencyOptions {
  /** How long a finished request's answer is kept (`IDEMPOTENCY_TTL_HOURS`). */
  ttlMs: number;
  /**
   * How long a running reservation holds without renewal (`IDEMPOTENCY_LEASE_SECONDS`). The request
   * renews it while it runs, so only a crashed process leaves one behind; its key is free after this.
   */
  leaseMs: number;
  /** Path of the GraphQL endpoint: there only mutations take part. */
  graphqlPath: string;
  /** Token cap when parsing a GraphQL document to tell a mutation from a query (`GRAPHQL_MAX_TOKENS`). */
  maxTokens: number;
}


interface Scope {
  actor_id: string;
  tenant_id: string;
  key: string;
}

type Lean = IdempotencyKeyDoc & { _id: unknown };
/** A reservation held by this request: the record and the token of this run. */
type Held = { _id: unknown; run: string };

/** Request state this module reads (set by the kernel's authentication and body parser). */
interface Requested {
  state: { actor?: Actor | null };
  request: Koa.Request & { body?: unknown };
  disableBodyParser?: boolean;
}

/**
 * The idempotency layer of the kernel. `applies(ctx)` is a pure header check, so requests without
 * the header pay nothing else; `run(ctx, next)` wraps the route once the body is parsed.
 */
export class Idempotency implements IdempotencyStore {
  private readonly model: IdempotencyKeyModel;

  constructor(conn: Connection, private readonly opts: IdempotencyOptions, private readonly log: Logger) {
    this.model = idempotencyKeyModel(conn);
  }

  /**
   * The stored answers as personal data: they copy what requests returned, so an erasure scrubs them
   * (`scrubStoredAnswers`); linked to their actor by `actor_id`.
   */
  personalData(): PersonalDataDeclaration {
    return {
      name: 'idempotency_keys', model: this.model.modelName, subject_field: 'actor_id', gdpr_fields: [], on_erasure: 'scrub',
      scrub: (subject) => scrubStoredAnswers(this.model, subject),
    };
  }

  /** POST or PATCH with the header, from an authenticated actor (anonymous requests have no scope to key on). */
  applies(ctx: Koa.Context): boolean {
    return (ctx.method === 'POST' || ctx.method === 'PATCH') && ctx.req.headers['idempotency-key'] !== undefined && !!(ctx as unknown as Requested).state.actor;
  }

  /** Runs `next` at most once per key: reserves the key, or answers from the stored request. */
  async run(ctx: Koa.Context, next: Koa.Next): Promise<void> {
    const c = ctx as unknown as Requested;
    const key = String(ctx.req.headers['idempotency-key']);
    if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
      throw new BadRequestError(`${IDEMPOTENCY_HEADER} must be 1 to ${MAX_KEY_LENGTH} characters`, { header: IDEMPOTENCY_HEADER, max_length: MAX_KEY_LENGTH });
    }
    // Raw-body routes (signed webhooks) dedupe by their own ids; GraphQL queries change nothing.
    if (c.disableBodyParser) return next();
    const body = c.request.body;
    if (ctx.path === this.opts.graphqlPath && !this.isMutation(body)) return next();

    const actor = c.state.actor;
    // `applies` admitted only an authenticated request; an anonymous one has no scope to key on.
    if (!actor) return next();
    const scope: Scope = { actor_id: actor.id, tenant_id: scopedTenantId(actor) ?? '', key };
    // If-Match is part of the request: a retry against a newer revision is another request.
    const fingerprint = fingerprintOf(ctx.method, ctx.path, canonical(ctx.query), ctx.get('If-Match'), body ?? null);
    const held = await this.reserve(scope, fingerprint);
    if ('fingerprint' in held) return this.replay(held, ctx);
    await this.execute(held, ctx, next);
  }

  /**
   * A GraphQL mutation over a transport without headers (graphql-ws, the key from the operation's
   * `extensions.idempotencyKey`): the same store, scope, fingerprint and answers as `Idempotency-Key`
   * on `POST /graphql` with `body` (the operation without its key), so a retry over either
   * transport replays. Either the stored result to answer with, or the reservation: run the
   * operation, then `finish` with its result (stored, or released when it failed on the server's
   * side) or null when it threw (released).
   * @throws AppError 400 (bad key), 422 IDEMPOTENCY_KEY_REUSED, 409 IDEMPOTENCY_IN_PROGRESS, or a replayed stored error
   */
  async reserveOperation(actor: Actor, key: string, body: object, log: Logger = this.log): Promise<{ replay: OperationResult } | { finish(result: OperationResult | null): Promise<void> }> {
    if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
      throw new BadRequestError(`extensions.idempotencyKey must be 1 to ${MAX_KEY_LENGTH} characters`, { extension: 'idempotencyKey', max_length: MAX_KEY_LENGTH });
    }
    const scope: Scope = { actor_id: actor.id, tenant_id: scopedTenantId(actor) ?? '', key };
    const held = await this.reserve(scope, fingerprintOf('POST', this.opts.graphqlPath, '{}', '', body));
    if ('fingerprint' in held) {
      const stored = bytesOf(held.body);
      if (!stored) throw storedError(held);
      return { replay: JSON.parse(stored.toString('utf8')) as OperationResult };
    }
    const filter = { _id: held._id as never, run: held.run, state: 'running' };
    const renew = this.renew(filter);
    return {
      finish: async (result) => {
        clearInterval(renew);
        const bytes = result && Buffer.from(JSON.stringify(result));
        if (!bytes || graphqlFailed(bytes)) await this.release(filter, log);
        else await this.store(filter, { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: bytes }, log);
      },
    };
  }

  /**
   * The reservation this request holds (the record and this run's token), or the finished record
   * of the same request to answer from.
   */
  private async reserve(scope: Scope, fingerprint: string): Promise<Held | Lean> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = new Date();
      const run = randomUUID();
      const fresh = { ...scope, fingerprint, run, state: 'running', status: null, headers: {}, body: null, error: null, created_at: now, expires_at: new Date(now.getTime() + this.opts.leaseMs) };
      try {
        // A copy: the driver adds `_id` to what it inserts, and `fresh` may still be used to take over.
        const { insertedId } = await this.model.collection.insertOne({ ...fresh });
        return { _id: insertedId, run };
      } catch (err) {
        if ((err as { code?: number }).code !== 11000) throw err;
      }
      const found = await this.model.findOne(scope).lean<Lean>();
      // Released (a 5xx) between the insert and this read: try to reserve again.
      if (!found) continue;
      if (found.expires_at <= now) {
        // Expired but not yet removed by the TTL monitor (or a crashed run's lease): take it over, one winner.
        const taken = await this.model.collection.findOneAndUpdate({ _id: found._id as never, expires_at: found.expires_at }, { $set: fresh }, { returnDocument: 'after' });
        if (taken) return { _id: taken._id, run };
        continue;
      }
      if (found.fingerprint !== fingerprint) {
        throw new AppError(422, ErrorCode.IDEMPOTENCY_KEY_REUSED, `This ${IDEMPOTENCY_HEADER} was used with a different request`, { header: IDEMPOTENCY_HEADER });
      }
      if (found.state === 'running') throw inProgress();
      return found;
    }
    // The record changed hands three times during this call: others are busy with the key.
    throw inProgress();
  }

  private replay(found: Lean, ctx: Koa.Context): void {
    ctx.set(REPLAYED_HEADER, 'true');
    if (found.error) throw storedError(found);
    for (const [name, value] of Object.entries((found.headers ?? {}) as Record<string, string>)) ctx.set(name, value);
    ctx.status = found.status!;
    const bytes = bytesOf(found.body);
    if (bytes?.length) ctx.body = bytes;
  }

  /** Renews the lease of a running reservation every third of it, so that only a crashed process's lapses. */
  private renew(filter: object): NodeJS.Timeout {
    const renew = setInterval(() => {
      this.model.collection.updateOne(filter, { $set: { expires_at: new Date(Date.now() + this.opts.leaseMs) } }).catch((err: unknown) => this.log.warn({ err }, 'idempotency lease renewal failed'));
    }, this.opts.leaseMs / 3);
    renew.unref();
    return renew;
  }

  private async execute(held: Held, ctx: Koa.Context, next: Koa.Next): Promise<void> {
    // This run's token too: after a lapsed lease another run holds the record, and this one must not touch it.
    const filter = { _id: held._id as never, run: held.run, state: 'running' };
    const renew = this.renew(filter);
    try {
      await next();
    } catch (err) {
      clearInterval(renew);
      const appErr = toAppError(err);
      if (appErr && appErr.status < 500 && !NOT_STORED.has(appErr.status)) {
        await this.store(filter, { status: appErr.status, headers: appErr.headers ?? {}, error: { code: appErr.code, message: appErr.message, details: appErr.details } }, logOf(ctx, this.log));
      } else await this.release(filter, logOf(ctx, this.log));
      throw err;
    }
    clearInterval(renew);
    const body = await bufferBody(ctx);
    // A 404 without a body: no route answered (the kernel answers 404/405 afterwards); nothing ran.
    const unrouted = ctx.status === 404 && body === null;
    if (unrouted || ctx.status >= 500 || NOT_STORED.has(ctx.status) || (ctx.path === this.opts.graphqlPath && graphqlFailed(body))) {
      await this.release(filter, logOf(ctx, this.log));
      return;
    }
    const headers: Record<string, string> = {};
    for (const name of REPLAYED_HEADERS) {
      const value = ctx.response.get(name);
      if (value) headers[name] = String(value);
    }
    await this.store(filter, { status: ctx.status, headers, body }, logOf(ctx, this.log));
  }

  private async store(filter: object, answer: { status: number; headers: Record<string, string>; body?: Buffer | null; error?: object }, log: Logger): Promise<void> {
    try {
      await this.model.collection.updateOne(filter, { $set: { ...answer, state: 'done', expires_at: new Date(Date.now() + this.opts.ttlMs) } });
    } catch (err) {
      // The operation happened; only its replay is lost. Free the key rather than leave it running.
      log.error({ err }, 'idempotency: storing the answer failed');
      await this.release(filter, log);
    }
  }

  private async release(filter: object, log: Logger): Promise<void> {
    try {
      await this.model.collection.deleteOne(filter);
    } catch (err) {
      log.error({ err }, 'idempotency: releasing the key failed (it lapses with its lease)');
    }
  }

  private isMutation(body: unknown): boolean {
    const b = body as { query?: unknown; operationName?: unknown } | null;
    if (!b || typeof b !== 'object' || typeof b.query !== 'string') return false;
    try {
      const doc = parse(b.query, { maxTokens: this.opts.maxTokens });
      return getOperationAST(doc, typeof b.operationName === 'string' ? b.operationName : undefined)?.operation === 'mutation';
    } catch {
      // Yoga answers the parse error itself.
      return false;
    }
  }
}

/** The request's logger (made on first use, so only when something is logged), else the module's. */
const logOf = (ctx: Koa.Context, fallback: Logger): Logger => (ctx.state as { ctx?: { log: Logger } }).ctx?.log ?? fallback;

/** What identifies a request under its key: method, path, query, `If-Match` and body (JSON key order aside). */
function fingerprintOf(method: string, path: string, query: string, ifMatch: string, body: unknown): string {
  return createHash('sha256').update(`${method}\n${path}\n${query}\n${ifMatch}\n${canonical(body)}`).digest('hex');
}

/** A stored error answer, raised again with its status, code, message, details and headers. */
function storedError(found: Lean): AppError {
  const e = (found.error ?? { code: ErrorCode.INTERNAL_ERROR, message: 'Internal server error', details: {} }) as { code: string; message: string; details: ErrorDetails };
  const err = new AppError(found.status ?? 500, e.code, e.message, e.details);
  const headers = (found.headers ?? {}) as Record<string, string>;
  if (Object.keys(headers).length) err.headers = headers;
  return err;
}

function inProgress(): AppError {
  const err = new AppError(409, ErrorCode.IDEMPOTENCY_IN_PROGRESS, `A request with this ${IDEMPOTENCY_HEADER} is still being processed; retry later`, { header: IDEMPOTENCY_HEADER });
  err.headers = { 'Retry-After': '1' };
  return err;
}

/** JSON with object keys sorted at every level: the same body in any key order hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The answer's bytes. Objects are serialized the way Koa will send them; a stream (GraphQL's
 * answer) is read into a buffer, which then becomes the body that is sent.
 */
async function bufferBody(ctx: Koa.Context): Promise<Buffer | null> {
  const body: unknown = ctx.body;
  if (body == null) return null;
  if (Buffer.isBuffer(body)) return body;
  if (typeof body === 'string') return Buffer.from(body);
  if (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    const chunks: Buffer[] = [];
    for await (const chunk of body as AsyncIterable<Uint8Array | string>) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk));
    const bytes = Buffer.concat(chunks);
    ctx.body = bytes;
    return bytes;
  }
  return Buffer.from(JSON.stringify(body));
}

/** A GraphQL answer whose errors include a server failure: released like a 5xx, so a retry runs again. */
function graphqlFailed(body: Buffer | null): boolean {
  if (!body) return false;
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { errors?: { extensions?: { code?: string; status?: number } }[] };
    return !!parsed.errors?.some((e) => e.extensions?.code === ErrorCode.INTERNAL_ERROR || (e.extensions?.status ?? 0) >= 500);
  } catch {
    return false;
  }
}
