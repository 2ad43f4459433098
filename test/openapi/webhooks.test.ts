/**
 * The event catalogue in `/openapi.json`, under OpenAPI 3.1's top-level `webhooks`: one `POST` per
 * event type endpoints may receive (`outbound`), with the Standard Webhooks headers and the body a
 * webhook endpoint receives, whose `data` is the type's JSON Schema from `GET /events/types`. The
 * document stays valid.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { openapiPlugin } from '../../plugins/openapi/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { paymentsPlugin } from '../../plugins/payments/index.ts';

let t: TestApp;
let doc: any;
let types: { name: string; schema: Record<string, unknown>; outbound: boolean }[];
let all: typeof types;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [openapiPlugin, resourcesPlugin, webhooksPlugin, paymentsPlugin], config: { WEBHOOKS_ENABLED: 'true', PAYMENTS_ENABLED: 'true' } });
  doc = (await t.http('GET', '/openapi.json', { key: null })).body;
  all = (await t.http('GET', '/events/types')).body.items;
  types = all.filter((x) => x.outbound);
});
afterAll(() => t?.close());

it('documents every catalogue type endpoints may receive, and nothing else', () => {
  expect(Object.keys(doc.webhooks).sort()).toEqual(types.map((x) => x.name).sort());
  expect(Object.keys(doc.webhooks)).toEqual(expect.arrayContaining(['projects.created', 'payment.completed', 'ping', 'webhook_endpoint.disabled']));
  // Events about deliveries and about the endpoints' own set-up are in the catalogue but never sent to an endpoint, so not documented as webhooks.
  expect(all.filter((x) => !x.outbound).map((x) => x.name).sort()).toEqual([
    'webhook_delivery.failed', 'webhook_delivery.succeeded', 'webhook_endpoint.created', 'webhook_endpoint.deleted', 'webhook_endpoint.updated',
  ]);
  expect(Object.keys(doc.webhooks)).not.toContain('webhook_delivery.failed');
  expect(Object.keys(doc.webhooks)).not.toContain('webhook_endpoint.created');
});

it('each is the POST an endpoint receives: signed headers, {id, type, timestamp, data} with data per the catalogue', () => {
  for (const { name, schema } of types) {
    const op = doc.webhooks[name].post;
    expect(op.parameters.map((p: any) => [p.in, p.name, p.required])).toEqual([
      ['header', 'webhook-id', true], ['header', 'webhook-timestamp', true], ['header', 'webhook-signature', true],
    ]);
    const body = op.requestBody.content['application/json'].schema;
    expect(body.required).toEqual(['id', 'type', 'timestamp', 'data']);
    expect(body.properties.type).toEqual({ type: 'string', const: name });
    const { $schema: _d, ...data } = schema;
    expect(body.properties.data).toEqual(data);
    expect(Object.keys(op.responses)).toEqual(['2XX']);
  }
});

it('keeps the document valid OpenAPI 3.1', async () => {
  const res = await new Validator().validate(structuredClone(doc));
  expect(res.errors).toBeUndefined();
  expect(res.valid).toBe(true);
});
