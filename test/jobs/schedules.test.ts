/**
 * Schedules: both field sets on one schedule, cron validation (422 with the parser's reason),
 * time zones and parameter templates, overrides, primary chains, dependencies between schedules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Types } from 'mongoose';
import { expectError, type TestApp } from '../helpers/app.ts';
import { templateValues, resolveTemplates } from '../../plugins/jobs/cron.ts';
import { jobsApp, until, waitRun } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await jobsApp();
});
afterAll(() => t?.close());

const create = (json: Record<string, unknown>) => t.http('POST', '/jobs/schedules', { json });
const runsOf = (scheduleId: string) => t.http('GET', `/jobs/runs?schedule_id=${scheduleId}&per_page=100`);
const oid = (id: string) => new Types.ObjectId(id);
const schedules = () => t.app.db.conn.collection('job_schedules');
const makeDue = (id: string) => schedules().updateOne({ _id: oid(id) }, { $set: { next_run_at: new Date(Date.now() - 1000) } });
const getSchedule = async (id: string) => (await t.http('GET', `/jobs/schedules/${id}`)).body;

describe('fields', () => {
  it('primary fields create a schedule; the view shows the extended names beside them', async () => {
    const r = await create({ job_name: 'nightly-echo', job_type: 'echo', cron_expression: '30 2 * * *', is_enabled: true, max_attempts: 2, timeout_seconds: 60, parameters: { message: 'x' }, description: 'd' });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      job_name: 'nightly-echo', name: 'nightly-echo', job_type: 'echo', target: 'echo', type: 'job', cron_expression: '30 2 * * *', cron: '30 2 * * *',
      timezone: 'UTC', is_enabled: true, max_attempts: 2, timeout_seconds: 60, parameters: { message: 'x' }, params: { message: 'x' },
      allow_param_override: false, dependency_mode: 'same_day', per_tenant: false, tenant_id: null, chain: [], last_run_at: null, last_run_status: null,
    });
    // 02:30 UTC: JOBS_DEFAULT_TIMEZONE is UTC unless set.
    const next = new Date(r.body.next_run_at);
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'UTC', hour: '2-digit', minute: '2-digit' }).format(next)).toBe('02:30');
    expect(next.getTime()).toBeGreaterThan(Date.now());
    const g = await t.http('GET', `/jobs/schedules/${r.body.id}`);
    expect(g.body).toEqual(r.body);
    expect((await t.http('GET', '/jobs/schedules')).body.map((s: { id: string }) => s.id)).toContain(r.body.id);
  });

  it('extended names create the same schedule; giving both names with different values is 422', async () => {
    const r = await create({ name: 'ext', type: 'job', target: 'echo', cron: '0 * * * *', timezone: 'UTC', params: { message: 'y' } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ job_name: 'ext', job_type: 'echo', cron_expression: '0 * * * *', parameters: { message: 'y' }, timezone: 'UTC' });
    const bad = expectError(await create({ name: 'a', job_name: 'b', target: 'echo', cron: '0 * * * *', params: { message: 'y' } }), 422, 'VALIDATION_ERROR');
    expect(bad.details.errors).toEqual([expect.objectContaining({ loc: ['body', 'name'] })]);
  });

  it('an invalid cron expression is 422 with the parser reason; nothing is written', async () => {
    const before = await t.app.db.conn.collection('job_schedules').countDocuments();
    const e1 = expectError(await create({ job_name: 'bad1', job_type: 'count', cron_expression: '61 * * * *' }), 422, 'VALIDATION_ERROR');
    expect(e1.details.errors).toEqual([{ loc: ['body', 'cron_expression'], msg: expect.stringMatching(/^invalid cron expression: .*61/), type: 'invalid_cron' }]);
    const e2 = expectError(await create({ job_name: 'bad2', job_type: 'count', cron_expression: '* * *' }), 422, 'VALIDATION_ERROR');
    expect((e2.details.errors as { msg: string }[])[0]!.msg).toMatch(/expected 5 fields/);
    expectError(await create({ job_name: 'bad3', job_type: 'count', cron_expression: '* * * * *', timezone: 'Mars/Olympus' }), 422, 'VALIDATION_ERROR');
    expectError(await create({ job_name: 'bad4', job_type: 'nope', cron_expression: '* * * * *' }), 422, 'VALIDATION_ERROR');
    expectError(await create({ job_name: 'bad5', job_type: 'echo', cron_expression: '* * * * *', parameters: { message: 3 } }), 422, 'VALIDATION_ERROR');
    expectError(await create({ job_name: 'bad6', job_type: 'count', cron_expression: '* * * * *', chain: ['nope'] }), 422, 'VALIDATION_ERROR');
    expect(await t.app.db.conn.collection('job_schedules').countDocuments()).toBe(before);
  });

  it('PATCH validates and recomputes next_run_at; a duplicate name is 409; DELETE removes it', async () => {
    const r = await create({ job_name: 'patch-me', job_type: 'count', cron_expression: '0 0 * * *', timezone: 'UTC' });
    const p = await t.http('PATCH', `/jobs/schedules/${r.body.id}`, { json: { cron: '0 12 * * *' } });
    expect(p.status).toBe(200);
    expect(new Date(p.body.next_run_at).getUTCHours()).toBe(12);
    expectError(await t.http('PATCH', `/jobs/schedules/${r.body.id}`, { json: { cron_expression: 'nope nope' } }), 422, 'VALIDATION_ERROR');
    const off = await t.http('PATCH', `/jobs/schedules/${r.body.id}`, { json: { is_enabled: false } });
    expect(off.body).toMatchObject({ is_enabled: false, next_run_at: null });
    const taken = expectError(await t.http('PATCH', `/jobs/schedules/${r.body.id}`, { json: { job_name: 'nightly-echo' } }), 409, 'CONFLICT');
    expect(taken).toMatchObject({ message: 'A schedule named "nightly-echo" exists already', details: { field: 'job_name' } });
    expect((await getSchedule(r.body.id)).job_name).toBe('patch-me');
    expect((await t.http('DELETE', `/jobs/schedules/${r.body.id}`)).status).toBe(204);
    expectError(await t.http('GET', `/jobs/schedules/${r.body.id}`), 404, 'NOT_FOUND');
  });
});

describe('attempts and timeout', () => {
  it("a schedule's max_attempts and timeout_seconds reach its runs (over the job's own)", async () => {
    // `fail` declares max_attempts 1, timeout 30.
    const s = await create({ name: 'fail-twice', target: 'fail', cron: '0 0 1 1 *', timezone: 'UTC', max_attempts: 2, timeout_seconds: 60 });
    expect(s.status).toBe(201);
    await makeDue(s.body.id);
    const chk = await t.http('POST', '/jobs/check-schedules');
    const fired = chk.body.triggered.find((x: { schedule_id: string }) => x.schedule_id === s.body.id);
    expect(fired).toBeTruthy();
    const run = await waitRun(t, fired.run_id);
    expect(run).toMatchObject({ max_attempts: 2, timeout_seconds: 60, status: 'failed', attempt: 2, error: 'step failed on purpose', schedule_id: s.body.id, trigger: 'schedule' });
    const attempts = await t.app.db.conn.collection('jobs_fixture_calls').find({ job: 'fail', run_id: fired.run_id }).toArray();
    expect(attempts.map((c) => c.attempt).sort()).toEqual([1, 2]);
  });
});

describe('parameter templates', () => {
  it('{today}, {yesterday}, {month}, {previous_month} resolve in the given time zone', () => {
    // 22:30 UTC on 31 March 2024 is already 1 April in Stockholm (UTC+2).
    const at = new Date('2024-03-31T22:30:00Z');
    expect(templateValues(at, 'Europe/Stockholm')).toEqual({ today: '2024-04-01', yesterday: '2024-03-31', month: '2024-04', previous_month: '2024-03' });
    expect(templateValues(at, 'UTC')).toEqual({ today: '2024-03-31', yesterday: '2024-03-30', month: '2024-03', previous_month: '2024-02' });
    expect(templateValues(new Date('2024-01-01T05:00:00Z'), 'America/New_York')).toEqual({ today: '2024-01-01', yesterday: '2023-12-31', month: '2024-01', previous_month: '2023-12' });
    expect(resolveTemplates({ a: 'report-{month}.csv', b: ['{today}'], c: 3 }, templateValues(at, 'Europe/Stockholm'))).toEqual({ a: 'report-2024-04.csv', b: ['2024-04-01'], c: 3 });
  });

  it('a schedule run gets its templates resolved; overrides only when allow_param_override', async () => {
    const tz = 'Pacific/Auckland';
    const r = await create({ name: 'tpl', target: 'echo', cron: '0 3 * * *', timezone: tz, params: { message: 'report-{previous_month}', day: '{yesterday}' } });
    expect(r.status).toBe(201);
    const run = await t.http('POST', `/jobs/schedules/${r.body.id}/run`, { json: {} });
    expect(run.status).toBe(202);
    const v = templateValues(new Date(), tz);
    expect(run.body.parameters).toEqual({ message: `report-${v.previous_month}`, day: v.yesterday });
    expect(run.body).toMatchObject({ schedule_id: r.body.id, trigger: 'manual' });
    expect((await waitRun(t, run.body.id)).result).toEqual({ echoed: { message: `report-${v.previous_month}`, day: v.yesterday } });
    const e = expectError(await t.http('POST', `/jobs/schedules/${r.body.id}/run`, { json: { params: { message: 'other' } } }), 422, 'VALIDATION_ERROR');
    expect((e.details.errors as unknown[])[0]).toMatchObject({ loc: ['body', 'params'], type: 'override_not_allowed' });
    await t.http('PATCH', `/jobs/schedules/${r.body.id}`, { json: { allow_param_override: true } });
    const o = await t.http('POST', `/jobs/schedules/${r.body.id}/run`, { json: { params: { message: 'other' } } });
    expect(o.body.parameters).toEqual({ message: 'other', day: v.yesterday });
  });
});

describe('primary chain', () => {
  it('runs the chained jobs in order after success, with the same parameters, parent_job_id and chain_index', async () => {
    const s = await create({ job_name: 'chained', job_type: 'echo', cron_expression: '0 0 1 1 *', parameters: { message: 'c' }, chain: ['count', 'echo'] });
    expect(s.status).toBe(201);
    await t.app.db.conn.collection('job_schedules').updateOne({ job_name: 'chained' }, { $set: { next_run_at: new Date(Date.now() - 1000) } });
    const chk = await t.http('POST', '/jobs/check-schedules');
    expect(chk.body.triggered).toHaveLength(1);
    const runs = await until(async () => {
      const rs = (await runsOf(s.body.id)).body.items;
      return rs.length === 3 && rs.every((x: { status: string }) => x.status === 'completed') ? rs : null;
    });
    const [head, first, second] = [...runs].reverse();
    expect(head).toMatchObject({ job_name: 'echo', job_type: 'scheduled', parent_job_id: null, chain_index: null });
    expect(first).toMatchObject({ job_name: 'count', job_type: 'chain', parent_job_id: head.id, chain_index: 0, parameters: { message: 'c' } });
    expect(second).toMatchObject({ job_name: 'echo', job_type: 'chain', parent_job_id: first.id, chain_index: 1, parameters: { message: 'c' } });
  });

  it('a failed step stops the chain: the remaining steps never run', async () => {
    const s = await create({ job_name: 'chain-fails', job_type: 'fail', cron_expression: '0 0 1 1 *', chain: ['count'] });
    const run = await t.http('POST', `/jobs/schedules/${s.body.id}/run`, { json: {} });
    expect((await waitRun(t, run.body.id)).status).toBe('failed');
    await new Promise((r) => setTimeout(r, 400));
    const runs = (await runsOf(s.body.id)).body.items;
    expect(runs.map((x: { job_name: string }) => x.job_name)).toEqual(['fail']);
    expect((await t.http('GET', `/jobs/schedules/${s.body.id}`)).body.last_run_status).toBe('failed');
  });
});

describe('dependencies', () => {
  it('an unmet dependency skips and flags the run; it runs (triggered_by dependency) once the dependency completes', async () => {
    const a = await create({ name: 'dep-a', target: 'count', cron: '0 0 1 1 *' });
    const b = await create({ name: 'dep-b', target: 'count', cron: '0 0 1 1 *', depends_on_schedules: [a.body.id], dependency_mode: 'same_day' });
    expect(b.status).toBe(201);
    await t.app.db.conn.collection('job_schedules').updateOne({ job_name: 'dep-b' }, { $set: { next_run_at: new Date(Date.now() - 1000) } });
    const chk = await t.http('POST', '/jobs/check-schedules');
    expect(chk.body.skipped).toContain(b.body.id);
    const flagged = (await t.http('GET', `/jobs/schedules/${b.body.id}`)).body;
    expect(flagged).toMatchObject({ dependency_unmet: true, last_run_status: 'skipped', last_run_id: null });
    expect((await runsOf(b.body.id)).body.total).toBe(0);
    await t.http('POST', `/jobs/schedules/${a.body.id}/run`, { json: {} });
    const bRun = await until(async () => (await runsOf(b.body.id)).body.items[0]);
    expect(bRun).toMatchObject({ trigger: 'dependency', triggered_by: 'scheduler' });
    expect((await waitRun(t, bRun.id)).status).toBe('completed');
    expect((await t.http('GET', `/jobs/schedules/${b.body.id}`)).body).toMatchObject({ dependency_unmet: false, last_run_status: 'completed' });
  });

  it('dependency_mode none ignores dependencies; an unknown dependency is 422', async () => {
    const a = await create({ name: 'dep-none-a', target: 'count', cron: '0 0 1 1 *' });
    const b = await create({ name: 'dep-none-b', target: 'count', cron: '0 0 1 1 *', depends_on_schedules: [a.body.id], dependency_mode: 'none' });
    await t.app.db.conn.collection('job_schedules').updateOne({ job_name: 'dep-none-b' }, { $set: { next_run_at: new Date(Date.now() - 1000) } });
    const chk = await t.http('POST', '/jobs/check-schedules');
    expect(chk.body.triggered.map((x: { schedule_id: string }) => x.schedule_id)).toContain(b.body.id);
    expectError(await create({ name: 'dep-bad', target: 'count', cron: '0 0 1 1 *', depends_on_schedules: ['5f0000000000000000000000'] }), 422, 'VALIDATION_ERROR');
  });
});

describe('last run', () => {
  it('a schedule run sets last_run_at, last_run_id and last_run_status (pending, then the run\'s final status)', async () => {
    const s = await create({ name: 'last-run', target: 'count', cron: '0 0 1 1 *', timezone: 'UTC' });
    expect(s.body).toMatchObject({ last_run_at: null, last_run_id: null, last_run_status: null });
    await makeDue(s.body.id);
    const before = Date.now();
    const chk = await t.http('POST', '/jobs/check-schedules');
    const fired = chk.body.triggered.find((x: { schedule_id: string }) => x.schedule_id === s.body.id);
    expect(fired).toBeTruthy();
    const now = await getSchedule(s.body.id);
    expect(now.last_run_id).toBe(fired.run_id);
    expect(['pending', 'completed']).toContain(now.last_run_status);
    const at = new Date(now.last_run_at).getTime();
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(new Date(now.next_run_at).getTime()).toBeGreaterThan(Date.now());
    const run = await waitRun(t, fired.run_id);
    expect(run).toMatchObject({ status: 'completed', schedule_id: s.body.id, trigger: 'schedule', triggered_by: 'scheduler', job_type: 'scheduled' });
    const after = await until(async () => {
      const v = await getSchedule(s.body.id);
      return v.last_run_status === 'completed' ? v : null;
    });
    expect(after).toMatchObject({ last_run_id: fired.run_id, last_run_at: now.last_run_at });
  });
});

describe('cron firing (Agenda)', () => {
  it('two schedules of the same job both fire, each its own Agenda job; disabling one stops it, the other goes on', async () => {
    const one = await create({ name: 'every-second-1', target: 'count', cron: '* * * * * *', timezone: 'UTC' });
    const two = await create({ name: 'every-second-2', target: 'count', cron: '* * * * * *', timezone: 'UTC' });
    expect([one.status, two.status]).toEqual([201, 201]);
    const agendaJobs = () => t.app.db.conn.collection('agenda_jobs').find({ name: 'jobs:schedule', 'data.schedule_id': { $in: [one.body.id, two.body.id] } }).toArray();
    expect((await agendaJobs()).map((j) => j.data.schedule_id).sort()).toEqual([one.body.id, two.body.id].sort());
    const fired = async (id: string) => (await runsOf(id)).body.items.filter((r: { trigger: string }) => r.trigger === 'schedule');
    try {
      await until(async () => (await fired(one.body.id)).length >= 2 && (await fired(two.body.id)).length >= 2, 30_000, 'both schedules to fire twice');
      for (const id of [one.body.id, two.body.id]) {
        const v = await getSchedule(id);
        expect(v.last_run_at).toBeTruthy();
        expect(v.last_run_id).toBeTruthy();
      }
      const off = await t.http('PATCH', `/jobs/schedules/${one.body.id}`, { json: { is_enabled: false } });
      expect(off.body).toMatchObject({ is_enabled: false, next_run_at: null });
      expect((await agendaJobs()).find((j) => j.data.schedule_id === one.body.id)!.disabled).toBe(true);
      // A tick already under way when it was disabled may still finish; then nothing more.
      await new Promise((res) => setTimeout(res, 1500));
      const oneBefore = (await fired(one.body.id)).length;
      const twoBefore = (await fired(two.body.id)).length;
      await new Promise((res) => setTimeout(res, 3500));
      expect((await fired(one.body.id)).length).toBe(oneBefore);
      expect((await fired(two.body.id)).length).toBeGreaterThan(twoBefore);
    } finally {
      await t.http('PATCH', `/jobs/schedules/${one.body.id}`, { json: { is_enabled: false } });
      await t.http('PATCH', `/jobs/schedules/${two.body.id}`, { json: { is_enabled: false } });
    }
  });
});

describe('dependency modes and days', () => {
  /** A schedule whose last run completed, then moved back in time by the given hours (started, completed, last_run_at). */
  async function dependencyRanAgo(name: string, started: number, completed: number) {
    const a = await create({ name, target: 'count', cron: '0 0 1 1 *' });
    const run = await t.http('POST', `/jobs/schedules/${a.body.id}/run`, { json: {} });
    expect((await waitRun(t, run.body.id)).status).toBe('completed');
    await until(async () => (await getSchedule(a.body.id)).last_run_status === 'completed');
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000);
    await t.app.db.conn.collection('job_runs').updateOne({ _id: oid(run.body.id) }, { $set: { started_at: hoursAgo(started), completed_at: hoursAgo(completed) } });
    await schedules().updateOne({ _id: oid(a.body.id) }, { $set: { last_run_at: hoursAgo(started) } });
    return a.body.id as string;
  }

  it('a dependency that completed yesterday: same_day is unmet (skipped, flagged), last_run is met', async () => {
    // 30 hours ago is another day in every time zone.
    const a = await dependencyRanAgo('day-dep-a', 30, 30);
    const same = await create({ name: 'day-same', target: 'count', cron: '0 0 1 1 *', depends_on_schedules: [a], dependency_mode: 'same_day' });
    const last = await create({ name: 'day-last', target: 'count', cron: '0 0 1 1 *', depends_on_schedules: [a], dependency_mode: 'last_run' });
    await makeDue(same.body.id);
    await makeDue(last.body.id);
    const chk = await t.http('POST', '/jobs/check-schedules');
    expect(chk.body.skipped).toContain(same.body.id);
    expect(chk.body.triggered.map((x: { schedule_id: string }) => x.schedule_id)).toContain(last.body.id);
    expect(await getSchedule(same.body.id)).toMatchObject({ dependency_unmet: true, last_run_status: 'skipped', last_run_id: null });
    expect((await runsOf(same.body.id)).body.total).toBe(0);
    const lastRun = chk.body.triggered.find((x: { schedule_id: string }) => x.schedule_id === last.body.id).run_id;
    expect(await waitRun(t, lastRun)).toMatchObject({ status: 'completed', schedule_id: last.body.id, trigger: 'schedule' });
    expect(await getSchedule(last.body.id)).toMatchObject({ dependency_unmet: false });
  });

  it('last_run: unmet while the dependency\'s last run has not completed (failed)', async () => {
    const a = await create({ name: 'failing-dep', target: 'fail', cron: '0 0 1 1 *' });
    const run = await t.http('POST', `/jobs/schedules/${a.body.id}/run`, { json: {} });
    expect((await waitRun(t, run.body.id)).status).toBe('failed');
    await until(async () => (await getSchedule(a.body.id)).last_run_status === 'failed');
    const last = await create({ name: 'after-failing', target: 'count', cron: '0 0 1 1 *', depends_on_schedules: [a.body.id], dependency_mode: 'last_run' });
    await makeDue(last.body.id);
    const chk = await t.http('POST', '/jobs/check-schedules');
    expect(chk.body.skipped).toContain(last.body.id);
    expect(await getSchedule(last.body.id)).toMatchObject({ dependency_unmet: true, last_run_status: 'skipped' });
  });

  it('same_day counts the day the dependency\'s run completed: started yesterday, completed today is met', async () => {
    const a = await dependencyRanAgo('midnight-dep', 30, 0);
    const same = await create({ name: 'after-midnight', target: 'count', cron: '0 0 1 1 *', depends_on_schedules: [a], dependency_mode: 'same_day' });
    await makeDue(same.body.id);
    const chk = await t.http('POST', '/jobs/check-schedules');
    expect(chk.body.triggered.map((x: { schedule_id: string }) => x.schedule_id)).toContain(same.body.id);
  });
});
