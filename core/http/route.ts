import type Koa from 'koa';
import type { z } from 'zod';
import { ValidationError, zodIssues, type ValidationIssue } from '../errors.ts';
import type { Actor } from '../context.ts';
import { PluginError } from '../plugin-error.ts';
import { requireFeatures } from '../access.ts';
import { PERMISSIONS, permit, type Permission } from '../permissions.ts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Who may call a route: its declared {@link Permission}. */
export type RouteAuth = Permission;

type Schema = z.ZodType;
type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface HandlerArgs<P, Q, B, A extends RouteAuth = RouteAuth> {
  params: P;
  query: Q;
  body: B;
  /** The authenticated actor: never null behind a route that requires one, null or not on a `public` route. */
  actor: A extends 'public' ? Actor | null : Actor;
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
  /** Media types of the success body when it is not JSON (`text/event-stream`, `text/html`). @default ['application/json'] */
  mediaTypes?: string[];
  /**
   * Error statuses this route answers with a body of its own (a webhook receiver's 500 `{status:
   * 'failed'}`), besides the error envelope: status → description and JSON schema.
   */
  responses?: Record<number, { description: string; schema: Schema }>;
}

/**
 * A budget of the rate limiter apart from the general one, for a route whose callers come in bursts
 * from a few addresses (a webhook receiver: a provider delivering, where `RATE_LIMIT_MAX` sizes API
 * clients): `max` requests per window per value of the path parameter `param` and per client (the
 * general limiter's key: credential, else ip), answered with the same headers and 429. The general
 * budget still guards the route: a client it refuses is refused here too, and answers 4xx spend it,
 * so a client cannot post to ever new values for ever fresh budgets.
 */
export interface RouteBudget {
  /** The path parameter the budget is counted by (`provider` of `/webhooks/:provider`). */
  param: string;
  /** Requests per window (`RATE_LIMIT_WINDOW_MS`) per value and client. */
  max: number;
  /** The budget's name in the limiter's keys (`<name>:<value>`): unique among routes. */
  name: string;
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
export interface RouteDef<P extends Schema | undefined = Schema | undefined, Q extends Schema | undefined = Schema | undefined, B extends Schema | undefined = Schema | undefined, A extends RouteAuth = RouteAuth> {
  method: HttpMethod;
  /** Koa-router path, `:param` style. */
  path: string;
  summary?: string;
  description?: string;
  tags?: string[];
  /**
   * Who may call it: the operation's one declaration of its permission (a GraphQL field of the
   * same operation declares the same value through `t.withAuth(scopes(...))`). Required, so no
   * route is open or closed by a default nobody wrote.
   */
  auth: A;
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
  /** A rate-limit budget of its own instead of the general one (see {@link RouteBudget}). */
  budget?: RouteBudget;
  /**
   * The handler's `body` is the request body as a Buffer, byte for byte as received: the JSON
   * parser skips this route (signature checks over raw bytes, e.g. webhooks). `BODY_LIMIT` still
   * applies (413); a `body` schema is not applied. @default false
   */
  rawBody?: boolean;
  handler(args: HandlerArgs<Out<P>, Out<Q>, Out<B>, A>): unknown;
}

/** Identity function that infers handler argument types from the schemas. */
export function defineRoute<P extends Schema | undefined = undefined, Q extends Schema | undefined = undefined, B extends Schema | undefined = undefined, A extends RouteAuth = RouteAuth>(
  def: RouteDef<P, Q, B, A>,
): RouteDef {
  return def as unknown as RouteDef;
}

/** The route's `auth` and `features` guards. @throws the rejected credential's error or AuthRequiredError (401), AccessDeniedError (403) */
export function checkAuth(route: Pick<RouteDef, 'auth' | 'features'>, actor: Actor | null, authError: Error | null): void {
  permit(route.auth, actor, authError);
  if (actor && route.features?.length) requireFeatures(actor, route.features);
}

/**
 * The route as the kernel registers it, tagged with its plugin.
 * @throws PluginError when it declares no permission (a JavaScript plugin that left `auth` out), or
 * a `budget` counted by a parameter its path does not have or with a `max` that is not a positive integer
 */
export function declaredRoute(route: RouteDef, plugin: string): RouteDef & { plugin: string } {
  const where = `Route ${route.method} ${route.path} of plugin "${plugin}"`;
  if (!PERMISSIONS.includes(route.auth)) throw new PluginError(`${where} declares no permission: set auth to one of ${PERMISSIONS.join(', ')}`);
  const b = route.budget;
  if (b && !route.path.split('/').includes(`:${b.param}`)) throw new PluginError(`${where}: its budget is counted by ":${b.param}", which its path does not have`);
  if (b && !(Number.isInteger(b.max) && b.max > 0)) throw new PluginError(`${where}: its budget's max must be a positive integer, not ${String(b.max)}`);
  return { ...route, plugin };
}

const SOURCES = ['params', 'query', 'body'] as const;

/** Validate all three inputs and report every problem at once. Returns a new object (the caller may add to it). */
export function validateInputs(route: RouteDef, raw: { params: unknown; query: unknown; body: unknown }): Record<string, unknown> {
  let issues: ValidationIssue[] | undefined;
  const out: Record<string, unknown> = { params: raw.params, query: raw.query, body: raw.body };
  for (const source of SOURCES) {
    const schema = route[source];
    if (!schema) continue;
    const res = schema.safeParse(raw[source]);
    if (res.success) out[source] = res.data;
    else (issues ??= []).push(...zodIssues(source, res.error.issues));
  }
  if (issues) throw new ValidationError(issues);
  return out;
}
