/**
 * The shared parts of the document: the error envelope and the error responses (derived from
 * core's error catalogue), security, and the `POST /graphql` operation.
 */
import { STATUS_CODES } from 'node:http';
import { ErrorCode, type AppError, type CatalogueEntry } from '../../core/errors.ts';
import { schemaRef } from './json-schema.ts';
import type { HeaderObject, JsonSchema, OperationObject, Reference, ResponseObject } from './types.ts';

/** Security requirement of every non-public route: an API key or a bearer token. */
export const AUTH_SECURITY: readonly Readonly<Record<string, string[]>>[] = [{ ApiKeyAuth: [] }, { BearerAuth: [] }];

export const headerRef = (name: string): Reference => ({ $ref: `#/components/headers/${name}` });

/** Component name (`#/components/responses/<name>`) and summary of an error status; others are `Error<status>`. */
const ERROR_RESPONSES: Readonly<Record<number, { name: string; summary: string }>> = {
  400: { name: 'BadRequest', summary: 'Bad request' },
  401: { name: 'Unauthorized', summary: 'Authentication required' },
  403: { name: 'Forbidden', summary: 'Access denied' },
  404: { name: 'NotFound', summary: 'Not found' },
  405: { name: 'MethodNotAllowed', summary: 'Method not allowed' },
  409: { name: 'Conflict', summary: 'Conflict' },
  412: { name: 'PreconditionFailed', summary: 'Precondition failed' },
  413: { name: 'PayloadTooLarge', summary: 'Payload too large' },
  415: { name: 'UnsupportedMediaType', summary: 'Unsupported media type' },
  422: { name: 'UnprocessableEntity', summary: 'Validation failed' },
  428: { name: 'PreconditionRequired', summary: 'Precondition required' },
  429: { name: 'TooManyRequests', summary: 'Too many requests' },
  500: { name: 'InternalError', summary: 'Internal server error' },
  503: { name: 'ServiceUnavailable', summary: 'Service unavailable' },
};

/** Name of the shared response component of an error status. */
export const errorResponseName = (status: number): string => ERROR_RESPONSES[status]?.name ?? `Error${status}`;


/**
 * The shared response of an error status: every catalogue code answered with it, what each
 * means, and an example envelope per code. A status without catalogue codes is documented with
 * the envelope and its reason phrase.
 */
export function errorResponse(status: number, catalogue: readonly CatalogueEntry[]): ResponseObject {
  const codes = catalogue.filter((c) => c.example.status === status);
  const headers: Record<string, HeaderObject | Reference> = { 'X-Request-Id': headerRef('X-Request-Id') };
  if (status === 429) {
    headers['Retry-After'] = headerRef('Retry-After');
    for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) headers[h] = headerRef(h);
  }
  if (!codes.length) {
    return {
      description: `${STATUS_CODES[status] ?? 'Error'}. \`error.code\`: a domain-specific code.`,
      headers,
      content: { 'application/json': { schema: schemaRef('ErrorEnvelope') } },
    };
  }
  const summary = ERROR_RESPONSES[status]?.summary ?? STATUS_CODES[status] ?? 'Error';
  const names = codes.map((c) => `\`${c.code}\``).join(' or ');
  const when = codes.length === 1 ? codes[0]!.description : codes.map((c) => `\`${c.code}\`: ${c.description}`).join(' ');
  const example = (e: AppError) => ({
    summary: e.code,
    value: { error: { code: e.code, message: e.message, details: e.details }, request_id: '3f1c2b0e-7f5d-4c1e-9a43-0d2b6f1e8a77' },
  });
  return {
    description: `${summary}: \`error.code\` ${names}. ${when}`,
    headers,
    content: {
      'application/json': {
        schema: schemaRef('ErrorEnvelope'),
        examples: Object.fromEntries(codes.map((c) => [c.code, example(c.example)])),
      },
    },
  };
}

export function graphqlOperation(
  schemas: Record<string, JsonSchema>,
  rateLimited: boolean,
  errorRef: (status: number) => Reference,
): OperationObject {
  schemas.GraphQLRequest = {
    type: 'object',
    required: ['query'],
    properties: {
      query: { type: 'string', description: 'The GraphQL document.' },
      variables: { type: ['object', 'null'], additionalProperties: true },
      operationName: { type: ['string', 'null'] },
    },
  };
  schemas.GraphQLResponse = {
    type: 'object',
    properties: {
      data: { type: ['object', 'null'], additionalProperties: true },
      errors: {
        type: 'array',
        items: {
          type: 'object',
          required: ['message'],
          properties: {
            message: { type: 'string' },
            path: { type: 'array', items: { type: ['string', 'integer'] } },
            extensions: {
              type: 'object',
              description: 'Same codes as the REST error envelope.',
              properties: {
                code: { type: 'string' },
                status: { type: 'integer' },
                details: { type: 'object', additionalProperties: true },
                request_id: { type: 'string' },
              },
            },
          },
        },
      },
    },
  };
  const headers: Record<string, Reference> = { 'X-Request-Id': headerRef('X-Request-Id') };
  if (rateLimited) for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) headers[h] = headerRef(h);
  const responses: Record<string, ResponseObject | Reference> = {
    200: {
      description: 'Result. Resolver errors (including `AUTH_REQUIRED`, `ACCESS_DENIED`, `NOT_FOUND`) are reported in `errors[].extensions.code` with HTTP 200.',
      headers,
      content: { 'application/json': { schema: schemaRef('GraphQLResponse') } },
    },
    400: {
      description: 'A malformed JSON body (error envelope, `BAD_REQUEST`) or a GraphQL document that does not parse or validate (GraphQL `errors`).',
      headers: { 'X-Request-Id': headerRef('X-Request-Id') },
      content: { 'application/json': { schema: { oneOf: [schemaRef('ErrorEnvelope'), schemaRef('GraphQLResponse')] } } },
    },
    401: errorRef(401),
    413: errorRef(413),
  };
  if (rateLimited) responses[429] = errorRef(429);
  responses[500] = errorRef(500);
  return {
    operationId: 'postGraphql',
    summary: 'GraphQL endpoint',
    description:
      'Queries and mutations contributed by every plugin. A credential is optional at the transport level (fields that need a caller ' +
      'report `AUTH_REQUIRED` in `errors`), but a presented credential that is rejected answers 401 with the error envelope.',
    tags: ['graphql'],
    requestBody: { required: true, content: { 'application/json': { schema: schemaRef('GraphQLRequest') } } },
    responses,
    security: [{}, ...AUTH_SECURITY.map((s) => ({ ...s }))],
    'x-auth': 'public',
  };
}

export function errorEnvelopeSchema(): JsonSchema {
  return {
    type: 'object',
    description: 'Every failure answers with this envelope.',
    required: ['error', 'request_id'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'details'],
        properties: {
          code: {
            type: 'string',
            description: `Stable machine-readable code; clients branch on it. Core codes: ${Object.values(ErrorCode).join(', ')}; domain errors may use others.`,
          },
          message: { type: 'string', description: 'Human-readable text.' },
          details: {
            type: 'object',
            description: 'Context; may be empty.',
            additionalProperties: true,
            properties: {
              errors: {
                type: 'array',
                description:
                  'Every problem found: `ValidationIssue`s on a 422 `VALIDATION_ERROR` and on a 400 naming a query parameter; ' +
                  'the rejected items (`BulkItemError`) when every item of a bulk call failed.',
                items: { anyOf: [schemaRef('ValidationIssue'), schemaRef('BulkItemError')] },
              },
            },
          },
        },
      },
      request_id: { type: 'string', description: 'Correlation id, also in the `X-Request-Id` response header.' },
    },
  };
}

/** One rejected item of a bulk call (207 bodies and the error of a bulk call that rejected every item). */
export function bulkItemErrorSchema(): JsonSchema {
  return {
    type: 'object',
    required: ['index', 'error'],
    properties: {
      index: { type: 'integer', description: 'Position of the item in the request.' },
      id: { type: 'string', description: 'Id of the item, when it has one.' },
      error: {
        type: 'object',
        required: ['status', 'code', 'message', 'details'],
        properties: { status: { type: 'integer' }, code: { type: 'string' }, message: { type: 'string' }, details: { type: 'object', additionalProperties: true } },
      },
    },
  };
}

export function validationIssueSchema(): JsonSchema {
  return {
    type: 'object',
    required: ['loc', 'msg', 'type'],
    properties: {
      loc: { type: 'array', items: { type: ['string', 'integer'] }, description: 'Path of the offending value, starting with its source: `["body", "name"]`.' },
      msg: { type: 'string' },
      type: { type: 'string', description: 'Kind of problem, e.g. `invalid_type`, `too_big`, `unrecognized_keys`.' },
    },
  };
}
