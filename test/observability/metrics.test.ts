import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { loadConfig, ConfigError } from '../../config/index.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { checkExposition, samples, scrape, total } from './helpers.ts';

let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp({ plugins: [resourcesPlugin, auditPlugin], config: { GRAPHQL_MAX_DEPTH: '4', RATE_LIMIT_ENABLED: 'false' } });
});
afterAll(() => t?.close());

describe('GET /metrics (main port, no token outside production)', () => {
  it('serves the Prometheus text format with process, event loop, HTTP and MongoDB series', async () => {
    await t.http('GET', '/projects');
    const res = await scrape(t);
    expect(res.status).toBe(200);
    expect(res.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const names = checkExposition(res.text);
    for (const n of ['process_cpu_seconds_total', 'nodejs_eventloop_lag_seconds', 'nodejs_eventloop_lag_p99_seconds', 'http_request_duration_seconds',
      'http_requests_in_flight', 'mongodb_pool_connections', 'mongodb_command_duration_seconds', 'event_consumer_lag_seconds',
      'audit_flush_duration_seconds', 'audit_entries_written_total', 'audit_entries_lost_total']) {
      expect(names, n).toContain(n);
    }
  });

  it("a plugin's series are registered by the plugin: absent when it is not loaded (here jobs and webhooks)", async () => {
    const names = checkExposition((await scrape(t)).text);
    for (const n of ['job_runs_started_total', 'job_runs', 'job_queue_lag_seconds', 'webhook_deliveries_total', 'webhook_dead_letter_size',
      'outbound_webhook_attempts_total', 'outbound_webhook_delivery_delay_seconds', 'outbound_webhook_endpoints_disabled_total']) {
      expect(names, n).not.toContain(n);
    }
  });

  it('HTTP requests are labelled by route template and status class, and unknown paths fold into one label', async () => {
    const created = await t.http('POST', '/projects', { json: { name: 'P' } });
    expect(created.status).toBe(201);
    await t.http('GET', `/projects/${created.body._id ?? created.body.id}`);
    await t.http('GET', '/no/such/path/1');
    await t.http('GET', '/no/such/path/2');
    expect(await total(t, 'http_request_duration_seconds', { method: 'POST', route: '/projects', status_class: '2xx' })).toBeGreaterThanOrEqual(1);
    expect(await total(t, 'http_request_duration_seconds', { method: 'GET', route: '/projects/:id', status_class: '2xx' })).toBeGreaterThanOrEqual(1);
    expect(await total(t, 'http_request_duration_seconds', { method: 'GET', route: 'unmatched', status_class: '4xx' })).toBe(2);
    const routes = (await samples(t, 'http_request_duration_seconds')).map((s) => String(s.labels.route));
    expect(routes.some((r) => r.startsWith('/no/'))).toBe(false);
  });

  it('1,000 requests to 1,000 different ids make one series per method, route and status class', async () => {
    const before = (await samples(t, 'http_request_duration_seconds')).length;
    const ids = Array.from({ length: 1000 }, () => new Types.ObjectId().toHexString());
    for (let i = 0; i < ids.length; i += 50) await Promise.all(ids.slice(i, i + 50).map((id) => t.http('GET', `/projects/${id}`)));
    const series = await samples(t, 'http_request_duration_seconds', { route: '/projects/:id' });
    const keys = new Set(series.map((s) => `${s.labels.method} ${s.labels.route} ${s.labels.status_class}`));
    expect([...keys].sort()).toEqual(['GET /projects/:id 2xx', 'GET /projects/:id 4xx']);
    expect(await total(t, 'http_request_duration_seconds', { route: '/projects/:id', status_class: '4xx' })).toBe(1000);
    // At most the one new series (404s) over what earlier tests made.
    expect((await samples(t, 'http_request_duration_seconds')).length).toBeLessThanOrEqual(before + 1);
  });

  it('GraphQL: operations by type and bounded name, errors by code, refusals by limit', async () => {
    await t.gql('query Mine { me { email } }');
    await t.gql('{ me { email } }');
    await t.gql('mutation Make { createProject(input: {name: "G"}) { _id } }');
    expect(await total(t, 'graphql_operations_total', { type: 'query', name: 'Mine' })).toBe(1);
    expect(await total(t, 'graphql_operations_total', { type: 'query', name: 'anonymous' })).toBe(1);
    // 120 distinct names: the first 100 per app keep theirs, the rest fold into `other`.
    for (let i = 0; i < 120; i += 20) await Promise.all(Array.from({ length: 20 }, (_, k) => t.gql(`query N${i + k} { me { email } }`)));
    const names = new Set((await samples(t, 'graphql_operations_total')).map((s) => String(s.labels.name)));
    expect(names.size).toBeLessThanOrEqual(102);
    expect(await total(t, 'graphql_operations_total', { name: 'other' })).toBeGreaterThan(0);

    const bad = await t.gql('{ project(id: "nope") { name } }');
    expect(bad.body.errors?.length).toBeGreaterThan(0);
    const code = String(bad.body.errors![0]!.extensions?.code);
    expect(await total(t, 'graphql_errors_total', { code })).toBeGreaterThanOrEqual(1);

    const deep = await t.gql('{ me { tenant { id name } } projects { items { _id name tags } } a: projects { items { _id } } }');
    const deeper = await t.gql('{ __typename a: me { email } ...F } fragment F on Query { projects { items { _id name } } }');
    expect(deep.status + deeper.status).toBeGreaterThan(0);
    const tooDeep = await t.gql('{ a { b { c { d { e } } } } }');
    expect(tooDeep.status).toBe(400);
    expect(await total(t, 'graphql_limit_refusals_total')).toBeGreaterThanOrEqual(1);
  });

  it('failed authentications are counted', async () => {
    const before = await total(t, 'auth_failures_total');
    expect((await t.http('GET', '/projects', { key: 'ak_not_a_real_key_0000000000' })).status).toBe(401);
    expect(await total(t, 'auth_failures_total', { locked_out: 'false' })).toBe(before + 1);
  });

  it('audit: a write moves the flush duration and the entries written', async () => {
    const written = await total(t, 'audit_entries_written_total');
    await t.http('POST', '/projects', { json: { name: 'audited' } });
    await t.app.services.get('audit').flush();
    expect(await total(t, 'audit_entries_written_total')).toBeGreaterThan(written);
    expect(await total(t, 'audit_flush_duration_seconds')).toBeGreaterThan(0);
  });

  it('MongoDB: pool gauges and command durations by command name', async () => {
    expect(await total(t, 'mongodb_pool_connections', { state: 'total' })).toBeGreaterThan(0);
    expect(await total(t, 'mongodb_pool_connections', { state: 'waiting' })).toBeGreaterThanOrEqual(0);
    expect(await total(t, 'mongodb_command_duration_seconds', { command: 'insert', outcome: 'ok' })).toBeGreaterThan(0);
    expect(await total(t, 'mongodb_command_duration_seconds', { command: 'find' })).toBeGreaterThan(0);
  });
});

describe('rate-limit refusals', () => {
  it('are counted', async () => {
    const r = await buildTestApp({ config: { RATE_LIMIT_STORE: 'memory', RATE_LIMIT_MAX: '2' } });
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await r.http('GET', '/auth/me')).status);
      expect(statuses.filter((s) => s === 429).length).toBe(2);
      expect(await total(r, 'rate_limit_refusals_total')).toBe(2);
      expect(await total(r, 'http_request_duration_seconds', { route: '/auth/me', status_class: '4xx' })).toBe(2);
    } finally {
      await r.close();
    }
  });
});

describe('protection', () => {
  it('METRICS_TOKEN: 401 without or with a wrong token, 200 with it; /metrics needs no API key', async () => {
    const token = 'metrics-token-0123456789abcdef';
    const p = await buildTestApp({ config: { METRICS_TOKEN: token } });
    try {
      const none = await scrape(p);
      expect(none.status).toBe(401);
      expect(JSON.parse(none.text).error.code).toBe('AUTH_REQUIRED');
      expect((await scrape(p, 'wrong-token-0123456789abcdef00')).status).toBe(401);
      const ok = await scrape(p, token);
      expect(ok.status).toBe(200);
      checkExposition(ok.text);
    } finally {
      await p.close();
    }
  });

  it('METRICS_PORT: served on its own port only (main port answers 404), token required there too when set', async () => {
    const token = 'metrics-token-0123456789abcdef';
    const p = await buildTestApp({ config: { METRICS_PORT: '0', METRICS_TOKEN: token } });
    try {
      expect((await scrape(p, token)).status).toBe(404);
      const port = p.app.services.get('metrics').port!;
      expect(port).toBeGreaterThan(0);
      const url = `http://127.0.0.1:${port}/metrics`;
      expect((await fetch(url)).status).toBe(401);
      const ok = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      checkExposition(await ok.text());
      expect((await fetch(`http://127.0.0.1:${port}/projects`)).status).toBe(404);
    } finally {
      await p.close();
    }
  });

  it('METRICS_ENABLED=false: no /metrics route', async () => {
    const p = await buildTestApp({ config: { METRICS_ENABLED: 'false' } });
    try {
      expect((await scrape(p)).status).toBe(404);
    } finally {
      await p.close();
    }
  });

  it('production refuses to start with metrics open on the API port', () => {
    const prod = { NODE_ENV: 'production', TOKEN_SECRET: 'x'.repeat(40), CURSOR_HMAC_SECRET: 'y'.repeat(40) };
    expect(() => loadConfig(prod)).toThrow(ConfigError);
    expect(() => loadConfig(prod)).toThrow(/METRICS_ENABLED: in production \/metrics must not be open on the API port: set METRICS_PORT .* or METRICS_TOKEN/);
    expect(loadConfig({ ...prod, METRICS_TOKEN: 'z'.repeat(20) }).METRICS_TOKEN).toBe('z'.repeat(20));
    expect(loadConfig({ ...prod, METRICS_PORT: '9464' }).METRICS_PORT).toBe(9464);
    expect(loadConfig({ ...prod, METRICS_ENABLED: 'false' }).METRICS_ENABLED).toBe(false);
  });
});
