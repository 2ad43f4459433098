/**
 * What a caller sees of a failed run: system-scoped actors get the error and its traceback as
 * stored; a tenant administrator gets the error message only, its secrets redacted, and no
 * traceback (it names server files). One rule for REST, the SSE stream and GraphQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { ADMIN_KEY, buildTestApp, createTenantUser, type TestApp } from '../helpers/app.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { definePlugin } from '../../core/plugin.ts';
import { FAST, waitRun } from './helpers.ts';

const SECRETS = ['user:pass', 'db.internal', 'hunter2', 'tok3n-abc.def', 's3cr3t-api'];
const MESSAGE = 'cannot reach mongodb://user:pass@db.internal:27017/x (password=hunter2, Authorization: Bearer tok3n-abc.def, api_key=s3cr3t-api)';

/** `leaky`: a per-tenant job whose error quotes a connection string with credentials and other secrets. */
const leakyPlugin = definePlugin({
  name: 'jobs-leaky',
  setup: () => ({
    jobs: [{
      name: 'leaky', per_tenant: true, max_attempts: 1, timeout: 30,
      run() {
        throw new Error(MESSAGE);
      },
    }],
  }),
});

let t: TestApp;
let A: Awaited<ReturnType<typeof createTenantUser>>;
let runId: string;
beforeAll(async () => {
  t = await buildTestApp({ plugins: [jobsPlugin, leakyPlugin], config: FAST });
  A = await createTenantUser(t, { roles: ['admin'] });
  const r = await t.http('POST', '/jobs/run/leaky', { key: A.key, json: { parameters: {} } });
  expect(r.status).toBe(202);
  runId = r.body.id;
  expect(await waitRun(t, runId, ['failed', 'completed'], A.key)).toMatchObject({ status: 'failed' });
});
afterAll(() => t?.close());

const expectNoSecret = (value: unknown) => {
  const text = JSON.stringify(value);
  for (const s of SECRETS) expect(text).not.toContain(s);
};

async function stream(key: string): Promise<EventSourceMessage[]> {
  const res = await fetch(`${t.url}/jobs/runs/${runId}/logs`, { headers: { 'X-API-Key': key, Accept: 'text/event-stream' } });
  expect(res.status).toBe(200);
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => events.push(e) });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return events;
    parser.feed(value);
  }
}

const RUN_QUERY = 'query($id: String!) { jobRun(id: $id) { status error error_traceback logs { message } } }';

describe('a failed run of a handler whose error quotes secrets', () => {
  it('REST: the tenant administrator gets the redacted message and no traceback; the system administrator all of it', async () => {
    const mine = await t.http('GET', `/jobs/runs/${runId}`, { key: A.key });
    expect(mine.status).toBe(200);
    expect(mine.body.error_traceback).toBeNull();
    expect(mine.body.error).toContain('mongodb');
    expect(mine.body.error).toContain('[redacted]');
    expectNoSecret(mine.body);
    const list = await t.http('GET', '/jobs/runs', { key: A.key });
    expect(list.body.items[0]).toMatchObject({ id: runId, error_traceback: null });
    expectNoSecret(list.body);

    const sys = await t.http('GET', `/jobs/runs/${runId}`, { key: ADMIN_KEY });
    expect(sys.body.error).toBe(MESSAGE);
    expect(sys.body.error_traceback).toMatch(/^Error: cannot reach mongodb:\/\/user:pass@/);
    expect(sys.body.error_traceback).toContain('failure-visibility.test.ts');
  });

  it('SSE: the end event and the log lines carry the redacted message to the tenant administrator', async () => {
    const mine = await stream(A.key);
    const end = mine.at(-1)!;
    expect(end.event).toBe('end');
    expect(JSON.parse(end.data)).toMatchObject({ status: 'failed', error: expect.stringContaining('[redacted]') });
    expectNoSecret(mine.map((e) => e.data));
    const sys = await stream(ADMIN_KEY);
    expect(JSON.parse(sys.at(-1)!.data).error).toBe(MESSAGE);
  });

  it('GraphQL jobRun: the same view', async () => {
    const mine = await t.gql(RUN_QUERY, { id: runId }, { key: A.key });
    expect(mine.body.errors).toBeUndefined();
    expect(mine.body.data.jobRun).toMatchObject({ status: 'failed', error_traceback: null, error: expect.stringContaining('[redacted]') });
    expectNoSecret(mine.body);
    const sys = await t.gql(RUN_QUERY, { id: runId }, { key: ADMIN_KEY });
    expect(sys.body.data.jobRun.error).toBe(MESSAGE);
    expect(sys.body.data.jobRun.error_traceback).toContain('failure-visibility.test.ts');
  });
});
