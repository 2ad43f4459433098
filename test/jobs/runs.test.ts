/**
 * The primary framework through HTTP: registry, manual runs, the JobRun state machine (retries on
 * the same document, timeouts, cancellation through the AbortSignal, results), errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { expectError, type TestApp } from '../helpers/app.ts';
import { jobsApp, trigger, until, waitRun } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await jobsApp();
});
afterAll(() => t?.close());

const calls = (filter: Record<string, unknown>) => t.app.db.conn.collection('jobs_fixture_calls').find(filter).toArray();

describe('registry', () => {
  it('lists every plugin job with its documented fields and the extended ones', async () => {
    const r = await t.http('GET', '/jobs/registry');
    expect(r.status).toBe(200);
    const names = r.body.map((j: { name: string }) => j.name);
    for (const n of ['cleanup_expired_tokens', 'cleanup_audit_log', 'cleanup_job_runs', 'purge_soft_deleted', 'calculate_next_schedules', 'echo'])
      expect(names).toContain(n);
    const timeouts = Object.fromEntries(r.body.map((j: { name: string; timeout: number }) => [j.name, j.timeout]));
    expect(timeouts).toMatchObject({ cleanup_expired_tokens: 300, cleanup_audit_log: 600, cleanup_job_runs: 300, purge_soft_deleted: 600, calculate_next_schedules: 120 });
    const echo = r.body.find((j: { name: string }) => j.name === 'echo');
    expect(echo).toEqual({
      name: 'echo', description: 'Returns its parameters', timeout: 30, max_attempts: 1, per_tenant: false, timeout_seconds: 30, retries: 0, plugin: 'jobs-fixture',
      params: {
        message: { type: 'string', required: true, description: 'Anything' },
        level: { type: 'string', required: false, description: '', enum: ['low', 'high'] },
        day: { type: 'string', required: false, description: '' },
      },
    });
  });

  it('applies the defaults: description empty, timeout 3600, max_attempts 3', async () => {
    const r = await t.http('GET', '/jobs/registry/cleanup_audit_log');
    expect(r.body).toMatchObject({ timeout: 600, max_attempts: 3 });
    const count = await t.http('GET', '/jobs/registry/count');
    expect(count.body).toMatchObject({ name: 'count', max_attempts: 1 });
    // `bare` (test/jobs/helpers.ts) declares neither description nor timeout nor max_attempts nor params.
    const expected = { name: 'bare', description: '', timeout: 3600, max_attempts: 3, timeout_seconds: 3600, retries: 2, per_tenant: false, params: {}, plugin: 'jobs-test' };
    expect((await t.http('GET', '/jobs/registry')).body.find((j: { name: string }) => j.name === 'bare')).toEqual(expected);
    expect((await t.http('GET', '/jobs/registry/bare')).body).toEqual(expected);
    // Its runs take them.
    const run = await trigger(t, 'bare');
    expect(run.body).toMatchObject({ max_attempts: 3, timeout_seconds: 3600 });
    expect(await waitRun(t, run.body.id)).toMatchObject({ status: 'completed', result: { bare: true } });
  });

  it('an unknown job is 404 in the envelope', async () => {
    expectError(await t.http('GET', '/jobs/registry/nope'), 404, 'NOT_FOUND');
  });
});

describe('manual runs', () => {
  it('POST /jobs/run/{job_name} answers 202 with the pending run, which completes with its result', async () => {
    const r = await trigger(t, 'echo', { message: 'hi' });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({ job_name: 'echo', job_type: 'manual', status: 'pending', attempt: 1, max_attempts: 1, parameters: { message: 'hi' }, trigger: 'manual' });
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'completed', result: { echoed: { message: 'hi' } }, error: null, error_traceback: null });
    expect(run.started_at).toBeTruthy();
    expect(run.completed_at).toBeTruthy();
    expect(run.duration_ms).toBeGreaterThanOrEqual(0);
    expect(run.duration_seconds).toBe(run.duration_ms / 1000);
    expect(run.logs.map((l: { message: string }) => l.message)).toContain('echo hi');
    expect(run.triggered_by).toMatch(/^[0-9a-f]{24}$/);
  });

  it('POST /jobs/run with {job, params} answers {run_id, status: pending, message}', async () => {
    const r = await t.http('POST', '/jobs/run', { json: { job: 'echo', params: { message: 'x' } } });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ run_id: expect.any(String), status: 'pending', message: expect.any(String) });
    expect((await waitRun(t, r.body.run_id)).status).toBe('completed');
  });

  it('an unknown job is 404; parameters failing the schema are 422; nothing is written', async () => {
    const before = await t.app.db.conn.collection('job_runs').countDocuments();
    expectError(await trigger(t, 'nope'), 404, 'NOT_FOUND');
    expectError(await t.http('POST', '/jobs/run', { json: { job: 'nope', params: {} } }), 404, 'NOT_FOUND');
    const bad = expectError(await trigger(t, 'echo', { message: 5 }), 422, 'VALIDATION_ERROR');
    expect(bad.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'parameters', 'message'] })]);
    const bad2 = expectError(await t.http('POST', '/jobs/run', { json: { job: 'echo', params: { level: 'mid', message: 'a' } } }), 422, 'VALIDATION_ERROR');
    expect(bad2.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'params', 'level'] })]);
    expect(await t.app.db.conn.collection('job_runs').countDocuments()).toBe(before);
  });

  it('the JobRunner service queues runs for other plugins', async () => {
    const { systemActor } = await import('../../core/context.ts');
    const res = await t.app.services.get('jobs').trigger('echo', { message: 'svc' }, { actor: systemActor() });
    expect(res).toEqual({ run_id: expect.any(String), status: 'pending' });
    expect(await waitRun(t, res.run_id)).toMatchObject({ status: 'completed', triggered_by: 'system' });
    await expect(t.app.services.get('jobs').trigger('echo', { message: 1 }, { actor: systemActor() })).rejects.toMatchObject({ status: 422 });
    await expect(t.app.services.get('jobs').trigger('nope', {}, { actor: systemActor() })).rejects.toMatchObject({ status: 404 });
  });
});

describe('state machine', () => {
  it('a failing attempt is retried on the same document with attempt incremented, after a wait', async () => {
    const r = await trigger(t, 'flaky', { succeed_on: 3 });
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'completed', attempt: 3, max_attempts: 3, result: { attempt: 3 } });
    const c = await calls({ run_id: r.body.id });
    expect(c.map((x) => x.attempt)).toEqual([1, 2, 3]);
    // The wait between attempts (JOBS_RETRY_DELAY_MS = 100 here) separates them.
    expect(c[1]!.at.getTime() - c[0]!.at.getTime()).toBeGreaterThanOrEqual(100);
    expect(run.logs.filter((l: { level: string }) => l.level === 'warning')).toHaveLength(2);
    expect(await t.app.db.conn.collection('job_runs').countDocuments({ job_name: 'flaky' })).toBe(1);
  });

  it('the last failing attempt stores error and error_traceback', async () => {
    const r = await trigger(t, 'flaky', { succeed_on: 99 });
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'failed', attempt: 3, error: 'flaky failure on attempt 3', result: null });
    expect(run.error_traceback).toContain('Error: flaky failure on attempt 3');
    expect(run.error_traceback).toContain('jobs-fixture-plugin.ts');
  });

  it('a timeout aborts the signal and counts as a failed attempt', async () => {
    const r = await trigger(t, 'slow_timeout');
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'failed', attempt: 2, max_attempts: 2 });
    expect(run.error).toMatch(/timed out after 1 s/);
    const aborted = await until(async () => {
      const c = await calls({ run_id: r.body.id, phase: 'aborted' });
      return c.length === 2 ? c : null;
    });
    expect(aborted.map((c) => c.reason)).toEqual([expect.stringMatching(/timed out/), expect.stringMatching(/timed out/)]);
  });

  it('cancel while running aborts the function through its signal; the run ends cancelled', async () => {
    const r = await trigger(t, 'sleepy', { ms: 20_000, steps: 400 });
    await waitRun(t, r.body.id, ['running']);
    const c = await t.http('POST', `/jobs/runs/${r.body.id}/cancel`);
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ status: 'cancelled' });
    // The function stopped: it never reaches its end.
    await new Promise((res) => setTimeout(res, 500));
    expect(await calls({ run_id: r.body.id, phase: 'end' })).toHaveLength(0);
    const run = await waitRun(t, r.body.id);
    expect(run.status).toBe('cancelled');
    expect(run.completed_at).toBeTruthy();
  });

  it('cancelling a finished run is 409; an unknown run is 404', async () => {
    const r = await trigger(t, 'echo', { message: 'done' });
    await waitRun(t, r.body.id);
    const err = expectError(await t.http('POST', `/jobs/runs/${r.body.id}/cancel`), 409, 'CONFLICT');
    expect(err.details).toEqual({ status: 'completed' });
    expectError(await t.http('POST', '/jobs/runs/5f0000000000000000000000/cancel'), 404, 'NOT_FOUND');
    expectError(await t.http('GET', '/jobs/runs/nope'), 422, 'VALIDATION_ERROR');
  });

  it('a function that ignores the signal has its result discarded', async () => {
    const r = await trigger(t, 'deaf', { ms: 800 });
    await waitRun(t, r.body.id, ['running']);
    expect((await t.http('POST', `/jobs/runs/${r.body.id}/cancel`)).status).toBe(200);
    await until(async () => (await calls({ run_id: r.body.id, phase: 'end' })).length === 1);
    await new Promise((res) => setTimeout(res, 300));
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'cancelled', result: null });
    expect(run.logs.map((l: { message: string }) => l.message)).not.toContain('deaf finished anyway');
  });

  it('a function that ignores its signal past its timeout has its result, logs and progress discarded', async () => {
    // deaf_timeout: timeout 1 s, max_attempts 1; it goes on for 2.5 s, then logs, reports progress and returns.
    const r = await trigger(t, 'deaf_timeout', { ms: 2500 });
    const failed = await waitRun(t, r.body.id, ['completed', 'failed', 'cancelled']);
    expect(failed).toMatchObject({ status: 'failed', attempt: 1, result: null });
    expect(failed.error).toMatch(/timed out after 1 s/);
    // The function did finish, later.
    await until(async () => (await calls({ run_id: r.body.id, phase: 'end' })).length === 1);
    await new Promise((res) => setTimeout(res, 500));
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'failed', result: null, error: failed.error, completed_at: failed.completed_at, progress_current: 0, progress_message: null });
    const messages = run.logs.map((l: { message: string }) => l.message);
    expect(messages).not.toContain('deaf_timeout finished anyway');
    expect(messages).not.toContain('deaf_timeout progress after its timeout');
    expect(messages).toEqual(failed.logs.map((l: { message: string }) => l.message));
  });

  it('every log line carries its timestamp (an ISO date within the run)', async () => {
    const r = await trigger(t, 'sleepy', { ms: 200, steps: 2 });
    const run = await waitRun(t, r.body.id);
    expect(run.status).toBe('completed');
    expect(run.logs.length).toBeGreaterThanOrEqual(5); // 2 progress, 2 step lines, completed
    const start = new Date(run.started_at).getTime();
    const end = new Date(run.completed_at).getTime();
    let previous = 0;
    for (const l of run.logs as { timestamp: string }[]) {
      expect(l.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      const at = new Date(l.timestamp).getTime();
      expect(at).toBeGreaterThanOrEqual(start);
      expect(at).toBeLessThanOrEqual(end);
      expect(at).toBeGreaterThanOrEqual(previous);
      previous = at;
    }
  });

  it('a non-JSON-serialisable result fails the run with a clear error, without retrying', async () => {
    const r = await trigger(t, 'bad_result');
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'failed', attempt: 1, error: "The job's result is not JSON-serialisable: result.data is a Map" });
  });

  it('progress is visible on the run while it runs', async () => {
    const r = await trigger(t, 'sleepy', { ms: 2_000, steps: 4 });
    const mid = await until(async () => {
      const g = await t.http('GET', `/jobs/runs/${r.body.id}`);
      return g.body.progress_current >= 1 && g.body.status === 'running' ? g.body : null;
    });
    expect(mid).toMatchObject({ progress_total: 4, progress_message: expect.stringMatching(/^step \d$/) });
    const run = await waitRun(t, r.body.id);
    expect(run).toMatchObject({ status: 'completed', progress_current: 4, progress_total: 4, progress_message: 'step 4', percentage: 100 });
    expect(run.logs.filter((l: { level: string }) => l.level === 'progress').map((l: { percentage: number }) => l.percentage)).toEqual([25, 50, 75, 100]);
  });
});

describe('GET /jobs/runs', () => {
  it('filters by job_name and status and pages with the standard headers', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await trigger(t, 'count')).body.id);
    for (const id of ids) await waitRun(t, id);
    const r = await t.http('GET', '/jobs/runs?job_name=count&status=completed&per_page=2&page=1');
    expect(r.status).toBe(200);
    expect(r.headers.get('x-total-count')).toBe('3');
    expect(r.headers.get('x-total-pages')).toBe('2');
    expect(r.headers.get('x-page')).toBe('1');
    expect(r.headers.get('x-per-page')).toBe('2');
    expect(r.body).toMatchObject({ total: 3, page: 1, per_page: 2, total_pages: 2 });
    expect(r.body.items.map((x: { id: string }) => x.id)).toEqual([ids[2], ids[1]]);
    expect(r.body.items[0].logs).toBeUndefined();
    const p2 = await t.http('GET', '/jobs/runs?job_name=count&page=2&per_page=2');
    expect(p2.body.items.map((x: { id: string }) => x.id)).toEqual([ids[0]]);
    expect([p2.headers.get('x-page'), p2.headers.get('x-per-page'), p2.headers.get('x-total-count'), p2.headers.get('x-total-pages')]).toEqual(['2', '2', '3', '2']);
    // Defaults: page 1, 20 per page.
    const d = await t.http('GET', '/jobs/runs?job_name=count');
    expect([d.headers.get('x-page'), d.headers.get('x-per-page')]).toEqual(['1', '20']);
    expect(d.body).toMatchObject({ page: 1, per_page: 20 });
    expectError(await t.http('GET', '/jobs/runs?status=weird'), 422, 'VALIDATION_ERROR');
  });
});

describe('recovery', () => {
  it('a pending run that lost its Agenda job (crash between insert and enqueue) is queued again by the sweep', async () => {
    const res = await t.app.db.conn.collection('job_runs').insertOne({
      job_name: 'count', job_type: 'manual', status: 'pending', parameters: {}, attempt: 1, max_attempts: 1, timeout_seconds: 30, retry_delay_ms: 0,
      logs: [], chain_next: [], takeovers: 0, progress_current: 0, trigger: 'manual', created_at: new Date(Date.now() - 60_000), updated_at: new Date(),
    });
    // The sweep runs every 50 poll intervals (at least 5 s).
    const run = await waitRun(t, String(res.insertedId), ['completed', 'failed'], undefined, 25_000);
    expect(run.status).toBe('completed');
  });
});

describe('job_runs collection', () => {
  it('has the indexes of the model: (job_name, started_at desc), status, (tenant_id, created_at desc), parent_job_id, created_at desc, unique dedupe_key', async () => {
    const indexes = await t.app.db.conn.collection('job_runs').listIndexes().toArray();
    const byKey = new Map(indexes.map((i) => [JSON.stringify(i.key), i]));
    for (const key of [{ job_name: 1, started_at: -1 }, { status: 1 }, { tenant_id: 1, created_at: -1 }, { parent_job_id: 1 }, { created_at: -1 }, { dedupe_key: 1 }])
      expect(byKey.has(JSON.stringify(key)), `index ${JSON.stringify(key)} in ${[...byKey.keys()].join(' ')}`).toBe(true);
    const dedupe = byKey.get(JSON.stringify({ dedupe_key: 1 }))!;
    expect(dedupe.unique).toBe(true);
    // Only runs that carry a key take part (plain manual runs have none).
    expect(dedupe.partialFilterExpression).toEqual({ dedupe_key: { $type: 'string' } });
  });
});

describe('a pending run (queued behind the concurrency limit)', () => {
  let one: TestApp;
  beforeAll(async () => {
    one = await jobsApp({ JOBS_CONCURRENCY: '1' });
  });
  afterAll(() => one?.close());

  it('cancelled while pending ends cancelled; its function never runs, even when a slot frees up', async () => {
    const oneCalls = (filter: Record<string, unknown>) => one.app.db.conn.collection('jobs_fixture_calls').find(filter).toArray();
    const blocker = await trigger(one, 'sleepy', { ms: 30_000, steps: 600 });
    await waitRun(one, blocker.body.id, ['running']);
    const queued = await trigger(one, 'count');
    expect(queued.status).toBe(202);
    // The only slot is taken: the run stays pending (several poll intervals).
    await new Promise((res) => setTimeout(res, 1000));
    expect((await one.http('GET', `/jobs/runs/${queued.body.id}`)).body.status).toBe('pending');
    const c = await one.http('POST', `/jobs/runs/${queued.body.id}/cancel`);
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ status: 'cancelled', started_at: null, duration_ms: null });
    expect(c.body.completed_at).toBeTruthy();
    // Free the slot: Agenda now delivers the cancelled run's job, whose claim finds it no longer pending.
    expect((await one.http('POST', `/jobs/runs/${blocker.body.id}/cancel`)).status).toBe(200);
    const agenda = one.app.db.conn.collection('agenda_jobs');
    await until(async () => !(await agenda.findOne({ name: 'jobs:run', 'data.run_id': queued.body.id })), 20_000, 'the Agenda job of the cancelled run to be processed');
    await new Promise((res) => setTimeout(res, 300));
    expect(await oneCalls({ run_id: queued.body.id })).toHaveLength(0);
    const run = await waitRun(one, queued.body.id);
    expect(run).toMatchObject({ status: 'cancelled', started_at: null, attempt: 1, result: null });
    expect(run.logs.map((l: { message: string }) => l.message)).toEqual([expect.stringMatching(/^cancelled by /)]);
    expect((await one.app.db.conn.collection('job_runs').findOne({ _id: new Types.ObjectId(queued.body.id as string) }))!.worker).toBeNull();
  });
});
