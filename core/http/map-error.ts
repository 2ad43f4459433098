import { isDatabaseSocketError } from '../db-sockets.ts';
import { AppError, BadRequestError, ConflictError, ErrorCode, ServiceUnavailableError, ValidationError } from '../errors.ts';

interface MongooseValidationLike {
  name: 'ValidationError';
  errors: Record<string, { path: string; message: string; kind?: string }>;
}

/**
 * Classify an error thrown anywhere below a request. Returns the AppError a client may see, or
 * null for an unexpected failure (which is logged and masked as 500 INTERNAL_ERROR).
 * `loc` prefixes the paths of a mongoose validation error (e.g. `['body', 3]` for a bulk item).
 */
export function toAppError(err: unknown, loc: readonly (string | number)[] = ['body']): AppError | null {
  if (err instanceof AppError) return err;
  if (!err || typeof err !== 'object') return null;
  const e = err as { name?: string; code?: unknown; errno?: unknown; status?: unknown; statusCode?: unknown; type?: string; expose?: boolean; message?: string };
  if (e.code === 11000 || e.code === 11001) return new ConflictError('A document with the same unique value already exists');
  // MaxTimeMSExpired: a list/count ran past QUERY_TIMEOUT_MS (typically an expensive regex or filter).
  if (e.code === 50) return new AppError(503, ErrorCode.QUERY_TIMEOUT, 'The query took too long; narrow the filter and retry');
  if (isDatabaseUnavailable(e)) return new ServiceUnavailableError('The database is unavailable; retry shortly');
  if (e.name === 'ValidationError' && 'errors' in e) {
    const ve = err as MongooseValidationLike;
    return new ValidationError(
      Object.values(ve.errors).map((x) => ({ loc: [...loc, ...x.path.split('.')], msg: x.message, type: x.kind ?? 'invalid' })),
    );
  }
  if (e.name === 'CastError' || e.name === 'BSONError' || e.name === 'StrictModeError') {
    return new BadRequestError(e.name === 'CastError' ? 'A value could not be cast to the field type' : 'Invalid value', {});
  }
  // Query casting of an operator the field type lacks, e.g. `budget__regex=1` on a Number field.
  // mongoose throws a MongooseError or a plain Error here, depending on the schema type.
  if ((e.name === 'MongooseError' || e.name === 'Error') && /^Can't use \$\w+( with \w+)?\.?$/.test(e.message ?? '')) return new BadRequestError(e.message!, {});
  // A request body sent with Content-Encoding gzip/deflate/br that does not decompress: the body
  // parser (co-body → inflation → raw-body) passes zlib's own error on, without a status.
  // zlib codes are Z_* (Z_DATA_ERROR, Z_BUF_ERROR for a truncated stream), brotli's ERR__ERROR_*.
  if (typeof e.errno === 'number' && typeof e.code === 'string' && /^(Z_|ERR__ERROR_)/.test(e.code)) {
    return new BadRequestError('Request body does not match its Content-Encoding (corrupt or truncated compressed data)');
  }
  // http-errors raised by the body parser and router (`expose` is only true for 4xx).
  const status = typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  if (status && status >= 400 && status < 500 && e.expose !== false) {
    if (status === 400 && (e.type === 'entity.parse.failed' || /JSON/i.test(e.message ?? ''))) return new BadRequestError('Malformed JSON body', jsonErrorDetails(e));
    return new AppError(status, HTTP_CODES[status] ?? ErrorCode.BAD_REQUEST, STATUS_MESSAGES[status] ?? e.message ?? 'Bad request');
  }
  return null;
}

/**
 * What the JSON parser refused and where: its message without the excerpt of the body V8 appends
 * (`, "<body>"... is not valid JSON`), and, when it names one, the position with its line and column.
 * The body itself is never echoed.
 */
function jsonErrorDetails(e: { message?: string; body?: unknown }): Record<string, unknown> {
  const reason = (e.message ?? '').replace(/, .*is not valid JSON$/s, '').replace(/ \(line \d+ column \d+\)$/, '').slice(0, 200);
  const at = /at position (\d+)/.exec(reason);
  if (!at) return { reason };
  const position = Number(at[1]);
  const before = typeof e.body === 'string' ? e.body.slice(0, position) : undefined;
  if (before === undefined) return { reason, position };
  const lines = before.split('\n');
  return { reason, position, line: lines.length, column: lines.at(-1)!.length + 1 };
}

/**
 * The driver lost the database (network error, no server selectable within the time-out, a pool
 * cleared by a failed connection, a client closed on shutdown). The request may succeed once the
 * database is back: 503, not a masked 500. Also what the event relay retries (audit entries ride on it).
 */
const UNAVAILABLE = new Set([
  'MongoNetworkError', 'MongoNetworkTimeoutError', 'MongoServerSelectionError', 'MongooseServerSelectionError', 'MongoNotConnectedError',
  'MongoPoolClearedError', 'MongoServerClosedError', 'MongoTopologyClosedError', 'MongoClientClosedError', 'MongoOperationTimeoutError',
]);
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = (err ?? {}) as { name?: string; message?: string; errorResponse?: unknown };
  // A bulk write (insertMany) wraps the network error it met.
  if (e.name === 'MongoBulkWriteError' && e.errorResponse !== err && isDatabaseUnavailable(e.errorResponse)) return true;
  // Node's own error of a database socket the peer closed (EPIPE), which the driver passes on unwrapped.
  if (isDatabaseSocketError(err)) return true;
  // mongoose's own wait for a connection (only if command buffering is on for a model).
  return UNAVAILABLE.has(e.name ?? '') || (e.name === 'MongooseError' && /buffering timed out/.test(e.message ?? ''));
}

/** Codes for client errors raised by libraries (body parser, router) rather than by our code. */
const HTTP_CODES: Record<number, string> = {
  400: ErrorCode.BAD_REQUEST,
  401: ErrorCode.AUTH_REQUIRED,
  403: ErrorCode.ACCESS_DENIED,
  404: ErrorCode.NOT_FOUND,
  405: ErrorCode.METHOD_NOT_ALLOWED,
  409: ErrorCode.CONFLICT,
  408: ErrorCode.REQUEST_TIMEOUT,
  413: ErrorCode.PAYLOAD_TOO_LARGE,
  414: ErrorCode.URI_TOO_LONG,
  415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
  429: ErrorCode.RATE_LIMITED,
};
const STATUS_MESSAGES: Record<number, string> = {
  413: 'Request body is too large',
  415: 'Unsupported content type',
  414: 'Request URL is too long',
};
