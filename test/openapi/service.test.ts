import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildOpenApiDocument, operationIdFor, toOpenApiPath, type DocumentedRoute } from '../../plugins/openapi/service.ts';

const route = (r: Partial<DocumentedRoute> & Pick<DocumentedRoute, 'method' | 'path'>): DocumentedRoute => ({ plugin: 'p', auth: 'user', handler: () => ({}), ...r });
const info = { title: 't', version: '1.0.0' };
const logger = () => ({ warn: vi.fn(), error: vi.fn() });

type Node = { v: number; kids: Node[] };
const node: z.ZodType<Node> = z.lazy(() => z.object({ v: z.number(), kids: z.array(node) }));
const Tree = z.object({
  v: z.number(),
  get kids() {
    return z.array(Tree);
  },
});

describe('openapi generator (no server)', () => {
  it('converts koa paths and derives stable operationIds', () => {
    expect(toOpenApiPath('/a/:id/b/:sub_id')).toEqual({ path: '/a/{id}/b/{sub_id}', params: ['id', 'sub_id'], optionalGroup: false });
    expect(toOpenApiPath('/files{/:name}').optionalGroup).toBe(true);
    expect(operationIdFor('DELETE', '/admin/api-keys/:id')).toBe('deleteAdminApiKeysById');
    expect(operationIdFor('GET', '/')).toBe('getRoot');
    expect(operationIdFor('GET', '/openapi.json')).toBe('getOpenapiJson');
  });

  it('never crashes on unconvertible schemas: documents {} and logs the route', () => {
    const log = logger();
    const doc = buildOpenApiDocument(
      [
        route({
          method: 'POST', path: '/x',
          body: z.object({ n: z.string().transform(Number), when: z.coerce.date(), big: z.bigint().optional(), any: z.custom<string>() }),
          response: z.lazy(() => {
            throw new Error('broken schema');
          }),
        }),
      ],
      { info, log },
    );
    const op = doc.paths['/x']!.post!;
    expect((op.responses['200'] as any).content['application/json'].schema).toEqual({});
    expect(log.warn).toHaveBeenCalledWith(expect.objectContaining({ route: 'POST /x' }), expect.stringContaining('could not be converted'));
    const body = op.requestBody!.content['application/json']!.schema as any;
    expect(body.properties.n).toEqual({ type: 'string' });
    expect(body.properties.when).toMatchObject({ type: 'string', format: 'date-time' });
    expect(body.required).toEqual(['n', 'when', 'any']);
  });

  it('moves $defs of recursive and id-named schemas to components and keeps the document valid', async () => {
    const Tag = z.object({ label: z.string(), weight: z.number().default(1) }).meta({ id: 'OpenapiTestTag' });
    const doc = buildOpenApiDocument(
      [
        route({ method: 'POST', path: '/nodes', body: node, response: z.object({ tree: Tree, tag: Tag }) }),
        route({ method: 'POST', path: '/trees', body: z.object({ tree: Tree, tag: Tag }), response: Tag }),
      ],
      { info },
    );
    const json = JSON.stringify(doc);
    expect(json).not.toContain('$defs');
    expect(json).not.toContain('"$ref":"#"');
    expect(doc.paths['/nodes']!.post!.requestBody!.content['application/json']!.schema).toEqual({ $ref: '#/components/schemas/PostNodesBody' });
    expect(doc.components.schemas.PostNodesBody).toMatchObject({ properties: { kids: { items: { $ref: '#/components/schemas/PostNodesBody' } } } });
    // The id keeps its name; the input side (weight optional) differs from the output side, so it gets its own.
    expect(doc.components.schemas.OpenapiTestTag).toMatchObject({ required: ['label', 'weight'] });
    expect(doc.components.schemas.OpenapiTestTagInput).toMatchObject({ required: ['label'] });
    const v = new Validator();
    const res = await v.validate(structuredClone(doc) as any);
    expect(res.errors).toBeUndefined();
    expect(() => v.resolveRefs()).not.toThrow();
  });

  it('follows the rate-limit setting, leaves exempt routes without 429 and skips reserved or bad docs entries', () => {
    const log = logger();
    const routes = [
      route({ method: 'GET', path: '/a', auth: 'public', docs: { headers: { Authorization: { description: 'no' } }, errors: [304, 418] } }),
      route({ method: 'GET', path: '/b', auth: 'public', rateLimitExempt: true }),
    ];
    const on = buildOpenApiDocument(routes, { info, log });
    expect(on.paths['/a']!.get!.responses['429']).toBeDefined();
    expect(on.paths['/a']!.get!.responses['418']).toEqual({ $ref: '#/components/responses/Error418' });
    expect(on.paths['/a']!.get!.responses['304']).toBeUndefined();
    expect(on.paths['/a']!.get!.parameters).toBeUndefined();
    expect(on.paths['/b']!.get!.responses['429']).toBeUndefined();
    expect(log.warn).toHaveBeenCalledTimes(2);
    const off = buildOpenApiDocument(routes, { info, rateLimitEnabled: false, graphql: false });
    expect(off.paths['/a']!.get!.responses['429']).toBeUndefined();
    expect(off.paths['/graphql']).toBeUndefined();
  });

  it('dedupes colliding operationIds deterministically', () => {
    const log = logger();
    const doc = buildOpenApiDocument([route({ method: 'GET', path: '/a-b' }), route({ method: 'GET', path: '/a_b' })], { info, log });
    expect(doc.paths['/a-b']!.get!.operationId).toBe('getAB');
    expect(doc.paths['/a_b']!.get!.operationId).toBe('getAB_2');
    expect(log.warn).toHaveBeenCalledOnce();
  });
});
