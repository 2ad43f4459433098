/**
 * One error family for every plugin. The error middleware (REST) and the Yoga error mask (GraphQL)
 * turn an `AppError` into the envelope `{ error: { code, message, details }, request_id }`; anything
 * that is not an `AppError` becomes a masked 500 `INTERNAL_ERROR`.
 */
import type { z } from 'zod';

/** Stable, machine-readable error codes. Clients branch on these; never rename one. */
export const ErrorCode = {
  INTERNAL_ERROR: 'INTERNAL_ERROR',
  BAD_REQUEST: 'BAD_REQUEST',
  AUTH_REQUIRED: 'AUTH_REQUIRED',
  ACCESS_DENIED: 'ACCESS_DENIED',
  NOT_FOUND: 'NOT_FOUND',
  METHOD_NOT_ALLOWED: 'METHOD_NOT_ALLOWED',
  CONFLICT: 'CONFLICT',
  GONE: 'GONE',
  ETAG_MISMATCH: 'ETAG_MISMATCH',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  URI_TOO_LONG: 'URI_TOO_LONG',
  HEADERS_TOO_LARGE: 'HEADERS_TOO_LARGE',
  REQUEST_TIMEOUT: 'REQUEST_TIMEOUT',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  CASCADE_DENY: 'CASCADE_DENY',
  VALIDATION_ERROR: 'VALIDATION_ERROR',
  ETAG_REQUIRED: 'ETAG_REQUIRED',
  RATE_LIMITED: 'RATE_LIMITED',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
  QUERY_TIMEOUT: 'QUERY_TIMEOUT',
  IDEMPOTENCY_KEY_REUSED: 'IDEMPOTENCY_KEY_REUSED',
  IDEMPOTENCY_IN_PROGRESS: 'IDEMPOTENCY_IN_PROGRESS',
  TENANT_REQUIRED: 'TENANT_REQUIRED',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** One entry of `details.errors` in a 422 `VALIDATION_ERROR`. */
export interface ValidationIssue {
  /** Path of the offending value, starting with its source: `['body', 'name']`, `['query', 'per_page']`. */
  loc: (string | number)[];
  msg: string;
  /** Machine-readable kind of problem, e.g. `invalid_type`, `too_big`, `unrecognized_keys`. */
  type: string;
}

export type ErrorDetails = Record<string, unknown>;

/**
 * Base of every error a client may see. Domain code may raise it with any status and code
 * (a domain error may carry any status, code and details its raiser chooses).
 *
 * @example throw new AppError(409, 'CONFLICT', 'Payment already captured', { payment_id })
 */
export class AppError extends Error {
  /** Koa convention: an AppError's message is safe to show. */
  readonly expose = true;
  /** Extra response headers, e.g. `Retry-After` on a 429. */
  headers?: Record<string, string>;

  constructor(
    readonly status: number,
    readonly code: ErrorCode | (string & {}),
    message: string,
    readonly details: ErrorDetails = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class BadRequestError extends AppError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(400, ErrorCode.BAD_REQUEST, message, details);
  }
}

export class AuthRequiredError extends AppError {
  constructor(message = 'Authentication required') {
    super(401, ErrorCode.AUTH_REQUIRED, message);
  }
}

export class AccessDeniedError extends AppError {
  constructor(message = 'Access denied', details: ErrorDetails = {}) {
    super(403, ErrorCode.ACCESS_DENIED, message, details);
  }
}

export class NotFoundError extends AppError {
  constructor(resource: string, itemId?: string, message?: string) {
    super(404, ErrorCode.NOT_FOUND, message ?? (itemId ? `${resource} ${itemId} not found` : `${resource} not found`), {
      resource,
      ...(itemId !== undefined ? { item_id: itemId } : {}),
    });
  }
}

export class ConflictError extends AppError {
  constructor(message = 'Conflict', details: ErrorDetails = {}) {
    super(409, ErrorCode.CONFLICT, message, details);
  }
}

export class EtagMismatchError extends AppError {
  constructor(details: ErrorDetails = {}) {
    super(412, ErrorCode.ETAG_MISMATCH, 'If-Match does not match the current revision', details);
  }
}

export class EtagRequiredError extends AppError {
  constructor() {
    super(428, ErrorCode.ETAG_REQUIRED, 'This mutation requires an If-Match header');
  }
}

export class UnsupportedMediaTypeError extends AppError {
  constructor(message = 'Request bodies must be application/json') {
    super(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, message);
  }
}

export class CascadeDenyError extends AppError {
  constructor(details: { resource: string; item_id: string; referenced_by: string; count: number }) {
    super(
      422,
      ErrorCode.CASCADE_DENY,
      `${details.resource} ${details.item_id} is still referenced by ${details.count} ${details.referenced_by} document(s)`,
      details,
    );
  }
}

function summary(errors: ValidationIssue[]): string {
  const first = errors[0];
  if (!first) return 'Validation failed';
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  const field = first.loc.slice(1).join('.');
  return `Validation failed: ${field && !first.msg.startsWith(field) ? `${field}: ` : ''}${first.msg}${more}`;
}

export class ValidationError extends AppError {
  /** The default message names the first problem and its field, so that it reads on its own (`Validation failed: name is required`). */
  constructor(errors: ValidationIssue[], message = summary(errors)) {
    super(422, ErrorCode.VALIDATION_ERROR, message, { errors });
  }
}

export class RateLimitedError extends AppError {
  constructor(retryAfterSeconds: number) {
    super(429, ErrorCode.RATE_LIMITED, 'Too many requests', { retry_after: retryAfterSeconds });
    this.headers = { 'Retry-After': String(retryAfterSeconds) };
  }
}

/** 410: what was asked for existed once and is gone for good (e.g. an event older than the log keeps). */
export class GoneError extends AppError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(410, ErrorCode.GONE, message, details);
  }
}

export class ServiceUnavailableError extends AppError {
  constructor(message = 'Service unavailable', details: ErrorDetails = {}) {
    super(503, ErrorCode.SERVICE_UNAVAILABLE, message, details);
  }
}

/**
 * Map a zod error (v4) to validation issues under a source prefix (`body`, `query`, `params`, or a
 * path such as `['body', 3]` for one item of a bulk body).
 * An `unrecognized_keys` issue becomes one issue per key, located at that key.
 */
export function zodIssues(
  source: string | readonly (string | number)[],
  issues: readonly { path: readonly PropertyKey[]; message: string; code: string; keys?: readonly string[]; expected?: unknown; origin?: unknown; minimum?: unknown; maximum?: unknown; values?: unknown }[],
): ValidationIssue[] {
  const prefix = typeof source === 'string' ? [source] : source;
  return issues.flatMap((i) => {
    const loc = [...prefix, ...i.path.map((p) => (typeof p === 'number' ? p : String(p)))];
    if (i.code === 'unrecognized_keys' && i.keys?.length)
      return i.keys.map((k) => ({ loc: [...loc, k], msg: `Unrecognized key: "${k}"`, type: i.code }));
    return [{ loc, msg: plainMessage(i, loc.slice(prefix.length)), type: i.code }];
  });
}

const KINDS: Record<string, string> = { string: 'text', number: 'a number', int: 'a whole number', boolean: 'true or false', array: 'a list', object: 'an object', date: 'a date' };
const UNITS: Record<string, string> = { string: 'characters', array: 'items', set: 'items', file: 'bytes' };

/**
 * zod's default messages ("Invalid input: expected string, received undefined") in words a person
 * reads on their own or next to the field ("name is required"); messages a schema set itself are kept.
 */
function plainMessage(i: { message: string; code: string; expected?: unknown; origin?: unknown; minimum?: unknown; maximum?: unknown; values?: unknown }, path: readonly (string | number)[]): string {
  const m = i.message;
  if (i.code === 'invalid_type' && m.startsWith('Invalid input')) {
    if (m.endsWith('received undefined')) return path.length ? `${path.join('.')} is required` : 'a value is required';
    return `Must be ${KINDS[String(i.expected)] ?? String(i.expected)}`;
  }
  if ((i.code === 'too_small' && m.startsWith('Too small')) || (i.code === 'too_big' && m.startsWith('Too big'))) {
    const small = i.code === 'too_small';
    const n = Number(small ? i.minimum : i.maximum);
    const unit = UNITS[String(i.origin)];
    if (small && n === 1 && unit) return i.origin === 'string' ? 'Must not be empty' : 'Give at least one';
    return `Must be ${small ? 'at least' : 'at most'} ${String(n)}${unit ? ` ${unit}` : ''}`;
  }
  if (i.code === 'invalid_value' && m.startsWith('Invalid option') && Array.isArray(i.values)) return `Must be one of: ${i.values.map(String).join(', ')}`;
  return m;
}

/**
 * Validate input with a zod schema; every problem becomes a 422 `VALIDATION_ERROR` issue located
 * under `loc`. Services use it for bodies (`['body']`), GraphQL resolvers for arguments.
 *
 * @default loc ['args'] (GraphQL arguments)
 * @example const input = parseInput(createSchema, body, ['body'])
 */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, loc: readonly (string | number)[] = ['args']): z.output<S> {
  const res = schema.safeParse(value);
  if (!res.success) throw new ValidationError(zodIssues(loc, res.error.issues));
  return res.data;
}

/** One code of {@link ERROR_CATALOGUE}. */
export interface ErrorCodeDoc {
  /** A typical error with this code: its status, message and details (documentation examples). */
  example: AppError;
  /** When the server answers with this code. */
  description: string;
}

const SAMPLE_ID = '64b7f0c2a1b2c3d4e5f60718';

/**
 * The kernel's error codes, by status: code → status (of its example) → when. Plugins add their own
 * (`errorCodes` of `setup()`); {@link ErrorCatalogue} holds both, `/openapi.json` documents its error
 * responses from that, and a test checks that docs/errors.md lists every code.
 */
export const ERROR_CATALOGUE: Readonly<Record<ErrorCode, ErrorCodeDoc>> = {
  BAD_REQUEST: {
    example: new BadRequestError('Malformed JSON body'),
    description: 'Malformed JSON body or query parameter, invalid `where` JSON, unknown operator, invalid cursor, invalid `X-Tenant-Id`.',
  },
  AUTH_REQUIRED: { example: new AuthRequiredError(), description: 'Missing or invalid credentials, or an expired token.' },
  ACCESS_DENIED: {
    example: new AccessDeniedError(),
    description: 'A role, feature, attribute or tenant guard rejected the caller; `details.feature` names a missing feature.',
  },
  NOT_FOUND: { example: new NotFoundError('item', SAMPLE_ID), description: 'The id matches nothing (`details.resource`, `details.item_id`).' },
  METHOD_NOT_ALLOWED: { example: new AppError(405, ErrorCode.METHOD_NOT_ALLOWED, 'Method not allowed'), description: 'Known path, other method (`Allow` lists the methods).' },
  REQUEST_TIMEOUT: { example: new AppError(408, ErrorCode.REQUEST_TIMEOUT, 'Request timeout'), description: 'The request did not arrive in time.' },
  CONFLICT: { example: new ConflictError('A document with the same unique value already exists'), description: 'Duplicate key or state conflict.' },
  IDEMPOTENCY_IN_PROGRESS: {
    example: new AppError(409, ErrorCode.IDEMPOTENCY_IN_PROGRESS, 'A request with this Idempotency-Key is still being processed; retry later', { header: 'Idempotency-Key' }),
    description: 'A request with the same `Idempotency-Key` (same actor and tenant) is still running; `Retry-After: 1`.',
  },
  TENANT_REQUIRED: {
    example: new AppError(409, ErrorCode.TENANT_REQUIRED, 'You are a member of several tenants: sign in again with X-Tenant-Id set to one of details.tenants', { tenants: [{ id: SAMPLE_ID, name: 'Acme' }] }),
    description: 'A sign-in (passkey) by a person with several memberships without `X-Tenant-Id`: `details.tenants` lists them.',
  },
  GONE: {
    example: new GoneError('Event evt_64b7f0c2a1b2c3d4e5f60718 is older than the event log keeps (30 days): read the current state, then stream without Last-Event-ID', { last_event_id: 'evt_64b7f0c2a1b2c3d4e5f60718', retention_days: 30 }),
    description: 'A stream resumed from an event older than the event log keeps.',
  },
  ETAG_MISMATCH: { example: new EtagMismatchError(), description: '`If-Match` does not match the current revision.' },
  PAYLOAD_TOO_LARGE: { example: new AppError(413, ErrorCode.PAYLOAD_TOO_LARGE, 'Request body is too large'), description: 'The body is above `BODY_LIMIT`; an uploaded file above `FILES_MAX_BYTES` or over its tenant\'s quota.' },
  URI_TOO_LONG: { example: new AppError(414, ErrorCode.URI_TOO_LONG, 'Request URL is too long'), description: 'The request target is above `MAX_URL_LENGTH`.' },
  UNSUPPORTED_MEDIA_TYPE: { example: new UnsupportedMediaTypeError('Unsupported content type'), description: 'A non-empty body that is not JSON; an uploaded file whose bytes disagree with its declared type or whose type is not allowed.' },
  VALIDATION_ERROR: {
    example: new ValidationError([{ loc: ['body', 'email'], msg: 'Invalid email address', type: 'invalid_format' }]),
    description: 'Schema or domain validation failed (`details.errors` lists every problem).',
  },
  IDEMPOTENCY_KEY_REUSED: {
    example: new AppError(422, ErrorCode.IDEMPOTENCY_KEY_REUSED, 'This Idempotency-Key was used with a different request', { header: 'Idempotency-Key' }),
    description: 'An `Idempotency-Key` already used by this actor for a different request (method, path, query or body).',
  },
  CASCADE_DENY: {
    example: new CascadeDenyError({ resource: 'customer', item_id: SAMPLE_ID, referenced_by: 'order', count: 2 }),
    description: 'A delete was denied by a cascade rule.',
  },
  ETAG_REQUIRED: { example: new EtagRequiredError(), description: 'This mutation requires an `If-Match` header.' },
  RATE_LIMITED: { example: new RateLimitedError(30), description: 'The rate limiter triggered; retry after `Retry-After` seconds.' },
  HEADERS_TOO_LARGE: { example: new AppError(431, ErrorCode.HEADERS_TOO_LARGE, 'Request headers are too large'), description: 'Request line plus headers above `MAX_HEADER_SIZE`.' },
  INTERNAL_ERROR: {
    example: new AppError(500, ErrorCode.INTERNAL_ERROR, 'Internal server error'),
    description: 'Unexpected failure; the message is generic and the cause is logged server-side under `request_id`.',
  },
  SERVICE_UNAVAILABLE: { example: new ServiceUnavailableError(), description: 'A dependency (the database) does not answer.' },
  QUERY_TIMEOUT: {
    example: new AppError(503, ErrorCode.QUERY_TIMEOUT, 'The query took too long; narrow the filter and retry'),
    description: 'A list or count query ran longer than `QUERY_TIMEOUT_MS`.',
  },
};

/** 409 `TENANT_REQUIRED`: a person with several memberships signs in again with `X-Tenant-Id` set to one of `details.tenants`. */
export class TenantRequiredError extends AppError {
  constructor(tenants: { id: string; name: string | null }[]) {
    super(409, ErrorCode.TENANT_REQUIRED, 'You are a member of several tenants: sign in again with X-Tenant-Id set to one of details.tenants', { tenants });
  }
}

/** Codes a plugin's errors carry beyond the kernel's, each with an example and when it is answered. */
export type ErrorCodes = Readonly<Record<string, ErrorCodeDoc>>;

/** One code of the catalogue, with the plugin that declared it (absent: the kernel's). */
export interface CatalogueEntry extends ErrorCodeDoc {
  code: string;
  plugin?: string;
}

/** The kernel's codes as catalogue entries (a catalogue with no plugin codes). */
export const KERNEL_CODES: readonly CatalogueEntry[] = Object.entries(ERROR_CATALOGUE).map(([code, d]) => ({ code, ...d }));

/** Every code a client can meet on this app: the kernel's, then each plugin's in set-up order. */
export class ErrorCatalogue {
  private readonly entries: CatalogueEntry[] = [...KERNEL_CODES];

  /** @returns null when accepted, else why not (a malformed or already declared code, an example of another code) */
  add(codes: ErrorCodes, plugin: string): string | null {
    for (const [code, d] of Object.entries(codes)) {
      if (!/^[A-Z][A-Z0-9_]*$/.test(code)) return `Error code "${code}" of plugin "${plugin}" is not SCREAMING_SNAKE_CASE`;
      if (!(d.example instanceof AppError) || d.example.code !== code) return `Error code "${code}" of plugin "${plugin}" needs an AppError example carrying that code`;
      const taken = this.entries.find((e) => e.code === code);
      if (taken) return `Error code "${code}" of plugin "${plugin}" is already declared by ${taken.plugin ? `plugin "${taken.plugin}"` : 'the kernel'}`;
      this.entries.push({ code, ...d, plugin });
    }
    return null;
  }

  /** Every code, ordered by the status of its example (the kernel's first within a status). */
  all(): readonly CatalogueEntry[] {
    return [...this.entries].sort((a, b) => a.example.status - b.example.status);
  }
}
