import type Koa from 'koa';
import type { z } from 'zod';
import { AuthRequiredError, ValidationError, zodIssues, type ValidationIssue } from '../errors.ts';
import type { Actor } from '../context.ts';
import { requireFeatures, requireRole } from '../identity/guards.ts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call a route.
 * - `public`: anyone; a presented credential is still resolved.
 * - `user`: any authenticated actor (401 otherwise).
 * - `admin`: role `admin` or system scope (403 otherwise).
 * - `system`: system administrators only (`scope: system` or `is_system_user`).
 */
export type RouteAuth = 'public' | 'user' | 'admin' | 'system';

type Schema = z.ZodType;
type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface HandlerArgs<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** The authenticated actor (null only on `public` routes). */
  user: Actor | null;
  ctx: Koa.Context;
}

/** Extra OpenAPI description of a route that its zod schemas alone cannot express. */
export interface RouteDocs {
  /** Request headers, name → description (`If-Match`, ...). */
  headers?: Record<string, { description: string; required?: boolean }>;
  /** Extra response headers of the success response. */
  responseHeaders?: Record<string, string>;
  /** Error statuses this route can answer besides the generic ones. */
  errors?: number[];
  /**
   * The body schema for documentation only, when the handler's service validates the body itself
   * (so REST and GraphQL share one validation, in one order). Prefer `body` otherwise.
   */
  body?: Schema;
}

/**
 * A REST route. Plugins return these from `setup()`; the kernel validates `params`, `query` and
 * `body` with their zod schemas (422 `VALIDATION_ERROR` listing every problem) and checks `auth`
 * and `features` before the handler runs.
 *
 * The handler's return value becomes the JSON body (status `status`, default 200; 204 when it
 * returns undefined and set no body).
 *
 * @example
 * defineRoute({ method: 'GET', path: '/hello/:name', params: z.object({ name: z.string() }),
 *   handler: ({ params }) => ({ hello: params.name }) })
 */
export interface RouteDef<P extends Schema | undefined = Schema | undefined, Q extends Schema | undefined = Schema | undefined, B extends Schema | undefined = Schema | undefined> {
  method: HttpMethod;
  /** Koa-router path, `:param` style. */
  path: string;
  summary?: string;
  description?: string;
  tags?: string[];
  /** @default 'user' */
  auth?: RouteAuth;
  /** Feature guard: the actor must hold every listed feature (403 with `details.feature`). */
  features?: string[];
  params?: P;
  query?: Q;
  body?: B;
  /** Schema of the success body, for OpenAPI. */
  response?: Schema;
  /** Success status. @default 200 */
  status?: number;
  docs?: RouteDocs;
  /** Exempt from the rate limiter (health probes). @default false */
  rateLimitExempt?: boolean;
  /**
   * The handler's `body` is the request body as a Buffer, byte for byte as received: the JSON
   * parser skips this route (signature checks over raw bytes, e.g. webhooks). `BODY_LIMIT` still
   * applies (413); a `body` schema is not applied. @default false
   */
  rawBody?: boolean;
  handler(args: HandlerArgs<Out<P>, Out<Q>, Out<B>>): unknown;
}

/** Identity function that infers handler argument types from the schemas. */
export function defineRoute<P extends Schema | undefined = undefined, Q extends Schema | undefined = undefined, B extends Schema | undefined = undefined>(
  def: RouteDef<P, Q, B>,
): RouteDef {
  return def as unknown as RouteDef;
}

/** The route's `auth` and `features` guards. @throws the rejected credential's error or AuthRequiredError (401), AccessDeniedError (403) */
export function checkAuth(route: Pick<RouteDef, 'auth' | 'features'>, actor: Actor | null, authError: Error | null): void {
  const auth = route.auth ?? 'user';
  if (auth === 'public') return;
  if (!actor) throw authError ?? new AuthRequiredError();
  if (auth === 'admin' || auth === 'system') requireRole(actor, auth);
  if (route.features?.length) requireFeatures(actor, route.features);
}

/** Validate all three inputs and report every problem at once. */
export function validateInputs(route: RouteDef, raw: { params: unknown; query: unknown; body: unknown }) {
  const issues: ValidationIssue[] = [];
  const out: Record<'params' | 'query' | 'body', unknown> = { params: raw.params, query: raw.query, body: raw.body };
  for (const source of ['params', 'query', 'body'] as const) {
    const schema = route[source];
    if (!schema) continue;
    const res = schema.safeParse(raw[source]);
    if (res.success) out[source] = res.data;
    else issues.push(...zodIssues(source, res.error.issues));
  }
  if (issues.length) throw new ValidationError(issues);
  return out;
}
