import { z } from 'zod';
import { bool, int } from './fields.ts';

/**
 * Limits of the HTTP and GraphQL pipeline (rate limits, failed sign-ins, GraphQL cost and depth,
 * body, URL and header sizes, the proxy trusted), idempotency keys and the shutdown grace,
 * spread into the config schema of `config/index.ts`. Names are the environment variable names.
 */
export const limitSettings = {
  /** @default true */
  RATE_LIMIT_ENABLED: bool(true),
  /**
   * Where rate-limit and failed-authentication counters live: `mongo` (shared by every replica on
   * the database) or `memory` (this process only: a single server, or benchmarks). @default 'mongo'
   */
  RATE_LIMIT_STORE: z.enum(['mongo', 'memory']).default('mongo'),
  /** Requests per window per credential (or per IP when anonymous). @default 1000 */
  RATE_LIMIT_MAX: int(1000, 1),
  /** @default 60 */
  RATE_LIMIT_WINDOW_SECONDS: int(60, 1),
  /**
   * How often (ms) each process adds its request counts to the shared store and reads back the
   * totals (one bulk write per interval). Bounds the overshoot across replicas. @default 100
   */
  RATE_LIMIT_SYNC_MS: int(100, 10),
  /**
   * Requests per window to a webhook receiver (`POST /webhooks/{provider}`), per provider and
   * client ip, counted apart from `RATE_LIMIT_MAX`. @default 6000
   */
  WEBHOOK_RATE_LIMIT_MAX: int(6000, 1),
  /**
   * Failed authentications per window, per client ip and per targeted identity (API key prefix,
   * email), after which further failures answer 429. Valid credentials always pass. @default 100
   */
  AUTH_FAILURE_LIMIT: int(100, 1),
  /** GraphQL: most aliases in one operation (graphql-armor). @default 30 */
  GRAPHQL_MAX_ALIASES: int(30, 1),
  /** GraphQL: deepest selection (graphql-armor; introspection exempt). @default 12 */
  GRAPHQL_MAX_DEPTH: int(12, 1),
  /** GraphQL: most tokens in the query text, counted while parsing (graphql-armor). @default 2000 */
  GRAPHQL_MAX_TOKENS: int(2000, 1),
  /** GraphQL: most directives in one operation (graphql-armor). @default 50 */
  GRAPHQL_MAX_DIRECTIVES: int(50, 1),
  /** GraphQL: structural cost budget (graphql-armor cost limit: objects 2, scalars 1, times depth). @default 5000 */
  GRAPHQL_MAX_COST: int(5000, 1),
  /** GraphQL: list budget: items a request's lists may return, each list counting by its page size. @default 5000 */
  GRAPHQL_MAX_LIST_ITEMS: int(5000, 1),
  /** GraphQL: page size assumed for a list field called without `per_page` / `limit`. @default 100 */
  GRAPHQL_ASSUMED_PAGE_SIZE: int(100, 1),
  /** GraphQL: most mutation fields (aliases included) per request: the bulk cap. @default 100 */
  GRAPHQL_MAX_MUTATION_FIELDS: int(100, 1),
  /** GraphQL: deepest nesting of the variables. @default 32 */
  GRAPHQL_MAX_INPUT_DEPTH: int(32, 1),
  /** Largest accepted JSON body. @default '1mb' */
  BODY_LIMIT: z.string().regex(/^\d+(b|kb|mb)$/i, 'must look like 512kb or 1mb').default('1mb'),
  /**
   * Most bytes of a request body read and discarded after an early answer (413), so that the
   * client can read that answer; a larger declared body gets `Connection: close`. @default '64mb'
   */
  BODY_DRAIN_LIMIT: z.string().regex(/^\d+(b|kb|mb)$/i, 'must look like 512kb or 64mb').default('64mb'),
  /** Longest request target (path and query) answered normally; longer → 414 `URI_TOO_LONG`. Above the `where` cap (8192 characters), so that cap answers first. @default 12288 */
  MAX_URL_LENGTH: int(12288, 256),
  /**
   * Largest request head (request line and headers) Node's HTTP parser accepts (`maxHeaderSize`);
   * larger → 431 `HEADERS_TOO_LARGE`. Keep it above `MAX_URL_LENGTH`. @default 16384
   */
  MAX_HEADER_SIZE: int(16384, 1024),
  /** Trust `X-Forwarded-For` for the client ip (behind a proxy). @default false */
  TRUST_PROXY: bool(false),
  /** How long the answer to a request with an `Idempotency-Key` is kept for replay. @default 24 */
  IDEMPOTENCY_TTL_HOURS: int(24, 1),
  /**
   * How long the reservation of a running `Idempotency-Key` request holds without renewal (renewed
   * while it runs): after a crash its key is free again this much later. @default 30
   */
  IDEMPOTENCY_LEASE_SECONDS: int(30, 1),
  /** Time allowed for in-flight requests on SIGTERM/SIGINT. @default 10000 */
  SHUTDOWN_TIMEOUT_MS: int(10000, 0),
};
