import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';
import { sampleResources } from '../../plugins/resources/sample-resources.ts';

const regionalNotes = defineResource({
  name: 'regional_notes',
  schema: new Schema({ text: { type: String, required: true }, region: { type: String } }),
  guards: { attributes: [{ attribute: 'region', field: 'region' }] },
});

let t: TestApp;
let plain: { key: string; tenantId: string };
let eu: { key: string };
let multi: { key: string };
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [...sampleResources, regionalNotes] })] });
  plain = await createTenantUser(t);
  eu = await createTenantUser(t, { tenantId: plain.tenantId, attributes: { region: 'eu' } });
  multi = await createTenantUser(t, { tenantId: plain.tenantId, attributes: { region: ['eu', 'us'] } });
});
afterAll(() => t?.close());

describe('feature guards come before input validation', () => {
  it('a caller without the feature gets 403 even for an invalid body (the schema is not revealed)', async () => {
    const res = await t.http('POST', '/tasks', { key: plain.key, json: { nonsense: true } });
    expect(res.status).toBe(403);
    expect(envelope(res)).toMatchObject({ code: 'ACCESS_DENIED', details: { feature: 'tasks' } });
  });
});

describe('attribute-guarded field left out of a create', () => {
  it('takes the caller\'s single value, so the creator still sees the document', async () => {
    const res = await t.http('POST', '/regional_notes', { key: eu.key, json: { text: 'hello' } });
    expect(res.status).toBe(201);
    expect(res.body.region).toBe('eu');
    expect((await t.http('GET', `/regional_notes/${res.body._id}`, { key: eu.key })).status).toBe(200);
  });

  it('must be given when the caller holds several values (422)', async () => {
    const res = await t.http('POST', '/regional_notes', { key: multi.key, json: { text: 'which region?' } });
    expect(res.status).toBe(422);
    expect((envelope(res).details.errors as { loc: string[] }[])[0]!.loc).toEqual(['body', 'region']);
    const ok = await t.http('POST', '/regional_notes', { key: multi.key, json: { text: 'us one', region: 'us' } });
    expect(ok.status).toBe(201);
  });
});

describe('PATCH edge cases', () => {
  it('an empty PATCH changes nothing: same version, same updated_at', async () => {
    const { body: p } = await t.http('POST', '/projects', { key: plain.key, json: { name: 'Still' } });
    const res = await t.http('PATCH', `/projects/${p._id}`, { key: plain.key, json: {}, headers: { 'If-Match': '"1"' } });
    expect(res.status).toBe(200);
    expect(res.body.version).toBe(1);
    expect(res.body.updated_at).toBe(p.updated_at);
    expect(res.headers.get('etag')).toBe('"1"');
  });

  it('arrays cannot be set to null (clear them with [])', async () => {
    const { body: p } = await t.http('POST', '/projects', { key: plain.key, json: { name: 'Tagged', tags: ['a'] } });
    const bad = await t.http('PATCH', `/projects/${p._id}`, { key: plain.key, json: { tags: null }, headers: { 'If-Match': '"1"' } });
    expect(bad.status).toBe(422);
    const ok = await t.http('PATCH', `/projects/${p._id}`, { key: plain.key, json: { tags: [] }, headers: { 'If-Match': '"1"' } });
    expect(ok.body.tags).toEqual([]);
  });
});

describe('one validation, one order of checks for REST and GraphQL', () => {
  it('a PATCH without If-Match and with a bad body is 428 on both APIs (If-Match is checked before the body)', async () => {
    const { body: p } = await t.http('POST', '/projects', { key: plain.key, json: { name: 'Order' } });
    const rest = await t.http('PATCH', `/projects/${p._id}`, { key: plain.key, json: { budget: 'x' } });
    expect(rest.status).toBe(428);
    expect(envelope(rest).code).toBe('ETAG_REQUIRED');
    const gql = await t.gql('mutation($id: ID!) { updateProject(id: $id, input: {budget: "x"}) { _id } }', { id: p._id }, { key: plain.key });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('ETAG_REQUIRED');
    const both = await t.http('PATCH', `/projects/${p._id}`, { key: plain.key, json: { budget: 'x' }, headers: { 'If-Match': '"1"' } });
    expect(both.status).toBe(422);
    expect((envelope(both).details.errors as { loc: string[] }[])[0]!.loc).toEqual(['body', 'budget']);
  });

  it('OpenAPI still documents the create and update bodies', async () => {
    const t2 = await buildTestApp({ plugins: [resourcesPlugin, (await import('../../plugins/openapi/index.ts')).openapiPlugin] });
    try {
      const doc = (await t2.http('GET', '/openapi.json')).body;
      const create = doc.paths['/projects'].post.requestBody.content['application/json'].schema;
      const resolved = create.$ref ? doc.components.schemas[create.$ref.split('/').pop()] : create;
      expect(resolved.required).toContain('name');
      expect(doc.paths['/projects/{id}'].patch.requestBody).toBeDefined();
    } finally {
      await t2.close();
    }
  });
});
