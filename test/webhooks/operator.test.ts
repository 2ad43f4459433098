/**
 * Operator endpoints and GraphQL: listing with filters and offset pagination, the dead-letter
 * queue, retry (success, failure, 409, 404, by stored id or provider event id), purge (only old
 * processed events), and access by role: system admin only; tenant admin / user 403; anonymous 401.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { printType } from 'graphql';
import { buildTestApp, createTenantUser, envelope, type TestApp } from '../helpers/app.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { webhookEventModel } from '../../plugins/webhooks/model.ts';
import { deliver, hmac, newCalls, providersPlugin, SECRET } from './helpers.ts';

const calls = newCalls();
let t: TestApp;
let tenantAdmin: string;
let user: string;
const model = () => webhookEventModel(t.app.db.conn);
const send = (provider: string, id: string) => {
  const b = JSON.stringify({ id });
  return deliver(t, provider, b, { 'X-Signature': hmac('sha256', b) });
};

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [
      webhooksPlugin,
      providersPlugin(calls, [
        { provider: 'alpha', secret: SECRET, verifier: { type: 'hmac-sha256' }, event_id_path: 'id', max_retries: 0 },
        { provider: 'beta', secret: SECRET, verifier: { type: 'hmac-sha256' }, event_id_path: 'id', max_retries: 0 },
      ]),
    ],
    config: { WEBHOOKS_ENABLED: 'true', WEBHOOK_EVENT_RETENTION_DAYS: '30' },
  });
  tenantAdmin = (await createTenantUser(t, { roles: ['admin'] })).key;
  user = (await createTenantUser(t, { roles: ['user'] })).key;
});
afterAll(() => t?.close());
beforeEach(async () => {
  calls.list.length = 0;
  calls.failWith = null;
  await model().deleteMany({});
});

describe('GET /webhooks/events', () => {
  it('filters by provider and status, paginates with page/per_page and the X-Total-* headers', async () => {
    for (const id of ['a1', 'a2', 'a3']) await send('alpha', id);
    calls.failWith = 'nope';
    await send('alpha', 'a4');
    await send('beta', 'b1');
    calls.failWith = null;

    const all = await t.http('GET', '/webhooks/events');
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(5);
    const page2 = await t.http('GET', '/webhooks/events?provider=alpha&per_page=2&page=2');
    expect(page2.body).toMatchObject({ total: 4, page: 2, per_page: 2, total_pages: 2 });
    expect(page2.body.items).toHaveLength(2);
    expect(page2.headers.get('x-total-count')).toBe('4');
    expect(page2.headers.get('x-total-pages')).toBe('2');
    expect(page2.headers.get('x-page')).toBe('2');
    expect(page2.headers.get('x-per-page')).toBe('2');
    // Newest first.
    const first = await t.http('GET', '/webhooks/events?provider=alpha&per_page=1');
    expect(first.body.items[0]).toMatchObject({ provider: 'alpha', event_id: 'a4', status: 'failed', error: 'nope' });
    const failed = await t.http('GET', '/webhooks/events?status=failed');
    expect(failed.body.items.map((e: any) => e.event_id).sort()).toEqual(['a4', 'b1']);
    const betaOk = await t.http('GET', '/webhooks/events?provider=beta&status=processed');
    expect(betaOk.body.total).toBe(0);
  });

  it('bad parameters are 422', async () => {
    for (const q of ['status=weird', 'per_page=101', 'page=0', 'unknown=1']) {
      const res = await t.http('GET', `/webhooks/events?${q}`);
      expect(res.status).toBe(422);
      expect(envelope(res).code).toBe('VALIDATION_ERROR');
    }
  });
});

describe('dead-letter queue', () => {
  it('lists failed events only', async () => {
    await send('alpha', 'ok1');
    calls.failWith = 'boom';
    await send('alpha', 'f1');
    await send('beta', 'f2');
    const res = await t.http('GET', '/webhooks/dead-letter');
    expect(res.status).toBe(200);
    expect(res.body.items.map((e: any) => e.event_id).sort()).toEqual(['f1', 'f2']);
    expect(res.headers.get('x-total-count')).toBe('2');
    const beta = await t.http('GET', '/webhooks/dead-letter?provider=beta');
    expect(beta.body.items.map((e: any) => e.event_id)).toEqual(['f2']);
  });

  it('retry re-runs the handler with the stored payload: success makes it processed', async () => {
    calls.failWith = 'boom';
    await send('alpha', 'r1');
    const stored = await model().findOne({ event_id: 'r1' }).lean();
    calls.failWith = null;
    const res = await t.http('POST', `/webhooks/dead-letter/${String(stored!._id)}/retry`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: String(stored!._id), event_id: 'r1', status: 'processed', error: null });
    expect(calls.list.map((c) => c.payload)).toEqual([{ id: 'r1' }, { id: 'r1' }]);
    expect(calls.list[1]!.event).toMatchObject({ attempt: 2, actor: { id: 'system' } });
    expect(await model().findById(stored!._id).lean()).toMatchObject({ status: 'processed', error: null, attempts: 2 });
    expect((await model().findById(stored!._id).lean())!.processed_at).toBeInstanceOf(Date);
    // No longer failed: 409.
    const again = await t.http('POST', `/webhooks/dead-letter/${String(stored!._id)}/retry`);
    expect(again.status).toBe(409);
    expect(envelope(again)).toMatchObject({ code: 'CONFLICT', details: { status: 'processed' } });
  });

  it('retry that fails again leaves it failed with the updated error; the provider event id works too', async () => {
    calls.failWith = 'first';
    await send('alpha', 'r2');
    calls.failWith = 'second';
    const res = await t.http('POST', '/webhooks/dead-letter/r2/retry');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ event_id: 'r2', status: 'failed', error: 'second' });
    expect(await model().findOne({ event_id: 'r2' }).lean()).toMatchObject({ status: 'failed', error: 'second', attempts: 2 });
  });

  it('an unknown event is 404; a provider event id shared by two providers is 409', async () => {
    const res = await t.http('POST', '/webhooks/dead-letter/000000000000000000000000/retry');
    expect(res.status).toBe(404);
    expect(envelope(res).code).toBe('NOT_FOUND');
    expect((await t.http('POST', '/webhooks/dead-letter/nothing-here/retry')).status).toBe(404);
    calls.failWith = 'x';
    await send('alpha', 'same');
    await send('beta', 'same');
    const amb = await t.http('POST', '/webhooks/dead-letter/same/retry');
    expect(amb.status).toBe(409);
    expect(calls.list).toHaveLength(2);
  });
});

describe('DELETE /webhooks/events/purge', () => {
  it('deletes only processed events older than retention_days (default WEBHOOK_EVENT_RETENTION_DAYS) and answers the count', async () => {
    const day = 86_400_000;
    const base = { provider: 'alpha', payload: {}, headers: {}, attempts: 1, updated_at: new Date() };
    const at = (days: number) => new Date(Date.now() - days * day);
    await model().create([
      { ...base, event_id: 'old-ok', status: 'processed', created_at: at(40) },
      { ...base, event_id: 'old-ok-2', status: 'processed', created_at: at(100) },
      { ...base, event_id: 'old-failed', status: 'failed', error: 'x', created_at: at(100) },
      { ...base, event_id: 'old-processing', status: 'processing', created_at: at(100) },
      { ...base, event_id: 'new-ok', status: 'processed', created_at: at(5) },
    ]);
    const res = await t.http('DELETE', '/webhooks/events/purge?retention_days=60');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ deleted_count: 1, retention_days: 60 });
    const def = await t.http('DELETE', '/webhooks/events/purge');
    expect(def.body).toMatchObject({ deleted_count: 1, retention_days: 30 });
    const left = (await model().find({}).lean()).map((d) => d.event_id).sort();
    expect(left).toEqual(['new-ok', 'old-failed', 'old-processing']);
    expect((await t.http('DELETE', '/webhooks/events/purge?retention_days=0')).status).toBe(422);
  });
});

describe('access: system administrators only', () => {
  const routes: [string, string][] = [
    ['GET', '/webhooks/events'],
    ['GET', '/webhooks/dead-letter'],
    ['POST', '/webhooks/dead-letter/000000000000000000000000/retry'],
    ['DELETE', '/webhooks/events/purge?retention_days=1'],
  ];

  it('REST: tenant admin and user 403, anonymous 401; nothing is deleted', async () => {
    await model().create({ provider: 'alpha', event_id: 'keep', payload: {}, headers: {}, status: 'processed', created_at: new Date(0), updated_at: new Date() });
    for (const [method, path] of routes) {
      for (const key of [tenantAdmin, user]) {
        const res = await t.http(method, path, { key });
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(envelope(res).code).toBe('ACCESS_DENIED');
      }
      const anon = await t.http(method, path, { key: null });
      expect(anon.status).toBe(401);
      expect(envelope(anon).code).toBe('AUTH_REQUIRED');
    }
    expect(await model().countDocuments({ event_id: 'keep' })).toBe(1);
  });

  it('GraphQL: same rules and the same service', async () => {
    calls.failWith = 'g';
    await send('alpha', 'g1');
    const q = 'query($p: String, $s: String) { webhookEvents(provider: $p, status: $s, per_page: 10) { total page per_page total_pages items { id event_id status error retry_count is_duplicate headers payload } } webhookDeadLetter { total items { event_id } } }';
    const ok = await t.gql(q, { p: 'alpha', s: 'failed' });
    expect(ok.body.errors).toBeUndefined();
    expect(ok.body.data.webhookEvents).toMatchObject({ total: 1, page: 1, per_page: 10, items: [{ event_id: 'g1', status: 'failed', error: 'g', payload: { id: 'g1' } }] });
    expect(ok.body.data.webhookDeadLetter.items).toEqual([{ event_id: 'g1' }]);
    calls.failWith = null;
    const m = 'mutation($id: String!) { retryWebhookEvent(event_id: $id) { event_id status error } }';
    for (const [key, code] of [[tenantAdmin, 'ACCESS_DENIED'], [user, 'ACCESS_DENIED'], [null, 'AUTH_REQUIRED']] as const) {
      const denied = await t.gql(q, {}, { key });
      expect(denied.body.errors?.[0]?.extensions?.code).toBe(code);
      const mut = await t.gql(m, { id: 'g1' }, { key });
      expect(mut.body.errors?.[0]?.extensions?.code).toBe(code);
    }
    expect(calls.list).toHaveLength(1);
    const retried = await t.gql(m, { id: 'g1' });
    expect(retried.body.data.retryWebhookEvent).toEqual({ event_id: 'g1', status: 'processed', error: null });
    const conflict = await t.gql(m, { id: 'g1' });
    expect(conflict.body.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const bad = await t.gql('{ webhookEvents(status: "weird") { total } }');
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
  });

  it('the role is checked before the input: bad arguments from a tenant admin are 403, not 422', async () => {
    const rest = await t.http('GET', '/webhooks/events?status=weird&per_page=1000', { key: tenantAdmin });
    expect(rest.status).toBe(403);
    const gql = await t.gql('{ webhookEvents(status: "weird", per_page: 1000) { total } }', {}, { key: tenantAdmin });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
    expect(gql.body.errors?.[0]?.message).toBe('System administrator required');
    const mut = await t.gql('mutation { retryWebhookEvent(event_id: "") { status } }', {}, { key: user });
    expect(mut.body.errors?.[0]?.extensions?.code).toBe('ACCESS_DENIED');
  });

  it('the GraphQL schema pieces', () => {
    const s = t.app.schema;
    expect(printType(s.getType('WebhookEvent')!)).toMatchSnapshot();
    expect(printType(s.getType('WebhookEventPage')!)).toMatchSnapshot();
    expect(printType(s.getType('WebhookRetryResult')!)).toMatchSnapshot();
    const query = s.getQueryType()!.getFields();
    expect(query.webhookEvents!.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['page: Int', 'per_page: Int', 'provider: String', 'status: String']);
    expect(String(query.webhookDeadLetter!.type)).toBe('WebhookEventPage!');
    const mut = s.getMutationType()!.getFields().retryWebhookEvent!;
    expect(mut.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['event_id: String!']);
    expect(String(mut.type)).toBe('WebhookRetryResult!');
  });
});
