/**
 * What a new user met on a first trial (fresh clone, README only): messages that send them the
 * wrong way. Each answer must name the mistake and how to fix it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../config/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { paymentsPlugin } from '../../plugins/payments/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { buildTestApp, createTenantUser, expectError, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { startServerProcess } from '../helpers/processes.ts';
import { create as createPayment } from '../payments/helpers.ts';

let t: TestApp;
let alice: { key: string; tenantId: string; userId: string };
beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin, webhooksPlugin, paymentsPlugin], config: { PAYMENTS_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' } });
  alice = await createTenantUser(t, { roles: ['user', 'admin'] });
});
afterAll(() => t?.close());

const project = async () => (await t.http('POST', '/projects', { key: alice.key, json: { name: 'Apollo' } })).body as { _id: string; version: number };

describe('If-Match without its quotes is a format mistake (400), not a conflict (412)', () => {
  it.each(['1', 'W/1', '"1', 'abc', '"1" "2"', ','])('If-Match: %s on PATCH, PUT and DELETE: 400 BAD_REQUEST naming the quotes; nothing written', async (value) => {
    const p = await project();
    for (const [method, json] of [['PATCH', { name: 'x' }], ['PUT', { name: 'x' }], ['DELETE', undefined]] as const) {
      const res = await t.http(method, `/projects/${p._id}`, { key: alice.key, json, headers: { 'If-Match': value } });
      const err = expectError(res, 400, 'BAD_REQUEST');
      expect(err.message).toBe('If-Match must be a quoted entity tag such as "1" (with the double quotes), as returned in ETag');
      expect(err.details).toMatchObject({ header: 'If-Match', errors: [{ loc: ['headers', 'If-Match'], type: 'invalid_format' }] });
    }
    const after = await t.http('GET', `/projects/${p._id}`, { key: alice.key });
    expect(after.body).toMatchObject({ name: 'Apollo', version: 1, is_deleted: false });
  });

  it('a weak tag still matches its revision, a list matches any of its tags, * is a mismatch (412) as before', async () => {
    const p = await project();
    expect((await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { name: 'b' }, headers: { 'If-Match': 'W/"1"' } })).status).toBe(200);
    expect((await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { name: 'c' }, headers: { 'If-Match': '"7", W/"2",' } })).status).toBe(200);
    expectError(await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { name: 'd' }, headers: { 'If-Match': '*' } }), 412, 'ETAG_MISMATCH');
    expectError(await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { name: 'd' }, headers: { 'If-Match': '"1"' } }), 412, 'ETAG_MISMATCH');
    expectError(await t.http('PATCH', `/projects/${p._id}`, { key: alice.key, json: { name: 'd' } }), 428, 'ETAG_REQUIRED');
  });

  it('the same on GraphQL (if_match), on a bulk delete item and on PUT /payments/{id}', async () => {
    const p = await project();
    const g = await t.gql('mutation ($id: ID!) { updateProject(id: $id, if_match: "1", input: {name: "x"}) { _id } }', { id: p._id }, { key: alice.key });
    expect(g.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
    expect(g.body.errors?.[0]?.message).toContain('(with the double quotes)');

    const bulk = await t.http('DELETE', '/projects/bulk', { key: alice.key, json: { items: [{ id: p._id, etag: '1' }] } });
    expect(JSON.stringify(bulk.body)).toContain('BAD_REQUEST');

    const pay = await createPayment(t, alice.key);
    const put = await t.http('PUT', `/payments/${pay._id}`, { key: alice.key, json: { provider_reference: 'r' }, headers: { 'If-Match': String(pay.version) } });
    expect(expectError(put, 400, 'BAD_REQUEST').message).toContain('(with the double quotes)');
  });
});

describe('an API key in the Authorization header', () => {
  it('401 AUTH_REQUIRED saying that API keys go in X-API-Key', async () => {
    const res = await t.http('GET', '/projects', { key: null, headers: { Authorization: alice.key } });
    const err = expectError(res, 401, 'AUTH_REQUIRED');
    expect(err.message).toContain('Bearer <token>');
    expect(err.message).toContain('X-API-Key');
  });
});

describe('a malformed JSON body', () => {
  it('400 whose details say what the parser refused and where, without echoing the body', async () => {
    const secret = 'x'.repeat(5000);
    const res = await t.http('POST', '/projects', { key: alice.key, body: `{"name": "a",\n "note": "${secret}" oops}`, headers: { 'Content-Type': 'application/json' } });
    const err = expectError(res, 400, 'BAD_REQUEST');
    expect(err.message).toBe('Malformed JSON body');
    expect(err.details).toEqual({ reason: expect.stringContaining("Expected ',' or '}'"), position: 5026, line: 2, column: 5013 });
    expect(JSON.stringify(res.body)).not.toContain('xxxxxxxx');
  });

  it('an unexpected token: the reason without V8\'s excerpt of the body', async () => {
    const res = await t.http('POST', '/projects', { key: alice.key, body: '{"name": nope-and-a-secret}', headers: { 'Content-Type': 'application/json' } });
    const err = expectError(res, 400, 'BAD_REQUEST');
    expect(err.details.reason).toBe("Unexpected token 'o'");
    expect(JSON.stringify(res.body)).not.toContain('secret');
  });
});

describe('a required field left out', () => {
  it('422 whose message and msg read "name is required"', async () => {
    const res = await t.http('POST', '/projects', { key: alice.key, json: { budget: 3 } });
    const err = expectError(res, 422, 'VALIDATION_ERROR');
    expect(err.details.errors).toEqual([{ loc: ['body', 'name'], msg: 'name is required', type: 'invalid_type' }]);
    expect(err.message).toBe('Validation failed: name is required');
  });
});

describe('a boolean setting with another value', () => {
  it('lists the accepted values', () => {
    let message = '';
    try {
      loadConfig({ WEBHOOKS_ENABLED: 'on' });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    expect(message).toContain('WEBHOOKS_ENABLED: must be one of true, false, yes, no, 1, 0');
    expect(loadConfig({ WEBHOOKS_ENABLED: 'yes' }).WEBHOOKS_ENABLED).toBe(true);
    expect(loadConfig({ WEBHOOKS_ENABLED: '0' }).WEBHOOKS_ENABLED).toBe(false);
    // Every settings file shares the one boolean shape, so its message too (the files settings had their own copy).
    expect(() => loadConfig({ FILES_ENABLED: 'on' })).toThrow('FILES_ENABLED: must be one of true, false, yes, no, 1, 0');
  });
});

describe('the start-up log', () => {
  it('lists the plugins that are on, and apart those a setting keeps off with the setting that turns each on', async () => {
    const server = await startServerProcess({ MONGODB_URI: uniqueDbUri(), JOBS_ENABLED: 'true' }, { timeoutMs: 90_000 });
    try {
      const line = server.logs.find((l) => String(l.msg).startsWith('listening'))!;
      expect(line.plugins).toEqual(expect.arrayContaining(['identity', 'resources', 'audit', 'jobs', 'openapi', 'admin-console']));
      expect(line.plugins).not.toEqual(expect.arrayContaining(['webhooks']));
      expect(line.plugins).not.toEqual(expect.arrayContaining(['payments']));
      expect(line.plugins).not.toEqual(expect.arrayContaining(['files']));
      expect(line.plugins_off).toEqual({ webhooks: 'WEBHOOKS_ENABLED=true', payments: 'PAYMENTS_ENABLED=true', files: 'FILES_ENABLED=true' });
    } finally {
      await server.stop();
    }
  }, 120_000);
});
