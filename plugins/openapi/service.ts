/**
 * OpenAPI 3.1 generation from the kernel's route table.
 *
 * Input: the `RouteDef`s every plugin contributed (zod schemas for `params`, `query`, `body` and
 * `response`, plus `auth`, `features`, `status` and the free-form `docs`). Output: a plain,
 * JSON-serialisable OpenAPI 3.1 document. No Koa here: `index.ts` only serves the result.
 *
 * Schemas are converted with zod 4's own `z.toJSONSchema` (JSON Schema 2020-12, the dialect of
 * OpenAPI 3.1). `$defs` it emits (recursive or `.meta({ id })` schemas) are moved to
 * `components.schemas`, because a `#/$defs/...` reference would resolve against the root of the
 * OpenAPI document.
 */
import { STATUS_CODES } from 'node:http';
import type { oas31 } from 'openapi3-ts';
import { z } from 'zod';
import { ErrorCode } from '../../core/errors.ts';
import type { HttpMethod, RouteAuth, RouteDef } from '../../core/http/route.ts';
import type { Logger } from '../../core/logger.ts';

/** A JSON Schema (2020-12) object, as OpenAPI 3.1 embeds it. */
export type JsonSchema = oas31.SchemaObject;

/** A schema as `z.toJSONSchema` returns it: with its dialect and local definitions. */
type RawJsonSchema = JsonSchema & { $schema?: string; $defs?: Record<string, JsonSchema> };

/** A route as `KernelView.routes()` lists it. */
export type DocumentedRoute = RouteDef & { plugin: string };

/** `{ $ref }` to a component of the same document. */
export type Reference = oas31.ReferenceObject;

export type ParameterObject = oas31.ParameterObject;
export type HeaderObject = oas31.HeaderObject;
export type ResponseObject = oas31.ResponseObject;
export type RequestBodyObject = oas31.RequestBodyObject;

/** An operation (`openapi3-ts` types) with `x-` extensions naming the route's plugin and guards. */
export interface OperationObject extends oas31.OperationObject {
  operationId: string;
  tags: string[];
  /** Always inline here. */
  requestBody?: RequestBodyObject;
  /** By status code, ascending: the success response first, then the errors. */
  responses: oas31.ResponsesObject;
  /** Name of the plugin that contributed the route. */
  'x-plugin'?: string;
  /** The route's `auth` level. */
  'x-auth'?: RouteAuth;
  /** Features the caller must hold. */
  'x-features'?: string[];
}

/** Operations by lower-case method. */
export type PathItemObject = Partial<Record<Lowercase<HttpMethod>, OperationObject>>;
/** `info` of the document; the plugin fills it from package.json. */
export type OpenApiInfo = oas31.InfoObject;

/** The generated document: OpenAPI 3.1 (types of the `openapi3-ts` package) with every component map present. */
export interface OpenApiDocument extends oas31.OpenAPIObject {
  openapi: '3.1.0';
  tags: oas31.TagObject[];
  paths: Record<string, PathItemObject>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, ResponseObject>;
    parameters: Record<string, ParameterObject>;
    headers: Record<string, HeaderObject>;
    securitySchemes: Record<string, oas31.SecuritySchemeObject>;
  };
}

/** Options of {@link buildOpenApiDocument}. */
export interface BuildOptions {
  info: OpenApiInfo;
  /**
   * Whether the rate limiter runs (`RATE_LIMIT_ENABLED`): routes not `rateLimitExempt` then list
   * 429 (with `Retry-After`) and `RateLimit-*` headers on their success response.
   * @default true
   */
  rateLimitEnabled?: boolean;
  /** Document `POST /graphql` (mounted by the kernel, so absent from the route table). @default true */
  graphql?: boolean;
  /**
   * Media types of the success body by `"METHOD /koa/path"`, for the rare route that answers
   * something other than JSON (an HTML page, a file). `RouteDef` has no field for it.
   * @default ['application/json'] for every route
   */
  successMediaTypes?: Record<string, string[]>;
  /** Receives conversion problems (`warn`; the schema is documented as `{}`) and routes left out (`error`). */
  log?: Pick<Logger, 'warn' | 'error'>;
}

/** Security requirement of every non-public route: an API key or a bearer token. */
const AUTH_SECURITY: readonly Readonly<Record<string, string[]>>[] = [{ ApiKeyAuth: [] }, { BearerAuth: [] }];

const schemaRef = (name: string): Reference => ({ $ref: `#/components/schemas/${name}` });
const headerRef = (name: string): Reference => ({ $ref: `#/components/headers/${name}` });

/** How an error status is documented: component name, summary and the `error.code`s the server answers with. */
export interface ErrorStatusDoc {
  name: string;
  summary: string;
  codes: { code: ErrorCode; message: string; details?: Record<string, unknown> }[];
  note?: string;
}

/**
 * Error statuses of the spec's error table (and the kernel's own), with their `ErrorCode`s.
 * Domain errors may carry any status and code; a status listed in `docs.errors` but not here is
 * still documented, with the envelope and the reason phrase.
 */
const ERROR_STATUSES: Readonly<Record<number, ErrorStatusDoc>> = {
  400: {
    name: 'BadRequest', summary: 'Bad request',
    codes: [{ code: ErrorCode.BAD_REQUEST, message: 'Malformed JSON body' }],
    note: 'Malformed JSON body or query parameter, invalid `where` JSON, unknown operator, invalid cursor, invalid `X-Tenant-Id`.',
  },
  401: {
    name: 'Unauthorized', summary: 'Authentication required',
    codes: [{ code: ErrorCode.AUTH_REQUIRED, message: 'Authentication required' }],
    note: 'Missing or invalid credentials, or an expired token.',
  },
  403: {
    name: 'Forbidden', summary: 'Access denied',
    codes: [{ code: ErrorCode.ACCESS_DENIED, message: 'Access denied' }],
    note: 'A role, feature, attribute or tenant guard rejected the caller; `details.feature` names a missing feature.',
  },
  404: {
    name: 'NotFound', summary: 'Not found',
    codes: [{ code: ErrorCode.NOT_FOUND, message: 'item 64b7f0c2a1b2c3d4e5f60718 not found', details: { resource: 'item', item_id: '64b7f0c2a1b2c3d4e5f60718' } }],
    note: 'The id matches nothing (`details.resource`, `details.item_id`).',
  },
  405: { name: 'MethodNotAllowed', summary: 'Method not allowed', codes: [{ code: ErrorCode.METHOD_NOT_ALLOWED, message: 'Method not allowed' }] },
  409: {
    name: 'Conflict', summary: 'Conflict',
    codes: [{ code: ErrorCode.CONFLICT, message: 'A document with the same unique value already exists' }],
    note: 'Duplicate key or state conflict.',
  },
  412: {
    name: 'PreconditionFailed', summary: 'Precondition failed',
    codes: [{ code: ErrorCode.ETAG_MISMATCH, message: 'If-Match does not match the current revision' }],
    note: '`If-Match` does not match the current revision.',
  },
  413: { name: 'PayloadTooLarge', summary: 'Payload too large', codes: [{ code: ErrorCode.PAYLOAD_TOO_LARGE, message: 'Request body is too large' }] },
  415: { name: 'UnsupportedMediaType', summary: 'Unsupported media type', codes: [{ code: ErrorCode.UNSUPPORTED_MEDIA_TYPE, message: 'Unsupported content type' }] },
  422: {
    name: 'UnprocessableEntity', summary: 'Validation failed',
    codes: [
      {
        code: ErrorCode.VALIDATION_ERROR, message: 'Validation failed',
        details: { errors: [{ loc: ['body', 'email'], msg: 'Invalid email address', type: 'invalid_format' }] },
      },
      {
        code: ErrorCode.CASCADE_DENY, message: 'customer 64b7f0c2a1b2c3d4e5f60718 is still referenced by 2 order document(s)',
        details: { resource: 'customer', item_id: '64b7f0c2a1b2c3d4e5f60718', referenced_by: 'order', count: 2 },
      },
    ],
    note: 'Schema or domain validation failed (`details.errors` lists every problem), or a delete was denied by a cascade rule.',
  },
  428: {
    name: 'PreconditionRequired', summary: 'Precondition required',
    codes: [{ code: ErrorCode.ETAG_REQUIRED, message: 'This mutation requires an If-Match header' }],
    note: 'This mutation requires an `If-Match` header.',
  },
  429: {
    name: 'TooManyRequests', summary: 'Too many requests',
    codes: [{ code: ErrorCode.RATE_LIMITED, message: 'Too many requests', details: { retry_after: 30 } }],
    note: 'The rate limiter triggered; retry after `Retry-After` seconds.',
  },
  500: {
    name: 'InternalError', summary: 'Internal server error',
    codes: [{ code: ErrorCode.INTERNAL_ERROR, message: 'Internal server error' }],
    note: 'Unexpected failure; the message is generic and the cause is logged server-side under `request_id`.',
  },
  503: { name: 'ServiceUnavailable', summary: 'Service unavailable', codes: [{ code: ErrorCode.SERVICE_UNAVAILABLE, message: 'Service unavailable' }] },
};

/** Reserved by OpenAPI: a header parameter with one of these names is ignored, so none is emitted. */
const IGNORED_HEADER_PARAMS = new Set(['accept', 'content-type', 'authorization']);

/**
 * Koa-router path to an OpenAPI path template: `/items/:id` → `/items/{id}`.
 * Also returns the parameter names in order. An optional group (`{/:x}`, path-to-regexp 8) has no
 * OpenAPI equivalent: its braces are dropped (the long form is documented) and `optionalGroup` is set.
 */
export function toOpenApiPath(path: string): { path: string; params: string[]; optionalGroup: boolean } {
  const optionalGroup = /[{}]/.test(path);
  const params: string[] = [];
  const out = path.replace(/[{}]/g, '').replace(/[:*]([A-Za-z_$][\w$]*)/g, (_m, name: string) => {
    params.push(name);
    return `{${name}}`;
  });
  return { path: out, params, optionalGroup };
}

const pascal = (s: string): string =>
  s
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');

/**
 * Stable operationId from method and path only: `DELETE /admin/api-keys/:id` → `deleteAdminApiKeysById`,
 * `GET /` → `getRoot`.
 */
export function operationIdFor(method: string, koaPath: string): string {
  const { path } = toOpenApiPath(koaPath);
  const words = path
    .split('/')
    .filter(Boolean)
    .map((seg) => pascal(seg.replace(/\{([^}]+)\}/g, ' By $1 ')));
  return method.toLowerCase() + (words.join('') || 'Root');
}

const isRecord = (x: unknown): x is Record<string, unknown> => !!x && typeof x === 'object' && !Array.isArray(x);

/** JSON encodes dates as ISO strings; say so instead of `{}` (zod calls `z.date()` unrepresentable). */
const dateAsString = (ctx: { zodSchema: { _zod: { def: { type: string } } }; jsonSchema: JsonSchema }): void => {
  if (ctx.zodSchema._zod.def.type === 'date') {
    ctx.jsonSchema.type = 'string';
    ctx.jsonSchema.format = 'date-time';
  }
};

/** Replaces every `$ref` of a schema tree through `map` (exact `#` or a `#/$defs/<name>` prefix). */
function rewriteRefs(node: unknown, map: (ref: string) => string): unknown {
  if (Array.isArray(node)) return node.map((x) => rewriteRefs(x, map));
  if (!isRecord(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === '$ref' && typeof v === 'string' ? map(v) : rewriteRefs(v, map);
  return out;
}

function hasRef(node: unknown, ref: string): boolean {
  if (Array.isArray(node)) return node.some((x) => hasRef(x, ref));
  if (!isRecord(node)) return false;
  return Object.entries(node).some(([k, v]) => (k === '$ref' ? v === ref : hasRef(v, ref)));
}

/**
 * Builds the whole document. Pure apart from `log`: the same routes give the same document.
 *
 * @example
 * const doc = buildOpenApiDocument(kernel.routes(), { info: { title: 'api', version: '1.0.0' } });
 */
export function buildOpenApiDocument(routes: readonly DocumentedRoute[], opts: BuildOptions): OpenApiDocument {
  return new DocumentBuilder(opts).build(routes);
}

class DocumentBuilder {
  private readonly doc: OpenApiDocument;
  private readonly operationIds = new Set<string>();
  private readonly rateLimited: boolean;

  constructor(private readonly opts: BuildOptions) {
    this.rateLimited = opts.rateLimitEnabled ?? true;
    this.doc = {
      openapi: '3.1.0',
      info: opts.info,
      tags: [],
      paths: {},
      components: {
        schemas: { ErrorEnvelope: errorEnvelopeSchema(), ValidationIssue: validationIssueSchema() },
        responses: {},
        parameters: {
          TenantId: {
            name: 'X-Tenant-Id', in: 'header', required: false,
            description: 'System administrators only: act within this tenant (24-hex object id). Ignored for other callers.',
            schema: { type: 'string', pattern: '^[0-9a-fA-F]{24}$' },
          },
        },
        headers: {
          'X-Request-Id': {
            description: 'Correlation id: echoed from the request header `X-Request-Id` when valid, else generated. Equals `request_id` of an error envelope.',
            schema: { type: 'string' },
          },
          'Retry-After': { description: 'Seconds to wait before retrying.', required: true, schema: { type: 'integer', minimum: 1 } },
          'RateLimit-Limit': { description: 'Requests allowed per window.', schema: { type: 'integer' } },
          'RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer' } },
          'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' } },
        },
        securitySchemes: {
          ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An API key issued by `POST /admin/api-keys`.' },
          BearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A token issued by `POST /auth/token`.' },
        },
      },
    };
  }

  build(routes: readonly DocumentedRoute[]): OpenApiDocument {
    const tags = new Set<string>();
    for (const route of routes) {
      try {
        this.operation(route).tags.forEach((t) => tags.add(t));
      } catch (err) {
        // A generator bug must not take the server down with it: the route is left out, loudly.
        this.opts.log?.error({ err, route: `${route.method} ${route.path}`, plugin: route.plugin }, 'openapi: route could not be documented; left out');
      }
    }
    if ((this.opts.graphql ?? true) && !this.doc.paths['/graphql']?.post) {
      this.doc.paths['/graphql'] = { ...this.doc.paths['/graphql'], post: this.graphqlOperation() };
      tags.add('graphql');
    }
    this.doc.tags = [...tags].sort().map((name) => ({ name }));
    return this.doc;
  }

  private warn(obj: object, msg: string): void {
    this.opts.log?.warn(obj, `openapi: ${msg}`);
  }

  private operation(route: DocumentedRoute): OperationObject {
    const where = `${route.method} ${route.path}`;
    const converted = toOpenApiPath(route.path);
    if (converted.optionalGroup) this.warn({ route: where }, 'optional path groups cannot be expressed; documenting the long form');

    let operationId = operationIdFor(route.method, route.path);
    if (this.operationIds.has(operationId)) {
      let n = 2;
      while (this.operationIds.has(`${operationId}_${n}`)) n++;
      this.warn({ route: where, operationId }, `operationId collides; using ${operationId}_${n}`);
      operationId = `${operationId}_${n}`;
    }
    this.operationIds.add(operationId);
    const base = operationId[0]!.toUpperCase() + operationId.slice(1);
    const auth = route.auth ?? 'user';

    const parameters: (ParameterObject | Reference)[] = [
      ...this.pathParameters(route, converted.params, where, base),
      ...(route.query ? this.queryParameters(route.query, where, base) : []),
      ...this.headerParameters(route, where),
    ];
    if (auth !== 'public') parameters.push({ $ref: '#/components/parameters/TenantId' });

    const op: OperationObject = {
      operationId,
      ...(route.summary ? { summary: route.summary } : {}),
      ...describe(route, auth),
      tags: route.tags?.length ? [...route.tags] : [route.plugin],
      ...(parameters.length ? { parameters } : {}),
      ...(route.body ?? route.docs?.body ? { requestBody: this.requestBody((route.body ?? route.docs?.body)!, where, base) } : {}),
      responses: this.responses(route, auth, where, base),
      ...(auth !== 'public' ? { security: AUTH_SECURITY.map((s) => ({ ...s })) } : {}),
      'x-plugin': route.plugin,
      'x-auth': auth,
      ...(route.features?.length ? { 'x-features': [...route.features] } : {}),
    };
    const item = (this.doc.paths[converted.path] ??= {});
    item[route.method.toLowerCase() as Lowercase<HttpMethod>] = op;
    return op;
  }

  private pathParameters(route: DocumentedRoute, names: string[], where: string, base: string): ParameterObject[] {
    const properties = route.params ? this.objectShape(route.params, where, `${base}Params`).properties : {};
    for (const name of Object.keys(properties)) {
      if (!names.includes(name)) this.warn({ route: where, param: name }, 'params schema names a parameter the path lacks; ignored');
    }
    return names.map((name) => ({ ...this.parameter(name, 'path', properties[name] ?? { type: 'string' }), required: true }));
  }

  private queryParameters(schema: z.ZodType, where: string, base: string): ParameterObject[] {
    const { properties, required, json } = this.objectShape(schema, where, `${base}Query`);
    const params = Object.entries(properties).map(([name, s]) => ({ ...this.parameter(name, 'query', s), required: required.has(name) }));
    const extra = json.additionalProperties;
    const freeForm = json.type !== 'object' || (extra !== undefined && extra !== false);
    if (freeForm) {
      // OpenAPI's way to say "any further name=value pair": one exploded form-style object parameter.
      const name = properties.filters ? '_filters' : 'filters';
      params.push({
        name, in: 'query', required: false, style: 'form', explode: true,
        description: 'Any further `name=value` query parameter this route accepts (free-form; the parameter name itself is not sent).',
        schema: { type: 'object', additionalProperties: isRecord(extra) ? extra : true },
      });
    }
    return params;
  }

  private headerParameters(route: DocumentedRoute, where: string): ParameterObject[] {
    const out: ParameterObject[] = [];
    for (const [name, h] of Object.entries(route.docs?.headers ?? {})) {
      if (IGNORED_HEADER_PARAMS.has(name.toLowerCase())) {
        this.warn({ route: where, header: name }, 'OpenAPI ignores this header as a parameter; not documented');
        continue;
      }
      out.push({ name, in: 'header', required: h.required ?? false, description: h.description, schema: { type: 'string' } });
    }
    return out;
  }

  /** One parameter from a property schema; its `description`/`deprecated` move to the parameter. */
  private parameter(name: string, where: 'path' | 'query', propSchema: JsonSchema): ParameterObject {
    const { description, deprecated, ...schema } = propSchema;
    return {
      name, in: where, required: false,
      ...(typeof description === 'string' ? { description } : {}),
      ...(deprecated === true ? { deprecated: true } : {}),
      schema,
    };
  }

  /** Properties and required names of an object schema (input side: defaults make a field optional). */
  private objectShape(schema: z.ZodType, where: string, name: string) {
    const json = this.deref(this.convert(schema, 'input', where, name));
    const properties = isRecord(json.properties) ? (json.properties as Record<string, JsonSchema>) : {};
    const required = new Set(Array.isArray(json.required) ? (json.required as string[]) : []);
    return { json, properties, required };
  }

  private requestBody(schema: z.ZodType, where: string, base: string): RequestBodyObject {
    // The body parser hands `{}` to the route when no body is sent.
    let required = true;
    try {
      required = !schema.safeParse({}).success;
    } catch {
      // async refinements cannot run synchronously: keep "required"
    }
    return { required, content: { 'application/json': { schema: this.convert(schema, 'input', where, `${base}Body`) } } };
  }

  private responses(route: DocumentedRoute, auth: RouteAuth, where: string, base: string): Record<string, ResponseObject | Reference> {
    const limited = this.rateLimited && !route.rateLimitExempt;
    const status = route.status ?? 200;
    const headers: Record<string, HeaderObject | Reference> = { 'X-Request-Id': headerRef('X-Request-Id') };
    if (limited) for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) headers[h] = headerRef(h);
    for (const [name, description] of Object.entries(route.docs?.responseHeaders ?? {})) headers[name] = { description, schema: { type: 'string' } };

    const success: ResponseObject = { description: STATUS_CODES[status] ?? 'Success', headers };
    if (status !== 204 && status !== 304) {
      const mediaTypes = this.opts.successMediaTypes?.[where] ?? ['application/json'];
      const schema: JsonSchema | Reference = route.response
        ? this.convert(route.response, 'output', where, `${base}Response`)
        : mediaTypes.some((m) => m.includes('json'))
          ? { type: 'object' }
          : { type: 'string' };
      success.content = Object.fromEntries(mediaTypes.map((m) => [m, { schema }]));
    }

    const errors = new Set<number>([400, 422, 500]);
    if (limited) errors.add(429);
    if (auth !== 'public') {
      errors.add(401);
      errors.add(403);
    }
    if (route.features?.length) errors.add(403);
    if (route.body ?? route.docs?.body) errors.add(413);
    for (const s of route.docs?.errors ?? []) {
      if (Number.isInteger(s) && s >= 400 && s <= 599) errors.add(s);
      else this.warn({ route: where, status: s }, 'docs.errors lists a status that is not an error status; ignored');
    }

    const out: Record<string, ResponseObject | Reference> = { [String(status)]: success };
    for (const s of [...errors].sort((a, b) => a - b)) {
      out[String(s)] = s === 403 && route.features?.length ? this.featureForbidden(route.features) : this.errorResponseRef(s);
    }
    return out;
  }

  /** 403 of a feature-guarded route: the shared one plus the feature names. */
  private featureForbidden(features: string[]): ResponseObject {
    const shared = this.errorResponse(403);
    const list = features.map((f) => `\`${f}\``).join(', ');
    return { ...shared, description: `${shared.description} Requires feature(s) ${list}; \`details.feature\` names the missing one.` };
  }

  /** `$ref` to the shared response of an error status, creating the component on first use. */
  private errorResponseRef(status: number): Reference {
    const name = ERROR_STATUSES[status]?.name ?? `Error${status}`;
    this.doc.components.responses[name] ??= this.errorResponse(status);
    return { $ref: `#/components/responses/${name}` };
  }

  private errorResponse(status: number): ResponseObject {
    const known = ERROR_STATUSES[status];
    const headers: Record<string, HeaderObject | Reference> = { 'X-Request-Id': headerRef('X-Request-Id') };
    if (status === 429) {
      headers['Retry-After'] = headerRef('Retry-After');
      for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) headers[h] = headerRef(h);
    }
    if (!known) {
      return {
        description: `${STATUS_CODES[status] ?? 'Error'}. \`error.code\`: a domain-specific code.`,
        headers,
        content: { 'application/json': { schema: schemaRef('ErrorEnvelope') } },
      };
    }
    const codes = known.codes.map((c) => `\`${c.code}\``).join(' or ');
    const example = (c: ErrorStatusDoc['codes'][number]) => ({
      summary: c.code,
      value: { error: { code: c.code, message: c.message, details: c.details ?? {} }, request_id: '3f1c2b0e-7f5d-4c1e-9a43-0d2b6f1e8a77' },
    });
    return {
      description: `${known.summary}: \`error.code\` ${codes}.${known.note ? ` ${known.note}` : ''}`,
      headers,
      content: {
        'application/json': {
          schema: schemaRef('ErrorEnvelope'),
          examples: Object.fromEntries(known.codes.map((c) => [c.code, example(c)])),
        },
      },
    };
  }

  private graphqlOperation(): OperationObject {
    const schemas = this.doc.components.schemas;
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
    if (this.rateLimited) for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) headers[h] = headerRef(h);
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
      401: this.errorResponseRef(401),
      413: this.errorResponseRef(413),
    };
    if (this.rateLimited) responses[429] = this.errorResponseRef(429);
    responses[500] = this.errorResponseRef(500);
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

  /**
   * zod → JSON Schema 2020-12 with `$defs` hoisted to `components.schemas`. Never throws: a schema
   * that cannot be converted is documented as `{}` (any value) and logged.
   */
  private convert(schema: z.ZodType, io: 'input' | 'output', where: string, name: string): JsonSchema | Reference {
    let raw: RawJsonSchema;
    try {
      raw = z.toJSONSchema(schema, { io, unrepresentable: 'any', override: dateAsString as never }) as RawJsonSchema;
    } catch (err) {
      this.warn({ route: where, part: name, err }, 'zod schema could not be converted; documented as {}');
      return {};
    }
    return this.hoist(raw, name, io);
  }

  private hoist(raw: RawJsonSchema, name: string, io: 'input' | 'output'): JsonSchema | Reference {
    const { $schema: _dialect, $defs, ...root } = raw;
    const defs = isRecord($defs) ? ($defs as Record<string, JsonSchema>) : {};
    const selfRef = hasRef(raw, '#');
    if (!Object.keys(defs).length && !selfRef) return root;

    const schemas = this.doc.components.schemas;
    const names = new Map<string, string>();
    const rootName = selfRef ? this.freeName(name) : undefined;
    // Named (`.meta({ id })`) defs keep their id, anonymous ones (`__schema0`) get the route's name.
    for (const key of Object.keys(defs)) names.set(key, /^__schema\d+$/.test(key) ? this.freeName(`${name}_${key.slice(2)}`) : key);
    const map = (ref: string): string => {
      if (ref === '#') return `#/components/schemas/${rootName}`;
      const m = /^#\/\$defs\/([^/]+)(.*)$/.exec(ref);
      const target = m ? names.get(m[1]!) : undefined;
      return m && target ? `#/components/schemas/${target}${m[2]}` : ref;
    };
    // The same id can convert differently (input vs output side, e.g. a default): never overwrite.
    for (const [key, def] of Object.entries(defs)) {
      const wanted = names.get(key)!;
      const body = rewriteRefs(def, map) as JsonSchema;
      const existing = schemas[wanted];
      if (existing && JSON.stringify(existing) !== JSON.stringify(body)) {
        const alt = this.freeName(`${wanted}${io === 'input' ? 'Input' : 'Output'}`, body);
        names.set(key, alt);
      }
    }
    for (const [key, def] of Object.entries(defs)) schemas[names.get(key)!] ??= rewriteRefs(def, map) as JsonSchema;
    const rewritten = rewriteRefs(root, map) as JsonSchema;
    if (!rootName) return rewritten;
    schemas[rootName] = rewritten;
    return schemaRef(rootName);
  }

  /** A component name not yet taken (or taken by an identical schema when `same` is given). */
  private freeName(wanted: string, same?: JsonSchema): string {
    const schemas = this.doc.components.schemas;
    const ok = (n: string) => !schemas[n] || (same !== undefined && JSON.stringify(schemas[n]) === JSON.stringify(same));
    if (ok(wanted)) return wanted;
    let n = 2;
    while (!ok(`${wanted}_${n}`)) n++;
    return `${wanted}_${n}`;
  }

  /** Follows one `$ref` into `components.schemas` (a hoisted recursive root). */
  private deref(schema: JsonSchema | Reference): JsonSchema {
    const ref = schema.$ref;
    const target = ref?.startsWith('#/components/schemas/') ? this.doc.components.schemas[ref.slice('#/components/schemas/'.length)] : undefined;
    // SchemaObject allows `$ref` too: an unresolvable reference stays as it is.
    return target ?? (schema as JsonSchema);
  }
}

/** `description` of an operation: the route's own text plus who may call it. */
function describe(route: DocumentedRoute, auth: RouteAuth): { description?: string } {
  const who: Record<RouteAuth, string> = {
    public: '',
    user: 'Requires an authenticated caller (API key or bearer token).',
    admin: 'Requires role `admin` (tenant administrators) or a system administrator.',
    system: 'System administrators only.',
  };
  const features = route.features?.length ? `Requires feature(s) ${route.features.map((f) => `\`${f}\``).join(', ')}.` : '';
  const text = [route.description, [who[auth], features].filter(Boolean).join(' ')].filter(Boolean).join('\n\n');
  return text ? { description: text } : {};
}

function errorEnvelopeSchema(): JsonSchema {
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
              errors: { type: 'array', description: '422 `VALIDATION_ERROR` only: every problem found.', items: schemaRef('ValidationIssue') },
            },
          },
        },
      },
      request_id: { type: 'string', description: 'Correlation id, also in the `X-Request-Id` response header.' },
    },
  };
}

function validationIssueSchema(): JsonSchema {
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
