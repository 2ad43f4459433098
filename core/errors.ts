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
 * (spec: "Domain errors may carry any status, code and details chosen by the raiser").
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

export class ValidationError extends AppError {
  constructor(errors: ValidationIssue[], message = 'Validation failed') {
    super(422, ErrorCode.VALIDATION_ERROR, message, { errors });
  }
}

export class RateLimitedError extends AppError {
  constructor(retryAfterSeconds: number) {
    super(429, ErrorCode.RATE_LIMITED, 'Too many requests', { retry_after: retryAfterSeconds });
    this.headers = { 'Retry-After': String(retryAfterSeconds) };
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
  issues: readonly { path: readonly PropertyKey[]; message: string; code: string; keys?: readonly string[] }[],
): ValidationIssue[] {
  const prefix = typeof source === 'string' ? [source] : source;
  return issues.flatMap((i) => {
    const loc = [...prefix, ...i.path.map((p) => (typeof p === 'number' ? p : String(p)))];
    if (i.code === 'unrecognized_keys' && i.keys?.length)
      return i.keys.map((k) => ({ loc: [...loc, k], msg: `Unrecognized key: "${k}"`, type: i.code }));
    return [{ loc, msg: i.message, type: i.code }];
  });
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
