/**
 * Stored chains (extended model): dependencies, parallel independent steps, failure policies,
 * built-in (is_system) chains, validation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, buildTestApp, type TestApp } from '../helpers/app.ts';
import { jobsPlugin } from '../../plugins/jobs/index.ts';
import { jobsFixturePlugin } from '../fixtures/jobs-fixture-plugin.ts';
import { Types } from 'mongoose';
import { FAST, waitRun } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  const withChains = jobsPlugin.configure({ chains: [{ name: 'builtin-maintenance', steps: [{ job: 'count' }] }] });
  t = await buildTestApp({ plugins: [withChains, jobsFixturePlugin], config: FAST });
});
afterAll(() => t?.close());

const calls = (filter: Record<string, unknown>) => t.app.db.conn.collection('jobs_fixture_calls').find(filter).toArray();
const steps = async (chainRunId: string) => (await t.http('GET', `/jobs/runs?chain_run_id=${chainRunId}&per_page=100`)).body.items.filter((r: { id: string }) => r.id !== chainRunId);

async function runChain(body: Record<string, unknown>, params: Record<string, unknown> = {}) {
  const c = await t.http('POST', '/jobs/chains', { json: body });
  expect(c.status).toBe(201);
  const r = await t.http('POST', `/jobs/chains/${c.body.id}/run`, { json: { params } });
  expect(r.status).toBe(202);
  expect(r.body).toMatchObject({ job_type: 'chain', chain_id: c.body.id, chain_run_id: r.body.id, status: 'pending' });
  return { chain: c.body, run: await waitRun(t, r.body.id) };
}

describe('chains', () => {
  it('independent steps run in parallel; a step starts once its dependencies completed', async () => {
    const { run } = await runChain({
      name: 'parallel',
      steps: [{ job: 'sleepy', params: { ms: 800 } }, { job: 'nap', params: { ms: 800 } }, { job: 'count', depends_on: ['sleepy', 'nap'] }],
    });
    expect(run.status).toBe('completed');
    const s = await steps(run.id);
    expect(s).toHaveLength(3);
    for (const x of s) expect(x).toMatchObject({ status: 'completed', chain_run_id: run.id, parent_job_id: run.id, trigger: 'chain', job_type: 'chain' });
    const at = async (job: string, phase: string) => (await calls({ job, phase, run_id: { $in: s.map((x: { id: string }) => x.id) } }))[0]!.at.getTime();
    const [sa, se, na, ne] = [await at('sleepy', 'start'), await at('sleepy', 'end'), await at('nap', 'start'), await at('nap', 'end')];
    // Their time windows overlap.
    expect(sa).toBeLessThan(ne);
    expect(na).toBeLessThan(se);
    const countRun = s.find((x: { job_name: string }) => x.job_name === 'count');
    expect(new Date(countRun.started_at).getTime()).toBeGreaterThanOrEqual(Math.max(se, ne));
    expect(run.result).toEqual({ steps: [
      { job: 'sleepy', status: 'completed', run_id: expect.any(String) },
      { job: 'nap', status: 'completed', run_id: expect.any(String) },
      { job: 'count', status: 'completed', run_id: countRun.id },
    ] });
  });

  it('the coordinator writes a progress line only when its progress changes, not on every poll', async () => {
    // sleepy takes about 6 poll intervals (100 ms here): the coordinator polls all along at 0 of 2.
    const { run } = await runChain({ name: 'quiet-progress', steps: [{ job: 'sleepy', params: { ms: 600 } }, { job: 'count', depends_on: ['sleepy'] }] });
    expect(run.status).toBe('completed');
    expect(run.duration_ms).toBeGreaterThanOrEqual(600);
    const lines = run.logs.filter((l: { level: string }) => l.level === 'progress').map((l: { message: string }) => l.message);
    // One line per distinct (done, total) state, none repeated.
    expect(lines).toEqual(['0 / 2', '1 / 2', '2 / 2']);
    expect(lines.filter((m: string, i: number) => i > 0 && m === lines[i - 1])).toEqual([]);
    expect(run).toMatchObject({ progress_current: 2, progress_total: 2 });
    // Inserted with its own id as chain_run_id (no second write).
    const doc = await t.app.db.conn.collection('job_runs').findOne({ _id: new Types.ObjectId(run.id) });
    expect(String(doc!.chain_run_id)).toBe(run.id);
  });

  it('a failed step stops the chain (default stop): dependent steps are skipped, the chain fails', async () => {
    const { run } = await runChain({ name: 'stops', steps: [{ job: 'fail' }, { job: 'count', depends_on: ['fail'] }] });
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/step 0 \(fail\) failed: step failed on purpose; chain stopped, skipped: count/);
    expect((await steps(run.id)).map((x: { job_name: string }) => x.job_name)).toEqual(['fail']);
  });

  it('on_failure continue lets the dependent steps run', async () => {
    const { run } = await runChain({ name: 'continues', default_on_failure: 'stop', steps: [{ job: 'fail', on_failure: 'continue' }, { job: 'count', depends_on: ['fail'] }] });
    expect(run.status).toBe('completed');
    expect(run.result.steps.map((x: { status: string }) => x.status)).toEqual(['failed', 'completed']);
  });

  it('on_failure retry gives the step `retries` more attempts after retry_delay_seconds', async () => {
    const { run } = await runChain({ name: 'retries', steps: [{ job: 'flaky', params: { succeed_on: 2 }, on_failure: 'retry', retries: 1, retry_delay_seconds: 0 }] });
    expect(run.status).toBe('completed');
    const [step] = await steps(run.id);
    expect(step).toMatchObject({ job_name: 'flaky', attempt: 2, max_attempts: 2, status: 'completed' });
  });

  it('retry_delay_seconds: the retry of a step starts at least that long after the failed attempt', async () => {
    const { run } = await runChain({ name: 'retry-delay', steps: [{ job: 'flaky', params: { succeed_on: 2 }, on_failure: 'retry', retries: 1, retry_delay_seconds: 1 }] });
    expect(run.status).toBe('completed');
    const [step] = await steps(run.id);
    expect(step).toMatchObject({ attempt: 2, max_attempts: 2, status: 'completed' });
    const attempts = (await calls({ job: 'flaky', run_id: step.id })).sort((a, b) => a.attempt - b.attempt);
    expect(attempts.map((c) => c.attempt)).toEqual([1, 2]);
    // 1 s, not JOBS_RETRY_DELAY_MS (100 ms here); a little slack for clocks.
    expect(attempts[1]!.at.getTime() - attempts[0]!.at.getTime()).toBeGreaterThanOrEqual(900);
    const full = await waitRun(t, step.id);
    expect(full.logs.map((l: { message: string }) => l.message)).toContainEqual(expect.stringMatching(/retrying in 1000 ms$/));
  });

  it('default_on_failure continue applies to steps without on_failure: dependents run, the chain completes', async () => {
    const { run } = await runChain({ name: 'default-continue', default_on_failure: 'continue', steps: [{ job: 'fail' }, { job: 'count', depends_on: ['fail'] }] });
    expect(run.status).toBe('completed');
    expect(run.result.steps.map((x: { job: string; status: string }) => [x.job, x.status])).toEqual([['fail', 'failed'], ['count', 'completed']]);
    const s = await steps(run.id);
    expect(s.find((x: { job_name: string }) => x.job_name === 'fail')).toMatchObject({ status: 'failed', attempt: 1, max_attempts: 1 });
  });

  it('default_on_failure retry applies to steps without on_failure: at least one more attempt, then the policy stops', async () => {
    // retries 0 (the default) still gets one retry under `retry`.
    const ok = await runChain({ name: 'default-retry', default_on_failure: 'retry', steps: [{ job: 'flaky', params: { succeed_on: 2 }, retry_delay_seconds: 0 }, { job: 'count', depends_on: ['flaky'] }] });
    expect(ok.run.status).toBe('completed');
    const okSteps = await steps(ok.run.id);
    expect(okSteps.find((x: { job_name: string }) => x.job_name === 'flaky')).toMatchObject({ status: 'completed', attempt: 2, max_attempts: 2 });
    expect(okSteps.find((x: { job_name: string }) => x.job_name === 'count')).toMatchObject({ status: 'completed' });
    // Retries used up: it stops like `stop`.
    const ko = await runChain({ name: 'default-retry-fails', default_on_failure: 'retry', steps: [{ job: 'fail', retries: 2, retry_delay_seconds: 0 }, { job: 'count', depends_on: ['fail'] }] });
    expect(ko.run.status).toBe('failed');
    expect(ko.run.error).toMatch(/step 0 \(fail\) failed: step failed on purpose; chain stopped, skipped: count/);
    const [failed] = await steps(ko.run.id);
    expect(failed).toMatchObject({ job_name: 'fail', status: 'failed', attempt: 3, max_attempts: 3 });
    expect(await calls({ job: 'fail', run_id: failed.id })).toHaveLength(3);
  });

  it('validates steps: unknown job, unknown dependency, cycle, step params (422); names are unique (409)', async () => {
    expectError(await t.http('POST', '/jobs/chains', { json: { name: 'x', steps: [{ job: 'nope' }] } }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('POST', '/jobs/chains', { json: { name: 'x', steps: [{ job: 'count', depends_on: ['echo'] }] } }), 422, 'VALIDATION_ERROR');
    const cyc = expectError(await t.http('POST', '/jobs/chains', { json: { name: 'x', steps: [{ job: 'count', depends_on: ['nap'] }, { job: 'nap', params: { ms: 1 }, depends_on: ['count'] }] } }), 422, 'VALIDATION_ERROR');
    expect(cyc.details.errors).toEqual([expect.objectContaining({ type: 'cycle' })]);
    expectError(await t.http('POST', '/jobs/chains', { json: { name: 'x', steps: [{ job: 'echo', params: { message: 1 } }] } }), 422, 'VALIDATION_ERROR');
    expectError(await t.http('POST', '/jobs/chains', { json: { name: 'parallel', steps: [{ job: 'count' }] } }), 409, 'CONFLICT');
  });

  it('CRUD; a built-in (is_system) chain cannot be deleted', async () => {
    const list = await t.http('GET', '/jobs/chains');
    const builtin = list.body.find((c: { name: string }) => c.name === 'builtin-maintenance');
    expect(builtin).toMatchObject({ is_system: true, default_on_failure: 'stop', steps: [{ job: 'count', params: {}, depends_on: [], on_failure: null, retries: 0, retry_delay_seconds: 60 }] });
    const del = expectError(await t.http('DELETE', `/jobs/chains/${builtin.id}`), 409, 'CONFLICT');
    expect(del.details).toEqual({ is_system: true });
    const c = await t.http('POST', '/jobs/chains', { json: { name: 'temp', steps: [{ job: 'count' }] } });
    const p = await t.http('PATCH', `/jobs/chains/${c.body.id}`, { json: { description: 'changed', default_on_failure: 'continue' } });
    expect(p.body).toMatchObject({ description: 'changed', default_on_failure: 'continue', is_system: false });
    // Renaming onto a taken name: the unique index answers 409.
    const taken = expectError(await t.http('PATCH', `/jobs/chains/${c.body.id}`, { json: { name: 'parallel' } }), 409, 'CONFLICT');
    expect(taken).toMatchObject({ message: 'A chain named "parallel" exists already', details: { field: 'name' } });
    expect((await t.http('PATCH', `/jobs/chains/${c.body.id}`, { json: { name: 'temp' } })).status).toBe(200);
    expect((await t.http('GET', `/jobs/chains/${c.body.id}`)).body.description).toBe('changed');
    expect((await t.http('DELETE', `/jobs/chains/${c.body.id}`)).status).toBe(204);
    expectError(await t.http('GET', `/jobs/chains/${c.body.id}`), 404, 'NOT_FOUND');
  });

  it('a schedule can target a chain', async () => {
    const c = await t.http('POST', '/jobs/chains', { json: { name: 'scheduled-chain', steps: [{ job: 'count' }] } });
    const s = await t.http('POST', '/jobs/schedules', { json: { name: 'run-chain', type: 'chain', target: c.body.id, cron: '0 0 1 1 *' } });
    expect(s.status).toBe(201);
    expect(s.body).toMatchObject({ type: 'chain', target: c.body.id, job_type: null });
    const r = await t.http('POST', `/jobs/schedules/${s.body.id}/run`, { json: {} });
    expect(r.status).toBe(202);
    expect(await waitRun(t, r.body.id)).toMatchObject({ status: 'completed', chain_id: c.body.id, schedule_id: s.body.id });
    expectError(await t.http('DELETE', `/jobs/chains/${c.body.id}`), 409, 'CONFLICT');
  });
});
