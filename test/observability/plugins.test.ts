/** Each plugin's series move when the plugin works: jobs, inbound webhooks, events, outbound API. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, type TestApp } from '../helpers/app.ts';
import { buildTestApp } from '../helpers/app.ts';
import { resourcesPlugin } from '../../plugins/resources/index.ts';
import { auditPlugin } from '../../plugins/audit/index.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { webhooksPlugin } from '../../plugins/webhooks/index.ts';
import { jobsFixturePlugin } from '../fixtures/jobs-fixture-plugin.ts';
import { deliver, hmac, newCalls, providersPlugin } from '../webhooks/helpers.ts';
import { waitRun } from '../jobs/helpers.ts';
import { outboundMetrics } from '../../plugins/webhooks/metrics.ts';
import { checkExposition, samples, scrape, total } from './helpers.ts';

const calls = newCalls();
let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp({
    plugins: [resourcesPlugin, auditPlugin, jobsPlugin, jobsFixturePlugin, webhooksPlugin,
      providersPlugin(calls, [{ provider: 'acme', secret: 'whsec-test-secret-0123456789', verifier: { type: 'hmac-sha256' }, event_id_path: 'id' }])],
    config: { JOBS_ENABLED: 'true', JOBS_POLL_INTERVAL_MS: '100', WEBHOOKS_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false' },
  });
});
afterAll(() => t?.close());

const trigger = async (job: string, parameters: Record<string, unknown> = {}) => {
  const r = await t.http('POST', `/jobs/run/${job}`, { key: ADMIN_KEY, json: { parameters } });
  expect(r.status).toBe(202);
  return waitRun(t, String(r.body.id));
};

describe('jobs', () => {
  it('runs started, completed and failed by job; duration; queue lag', async () => {
    expect((await trigger('count')).status).toBe('completed');
    expect((await trigger('fail')).status).toBe('failed');
    expect(await total(t, 'job_runs_started_total', { job_name: 'count' })).toBe(1);
    expect(await total(t, 'job_runs_completed_total', { job_name: 'count' })).toBe(1);
    expect(await total(t, 'job_runs_failed_total', { job_name: 'fail' })).toBe(1);
    expect(await total(t, 'job_run_duration_seconds', { job_name: 'count', status: 'completed' })).toBe(1);
    expect(await total(t, 'job_run_duration_seconds', { job_name: 'fail', status: 'failed' })).toBe(1);
    expect(await total(t, 'job_queue_lag_seconds', { job_name: 'count' })).toBe(1);
  });

  it('pending and running now, counted from the database at scrape time', async () => {
    const r = await t.http('POST', '/jobs/run/sleepy', { key: ADMIN_KEY, json: { parameters: { ms: 1500 } } });
    expect(r.status).toBe(202);
    await waitRun(t, String(r.body.id), ['running']);
    expect(await total(t, 'job_runs', { job_name: 'sleepy', status: 'running' })).toBe(1);
    await waitRun(t, String(r.body.id));
    expect(await samples(t, 'job_runs', { job_name: 'sleepy' })).toEqual([]);
  });
});

describe('inbound webhooks', () => {
  const send = (id: string, sig?: string) => {
    const body = JSON.stringify({ id });
    return deliver(t, 'acme', body, { 'X-Signature': sig ?? hmac('sha256', body) });
  };

  it('deliveries by provider and outcome; unknown providers fold into one label', async () => {
    expect((await send('e1')).status).toBe(200);
    expect((await send('e1')).status).toBe(200);
    expect((await send('e2', 'sha256=00')).status).toBe(401);
    for (const p of ['nobody-1', 'nobody-2']) expect((await deliver(t, p, '{}')).status).toBe(404);
    expect(await total(t, 'webhook_deliveries_total', { provider: 'acme', outcome: 'ok' })).toBe(1);
    expect(await total(t, 'webhook_deliveries_total', { provider: 'acme', outcome: 'already_processed' })).toBe(1);
    expect(await total(t, 'webhook_deliveries_total', { provider: 'acme', outcome: 'rejected_401' })).toBe(1);
    expect(await total(t, 'webhook_deliveries_total', { provider: 'unknown', outcome: 'rejected_404' })).toBe(2);
  });

  it('a failing handler: outcome failed, and the dead-letter size grows', async () => {
    calls.failWith = 'handler broke';
    try {
      expect((await send('e3')).status).toBe(500);
    } finally {
      calls.failWith = null;
    }
    expect(await total(t, 'webhook_deliveries_total', { provider: 'acme', outcome: 'failed' })).toBe(1);
    expect(await total(t, 'webhook_dead_letter_size', { provider: 'acme' })).toBe(1);
  });
});

describe('events and outbound webhooks', () => {
  it('durable consumer lag is a gauge per consumer', async () => {
    const lag = await samples(t, 'event_consumer_lag_seconds');
    const consumers = await t.app.services.get('events').lag();
    expect(lag.map((s) => s.labels.consumer).sort()).toEqual(Object.keys(consumers).sort());
  });

  it('the outbound series exist for the sender to move, and appear in the scrape', async () => {
    // The webhooks plugin registered them at set-up; registering again returns the same series.
    const m = outboundMetrics(t.app.services.get('metrics'));
    m.attempts.inc({ outcome: 'success' });
    m.delay.observe(1.5);
    m.disabled.inc();
    const names = checkExposition((await scrape(t)).text);
    for (const n of ['outbound_webhook_attempts_total', 'outbound_webhook_delivery_delay_seconds', 'outbound_webhook_endpoints_disabled_total']) expect(names).toContain(n);
    expect(await total(t, 'outbound_webhook_attempts_total', { outcome: 'success' })).toBe(1);
  });

  it('plugins add their own series on the app registry', async () => {
    const m = t.app.services.get('metrics');
    const c = m.counter({ name: 'my_plugin_things_total', help: 'Things', labelNames: ['kind'] });
    expect(m.counter({ name: 'my_plugin_things_total', help: 'Things', labelNames: ['kind'] })).toBe(c);
    c.inc({ kind: 'a' });
    expect((await scrape(t)).text).toContain('my_plugin_things_total{kind="a"} 1');
  });
});
