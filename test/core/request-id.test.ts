import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, envelope, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [examplePlugin] });
});
afterAll(() => t?.close());

describe('X-Request-Id', () => {
  it('is echoed on success', async () => {
    const res = await t.http('GET', '/auth/me', { headers: { 'X-Request-Id': 'req-ok.1:a_b' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('req-ok.1:a_b');
  });

  it('is echoed on an error, and the body carries the same id', async () => {
    const res = await t.http('GET', '/auth/me', { key: null, headers: { 'X-Request-Id': 'req-err-42' } });
    expect(res.status).toBe(401);
    envelope(res);
    expect(res.headers.get('x-request-id')).toBe('req-err-42');
    expect(res.body.request_id).toBe('req-err-42');
  });

  it('is echoed on a 500 and on a 404 route', async () => {
    for (const path of ['/example/crash', '/no/such/route']) {
      const res = await t.http('GET', path, { key: null, headers: { 'X-Request-Id': 'same-id' } });
      expect(res.status).toBeGreaterThanOrEqual(404);
      envelope(res);
      expect(res.body.request_id).toBe('same-id');
    }
  });

  it('is echoed on GraphQL responses and in GraphQL error extensions', async () => {
    const res = await t.gql('{ exampleCrash }', undefined, { headers: { 'X-Request-Id': 'gql-7' } });
    expect(res.headers.get('x-request-id')).toBe('gql-7');
    expect((res.body.errors?.[0]?.extensions as { request_id?: string }).request_id).toBe('gql-7');
  });

  it('a 128-character id is kept', async () => {
    const id = 'a'.repeat(128);
    const res = await t.http('GET', '/health', { headers: { 'X-Request-Id': id } });
    expect(res.headers.get('x-request-id')).toBe(id);
  });

  it('is generated (a uuid) when absent, and differs per request', async () => {
    const a = await t.http('GET', '/health');
    const b = await t.http('GET', '/auth/me', { key: null });
    expect(a.headers.get('x-request-id')).toMatch(UUID);
    expect(b.headers.get('x-request-id')).toMatch(UUID);
    expect(envelope(b)).toBeTruthy();
    expect(b.body.request_id).toBe(b.headers.get('x-request-id'));
    expect(a.headers.get('x-request-id')).not.toBe(b.headers.get('x-request-id'));
  });

  it.each([
    ['too long (300 chars)', 'x'.repeat(300)],
    ['129 chars', 'y'.repeat(129)],
    ['containing spaces', 'has some spaces'],
    ['containing a slash', 'a/b'],
    ['containing quotes and angle brackets', '"><script>'],
  ])('is replaced when invalid: %s', async (_label, bad) => {
    const res = await t.http('GET', '/auth/me', { key: null, headers: { 'X-Request-Id': bad } });
    expect(res.status).toBe(401);
    envelope(res);
    const id = res.headers.get('x-request-id');
    expect(id).not.toBe(bad);
    expect(id).toMatch(UUID);
    expect(res.body.request_id).toBe(id);
  });
});
