/**
 * Real server processes on one database (replicas): Agenda's lock plus the run document's own
 * lock give exactly-once execution; a SIGKILLed holder's run is finished by another replica once
 * its lock ttl (shortened here) has passed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import mongoose, { type Connection } from 'mongoose';
import { ADMIN_KEY, uniqueDbUri } from '../helpers/app.ts';
import { startReplicas, type ServerProcess } from '../helpers/processes.ts';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { until, waitRun } from './helpers.ts';

const uri = uniqueDbUri();
let procs: ServerProcess[] = [];
let conn: Connection;

const http = (p: ServerProcess) => ({
  async http(method: string, path: string, opts: { json?: unknown; key?: string } = {}) {
    const res = await fetch(p.url + path, {
      method,
      headers: { 'X-API-Key': opts.key ?? ADMIN_KEY, ...(opts.json !== undefined ? { 'Content-Type': 'application/json' } : {}) },
      ...(opts.json !== undefined ? { body: JSON.stringify(opts.json) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  },
});

/**
 * The lock's ttl: short, so that a killed holder is replaced within the test, and long enough that a
 * live holder starved of CPU on a loaded machine (its heartbeat renews at a third of it) keeps its runs.
 */
const LOCK_TTL_S = 10;

beforeAll(async () => {
  const env = {
    MONGODB_URI: uri, JOBS_ENABLED: 'true', PLUGINS: './test/fixtures/jobs-fixture-plugin.ts', RATE_LIMIT_ENABLED: 'false',
    JOBS_POLL_INTERVAL_MS: '100', JOBS_RETRY_DELAY_MS: '100', JOBS_LOCK_TTL_SECONDS: String(LOCK_TTL_S),
  };
  procs = await startReplicas(3, env);
  conn = await mongoose.createConnection(uri).asPromise();
}, 120_000);
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await conn?.close();
});

const calls = (filter: Record<string, unknown>) => conn.collection('jobs_fixture_calls').find(filter).toArray();

describe('three replicas', () => {
  it('run each of 30 manual runs exactly once', async () => {
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const r = await http(procs[i % 3]!).http('POST', '/jobs/run/count', { json: { parameters: {} } });
        expect(r.status).toBe(202);
        ids.push(r.body.id);
      }),
    );
    for (const id of ids) expect((await waitRun(http(procs[0]!), id)).status).toBe('completed');
    const c = await calls({ job: 'count', run_id: { $in: ids } });
    expect(c).toHaveLength(30);
    expect(new Set(c.map((x) => x.run_id)).size).toBe(30);
  });

  it('run one due schedule exactly once, however many replicas check it', async () => {
    const s = await http(procs[0]!).http('POST', '/jobs/schedules', { json: { job_name: 'yearly-count', job_type: 'count', cron_expression: '0 0 1 1 *', timezone: 'UTC' } });
    expect(s.status).toBe(201);
    // Make it due now.
    await conn.collection('job_schedules').updateOne({ _id: new mongoose.Types.ObjectId(s.body.id as string) }, { $set: { next_run_at: new Date(Date.now() - 1000) } });
    const results = await Promise.all(procs.flatMap((p) => [1, 2].map(() => http(p).http('POST', '/jobs/check-schedules'))));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.flatMap((r) => r.body.triggered)).toHaveLength(1);
    const runs = await until(async () => {
      const rs = await conn.collection('job_runs').find({ schedule_id: new mongoose.Types.ObjectId(s.body.id as string) }).toArray();
      return rs.length === 1 && rs[0]!.status === 'completed' ? rs : null;
    });
    expect(runs[0]).toMatchObject({ job_type: 'scheduled', triggered_by: 'scheduler', trigger: 'schedule' });
    expect(await calls({ job: 'count', run_id: String(runs[0]!._id) })).toHaveLength(1);
    const after = await http(procs[1]!).http('GET', `/jobs/schedules/${s.body.id}`);
    expect(after.body).toMatchObject({ last_run_status: 'completed', last_run_id: String(runs[0]!._id) });
    expect(new Date(after.body.next_run_at).getTime()).toBeGreaterThan(Date.now());
  });

  it('fire a cron schedule (Agenda) once per occurrence', async () => {
    const s = await http(procs[2]!).http('POST', '/jobs/schedules', { json: { name: 'every-2s', target: 'count', cron: '*/2 * * * * *', timezone: 'UTC' } });
    expect(s.status).toBe(201);
    const oid = new mongoose.Types.ObjectId(s.body.id as string);
    await until(async () => (await conn.collection('job_runs').countDocuments({ schedule_id: oid, status: 'completed' })) >= 3, 30_000, 'three occurrences');
    await http(procs[0]!).http('PATCH', `/jobs/schedules/${s.body.id}`, { json: { is_enabled: false } });
    await new Promise((r) => setTimeout(r, 2500));
    const runs = await conn.collection('job_runs').find({ schedule_id: oid }).toArray();
    const keys = runs.map((r) => r.dedupe_key as string);
    expect(new Set(keys).size).toBe(runs.length);
    // Occurrences are 2 s apart: no two runs for one occurrence.
    const times = keys.map((k) => Date.parse(k.split('@')[1]!)).sort();
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(2000);
    const c = await calls({ job: 'count', run_id: { $in: runs.map((r) => String(r._id)) } });
    expect(c).toHaveLength(runs.filter((r) => r.status === 'completed').length);
  });
});

describe('the log stream across processes', () => {
  it('streams lines and progress of a run that executes in another server process, and ends with it', async () => {
    const r = await http(procs[1]!).http('POST', '/jobs/run/sleepy', { json: { parameters: { ms: 3000, steps: 6 } } });
    expect(r.status).toBe(202);
    const id = r.body.id as string;
    const running = await until(async () => {
      const d = await conn.collection('job_runs').findOne({ _id: new mongoose.Types.ObjectId(id) });
      return d?.status === 'running' ? d : null;
    });
    const holderPid = Number(String(running.worker).split(':')[1]);
    const reader = procs.find((p) => p.proc.pid !== holderPid)!;
    const res = await fetch(`${reader.url}/jobs/runs/${id}/logs`, { headers: { 'X-API-Key': ADMIN_KEY, Accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events: (EventSourceMessage & { at: number })[] = [];
    const parser = createParser({ onEvent: (e) => void events.push({ ...e, at: Date.now() }) });
    const body = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { done, value } = await body.read();
      if (done) break;
      parser.feed(value);
    }
    const final = await waitRun(http(reader), id);
    expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ status: 'completed', result: { steps: 6 } });
    expect(events.filter((e) => e.event === 'log').map((e) => JSON.parse(e.data).message)).toEqual(final.logs.map((l: { message: string }) => l.message));
    // Progress reached the client in several events while the run was still going on the other process.
    const progress = events.filter((e) => e.event === 'progress');
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress[0]!.at).toBeLessThan(new Date(final.completed_at as string).getTime());
  }, 120_000);
});

describe('a killed holder', () => {
  it('is replaced after the lock ttl; a live holder past the ttl is not', async () => {
    const r = await http(procs[0]!).http('POST', '/jobs/run/sleepy', { json: { parameters: { ms: 2000 + LOCK_TTL_S * 1000, steps: 40 } } });
    expect(r.status).toBe(202);
    const id = r.body.id as string;
    const runDoc = await until(async () => {
      const d = await conn.collection('job_runs').findOne({ _id: new mongoose.Types.ObjectId(id) });
      return d?.status === 'running' ? d : null;
    });
    const holderPid = Number(String(runDoc.worker).split(':')[1]);
    const holder = procs.find((p) => p.proc.pid === holderPid)!;
    expect(holder).toBeTruthy();
    // Alive and renewing its lock: past the ttl nobody else starts it.
    await new Promise((res) => setTimeout(res, LOCK_TTL_S * 1000 + 600));
    expect(await calls({ run_id: id, phase: 'start' })).toHaveLength(1);
    await holder.stop('SIGKILL');
    const others = procs.filter((p) => p !== holder);
    const run = await waitRun(http(others[0]!), id, ['completed', 'failed'], ADMIN_KEY, 40_000 + 2 * LOCK_TTL_S * 1000);
    // A lost holder is not a failure of the job: the same attempt runs again on another replica.
    expect(run).toMatchObject({ status: 'completed', attempt: 1, max_attempts: 1 });
    const starts = await calls({ run_id: id, phase: 'start' });
    expect(starts.map((s) => s.attempt)).toEqual([1, 1]);
    expect(starts[1]!.pid).not.toBe(holderPid);
    expect(run.logs.some((l: { message: string }) => /stopped renewing its lock/.test(l.message))).toBe(true);
  }, 120_000);
});
