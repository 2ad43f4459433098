import { Writable } from 'node:stream';
import { Schema } from 'mongoose';
import { pino } from 'pino';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { createApp } from '../../core/kernel.ts';
import { definePlugin } from '../../core/plugin.ts';
import { defineRoute } from '../../core/http/route.ts';
import {
  AccessDeniedError,
  AppError,
  AuthRequiredError,
  BadRequestError,
  CascadeDenyError,
  ConflictError,
  EtagMismatchError,
  EtagRequiredError,
  NotFoundError,
  RateLimitedError,
  ServiceUnavailableError,
  ValidationError,
} from '../../core/errors.ts';
import { buildTestApp, createTenantUser, envelope, TEST_SECRETS, uniqueDbUri, type TestApp } from '../helpers/app.ts';
import { examplePlugin } from '../fixtures/example-plugin.ts';
import { corePlugins } from '../../builtin-plugins.ts';

/** Every error class the kernel maps, raised on demand from REST and GraphQL. */
const raisers: Record<string, () => never> = {
  'etag-mismatch': () => {
    throw new EtagMismatchError({ current_etag: '"r2"' });
  },
  'etag-required': () => {
    throw new EtagRequiredError();
  },
  'cascade-deny': () => {
    throw new CascadeDenyError({ resource: 'customers', item_id: 'c1', referenced_by: 'orders', count: 3 });
  },
  conflict: () => {
    throw new ConflictError('Order already shipped', { state: 'shipped' });
  },
  'not-found': () => {
    throw new NotFoundError('widgets', 'w42');
  },
  'access-denied': () => {
    throw new AccessDeniedError('Feature "x" required', { feature: 'x' });
  },
  'auth-required': () => {
    throw new AuthRequiredError();
  },
  'bad-request': () => {
    throw new BadRequestError('Unknown operator "__near"', { param: 'age__near' });
  },
  validation: () => {
    throw new ValidationError([{ loc: ['body', 'total'], msg: 'must be positive', type: 'too_small' }]);
  },
  'rate-limited': () => {
    throw new RateLimitedError(7);
  },
  unavailable: () => {
    throw new ServiceUnavailableError('Payments provider down', { provider: 'acme' });
  },
  domain: () => {
    throw new AppError(402, 'PAYMENT_REQUIRED', 'Card declined', { decline_code: 'insufficient_funds' });
  },
};

const gadgetSchema = new Schema({ title: { type: String, required: true }, qty: { type: Number, min: 1 } }, { versionKey: false });

const raiserPlugin = definePlugin({
  name: 'raiser',
  setup: ({ db }) => {
    const Gadget = db.model('Gadget', gadgetSchema, 'gadgets');
    return {
      routes: [
        defineRoute({
          method: 'GET', path: '/raise/:kind', auth: 'public',
          params: z.object({ kind: z.enum(Object.keys(raisers) as [string, ...string[]]) }),
          handler: ({ params }) => raisers[params.kind]!(),
        }),
        defineRoute({
          method: 'POST', path: '/gadgets', auth: 'public', status: 201,
          body: z.record(z.string(), z.unknown()),
          handler: async ({ body }) => ({ id: String((await Gadget.create(body))._id) }),
        }),
        defineRoute({
          method: 'GET', path: '/gadgets/:id', auth: 'public',
          handler: async ({ ctx }) => (await Gadget.findById(ctx.params.id).lean()) ?? {},
        }),
        defineRoute({
          method: 'GET', path: '/typed', auth: 'public',
          query: z.object({ n: z.coerce.number().int().max(10), flag: z.enum(['a', 'b']) }),
          handler: ({ query }) => query,
        }),
      ],
      graphql: (builder) => {
        builder.queryField('raise', (f) => f.string({ args: { kind: f.arg.string({ required: true }) }, resolve: (_r, a) => raisers[a.kind]!() }));
      },
    };
  },
});

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [examplePlugin, raiserPlugin], config: { BODY_LIMIT: '1kb' } });
});
afterAll(() => t?.close());

describe('the error table, through REST', () => {
  const table: [kind: string, status: number, code: string, details: Record<string, unknown>][] = [
    ['etag-mismatch', 412, 'ETAG_MISMATCH', { current_etag: '"r2"' }],
    ['etag-required', 428, 'ETAG_REQUIRED', {}],
    ['cascade-deny', 422, 'CASCADE_DENY', { resource: 'customers', item_id: 'c1', referenced_by: 'orders', count: 3 }],
    ['conflict', 409, 'CONFLICT', { state: 'shipped' }],
    ['not-found', 404, 'NOT_FOUND', { resource: 'widgets', item_id: 'w42' }],
    ['access-denied', 403, 'ACCESS_DENIED', { feature: 'x' }],
    ['auth-required', 401, 'AUTH_REQUIRED', {}],
    ['bad-request', 400, 'BAD_REQUEST', { param: 'age__near' }],
    ['validation', 422, 'VALIDATION_ERROR', { errors: [{ loc: ['body', 'total'], msg: 'must be positive', type: 'too_small' }] }],
    ['rate-limited', 429, 'RATE_LIMITED', { retry_after: 7 }],
    ['unavailable', 503, 'SERVICE_UNAVAILABLE', { provider: 'acme' }],
    ['domain', 402, 'PAYMENT_REQUIRED', { decline_code: 'insufficient_funds' }],
  ];

  it.each(table)('%s → %i %s', async (kind, status, code, details) => {
    const res = await t.http('GET', `/raise/${kind}`, { key: null });
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const err = envelope(res);
    expect(err.code).toBe(code);
    expect(err.details).toEqual(details);
    expect(err.message.length).toBeGreaterThan(0);
  });

  it('CASCADE_DENY names the referencing resource in its message', async () => {
    expect(envelope(await t.http('GET', '/raise/cascade-deny', { key: null })).message).toBe(
      'customers c1 is still referenced by 3 orders document(s)',
    );
  });

  it('an error carrying headers sets them (Retry-After)', async () => {
    const res = await t.http('GET', '/raise/rate-limited', { key: null });
    expect(res.headers.get('retry-after')).toBe('7');
  });
});

describe('the error table, through GraphQL extensions', () => {
  it.each([
    ['etag-mismatch', 412, 'ETAG_MISMATCH'],
    ['etag-required', 428, 'ETAG_REQUIRED'],
    ['cascade-deny', 422, 'CASCADE_DENY'],
    ['not-found', 404, 'NOT_FOUND'],
    ['validation', 422, 'VALIDATION_ERROR'],
    ['domain', 402, 'PAYMENT_REQUIRED'],
  ])('%s → %s', async (kind, status, code) => {
    const res = await t.gql('query ($k: String!) { raise(kind: $k) }', { k: kind });
    expect(res.status).toBe(200);
    const e = res.body.errors?.[0];
    expect(e?.extensions).toMatchObject({ code, status, request_id: res.headers.get('x-request-id') });
    expect(e?.path).toEqual(['raise']);
  });
});

describe('errors raised by real endpoints', () => {
  it('401 AUTH_REQUIRED without a credential', async () => {
    const res = await t.http('GET', '/auth/me', { key: null });
    expect(res.status).toBe(401);
    expect(envelope(res)).toEqual({ code: 'AUTH_REQUIRED', message: 'Authentication required', details: {} });
  });

  it('403 ACCESS_DENIED with details.feature', async () => {
    const u = await createTenantUser(t);
    const res = await t.http('GET', '/example/secret', { key: u.key });
    expect(res.status).toBe(403);
    const err = envelope(res);
    expect(err.code).toBe('ACCESS_DENIED');
    expect(err.details).toEqual({ feature: 'secret-feature' });
  });

  it('404 NOT_FOUND with resource and item_id for a lookup by id', async () => {
    const id = 'aaaaaaaaaaaaaaaaaaaaaaaa';
    const res = await t.http('DELETE', `/admin/api-keys/${id}`);
    expect(res.status).toBe(404);
    const err = envelope(res);
    expect(err.code).toBe('NOT_FOUND');
    expect(err.details).toEqual({ resource: 'api_key', item_id: id });
  });

  it('404 NOT_FOUND in the envelope for an unknown route', async () => {
    for (const [method, path] of [['GET', '/nope'], ['POST', '/nope/deeper']] as const) {
      const res = await t.http(method, path, { key: null });
      expect(res.status).toBe(404);
      const err = envelope(res);
      expect(err.code).toBe('NOT_FOUND');
      expect(err.message).toBe('Route not found');
    }
  });

  it('405 METHOD_NOT_ALLOWED with an Allow header for a known path and another method', async () => {
    const res = await t.http('PATCH', '/health', { key: null });
    expect(res.status).toBe(405);
    const err = envelope(res);
    expect(err.code).toBe('METHOD_NOT_ALLOWED');
    expect(res.headers.get('allow')).toContain('GET');
  });

  it('415 UNSUPPORTED_MEDIA_TYPE for a non-JSON body, and nothing is written', async () => {
    const res = await t.http('POST', '/example/notes', { body: 'text=a&region=eu', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    expect(res.status).toBe(415);
    expect(envelope(res).code).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(await t.app.db.conn.collection('example_notes').countDocuments({ text: 'a' })).toBe(0);
  });

  it('409 CONFLICT from a MongoDB duplicate key (POST /admin/users with an existing email)', async () => {
    const tenant = await t.http('POST', '/admin/tenants', { json: { name: 'dup' } });
    const user = { email: 'same@example.com', name: 'A', tenant_id: tenant.body.id };
    expect((await t.http('POST', '/admin/users', { json: user })).status).toBe(201);
    // Emails are stored lower-cased and trimmed, so this is the same email.
    const res = await t.http('POST', '/admin/users', { json: { ...user, email: 'Same@Example.com', name: 'B' } });
    expect(res.status).toBe(409);
    const err = envelope(res);
    expect(err.code).toBe('CONFLICT');
    expect(err.message).toBe('A user with this email already exists in this tenant');
    expect(await t.app.db.conn.collection('users').countDocuments({ email: 'same@example.com' })).toBe(1);
  });

  it('409 CONFLICT holds from the first request: unique indexes exist before the app serves', async () => {
    const fresh = await buildTestApp();
    try {
      const indexes = await fresh.app.db.conn.collection('users').indexes();
      expect(indexes.find((i) => i.key.email === 1)?.unique).toBe(true);
      const keyIndexes = await fresh.app.db.conn.collection('api_keys').indexes();
      expect(keyIndexes.find((i) => i.key.key_hash === 1)?.unique).toBe(true);
      const tenant = await fresh.http('POST', '/admin/tenants', { json: { name: 'race' } });
      const user = { email: 'race@example.com', name: 'R', tenant_id: tenant.body.id };
      const both = await Promise.all([fresh.http('POST', '/admin/users', { json: user }), fresh.http('POST', '/admin/users', { json: user })]);
      expect(both.map((r) => r.status).sort()).toEqual([201, 409]);
    } finally {
      await fresh.close();
    }
  });

  it('400 BAD_REQUEST for an X-Tenant-Id that is not an object id', async () => {
    const res = await t.http('GET', '/auth/me', { headers: { 'X-Tenant-Id': 'tenant-a' } });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });
});

describe('request bodies', () => {
  it('400 BAD_REQUEST for a malformed JSON body', async () => {
    const res = await t.http('POST', '/example/notes', { body: '{"text": "a", ', headers: { 'Content-Type': 'application/json' } });
    expect(res.status).toBe(400);
    const err = envelope(res);
    expect(err.code).toBe('BAD_REQUEST');
    expect(err.message).toBe('Malformed JSON body');
  });

  it('400 BAD_REQUEST for a JSON body that is not an object or array', async () => {
    const res = await t.http('POST', '/example/notes', { body: '"just a string"', headers: { 'Content-Type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });

  it('413 PAYLOAD_TOO_LARGE above BODY_LIMIT', async () => {
    const res = await t.http('POST', '/example/notes', { json: { text: 'x'.repeat(2048), region: 'eu' } });
    expect(res.status).toBe(413);
    const err = envelope(res);
    expect(err.code).toBe('PAYLOAD_TOO_LARGE');
    expect(err.details).toEqual({});
  });

  it('a body just under BODY_LIMIT is accepted', async () => {
    const res = await t.http('POST', '/example/notes', { json: { text: 'x'.repeat(900), region: 'eu' } });
    expect(res.status).toBe(201);
  });
});

describe('422 VALIDATION_ERROR lists every problem', () => {
  it('body: two bad fields and two unknown keys → four issues, each located', async () => {
    const res = await t.http('POST', '/example/notes', { json: { text: '', region: 5, color: 'red', size: 1 } });
    expect(res.status).toBe(422);
    const err = envelope(res);
    expect(err.code).toBe('VALIDATION_ERROR');
    const issues = err.details.errors as { loc: unknown[]; msg: string; type: string }[];
    expect(issues).toHaveLength(4);
    for (const i of issues) {
      expect(Object.keys(i).sort()).toEqual(['loc', 'msg', 'type']);
      expect(typeof i.msg).toBe('string');
    }
    expect(issues.map((i) => [i.loc, i.type])).toEqual([
      [['body', 'text'], 'too_small'],
      [['body', 'region'], 'invalid_type'],
      [['body', 'color'], 'unrecognized_keys'],
      [['body', 'size'], 'unrecognized_keys'],
    ]);
    expect(issues[2]!.msg).toContain('color');
  });

  it('a missing body is reported at its fields', async () => {
    const res = await t.http('POST', '/example/notes', {});
    expect(res.status).toBe(422);
    const issues = envelope(res).details.errors as { loc: unknown[] }[];
    expect(issues.map((i) => i.loc)).toEqual([['body', 'text'], ['body', 'region']]);
  });

  it('query and params problems are reported together, under their source', async () => {
    const res = await t.http('GET', '/typed?n=99&flag=c', { key: null });
    expect(res.status).toBe(422);
    const issues = envelope(res).details.errors as { loc: unknown[]; type: string }[];
    expect(issues.map((i) => [i.loc, i.type])).toEqual([
      [['query', 'n'], 'too_big'],
      [['query', 'flag'], 'invalid_value'],
    ]);
    const params = await t.http('GET', '/raise/unknown-kind', { key: null });
    expect(params.status).toBe(422);
    expect((envelope(params).details.errors as { loc: unknown[] }[])[0]!.loc).toEqual(['params', 'kind']);
  });

  it('a mongoose validation error maps to 422 with body locations', async () => {
    const res = await t.http('POST', '/gadgets', { key: null, json: { qty: 0 } });
    expect(res.status).toBe(422);
    const err = envelope(res);
    expect(err.code).toBe('VALIDATION_ERROR');
    const issues = err.details.errors as { loc: unknown[]; type: string }[];
    expect(issues.map((i) => [i.loc, i.type]).sort()).toEqual([
      [['body', 'qty'], 'min'],
      [['body', 'title'], 'required'],
    ]);
  });

  it('a mongoose cast error maps to 400 BAD_REQUEST', async () => {
    const res = await t.http('GET', '/gadgets/not-an-id', { key: null });
    expect(res.status).toBe(400);
    expect(envelope(res).code).toBe('BAD_REQUEST');
  });
});

describe('500 INTERNAL_ERROR never leaks the exception', () => {
  it('REST: generic message, no internal text, no stack', async () => {
    const res = await t.http('GET', '/example/crash', { key: null });
    expect(res.status).toBe(500);
    const err = envelope(res);
    expect(err).toEqual({ code: 'INTERNAL_ERROR', message: 'Internal server error', details: {} });
    const text = JSON.stringify(res.body);
    expect(text).not.toContain('secret internal detail');
    expect(text).not.toContain('at ');
    expect(text).not.toContain('/srv/app.ts');
  });

  it('GraphQL: exampleCrash is masked', async () => {
    const res = await t.gql('{ exampleCrash }');
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ exampleCrash: null });
    const e = res.body.errors?.[0];
    expect(e?.message).toBe('Internal server error');
    expect(e?.extensions?.code).toBe('INTERNAL_ERROR');
    expect(e?.path).toEqual(['exampleCrash']);
    const text = JSON.stringify(res.body);
    expect(text).not.toContain('secret internal detail');
    expect(text).not.toMatch(/\bat [\w/.]/);
  });

  it('the full stack is logged with the request id', async () => {
    const lines: Record<string, any>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, any>);
        cb();
      },
    });
    const config = loadConfig({ NODE_ENV: 'test', MONGODB_URI: uniqueDbUri(), ...TEST_SECRETS });
    const app = await createApp({ corePlugins: corePlugins(), config, plugins: [examplePlugin], logger: pino({ level: 'error' }, sink) });
    try {
      const port = await app.listen(0, '127.0.0.1');
      const res = await fetch(`http://127.0.0.1:${port}/example/crash`, { headers: { 'X-Request-Id': 'crash-1' } });
      expect(res.status).toBe(500);
      const line = lines.find((l) => l.request_id === 'crash-1');
      expect(line?.msg).toBe('unhandled error');
      expect(line?.err.message).toBe('secret internal detail at /srv/app.ts:12');
      expect(line?.err.stack).toContain('example-plugin.ts');
      // GraphQL: the masked resolver error is logged with the request's logger, and answered with its id.
      const gql = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Request-Id': 'gql-crash-1' }, body: JSON.stringify({ query: '{ exampleCrash }' }),
      });
      const body = (await gql.json()) as { errors: { extensions: { code: string; request_id: string } }[] };
      expect(body.errors[0]?.extensions).toMatchObject({ code: 'INTERNAL_ERROR', request_id: 'gql-crash-1' });
      const gqlLine = lines.find((l) => l.request_id === 'gql-crash-1');
      expect(gqlLine?.msg).toBe('unhandled GraphQL resolver error');
      expect(gqlLine?.err.message).toBe('secret internal detail');
    } finally {
      await app.close();
    }
  });
});
