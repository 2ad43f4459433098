import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import Router from '@koa/router';
import { bodyParser } from '@koa/bodyparser';
import { createYoga, type Plugin as YogaPlugin, type YogaServerInstance } from 'graphql-yoga';
import { GraphQLError, validateSchema, type GraphQLSchema } from 'graphql';
import type { Config, LoadedConfig } from '../config/index.ts';
import { resolveSecrets } from '../config/secrets.ts';
import { ErrorCatalogue, ErrorCode } from './errors.ts';
import { createLogger, type Logger } from './logger.ts';
import { HookBus } from './hooks.ts';
import { ServiceRegistry } from './services.ts';
import { Tenancy } from './tenancy.ts';
import { openDatabase, type Database } from './db.ts';
import { createBuilder, type GraphQLContext } from './graphql.ts';
import { HealthRegistry } from './health.ts';
import { declaredRoute, type RouteDef } from './http/route.ts';
import { routeHandler } from './http/handler.ts';
import { authenticate, rateLimit, requestHead, routeBudgets, type AppState } from './http/middleware.ts';
import { toAppError } from './http/map-error.ts';
import { indexRoutes, type RouteIndex } from './http/route-index.ts';
import { byteSize, clientErrorHandler } from './http/protocol.ts';
import { graphqlLimitPlugins } from './graphql-limits.ts';
import type { CommandStartedEvent } from 'mongodb';
import { Metrics, observeGraphQL, observeMongo } from './observability/metrics-wiring.ts';
import { observeRequests, setRoute } from './observability/access-log.ts';
import { accessWriter, OperationGuards } from './guards.ts';
import { listenMetrics, metricsRoute } from './observability/metrics-http.ts';
import { countRefusals } from './observability/metrics-limits.ts';
import { tracingEnabled } from './observability/tracing.ts';
import { traceGraphQL } from './observability/tracing-graphql.ts';
import { traceRequests } from './observability/tracing-http.ts';
import { PluginError, pluginStates, type JobDefinition, type KernelView, type PersonalDataDeclaration, type Plugin, type PluginContribution } from './plugin.ts';
import { blamed } from './plugin-error.ts';
import type { GraphqlTransport } from './transport.ts';

export { PluginError };

/** Socket errors that mean the client went away (reset, broken pipe, closed before the end). */
const CLIENT_GONE = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE']);

/**
 * Orders plugins so that each comes after its dependencies (stable: otherwise the given order).
 * @throws PluginError on a duplicate name, a missing dependency or a cycle
 */
function orderPlugins(plugins: readonly Plugin[]): Plugin[] {
  const byName = new Map<string, Plugin>();
  for (const p of plugins) {
    if (byName.has(p.name)) throw new PluginError(`Plugin "${p.name}" is enabled twice`);
    byName.set(p.name, p);
  }
  for (const p of plugins) {
    for (const dep of p.dependsOn) {
      if (!byName.has(dep)) throw new PluginError(`Plugin "${p.name}" depends on "${dep}", which is not enabled`);
    }
  }
  const out: Plugin[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (p: Plugin, path: string[]) => {
    const s = state.get(p.name);
    if (s === 'done') return;
    if (s === 'visiting') {
      const cycle = [...path.slice(path.indexOf(p.name)), p.name];
      throw new PluginError(`Plugin dependency cycle: ${cycle.join(' -> ')}`);
    }
    state.set(p.name, 'visiting');
    for (const dep of p.dependsOn) visit(byName.get(dep)!, [...path, p.name]);
    state.set(p.name, 'done');
    out.push(p);
  };
  for (const p of plugins) visit(p, []);
  return out;
}

export interface CreateAppOptions {
  /** Parsed settings; missing secrets are filled from `DATA_DIR` outside production (config/secrets.ts). */
  config: LoadedConfig | Config;
  /** Loaded first, in this order, always; their names are reserved (`corePlugins()`, builtin-plugins.ts). */
  corePlugins: Plugin[];
  /** Plugins after the core ones, in any order. */
  plugins: Plugin[];
  logger?: Logger;
  /** Sees every command the driver sends to the database (command monitoring; tests record query shapes with it). */
  onDatabaseCommand?: (event: CommandStartedEvent) => void;
}

export interface App {
  koa: Koa;
  config: Config;
  db: Database;
  hooks: HookBus;
  services: ServiceRegistry;
  schema: GraphQLSchema;
  log: Logger;
  kernel: KernelView;
  /** Listen on `port` (default `config.PORT`; 0 = any free port). Resolves to the bound port. */
  listen(port?: number, host?: string): Promise<number>;
  /** Stop accepting, finish in-flight requests (up to `SHUTDOWN_TIMEOUT_MS`), close plugins in reverse order, close the database. */
  close(): Promise<void>;
}

/** Builds the whole server: validates and orders plugins, opens the database, sets up every plugin, mounts REST and GraphQL. */
export async function createApp(opts: CreateAppOptions): Promise<App> {
  const log = opts.logger ?? createLogger(opts.config.LOG_LEVEL);
  const config = resolveSecrets(opts.config, log);
  const health = new HealthRegistry();

  const core = new Set(opts.corePlugins.map((p) => p.name));
  const reserved = opts.plugins.find((p) => core.has(p.name));
  if (reserved) throw new PluginError(`Plugin name "${reserved.name}" is reserved for a core plugin`);
  const ordered = orderPlugins([...opts.corePlugins, ...opts.plugins]);
  const options = new Map<string, unknown>();
  for (const p of ordered) {
    if (!p.optionsSchema) continue;
    const res = p.optionsSchema.safeParse(p.rawOptions ?? {});
    if (!res.success) {
      const lines = res.error.issues.map((i) => `  ${i.path.join('.') || '(options)'}: ${i.message}`);
      throw new PluginError(`Invalid options for plugin "${p.name}":\n${lines.join('\n')}`);
    }
    options.set(p.name, res.data);
  }

  // Always provided, so plugins call it unconditionally; off, nothing serves or samples it.
  const metrics = new Metrics({ defaultMetrics: config.METRICS_ENABLED });
  const db = await openDatabase(config, log, {
    ...(opts.onDatabaseCommand ? { onCommand: opts.onDatabaseCommand } : {}),
    ...(config.METRICS_ENABLED ? { observe: observeMongo(metrics) } : {}),
  });
  const hooks = new HookBus();
  const services = new ServiceRegistry();
  services.provide('healthChecks', health);
  services.provide('metrics', metrics);
  const tenancy = new Tenancy(config.MULTI_TENANT_ENABLED);
  const routes: (RouteDef & { plugin: string })[] = [];
  const jobs: (JobDefinition & { plugin: string })[] = [];
  const personalData: (PersonalDataDeclaration & { plugin: string })[] = [];
  const errorCodes = new ErrorCatalogue();
  const kernel: KernelView = {
    routes: () => routes, jobs: () => jobs, personalData: () => personalData, errorCodes: () => errorCodes.all(),
    plugins: () => ordered.map((p) => p.name), pluginStates: () => pluginStates(ordered, config),
    contributions: () => contributions.map(({ plugin, c }) => ({ plugin: plugin.name, contribution: c })),
  };
  const contributions: { plugin: Plugin; c: PluginContribution }[] = [];
  const transports: GraphqlTransport[] = [];

  const closePlugins = async () => {
    for (const { plugin, c } of [...contributions].reverse()) {
      try {
        await c.close?.();
      } catch (err) {
        log.error({ err, plugin: plugin.name }, 'plugin close failed');
      }
    }
  };

  let schema: GraphQLSchema;
  let yoga: ReturnType<typeof createYogaServer>;
  let router: Router;
  try {
    for (const plugin of ordered) await blame(plugin, async () => {
      const c = await plugin.setup({
        name: plugin.name,
        options: options.get(plugin.name),
        config,
        db: db.conn,
        hooks,
        services,
        tenancy,
        log: log.child({ plugin: plugin.name }),
        kernel,
      });
      contributions.push({ plugin, c });
      for (const h of c.hooks ?? []) hooks.on(h.event, h.handler as never, plugin.name, h.resources ? { resources: h.resources } : {});
      for (const [name, fn] of Object.entries(c.health ?? {})) health.register(name, fn, plugin.name);
      const refused = c.errorCodes && errorCodes.add(c.errorCodes, plugin.name);
      if (refused) throw new PluginError(refused);
      for (const j of c.jobs ?? []) {
        if (jobs.some((x) => x.name === j.name)) throw new PluginError(`Job "${j.name}" of plugin "${plugin.name}" is already defined`);
        jobs.push({ ...j, plugin: plugin.name });
      }
    });
    for (const { plugin, c } of contributions) await blame(plugin, () => {
      const list = typeof c.routes === 'function' ? c.routes() : (c.routes ?? []);
      for (const r of list) routes.push(declaredRoute(r, plugin.name));
      const decls = typeof c.personalData === 'function' ? c.personalData() : (c.personalData ?? []);
      for (const d of decls) {
        if (personalData.some((x) => x.name === d.name)) throw new PluginError(`Personal data "${d.name}" of plugin "${plugin.name}" is already declared`);
        const account = d.on_erasure === 'account' && personalData.find((x) => x.on_erasure === 'account');
        if (account) throw new PluginError(`Personal data "${d.name}" of plugin "${plugin.name}" declares the account, already declared by "${account.name}" of plugin "${account.plugin}"`);
        if (d.on_erasure === 'scrub' && !d.scrub) throw new PluginError(`Personal data "${d.name}" of plugin "${plugin.name}" is erased by scrubbing but has no scrub()`);
        personalData.push({ ...d, plugin: plugin.name });
      }
    });
    services.get('authFailures').onFailure = (lockedOut) => metrics.auth.failures.inc({ locked_out: String(lockedOut) });
    for (const { plugin, c } of contributions) await blame(plugin, () => c.ready?.());
    // Unique indexes must exist before the first request, or duplicates could slip in while they build.
    await Promise.all(Object.values(db.conn.models).map((m) => m.init()));

    const builder = createBuilder();
    for (const { plugin, c } of contributions) await blame(plugin, () => c.graphql?.(builder));
    schema = builder.toSchema({ sortSchema: true });
    const schemaErrors = validateSchema(schema);
    if (schemaErrors.length) throw new PluginError(`Invalid GraphQL schema:\n${schemaErrors.map((e) => `  ${e.message}`).join('\n')}`);
    for (const { c } of contributions) if (c.transport) transports.push(c.transport);
    yoga = createYogaServer(schema, config, log, metrics, transports.flatMap((t) => t.yogaPlugins?.() ?? []));
    router = mountRoutes(routes, yoga, config.BODY_LIMIT);
  } catch (err) {
    // Whatever fails after the database opened (set-up, schema, routes) must not leave it or the
    // plugins open. Index builds the failed set-up started are still running: closing the client
    // under them would make the driver's interruption error (MongoClientClosedError...) the one
    // the operator sees instead of the real cause, so they finish (or fail) first.
    await closePlugins();
    await Promise.allSettled(Object.values(db.conn.models).map((m) => m.init()));
    await db.close();
    throw err;
  }

  const koa = new Koa({ proxy: config.TRUST_PROXY });
  // Koa reports here what happens to a request after its answer began: without a listener it
  // prints the stack to stderr, around the structured log. A client that left mid-answer (a reset
  // connection, typically an event stream's reader gone) is not the server's failure.
  koa.on('error', (err: NodeJS.ErrnoException, ctx?: Koa.Context) => {
    const requestId = (ctx?.state as AppState | undefined)?.ctx?.requestId ?? null;
    if (err.code !== undefined && CLIENT_GONE.has(err.code)) log.debug({ code: err.code, request_id: requestId }, 'client closed the connection during the answer');
    else log.error({ err, request_id: requestId }, 'request failed after its answer began');
  });
  const identity = services.get('authentication');
  const idempotency = services.get('idempotency');
  const exempt = new Set(routes.filter((r) => r.rateLimitExempt).map((r) => r.path));
  // Provided by the rate-limit plugin with RATE_LIMIT_ENABLED; read once, the requests call it directly.
  const requestLimiter = countRefusals(services.maybe('requestLimiter') ?? null, metrics);

  // Operations over WebSocket pass HTTP's guards: one limiter and budget per key, one idempotency store, metrics, access log.
  const guards = new OperationGuards({ limiter: requestLimiter, max: config.RATE_LIMIT_MAX, failures: services.get('authFailures'), idempotency, metrics: config.METRICS_ENABLED ? metrics : null, access: accessWriter(log, config.ACCESS_LOG_LEVEL), route: '/graphql', trustProxy: config.TRUST_PROXY });
  let draining = false;
  const allowedMethods = router.allowedMethods();
  const index = indexRoutes(router);
  const routeOf = (path: string, method: string) => (index.match(path, method) ?? index.matchPath(path))?.path.toString() ?? null;
  const observer = observeRequests({ metrics: config.METRICS_ENABLED ? metrics : null, answered: (s, sec) => metrics.answered(s, sec), log, level: config.ACCESS_LOG_LEVEL, probes: config.ACCESS_LOG_HEALTH, routeOf });
  // Outermost, so the access log line and everything below run inside the request's span.
  if (tracingEnabled()) koa.use(traceRequests());
  koa.use(requestHead(log, { observer, maxUrlLength: config.MAX_URL_LENGTH, maxDrainBytes: byteSize(config.BODY_DRAIN_LIMIT), draining: () => draining, unmatched: (ctx) => allowedMethods(ctx as never, async () => undefined) }));
  if (config.METRICS_ENABLED && config.METRICS_PORT === undefined) koa.use(metricsRoute(metrics, config.METRICS_TOKEN));
  koa.use(authenticate(identity, services.get('authFailures')));
  // Each middleware is a frame on every request: mount the optional ones only when they do something.
  if (requestLimiter) koa.use(rateLimit(config, requestLimiter, (path) => exempt.has(path), routeBudgets(routes)));
  // Routes with `rawBody` get their bytes untouched (read in mountRoutes), so the JSON parser skips
  // them; GET, HEAD and OPTIONS carry no body to parse and skip the parser's frame altogether.
  const raw = routes.filter((r) => r.rawBody);
  const rawRoutes = new Router();
  for (const r of raw) rawRoutes.register(r.path, [r.method], () => undefined);
  const parseBody = bodyParser({ enableTypes: ['json'], jsonLimit: config.BODY_LIMIT, encoding: 'utf-8', parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'] });
  // The parser and the dispatcher share one middleware: one frame fewer on every request.
  const route = dispatch(router, index);
  koa.use((ctx, next) => {
    if (ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'OPTIONS') return route(ctx, next);
    if (raw.length && rawRoutes.match(ctx.path, ctx.method).route) (ctx as { disableBodyParser?: boolean }).disableBodyParser = true;
    const routed = () => Promise.resolve(route(ctx, next));
    // Idempotency-Key: a header check here, the rest only for requests that carry one.
    return parseBody(ctx, idempotency.applies(ctx) ? () => idempotency.run(ctx, routed) : routed);
  });

  let server: Server | undefined;
  let metricsServer: Server | undefined;
  let closers: (() => Promise<void>)[] = [];
  let closing: Promise<void> | undefined;
  return {
    koa, config, db, hooks, services, schema, log, kernel,
    async listen(port = config.PORT, host = config.HOST) {
      if (config.METRICS_ENABLED && config.METRICS_PORT !== undefined && !metricsServer) {
        const m = await listenMetrics(metrics, config.METRICS_PORT, host, config.METRICS_TOKEN);
        metricsServer = m.server;
        metrics.port = m.port;
      }
      return new Promise((resolve, reject) => {
        // maxHeaderSize: a deliberate limit (MAX_HEADER_SIZE) rather than Node's build default;
        // clientError: requests the parser refuses still get the error envelope and a request id.
        server = createServer({ maxHeaderSize: config.MAX_HEADER_SIZE }, koa.callback());
        server.on('clientError', clientErrorHandler(log));
        // Plugins' transports (GraphQL over WebSocket on /graphql, through the same Yoga and guards).
        closers = transports.flatMap((t) => (t.attach ? [t.attach(server!, { yoga, authentication: identity, guards, maxInputDepth: config.GRAPHQL_MAX_INPUT_DEPTH, log })] : []));
        server.once('error', reject);
        server.listen(port, host, () => resolve((server!.address() as AddressInfo).port));
      });
    },
    close() {
      closing ??= (async () => {
        draining = true;
        // Open streams never finish by themselves: end them (they say why) before waiting for requests.
        for (const t of transports) t.drain?.();
        await Promise.all(closers.map((c) => c()));
        if (server) await stopServer(server, config.SHUTDOWN_TIMEOUT_MS);
        if (metricsServer) await stopServer(metricsServer, 0);
        // The rate-limit plugin, loaded first and closed last, sends this process's last counts to the store while it is still open.
        await closePlugins();
        await db.close();
      })();
      return closing;
    },
  };
}

/**
 * Runs the matched route's handler directly. The router's layers still decide what matches (their
 * path syntax and order), tested only where the path can match (route-index.ts); what this skips
 * is the router's per-request work on a hit (every layer tested, a middleware array composed).
 * Misses go through the router itself, so `allowedMethods` sees what matched (405 with `Allow`).
 */
function dispatch(router: Router, index: RouteIndex): Koa.Middleware {
  const routed = router.routes() as unknown as Koa.Middleware;
  return (ctx, next) => {
    const path = ctx.path;
    const layer = index.match(path, ctx.method);
    if (!layer) return routed(ctx, next);
    (ctx as Koa.Context & { params: Record<string, string> }).params = layer.params(path, layer.captures(path));
    setRoute(ctx, String(layer.path));
    return (layer.stack[0] as unknown as Koa.Middleware)(ctx, next);
  };
}

/**
 * Runs one step of a plugin's start-up; an error becomes a `PluginError` naming the plugin (the
 * original stays as `cause`), so a failed start-up always says whose mistake it was.
 */
async function blame<T>(plugin: Plugin, step: () => T | Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw blamed(plugin.name, err);
  }
}

function mountRoutes(routes: readonly (RouteDef & { plugin: string })[], yoga: YogaServerInstance<Record<string, unknown>, Record<string, unknown>>, bodyLimit: string): Router {
  const router = new Router();
  const seen = new Map<string, string>();
  // A budget's name prefixes its keys in the limiter: two routes under one name would share counts.
  const budgets = new Map<string, string>();
  for (const route of routes) {
    const key = `${route.method} ${route.path}`;
    const first = seen.get(key);
    if (first) throw new PluginError(`Route ${key} is registered twice: by plugin "${first}" and by plugin "${route.plugin}"`);
    seen.set(key, route.plugin);
    const budget = route.budget?.name;
    if (budget !== undefined) {
      const taken = budgets.get(budget);
      if (taken) throw new PluginError(`Route ${key} of plugin "${route.plugin}": its budget's name "${budget}" is already the budget of ${taken}`);
      budgets.set(budget, `route ${key} of plugin "${route.plugin}"`);
    }
    router.register(route.path, [route.method], routeHandler(route, bodyLimit));
  }
  router.all('/graphql', async (ctx) => {
    const state = ctx.state as AppState;
    const gctx: GraphQLContext = { actor: state.actor, requestId: state.ctx.requestId, koa: ctx };
    // A rejected credential is an error even for GraphQL, as for every non-public REST route.
    if (state.authError) throw state.authError;
    const response = await yoga.handleNodeRequestAndResponse(ctx.request, ctx.res, gctx as never);
    ctx.status = response.status;
    response.headers.forEach((value, key) => {
      if (key.toLowerCase() !== 'content-length') ctx.append(key, value);
    });
    // A result Yoga serialized to one string goes out as that string (one write with its length)
    // rather than piped through a web stream; anything else (event streams) streams.
    const { bodyInit } = response as { bodyInit?: unknown };
    ctx.body = typeof bodyInit === 'string' ? bodyInit : response.body;
  });
  return router;
}

function createYogaServer(schema: GraphQLSchema, config: Config, log: Logger, metrics: Metrics, extra: YogaPlugin[]) {
  // Masked errors and the originals behind them, logged once the request (and its logger) is known.
  const unhandled = new WeakMap<GraphQLError, unknown>();
  /** Every GraphQL error carries its request's id; unhandled resolver errors are logged with the request's logger. */
  const requestIds: YogaPlugin = {
    onResultProcess({ result, setResult, serverContext }) {
      if (Array.isArray(result) || !('errors' in result) || !result.errors?.length) return;
      const gctx = serverContext as unknown as GraphQLContext;
      const rlog = (gctx.koa?.state as AppState | undefined)?.ctx?.log ?? log;
      const errors = result.errors.map((e) => {
        if (unhandled.has(e as GraphQLError)) rlog.error({ err: unhandled.get(e as GraphQLError) }, 'unhandled GraphQL resolver error');
        if (!(e instanceof GraphQLError) || e.extensions.request_id) return e;
        // A copy: parse and validation errors are cached and shared by later requests.
        return new GraphQLError(e.message, {
          nodes: e.nodes, source: e.source, positions: e.positions, path: e.path, originalError: e.originalError,
          extensions: { ...e.extensions, request_id: gctx.requestId },
        });
      });
      setResult({ ...result, errors });
    },
  };
  return createYoga<Record<string, unknown>>({
    schema,
    graphqlEndpoint: '/graphql',
    plugins: [...graphqlLimitPlugins(config), requestIds, ...(config.METRICS_ENABLED ? [observeGraphQL(metrics)] : []), ...(tracingEnabled() ? [traceGraphQL()] : []), ...extra],
    // GraphiQL is the graphiql plugin's (a Yoga plugin of its transport contribution), not Yoga's own page.
    graphiql: false,
    landingPage: false,
    logging: false,
    maskedErrors: {
      maskError(error) {
        const original = error instanceof GraphQLError ? error.originalError : error;
        if (!original || original instanceof GraphQLError) return error as Error;
        const appErr = toAppError(original);
        const path = error instanceof GraphQLError ? error.path : undefined;
        if (!appErr) {
          const masked = new GraphQLError('Internal server error', { path, extensions: { code: ErrorCode.INTERNAL_ERROR } });
          unhandled.set(masked, original);
          return masked;
        }
        return new GraphQLError(appErr.message, { path, extensions: { code: appErr.code, status: appErr.status, details: appErr.details } });
      },
    },
  });
}

async function stopServer(server: Server, timeoutMs: number) {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, timeoutMs);
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}

