/**
 * Traces through the official instrumentations, recorded by an in-memory exporter. The SDK starts
 * before the app's modules load (as core/observability/tracing-preload.ts does for `npm start`): the app comes
 * from dynamic imports below, after `startTracing`.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { instrumentations, startTracing } from '../../core/observability/tracing-sdk.ts';
import { currentTraceparent, injectTraceHeaders, traced } from '../../core/observability/tracing.ts';

const exporter = new InMemorySpanExporter();
const stopTracing = startTracing({
  OTEL_SERVICE_NAME: 'test', OTEL_TRACES_SAMPLER: 'parentbased_always_on', OTEL_TRACES_SAMPLER_ARG: 1, OTEL_GRAPHQL_RESOLVER_SPANS: false,
  OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_TRACES_EXPORTER: undefined,
}, new SimpleSpanProcessor(exporter));

const { buildTestApp, createTenantUser, ADMIN_KEY } = await import('../helpers/app.ts');
const { createLogger } = await import('../../core/logger.ts');
const { resourcesPlugin } = await import('../../plugins/resources/index.ts');
const { auditPlugin } = await import('../../plugins/audit/index.ts');
const { webhooksPlugin } = await import('../../plugins/webhooks/index.ts');
const { jobsPlugin } = await import('../../plugins/jobs/index.ts');
const { jobsFixturePlugin } = await import('../fixtures/jobs-fixture-plugin.ts');
const { deliver, hmac, newCalls, providersPlugin } = await import('../webhooks/helpers.ts');
const { waitRun } = await import('../jobs/helpers.ts');
const { createClient } = await import('graphql-ws');
const { default: WebSocket } = await import('ws');

type TestApp = Awaited<ReturnType<typeof buildTestApp>>;
let t: TestApp;
const logLines: Record<string, unknown>[] = [];

const spans = () => exporter.getFinishedSpans();
const byName = (name: string, trace?: string) => spans().filter((s) => s.name === name && (!trace || s.spanContext().traceId === trace));
const parentOf = (s: ReadableSpan) => spans().find((p) => p.spanContext().spanId === s.parentSpanContext?.spanId);
/** True when `s` sits under `ancestor` in its trace. */
function under(s: ReadableSpan, ancestor: ReadableSpan): boolean {
  for (let p = parentOf(s); p; p = parentOf(p)) if (p === ancestor) return true;
  return false;
}
async function until<T>(fn: () => T | undefined, what: string, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${spans().map((s) => s.name).join(', ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  const sink = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(l) as Record<string, unknown>); cb(); } });
  t = await buildTestApp({
    plugins: [resourcesPlugin, auditPlugin, webhooksPlugin, jobsPlugin, jobsFixturePlugin,
      providersPlugin(newCalls(), [{ provider: 'acme', secret: 'whsec-test-secret-0123456789', verifier: { type: 'hmac-sha256' }, event_id_path: 'meta.id' }])],
    config: { WEBHOOKS_ENABLED: 'true', JOBS_ENABLED: 'true', JOBS_POLL_INTERVAL_MS: '100', RATE_LIMIT_ENABLED: 'false' },
    logger: createLogger('info', sink),
  });
});
afterAll(async () => {
  await t?.close();
  await stopTracing();
});

describe('REST', () => {
  it('a create is a server span named by route template, with the insert and the audit flush beneath it', async () => {
    exporter.reset();
    const u = await createTenantUser(t);
    const res = await t.http('POST', '/projects', { key: u.key, json: { name: 'traced' } });
    expect(res.status).toBe(201);
    const server = await until(() => spans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /projects'), 'the server span');
    expect(server.attributes['http.route']).toBe('/projects');
    const trace = server.spanContext().traceId;
    const insert = byName('insert projects', trace)[0];
    expect(insert && under(insert, server)).toBe(true);
    expect(insert!.attributes['db.system'] ?? insert!.attributes['db.system.name']).toBe('mongodb');
    // The audit entry is written with the event by the relay the request started: same trace, its own span, the audit insert beneath it.
    const flush = await until(() => byName('audit.flush', trace)[0], 'the audit flush span');
    expect(under(flush, server)).toBe(true);
    expect(byName('insert audit_log', trace).some((s) => under(s, flush))).toBe(true);
    // The access-log line of the request carries its trace id.
    const line = logLines.find((l) => l.msg === 'request' && l.route === '/projects' && l.method === 'POST');
    expect(line).toMatchObject({ trace_id: trace, status: 201 });
    expect(typeof line!.span_id).toBe('string');
  });

  it('a provider\'s traceparent is continued by the server span (inbound webhook)', async () => {
    exporter.reset();
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parent = '00f067aa0ba902b7';
    const body = JSON.stringify({ meta: { id: 'evt_traced' } });
    const res = await deliver(t, 'acme', body, { 'X-Signature': hmac('sha256', body), traceparent: `00-${traceId}-${parent}-01` });
    expect(res.status).toBe(200);
    const server = await until(() => spans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /webhooks/:provider'), 'the webhook span');
    expect(server.spanContext().traceId).toBe(traceId);
    expect(server.parentSpanContext?.spanId).toBe(parent);
  });

  it('a request the caller did not sample records no span at all: no server, database, hook or audit span of its trace', async () => {
    exporter.reset();
    const u = await createTenantUser(t);
    const traceId = '5bf92f3577b34da6a3ce929d0e0e4737';
    const res = await t.http('POST', '/projects', { key: u.key, json: { name: 'unsampled' }, headers: { traceparent: `00-${traceId}-00f067aa0ba902b8-00` } });
    expect(res.status).toBe(201);
    await t.app.services.get('audit').flush();
    // A sampled request after it: its spans arriving means the unsampled one's would have too.
    await t.http('GET', `/projects/${(res.body as { _id: string })._id}`, { key: u.key });
    await until(() => spans().find((s) => s.kind === SpanKind.SERVER && s.name === 'GET /projects/:id'), 'the later request\'s span');
    expect(spans().filter((s) => s.spanContext().traceId === traceId).map((s) => s.name)).toEqual([]);
  });
});

describe('GraphQL', () => {
  it('an operation has parse, validate and execute spans under the server span, and no resolver spans by default', async () => {
    exporter.reset();
    const res = await t.gql('query Mine { me { email } projects { total } }');
    expect(res.status).toBe(200);
    const server = await until(() => spans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /graphql'), 'the server span');
    const trace = server.spanContext().traceId;
    for (const name of ['graphql.parse', 'graphql.validate', 'query Mine']) {
      const s = byName(name, trace)[0];
      expect(s && under(s, server), name).toBe(true);
    }
    expect(byName('query Mine', trace)[0]!.attributes['graphql.operation.name']).toBe('Mine');
    expect(spans().filter((s) => s.name.startsWith('graphql.resolve'))).toEqual([]);
  });

  it('an operation over graphql-ws is a server span of its own, with parse, validate and execute beneath it', async () => {
    exporter.reset();
    const client = createClient({ url: `${t.url.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: ADMIN_KEY }, retryAttempts: 0, lazy: true });
    try {
      const result = await new Promise<any>((resolve, reject) => {
        let last: unknown;
        client.subscribe({ query: 'query Mine { me { email } }' }, { next: (r) => (last = r), error: reject, complete: () => resolve(last) });
      });
      expect(result.data.me.email).toBeTruthy();
    } finally {
      await client.dispose();
    }
    const server = await until(() => spans().find((s) => s.kind === SpanKind.SERVER && s.name === 'WS /graphql query Mine'), 'the operation span');
    expect(server.attributes).toMatchObject({ 'graphql.operation.type': 'query', 'graphql.operation.name': 'Mine', 'http.response.status_code': 200 });
    const trace = server.spanContext().traceId;
    for (const name of ['graphql.parse', 'graphql.validate', 'query Mine']) {
      const s = byName(name, trace)[0];
      expect(s && under(s, server), name).toBe(true);
    }
    // Its access-log line carries its trace id.
    expect(logLines.find((l) => l.msg === 'request' && l.transport === 'ws')).toMatchObject({ trace_id: trace, operation_name: 'Mine' });
  });

  it('OTEL_GRAPHQL_RESOLVER_SPANS=true asks the instrumentation for resolver spans (trivial ones excepted)', () => {
    const config = (on: boolean) => instrumentations({ OTEL_GRAPHQL_RESOLVER_SPANS: on }).find((i) => i.instrumentationName.includes('graphql'))!.getConfig();
    expect(config(true)).toMatchObject({ ignoreResolveSpans: false, ignoreTrivialResolveSpans: true });
    expect(config(false)).toMatchObject({ ignoreResolveSpans: true });
  });
});

describe('context across work', () => {
  it('a job run stores the triggering request\'s traceparent and its span links to that trace', async () => {
    exporter.reset();
    const r = await t.http('POST', '/jobs/run/echo', { key: ADMIN_KEY, json: { parameters: { message: 'hi' } } });
    expect(r.status).toBeLessThan(300);
    const id = String(r.body.id ?? r.body.run_id);
    await waitRun(t, id);
    const server = spans().find((s) => s.kind === SpanKind.SERVER && s.name.startsWith('POST /jobs/run/:'))!;
    const trace = server.spanContext().traceId;
    const doc = await t.app.db.conn.collection('job_runs').findOne({}, { sort: { created_at: -1 } });
    expect(String(doc?.traceparent)).toMatch(new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`));
    const run = await until(() => byName('job echo')[0], 'the job span');
    expect(run.spanContext().traceId).not.toBe(trace);
    expect(run.links.map((l) => l.context.traceId)).toEqual([trace]);
  });

  it('injectTraceHeaders / currentTraceparent: an outbound delivery carries traceparent', async () => {
    const seen: IncomingHttpHeaders[] = [];
    const receiver = createServer((req, res) => {
      seen.push(req.headers);
      res.end('ok');
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      let expected: string | undefined;
      await traced('outbound.delivery', async () => {
        expected = currentTraceparent();
        await fetch(url, { method: 'POST', headers: injectTraceHeaders({ 'Content-Type': 'application/json' }), body: '{}' });
      });
      expect(expected).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(seen[0]!.traceparent).toBe(expected);
      // Outside any span nothing is added.
      expect(injectTraceHeaders({})).toEqual({});
      expect(currentTraceparent()).toBeUndefined();
    } finally {
      receiver.close();
    }
  });
});
