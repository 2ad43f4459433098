/** The webhook routes in /openapi.json: present when enabled, valid OpenAPI 3.1, documented access. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { openapiPlugin } from '../../plugins/openapi/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';

let t: TestApp;
let doc: any;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [webhooksPlugin, openapiPlugin], config: { WEBHOOKS_ENABLED: 'true' } });
  const res = await t.http('GET', '/openapi.json', { key: null });
  expect(res.status).toBe(200);
  doc = res.body;
});
afterAll(() => t?.close());

describe('webhooks in OpenAPI', () => {
  it('documents every webhook route and stays a valid OpenAPI 3.1 document', async () => {
    expect(Object.keys(doc.paths['/webhooks/{provider}'])).toEqual(['post']);
    expect(doc.paths['/webhooks/events'].get).toBeDefined();
    expect(doc.paths['/webhooks/dead-letter'].get).toBeDefined();
    expect(doc.paths['/webhooks/dead-letter/{event_id}/retry'].post).toBeDefined();
    expect(doc.paths['/webhooks/events/purge'].delete).toBeDefined();
    expect(doc.paths['/webhooks/{provider}'].post.responses).toHaveProperty('401');
    const v = new Validator();
    const res = await v.validate(structuredClone(doc));
    expect(res.errors).toBeUndefined();
    expect(res.valid).toBe(true);
  });
});
