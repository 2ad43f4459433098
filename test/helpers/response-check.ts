/**
 * Checks every response a test receives against the OpenAPI document of the app that sent it, so
 * the document cannot drift from the code: a body that does not match the schema documented for
 * its route and status fails the test that made the request.
 *
 * The schemas are JSON Schema 2020-12 (OpenAPI 3.1): ajv 8's 2020 build validates them. The
 * repository's own `ajv` is 6 (draft-07); the 8 comes with @seriousme/openapi-schema-validator.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type { OpenApiDocument, OperationObject } from '../../plugins/openapi/service.ts';

const require = createRequire(import.meta.url);
const validatorDir = dirname(require.resolve('@seriousme/openapi-schema-validator/package.json'));
type ValidateFunction = ((data: unknown) => boolean) & { errors?: unknown };
type AjvLike = { addSchema(s: object): unknown; compile(s: object): ValidateFunction; errorsText(e: unknown): string };
const Ajv2020 = (require(require.resolve('ajv/dist/2020', { paths: [validatorDir] })) as { default: new (o: object) => AjvLike }).default;

const DOC_ID = 'https://openapi.test/doc.json';

interface PathMatcher {
  re: RegExp;
  item: Record<string, OperationObject>;
  params: number;
}

/** Validates response bodies against the schemas an OpenAPI document gives them. */
export class ResponseChecker {
  private readonly ajv: AjvLike;
  private readonly paths: PathMatcher[];
  private readonly compiled = new Map<string, ValidateFunction | null>();
  /** The same schemas with a resource document's `required` cut to `_id`: what a `fields` projection answers. */
  private projected?: ResponseChecker;

  constructor(private readonly doc: OpenApiDocument) {
    this.ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    this.ajv.addSchema({ $id: DOC_ID, components: doc.components });
    // Static segments win over parameters (`/projects/bulk` before `/projects/{id}`).
    this.paths = Object.entries(doc.paths)
      .map(([p, item]) => ({
        re: new RegExp(`^${p.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}/?$`),
        item: item as Record<string, OperationObject>,
        params: (p.match(/\{/g) ?? []).length,
      }))
      .sort((a, b) => a.params - b.params);
  }

  /**
   * Throws when `body` does not match the schema documented for `method path` and `status`. An
   * undocumented error status is checked against the error envelope, an undocumented success status
   * (207 of a bulk call) against the route's success schema; routes the document lacks are skipped.
   */
  check(method: string, url: string, status: number, contentType: string, body: unknown): void {
    if (!contentType.includes('json') || status === 204 || status === 304) return;
    // A resource's schema describes the full document; `fields=` answers a subset of it.
    if (new URLSearchParams(url.split('?')[1] ?? '').has('fields')) {
      this.projected ??= new ResponseChecker(projection(this.doc));
      return this.projected.checkFull(method, url, body, status);
    }
    this.checkFull(method, url, body, status);
  }

  private checkFull(method: string, url: string, body: unknown, status: number): void {
    const path = url.split('?')[0]!;
    const m = method.toLowerCase();
    const match = this.paths.find((p) => p.re.test(path) && p.item[m]);
    if (!match) return;
    const op = match.item[m]!;
    const validate = this.validator(op, status, `${method} ${path} ${status}`);
    if (!validate || validate(body)) return;
    throw new Error(
      `${method} ${url} answered ${status} with a body its OpenAPI schema (${op.operationId}) rejects: ${this.ajv.errorsText(validate.errors)}\n` +
        `body: ${JSON.stringify(body).slice(0, 2000)}`,
    );
  }

  private validator(op: OperationObject, status: number, where: string): ValidateFunction | null {
    const key = `${op.operationId} ${status}`;
    if (this.compiled.has(key)) return this.compiled.get(key)!;
    const schema = this.schemaOf(op, status);
    let fn: ValidateFunction | null = null;
    if (schema) {
      const rebased = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', `"${DOC_ID}#/components/`)) as Record<string, unknown>;
      try {
        fn = this.ajv.compile(rebased);
      } catch (err) {
        throw new Error(`the OpenAPI schema of ${where} does not compile: ${(err as Error).message}`);
      }
    }
    this.compiled.set(key, fn);
    return fn;
  }

  private schemaOf(op: OperationObject, status: number): unknown {
    const responses = op.responses as Record<string, { $ref?: string; content?: Record<string, { schema?: unknown }> }>;
    let res = responses[String(status)];
    if (!res && status >= 400) return { $ref: '#/components/schemas/ErrorEnvelope' };
    if (!res && status < 300) res = Object.entries(responses).find(([s]) => s.startsWith('2'))?.[1];
    if (res?.$ref) res = this.doc.components.responses[res.$ref.split('/').pop()!] as typeof res;
    const content = res?.content;
    if (!content) return undefined;
    return Object.entries(content).find(([type]) => type.includes('json'))?.[1].schema;
  }
}

/** A copy of `doc` whose schemas that require `_id` (resource documents) require nothing else. */
function projection(doc: OpenApiDocument): OpenApiDocument {
  const copy = JSON.parse(JSON.stringify(doc)) as OpenApiDocument;
  for (const schema of Object.values(copy.components.schemas ?? {}) as { required?: string[] }[]) {
    if (schema.required?.includes('_id')) schema.required = ['_id'];
  }
  return copy;
}
