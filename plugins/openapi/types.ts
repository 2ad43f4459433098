import type { oas31 } from 'openapi3-ts';
import type { HttpMethod, RouteAuth, RouteDef } from '../../core/http/route.ts';

/* The OpenAPI shapes the generator's files share (service.ts, components.ts, json-schema.ts). */

/** A JSON Schema (2020-12) object, as OpenAPI 3.1 embeds it. */
export type JsonSchema = oas31.SchemaObject;

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
