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
import { webhooksOf, type DocumentedEventType } from './webhooks.ts';
import type { z } from 'zod';
import type { HttpMethod, RouteAuth } from '../../core/http/route.ts';
import type { Logger } from '../../core/logger.ts';
import { KERNEL_CODES, type CatalogueEntry } from '../../core/errors.ts';
import { AUTH_SECURITY, bulkItemErrorSchema, errorEnvelopeSchema, errorResponse, errorResponseName, graphqlOperation, headerRef, validationIssueSchema } from './components.ts';
import { SchemaConverter, isRecord, schemaRef } from './json-schema.ts';
import type { DocumentedRoute, HeaderObject, JsonSchema, OpenApiDocument, OpenApiInfo, OperationObject, ParameterObject, Reference, RequestBodyObject, ResponseObject } from './types.ts';

export type { DocumentedRoute, HeaderObject, JsonSchema, OpenApiDocument, OpenApiInfo, OperationObject, ParameterObject, PathItemObject, Reference, RequestBodyObject, ResponseObject } from './types.ts';

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
  /** Every error code the app answers (`KernelView.errorCodes()`). @default the kernel's codes alone */
  errorCodes?: readonly CatalogueEntry[];
  /** The event catalogue, documented under the top-level `webhooks` (what outbound webhook endpoints receive). */
  eventTypes?: readonly DocumentedEventType[];
  /** Receives conversion problems (`warn`; the schema is documented as `{}`) and routes left out (`error`). */
  log?: Pick<Logger, 'warn' | 'error'>;
}

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
  private readonly schemas: SchemaConverter;

  constructor(private readonly opts: BuildOptions) {
    this.rateLimited = opts.rateLimitEnabled ?? true;
    this.doc = {
      openapi: '3.1.0',
      info: opts.info,
      tags: [],
      paths: {},
      components: {
        schemas: { ErrorEnvelope: errorEnvelopeSchema(), ValidationIssue: validationIssueSchema(), BulkItemError: bulkItemErrorSchema() },
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
    this.schemas = new SchemaConverter(this.doc.components.schemas, (obj, msg) => this.warn(obj, msg));
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
      this.doc.paths['/graphql'] = {
        ...this.doc.paths['/graphql'],
        post: graphqlOperation(this.doc.components.schemas, this.rateLimited, (status) => this.errorResponseRef(status)),
      };
      tags.add('graphql');
    }
    if (this.opts.eventTypes?.length) {
      this.doc.webhooks = webhooksOf(this.opts.eventTypes);
      tags.add('webhooks');
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
    // Every route declares its permission (the kernel refuses one without): documented as declared.
    const { auth } = route;

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
    const json = this.schemas.deref(this.schemas.convert(schema, 'input', where, name));
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
    return { required, content: { 'application/json': { schema: this.schemas.convert(schema, 'input', where, `${base}Body`) } } };
  }

  private responses(route: DocumentedRoute, auth: RouteAuth, where: string, base: string): Record<string, ResponseObject | Reference> {
    const limited = this.rateLimited && !route.rateLimitExempt;
    const status = route.status ?? 200;
    const headers: Record<string, HeaderObject | Reference> = { 'X-Request-Id': headerRef('X-Request-Id') };
    if (limited) for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) headers[h] = headerRef(h);
    for (const [name, description] of Object.entries(route.docs?.responseHeaders ?? {})) headers[name] = { description, schema: { type: 'string' } };

    const success: ResponseObject = { description: STATUS_CODES[status] ?? 'Success', headers };
    if (status !== 204 && status !== 304) {
      const mediaTypes = this.opts.successMediaTypes?.[where] ?? route.docs?.mediaTypes ?? ['application/json'];
      const schema = route.response ? this.schemas.convert(route.response, 'output', where, `${base}Response`) : undefined;
      const fallback = (m: string): JsonSchema => (m.includes('json') ? { type: 'object' } : { type: 'string' });
      success.content = Object.fromEntries(mediaTypes.map((m) => [m, { schema: schema ?? fallback(m) }]));
    }

    const errors = new Set<number>([400, 422, 500]);
    if (limited) errors.add(429);
    if (auth !== 'public') {
      errors.add(401);
      errors.add(403);
    }
    if (route.features?.length) errors.add(403);
    if (route.body ?? route.docs?.body) errors.add(413);
    const own = route.docs?.responses ?? {};
    for (const s of [...(route.docs?.errors ?? []), ...Object.keys(own).map(Number)]) {
      if (Number.isInteger(s) && s >= 400 && s <= 599) errors.add(s);
      else this.warn({ route: where, status: s }, 'docs.errors lists a status that is not an error status; ignored');
    }

    const out: Record<string, ResponseObject | Reference> = { [String(status)]: success };
    for (const s of [...errors].sort((a, b) => a - b)) {
      const body = own[s];
      out[String(s)] = body
        ? this.ownErrorResponse(body, s, where, base)
        : s === 403 && route.features?.length ? this.featureForbidden(route.features) : this.errorResponseRef(s);
    }
    return out;
  }

  /** An error status the route answers with its own body (`docs.responses`), or the envelope when something else failed. */
  private ownErrorResponse(body: { description: string; schema: z.ZodType }, status: number, where: string, base: string): ResponseObject {
    const schema = this.schemas.convert(body.schema, 'output', where, `${base}${status}`);
    return {
      description: `${body.description} Any other failure: the error envelope.`,
      headers: { 'X-Request-Id': headerRef('X-Request-Id') },
      content: { 'application/json': { schema: { anyOf: [schema, schemaRef('ErrorEnvelope')] } } },
    };
  }

  /** 403 of a feature-guarded route: the shared one plus the feature names. */
  private featureForbidden(features: string[]): ResponseObject {
    const shared = errorResponse(403, this.opts.errorCodes ?? KERNEL_CODES);
    const list = features.map((f) => `\`${f}\``).join(', ');
    return { ...shared, description: `${shared.description} Requires feature(s) ${list}; \`details.feature\` names the missing one.` };
  }

  /** `$ref` to the shared response of an error status, creating the component on first use. */
  private errorResponseRef(status: number): Reference {
    const name = errorResponseName(status);
    this.doc.components.responses[name] ??= errorResponse(status, this.opts.errorCodes ?? KERNEL_CODES);
    return { $ref: `#/components/responses/${name}` };
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

